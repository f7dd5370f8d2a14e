"""The gateway side of authorization: one AuthzView per connection over the shared authorizer.

Every question a policy asks becomes an authorizer decision and, unless its Action says Kafka
would not log it, an audit event; topic ids are resolved through a snapshot of the cluster
view's cache (fed by Metadata responses) and a miss is noted (TopicIdMisses) so that the
session asks for a refresh, while the request gets UNKNOWN_TOPIC_ID, which clients retry.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from auth.principal import KafkaPrincipal
from authz.authorizer import GATEWAY_RESERVED, ILLEGAL_TOPIC_NAME, Decision
from authz.model import AclOperation, ResourceType
from authz.request_policy import Action
from authz.shadow import ByResourceType, DivergenceFold
from authz.topic_guard import NOTHING_FOUND, TopicFindings
from gateway.authorization import GatewayAuthorization
from gateway.ops.audit_batch import DecisionBatch, bounded_sample
from protocol.registry import api


class TopicIdMisses:
    """A connection's record that a request (or its response hook) named a topic id the gateway cannot
    name yet. The session turns it into a RefreshTopicIds action; the server carries it out.

    Set from the loop or the worker thread, taken by the loop: a plain flag, so a set racing a take
    loses at most a refresh that was being asked for at that very moment.
    """

    __slots__ = ("missed",)

    def __init__(self) -> None:
        self.missed = False

    def take(self) -> bool:
        missed, self.missed = self.missed, False
        return missed


@dataclass(slots=True)
class ConnectionAuthzView:
    """An AuthzView for one request of one connection (cheap to create per request)."""

    authorization: GatewayAuthorization
    principal: KafkaPrincipal
    client_host: str
    client_port: int
    listener: str
    api_key: int
    api_version: int
    topic_names: Mapping[uuid.UUID, str]  # a snapshot, taken when the request arrived
    misses: TopicIdMisses  # where a topic id it cannot name is noted (the session asks for a refresh)
    # What the topic guard found in this request: with a reserved or illegal topic named, cluster-level
    # actions are denied so that the policy decides every topic on its own (authz/topic_guard.py).
    findings: TopicFindings = NOTHING_FOUND
    # Illegal names whose action was otherwise allowed (their errors become the API's own).
    illegal_denied: set[str] = field(default_factory=set)
    # (resource type, name) of every allowed decision, for the id guard (authz/id_guard.py).
    allowed_names: set[tuple[ResourceType, str]] = field(default_factory=set)
    broker_request: bool = False  # CLUSTER_ACTION was allowed: a broker's request, naming others' ids
    # This request's decisions, written by flush_audit as one event per decision kind.
    _batch: DecisionBatch | None = field(default=None, init=False)
    _shadow: DivergenceFold | None = field(default=None, init=False)  # this request's shadow divergences

    def _audit(self, action: Action, decision: Decision) -> None:
        authorization = self.authorization
        if authorization.shadow is not None:
            self._shadow = authorization.shadow.observe(self._shadow, self.principal, self.client_host,
                                                        action, decision)
        audit = authorization.audit
        # An allowed decision is recorded only with ksgate.audit.log.allowed: its one field is read first,
        # so with Kafka's default (off) an allowed decision costs the audit two attribute reads.
        if decision.allowed:
            if not (audit.record_allowed and action.log_if_allowed and audit.enabled):
                return
        elif not (action.log_if_denied and audit.enabled):
            return
        pattern = getattr(getattr(decision.rule, "pattern", None), "pattern_type", None)
        if self._batch is None:  # most requests record nothing: the batch is made on the first event
            self._batch = DecisionBatch()
        self._batch.add(action.operation.name, action.resource_type.name,
                        pattern.name if pattern is not None else None, decision.allowed, _rule_text(decision),
                        action.name)

    def flush_audit(self) -> None:
        """Write the decisions recorded so far (called once the policy, and again once its response hook, ran)."""
        fold, self._shadow, batch = self._shadow, None, self._batch
        if (batch is None or not len(batch)) and fold is None:
            return
        schema = api(self.api_key)
        api_name = schema.name if schema else str(self.api_key)
        principal = str(self.principal)
        for divergence in fold.kinds.values() if fold is not None else ():
            self.authorization.audit.shadow(principal=principal, client_host=self.client_host,
                                            client_port=self.client_port, listener=self.listener,
                                            api_key=self.api_key, api_name=api_name,
                                            api_version=self.api_version, aggregate=divergence)
        for aggregate in batch.drain() if batch is not None else ():
            single = aggregate.count == 1  # exactly today's event: no count, no sample
            sample = bounded_sample(aggregate)
            self.authorization.audit.authorization(
                principal=principal, client_host=self.client_host, client_port=self.client_port,
                listener=self.listener, api_key=self.api_key, api_name=api_name, api_version=self.api_version,
                operation=aggregate.operation, resource_type=aggregate.resource_type,
                resource_name=sample[0], pattern_type=aggregate.pattern_type,
                allowed=aggregate.allowed, rule=aggregate.rule,
                count=None if single else aggregate.count, sample=None if single else sample)

    def _reserved(self, resource_type: ResourceType, name: str) -> bool:
        return resource_type == ResourceType.TOPIC and name in self.authorization.reserved_topics

    def allowed(self, action: Action) -> bool:
        resource_type, name, findings = action.resource_type, action.name, self.findings
        if (resource_type == ResourceType.TOPIC and name in self.authorization.reserved_topics) or (
                resource_type == ResourceType.CLUSTER and (findings.reserved or findings.illegal)):  # suspicious
            decision = GATEWAY_RESERVED
        else:
            decision = self.authorization.authorizer.authorize(self.principal, self.client_host, action.operation,
                                                               resource_type, name)
            if decision.allowed and resource_type == ResourceType.TOPIC and name in findings.illegal:
                self.illegal_denied.add(name)
                decision = ILLEGAL_TOPIC_NAME
        if decision.allowed:
            authorization, shadow = self.authorization, self.authorization.shadow
            # What _audit would skip, told without the call: an allowed decision with no active shadow ACLs to
            # compare it with and ksgate.audit.log.allowed off (Kafka's default) records nothing, the common case.
            if (shadow is not None and shadow.active) or authorization.audit.record_allowed:
                self._audit(action, decision)
            self.allowed_names.add((resource_type, name))
            if action.operation == AclOperation.CLUSTER_ACTION:
                self.broker_request = True
            return True
        self._audit(action, decision)
        return False

    def allowed_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        authorizer = self.authorization.authorizer
        decision = authorizer.authorize_any(self.principal, self.client_host, operation, resource_type)
        # Kafka's authorizeByResourceType never logs a denial: it only backs up another check.
        self._audit(ByResourceType(operation, resource_type), decision)
        return decision.allowed

    def authorized_operations(self, resource_type: ResourceType, name: str,
                              candidates: Iterable[AclOperation]) -> int:
        # Kafka computes these without logging each probe; so does ksgate.
        if self._reserved(resource_type, name):
            return 0
        bits = 0
        for operation in candidates:
            if self.authorization.authorizer.authorize(self.principal, self.client_host, operation,
                                                resource_type, name).allowed:
                bits |= 1 << int(operation)
        return bits

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        name = self.topic_names.get(topic_id)
        if name is None:
            self.misses.missed = True
        return name


def _rule_text(decision: Decision) -> str:
    rule = decision.rule
    if hasattr(rule, "value"):
        return str(rule.value)
    return f"AclBinding({rule})"
