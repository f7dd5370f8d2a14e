"""The request stage: one authenticated client frame → what to do with it.

    frame → header → route → check negotiated version → decode body → the route's refusal
          → topic guard / (the route's policy) → (rewrite) → relay, reply or the route's local handler

A pure function of the frame and a RequestContext (who asks, frozen): it changes no
session state, so the session can run it on the loop or, for a large request, in the
worker thread, and apply the decision afterwards in request order. Everything the gateway
cannot parse is refused (PipelineRefusal: the connection is closed), never relayed blind.
SASL frames never come here: their route sends them to the session's authenticator.
Without an authorizer a route may have its body walked instead of decoded (Produce: only its
topic names and acks are read; protocol/entities/topic_prepass.py), with the same refusals; with one,
a route whose policy has a walked shortcut (Produce) is relayed undecoded when the shortcut allows it all.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from authz.request_policy import Answer, Refuse, Relay, Rewrite, Verdict
from authz.topic_guard import NOTHING_FOUND, inspect_names
from gateway.admin.handlers import OffLoop
from gateway.session.api_versions import api_versions_reply, check_negotiated
from gateway.session.policy_check import allowed_walked, authorize, check_topics
from gateway.session.request_context import RequestContext
from gateway.session.response_queue import WireBytes, with_correlation_id
from gateway.session.response_stage import PipelineRefusal, RefusedInTurn
from gateway.session.routes import ApiRoute, Dispatch
from protocol.entities.topic_prepass import prepass_for
from protocol.errors import DecodeError
from protocol.framing import frame as framed
from protocol.header import FIXED_HEADER, SHORT_HEADER, read_request_header
from protocol.messages import response_frame
from protocol.schema import MessageSpec

Body = dict[str, Any]
Hook = Callable[[Body], Body] | None


@dataclass(slots=True)
class RelayRequest:
    """Send ``wire`` (the client's correlation id still in it) upstream; its answer fills the slot."""

    key: int
    version: int
    correlation_id: int
    wire: WireBytes
    hook: Hook = None  # post-processing of the upstream's answer (authorization merges and filters)
    expects_response: bool = True  # False: Produce acks=0, the client waits for nothing
    outcome: str | None = None  # the authorization outcome, for the metrics
    then_close: str | None = None  # set: the connection is closed in turn once this is relayed (RefusedInTurn)


@dataclass(slots=True)
class ReplyNow:
    """The session answers at once with ``frame`` (ApiVersions, a denied request)."""

    key: int
    version: int
    correlation_id: int
    frame: bytes
    outcome: str | None = None


@dataclass(slots=True)
class AnswerLocally:
    """An admin API ksgate serves itself: ``compute`` gives the body, or OffLoop work giving it."""

    key: int
    version: int
    correlation_id: int
    compute: Callable[[], Body | OffLoop]
    hook: Hook = None
    outcome: str | None = None


Decision = RelayRequest | ReplyNow | AnswerLocally

_OUTCOMES = {Relay: "allowed", Rewrite: "partial", Answer: "denied", Refuse: "refused"}
_HEADER_END = 4 + FIXED_HEADER.size
_REQUEST_CORRELATION_AT = 8  # size(4) api_key(2) api_version(2)
_NOT_SERVED = "api key {key} v{version} is advertised but not served (as on Kafka 4)"


def decide(requester: RequestContext, wire: memoryview, route: ApiRoute | None) -> Decision:
    """Run one request frame (``wire``: size prefix + payload, as received) through the stages its route names;
    raises PipelineRefusal to close the connection. ``route``: the frame's route, as the session looked it up
    once for every stage (the gateway's route table at its api key; None: the frame has no key, or no route)."""
    # peek_api(wire, 4) inline, with its struct and message (once per request): the header at offset 4 of the wire
    if len(wire) < _HEADER_END:
        raise PipelineRefusal(f"not a Kafka request: {SHORT_HEADER}")
    key, version, correlation_id = FIXED_HEADER.unpack_from(wire, 4)
    payload = wire[4:]
    dispatch = route.dispatch if route is not None else None
    # Before ApiVersions too: once the session has expired Kafka closes on any request but a SaslHandshake (measured).
    if requester.session_expired:
        raise PipelineRefusal("session over: expired without re-authentication (connections.max.reauth.ms), "
                              "or a re-authentication asked for another mechanism")
    if dispatch is not Dispatch.RELAY and dispatch is not None:  # one check for the relayed APIs
        if dispatch is Dispatch.API_VERSIONS:
            try:
                answer, _ = api_versions_reply(payload, correlation_id, version, requester.negotiated,
                                               requester.features, requester.served)
            except DecodeError as exc:
                raise PipelineRefusal(f"refused api key {key} v{version}: {exc}") from None
            return ReplyNow(key, version, correlation_id, framed(answer))
        if dispatch is Dispatch.SASL:  # the session's own, never a stage's
            raise PipelineRefusal(f"api key {key} is answered by the session, not the request stage")
    authorization = requester.authorization
    if dispatch is Dispatch.LOCAL and route is not None and route.local is None:
        raise PipelineRefusal(f"api key {key} is only served by the gateway itself, and it is not enabled here")
    try:
        schema, _, _, header_size, _ = read_request_header(payload, key, version)
        check_negotiated(key, version, requester.negotiated)
        raw_body = payload[header_size:]
        if authorization is None:
            if route is not None and route.walked is not None:
                walked = _walk(requester, schema.request, version, route.walked, raw_body)
                if walked is not None:
                    return _relay_walked(route, version, correlation_id, wire, walked, None)
        elif route is not None and route.walked_policy is not None:
            walked = allowed_walked(requester, authorization, route.walked_policy, schema.request, version, raw_body)
            if walked is not None:
                return _relay_walked(route, version, correlation_id, wire, walked, "allowed")
        codec = schema.request_codec(version)
        body, consumed = codec.decode_prefix(raw_body)
    except DecodeError as exc:
        raise PipelineRefusal(f"refused api key {key} v{version}: {exc}") from None
    assert route is not None  # a negotiated api key has a route
    if version < route.refused_below:
        raise PipelineRefusal(_NOT_SERVED.format(key=key, version=version))
    refusal = route.refusal(body, version) if route.refusal is not None else None
    if refusal is not None:
        raise PipelineRefusal(refusal)
    relayed: WireBytes = wire
    if consumed != len(raw_body):
        # Trailing bytes after the body: Kafka ignores them, so we accept the request,
        # but relay the canonical encoding so the upstream sees exactly what we parsed.
        relayed = framed(bytes(payload[:header_size]) + codec.encode(body))
    if authorization is not None:
        verdict: Verdict = authorize(requester, authorization, route, version, body)
        outcome: str | None = _OUTCOMES[type(verdict)]
    else:  # no ACLs, but Kafka's topic-name rules still hold
        verdict, outcome = check_topics(requester, route, version, body), None
    then_close: str | None = None
    if type(verdict) is not Relay:  # the usual verdict, told apart with one check
        if isinstance(verdict, Refuse):
            raise (RefusedInTurn if verdict.in_turn else PipelineRefusal)(
                verdict.reason, key if outcome is not None else None)
        if isinstance(verdict, Answer):
            return ReplyNow(key, version, correlation_id,
                            response_frame(key, version, correlation_id, verdict.response), outcome)
        if isinstance(verdict, Rewrite):
            relayed = framed(bytes(payload[:header_size]) + codec.encode(verdict.request))
            then_close = verdict.then_close
    if route.local is not None:
        assert authorization is not None  # a gateway without an authorizer serves no admin API (build_routes)
        handler = partial(route.local, authorization, requester.admin_request(), body, version)
        return AnswerLocally(key, version, correlation_id, handler, verdict.on_response, outcome)
    fire_and_forget = route.fire_and_forget  # Produce acks=0: the client expects no answer
    return RelayRequest(key, version, correlation_id, relayed, verdict.on_response,
                        fire_and_forget is None or not fire_and_forget(body), outcome, then_close)


def _walk(requester: RequestContext, spec: MessageSpec, version: int, keep: tuple[str, ...],
          raw_body: memoryview) -> Body | None:
    """Without an authorizer: the kept fields of a body walked, not decoded (same DecodeError where the decoder
    refuses), when it is relayed as it came; None sends it through the full decode: trailing bytes (the
    canonical encoding is relayed), or a topic Kafka's name rules flag (check_topics runs the policy)."""
    names: list[str] = []
    ids: list[uuid.UUID] = []
    kept, consumed = prepass_for(spec, version, keep)(raw_body, names, ids)
    if consumed != len(raw_body):
        return None
    if inspect_names(names, ids, frozenset(), requester.topic_names) is not NOTHING_FOUND:
        return None
    return kept


def _relay_walked(route: ApiRoute, version: int, correlation_id: int, wire: memoryview, walked: Body,
                  outcome: str | None) -> RelayRequest:
    """What the full path decides for a walked body that check_topics finds nothing in, or that the policy's shortcut
    allows (``outcome`` "allowed"): relayed as it came, no hook."""
    if version < route.refused_below:  # after the walk, as after the decode: a malformed body is refused as such
        raise PipelineRefusal(_NOT_SERVED.format(key=route.api_key, version=version))
    fire_and_forget = route.fire_and_forget
    return RelayRequest(route.api_key, version, correlation_id, wire, None,
                        fire_and_forget is None or not fire_and_forget(walked), outcome)


def upstream_pieces(decision: RelayRequest, upstream_id: int) -> list[WireBytes]:
    """The request frame as pieces, with the gateway's correlation id for the upstream in it."""
    view = decision.wire if isinstance(decision.wire, memoryview) else memoryview(decision.wire)
    return with_correlation_id(view, _REQUEST_CORRELATION_AT, upstream_id)
