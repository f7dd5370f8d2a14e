"""The policy check: run the route's policy for the requester, inside the topic guard.

APIs without a policy are refused (fail closed). Without an authorizer only Kafka's
topic-name rules are checked (the route's own refusal, e.g. a follower Fetch, runs before
either, in the request stage). Reads a RequestContext, never the connection, so it runs in
the worker thread for a large request as well.  A route whose policy has a shortcut over a walked body
(authz/request_policy.py WalkedPolicy) is first walked: when every answer is yes it is relayed undecoded.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from authz.id_guard import unallowed_id
from authz.model import AclOperation, ResourceType
from authz.request_policy import Refuse, Relay, Rewrite, Verdict, WalkedPolicy
from authz.topic_guard import NOTHING_FOUND, TopicGuard, UnrestrictedView, inspect_names, inspect_topics
from gateway.authorization import GatewayAuthorization
from gateway.session.authz_view import ConnectionAuthzView
from gateway.session.request_context import RequestContext
from gateway.session.routes import ApiRoute
from protocol.entities.topic_prepass import prepass_for
from protocol.registry import api
from protocol.schema import MessageSpec

Body = dict[str, Any]


def authorize(requester: RequestContext, authorization: GatewayAuthorization, route: ApiRoute, version: int,
              body: Body) -> Verdict:
    """The route's policy's verdict, inside the topic guard that no policy can skip (authz/topic_guard.py)."""
    policy, key = route.policy, route.api_key
    schema = api(key)
    if policy is None or schema is None:
        return Refuse(f"no authorization policy for api key {key}")
    guard = TopicGuard(key, version, schema.request, schema.response, authorization.reserved_topics,
                       requester.topic_names, route.topic_rules)
    findings = guard.inspect(body)
    view = ConnectionAuthzView(authorization, requester.principal, requester.client_host, requester.client_port,
                               requester.listener.name, key, version, requester.topic_names, requester.misses,
                               findings, guard.illegal_denied)
    try:
        verdict = policy(body, version, view)
    finally:
        view.flush_audit()
    unchecked = _unallowed_id(route, version, schema.request, body, verdict, view)
    if unchecked is not None:
        return Refuse(f"the {schema.name} policy relays {unchecked[0].name} {unchecked[1]!r} without allowing it")
    return guard.seal(_flushing_hook(verdict, view), findings)


def _unallowed_id(route: ApiRoute, version: int, spec: MessageSpec, body: Body, verdict: Verdict,
                  view: ConnectionAuthzView) -> tuple[ResourceType, str] | None:
    """The id guard (authz/id_guard.py) over what the verdict relays (or answers locally)."""
    if not isinstance(verdict, Relay | Rewrite):
        return None
    if view.broker_request:  # authorized as a broker's request: the ids it names are others'
        return None
    relayed = verdict.request if isinstance(verdict, Rewrite) else body
    return unallowed_id(spec, version, relayed, view.allowed_names, route.ids_not_checked)


def check_topics(requester: RequestContext, route: ApiRoute, version: int, body: Body) -> Verdict:
    """Without an authorizer: Kafka's topic-name rules, nothing else.

    A request naming an illegal topic runs its route's policy with a view that allows every
    legal action, so the illegal names get the API's own per-item errors.
    """
    key = route.api_key
    schema = api(key)
    if schema is None:
        return Refuse(f"api key {key} has no schema")
    findings = inspect_topics(schema.request, version, body, frozenset(), requester.topic_names)
    if findings is NOTHING_FOUND:  # the common case: no guard to build, nothing to seal
        return _RELAY
    if route.policy is None:
        return Refuse(f"api key {key} v{version} names an illegal topic")
    guard = TopicGuard(key, version, schema.request, schema.response, frozenset(), requester.topic_names,
                       route.topic_rules)
    view = UnrestrictedView(requester.principal, findings.illegal, guard.illegal_denied, requester.topic_names)
    return guard.seal(route.policy(body, version, view), findings)


_RELAY = Relay()


def _flushing_hook(verdict: Verdict, view: ConnectionAuthzView) -> Verdict:
    """A response hook that asks more questions (e.g. all-topics Metadata) writes its audit events once, after."""
    if not isinstance(verdict, Relay | Rewrite) or verdict.on_response is None:
        return verdict
    hook = verdict.on_response

    def audited(response: Body) -> Body:
        try:
            return hook(response)
        finally:
            view.flush_audit()

    return replace(verdict, on_response=audited)


def allowed_walked(requester: RequestContext, authorization: GatewayAuthorization, shortcut: WalkedPolicy,
                   spec: MessageSpec, version: int, raw_body: memoryview) -> Body | None:
    """The walk's kept fields when the policy's shortcut relays the request as it came; None sends it through the
    decode and ``authorize``, which then decide, audit and refuse exactly as without the shortcut.

    The shortcut asks the authorizer itself, building no view, no actions and no audit batch: only where an
    allowed decision records nothing (no active shadow ACLs to compare with, ``ksgate.audit.log.allowed`` off)
    and nothing the view adds applies (a reserved or illegal topic, an unknown topic id, trailing bytes: None).
    A denial also gives None, so that the full path records it.  Raises DecodeError where the decoder would.
    """
    audit, shadow = authorization.audit, authorization.shadow
    # An inactive shadow set (empty: the security topic's store always has one) compares nothing (ShadowAcls.observe).
    if (shadow is not None and shadow.active) or (audit.record_allowed and audit.enabled):
        return None
    names: list[str] = []
    ids: list[uuid.UUID] = []
    kept, consumed = prepass_for(spec, version, shortcut.keep)(raw_body, names, ids)
    if consumed != len(raw_body):
        return None
    topic_names = requester.topic_names
    if inspect_names(names, ids, authorization.reserved_topics, topic_names) is not NOTHING_FOUND:
        return None
    for topic_id in ids:  # a message names its topics by name or by id, never both at one version
        name = topic_names.get(topic_id)
        if name is None:  # the policy's UNKNOWN_TOPIC_ID, and the session's refresh (the view notes the miss)
            return None
        names.append(name)
    authorize = authorization.authorizer.authorize
    principal, host = requester.principal, requester.client_host

    def may(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return authorize(principal, host, operation, resource_type, name).allowed

    return kept if shortcut.relays(kept, names, may) else None
