"""What a candidate ACL set answers to one recorded decision, by the gateway's own StandardAuthorizer.

Free of pyspark: the Spark job hands it the distinct decision keys and joins the verdicts back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from auth.principal import KafkaPrincipal
from authz.authorizer import Decision, DecisionRule, StandardAuthorizer
from authz.model import (
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AclBinding,
    AclValidationError,
    parse_operation,
    parse_resource_type,
)
from pipeline.schema import UNSAMPLED

ALLOWED, DENIED = "ALLOWED", "DENIED"
# Denials no ACL decides: a guard of the gateway's own (its security-store topic, names Kafka's
# topic rules reject), applied whatever the ACLs say; a candidate set denies them just the same.
GUARD_RULES = frozenset({DecisionRule.GATEWAY_RESERVED.value, DecisionRule.ILLEGAL_TOPIC_NAME.value})
# Why a key has no candidate verdict.
UNSAMPLED_REASON = "unsampled"  # an aggregated event's decisions beyond its sample: names not logged
INVALID_REASON = "invalid"  # a principal, operation or resource type the authorizer cannot take


@dataclass(slots=True, frozen=True)
class DecisionKey:
    """What the candidate verdict depends on; ``host`` is None when no candidate binding names a host."""

    principal: str | None
    host: str | None
    operation: str | None
    resource_type: str | None
    resource_name: str | None
    guarded: bool  # the live decision was a gateway guard's (GUARD_RULES)


@dataclass(slots=True, frozen=True)
class Verdict:
    """The candidate's answer (``decision`` ALLOWED/DENIED and its rule), or why there is none."""

    decision: str | None
    rule: str | None


def names_hosts(bindings: Iterable[AclBinding]) -> bool:
    """Does any binding name a host? If not, the client's host cannot change a verdict."""
    return any(b.entry.host != WILDCARD_HOST for b in bindings)


def rule_text(decision: Decision) -> str:
    """The decision's rule as the audit log writes it (gateway/session/authz_view.py)."""
    rule = decision.rule
    return rule.value if isinstance(rule, DecisionRule) else f"AclBinding({rule})"


class CandidateAuthorizer:
    """A loaded StandardAuthorizer over the candidate set, answering DecisionKeys."""

    __slots__ = ("_authorizer",)

    def __init__(self, bindings: Sequence[AclBinding], super_users: Iterable[str],
                 allow_everyone_if_no_acl_found: bool) -> None:
        # No memo tables: every key is asked once.
        self._authorizer = StandardAuthorizer(super_users, allow_everyone_if_no_acl_found, cache_size=0)
        self._authorizer.load(bindings)

    def verdict(self, key: DecisionKey) -> Verdict:
        if key.resource_name == UNSAMPLED:
            return Verdict(None, UNSAMPLED_REASON)
        if key.guarded:
            return Verdict(DENIED, None)
        try:
            principal = KafkaPrincipal.parse(key.principal or "")
            operation = parse_operation(key.operation or "")
            resource_type = parse_resource_type(key.resource_type or "")
        except (ValueError, AclValidationError):
            return Verdict(None, INVALID_REASON)
        host = key.host or WILDCARD_HOST
        try:
            if key.resource_name == WILDCARD_RESOURCE:  # the log's "any resource of the type" check
                decision = self._authorizer.authorize_any(principal, host, operation, resource_type)
            else:
                decision = self._authorizer.authorize(principal, host, operation, resource_type,
                                                      key.resource_name or "")
        except ValueError:  # ANY/UNKNOWN operation or type
            return Verdict(None, INVALID_REASON)
        return Verdict(ALLOWED if decision.allowed else DENIED, rule_text(decision))
