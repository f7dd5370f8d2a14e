"""With an authorizer an allowed Produce is walked (WALKED_PRODUCE, policy_check.allowed_walked), not decoded, and
decided and audited the same.

decide() with the route's walked shortcut against decide() with the full decode and the policy (``walked_policy``
unset), on the same frames at every Produce version: allowed, denied, partly denied, transactional with and without
WRITE on the transactional id, unknown topic ids, reserved and illegal names, acks 0 / 1 / -1, trailing bytes,
cut and flipped bodies.  Each side has its own audit log: the same decision (or refusal, word for word), the same
audit events (denials always, allowed decisions with ksgate.audit.log.allowed) and the same topic-id miss.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from auth.principal import KafkaPrincipal
from authz.authorizer import StandardAuthorizer
from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from authz.policies.produce import WALKED_PRODUCE
from authz.shadow import ReportLimiter, ShadowAcls
from gateway.authorization import GatewayAuthorization
from gateway.ops.audit import AuditLog
from gateway.session.authz_view import TopicIdMisses
from gateway.session.request_context import RequestContext
from gateway.session.request_stage import AnswerLocally, RelayRequest, ReplyNow, decide
from gateway.session.response_stage import PipelineRefusal
from gateway.session.routes import RouteTable, route_of
from gateway.session.session import ProxySession
from protocol.api_keys import ApiKey
from protocol.messages import decode_response, request_frame
from protocol.record_batch import encode_batch
from tests.gateway.session.session_driver import Driver, gateway_for
from tests.protocol.test_straight_decode import _mutations

_VERSIONS = range(0, 14)
_RESERVED = "__ksgate_security"
_PLAIN = encode_batch([(None, b"x" * 100)], timestamp_ms=0)
_TXN = bytearray(_PLAIN)
_TXN[22] |= 0x10  # the transactional attribute (the CRC is the broker's to check)
_KNOWN = ("ok1", "ok2", "no", _RESERVED, "other")  # the names the topic-id cache knows; "ghost" it does not


@dataclass(slots=True)
class _RecordedAudit(AuditLog):
    """The audit log's events in memory (without their time stamp), written exactly when the file would be."""

    events: list[dict[str, Any]] = field(default_factory=list)

    def _write(self, event: dict[str, Any]) -> None:
        self.events.append({k: v for k, v in event.items() if k != "ts"})


def _allow(resource_type: ResourceType, name: str, pattern: PatternType) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW))


def _authorization(tmp: Path, record_allowed: bool, shadow: str = "none") -> GatewayAuthorization:
    """The ACLs every test uses; ``shadow``: none, inactive (empty, as the security topic's store always has one)
    or active (a candidate set that would deny ok2 and tx-ok: divergences on allowed decisions)."""
    authorizer = StandardAuthorizer([], False)
    authorizer.load([_allow(ResourceType.TOPIC, "ok", PatternType.PREFIXED),
                     _allow(ResourceType.TOPIC, _RESERVED, PatternType.LITERAL),  # the guard denies it anyway
                     _allow(ResourceType.TRANSACTIONAL_ID, "tx-ok", PatternType.LITERAL)])
    audit = _RecordedAudit(str(tmp), record_allowed)
    candidate = None
    if shadow != "none":
        candidate = ShadowAcls(authorizer, ReportLimiter(interval_s=0.0, clock=lambda: 0.0))  # every report admitted
        candidate.load([_allow(ResourceType.TOPIC, "ok1", PatternType.LITERAL)] if shadow == "active" else [])
    return GatewayAuthorization(authorizer, None, audit, reserved_topics=frozenset({_RESERVED}),  # type: ignore[arg-type]
                                shadow=candidate)


@pytest.fixture
def session(tmp_path: Path) -> ProxySession:
    gateway = gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer",
                                       "ksgate.acl.file": str(tmp_path / "acls.json")})
    return Driver.connect(gateway).session


@pytest.fixture
def routes(session: ProxySession) -> RouteTable:
    """The gateway's routes: Produce's is walked with an authorizer."""
    assert session.ctx.routes[ApiKey.PRODUCE].walked_policy is WALKED_PRODUCE
    return session.ctx.routes


@pytest.fixture
def base(session: ProxySession) -> RequestContext:
    context: RequestContext = session._request_context()
    assert context.authorization is not None
    return context._replace(principal=KafkaPrincipal("User", "alice"),
                            topic_names={_topic_id(name): name for name in _KNOWN})


_Side = tuple[RequestContext, RouteTable]  # a request's context and the routes it is decided through


def _sides(base: RequestContext, routes: RouteTable, tmp: Path, record_allowed: bool,
           shadow: str) -> tuple[_Side, _Side]:
    """(walking, decoding): the same ACLs, each with its own audit log (and shadow set)."""
    decoding = {**routes, ApiKey.PRODUCE: replace(routes[ApiKey.PRODUCE], walked_policy=None)}
    return ((base._replace(authorization=_authorization(tmp / "walked.log", record_allowed, shadow)), routes),
            (base._replace(authorization=_authorization(tmp / "decoded.log", record_allowed, shadow)), decoding))


def _topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def _produce(version: int, acks: int, txn_id: str | None, records: bytes, *names: str) -> dict[str, Any]:
    by_id = version >= 13
    return {"transactional_id": txn_id, "acks": acks, "timeout_ms": 1000, "topic_data": [
        {**({"topic_id": _topic_id(name)} if by_id else {"name": name}),
         "partition_data": [{"index": 0, "records": records}, {"index": 1, "records": None}]} for name in names]}


def _sized(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _outcome(side: _Side, wire: bytes) -> tuple[Any, ...]:
    """The decision, the audit events it wrote and whether it noted a topic-id miss."""
    context, routes = side
    assert context.authorization is not None
    audit = context.authorization.audit
    assert isinstance(audit, _RecordedAudit)
    audit.events.clear()
    context = context._replace(misses=TopicIdMisses())
    try:
        frame = memoryview(wire)
        decided: tuple[Any, ...] = _decision(decide(context, frame, route_of(routes, frame)))
    except PipelineRefusal as exc:
        decided = ("refused", str(exc))
    return decided, list(audit.events), context.misses.missed


def _decision(decision: Any) -> tuple[Any, ...]:
    assert not isinstance(decision, AnswerLocally)
    if isinstance(decision, ReplyNow):
        return ("reply", decision.correlation_id, decision.outcome,
                decode_response(decision.frame[4:], decision.key, decision.version))
    assert isinstance(decision, RelayRequest)
    hook = None if decision.hook is None else "hook"
    return ("relay", decision.key, decision.version, decision.correlation_id, bytes(decision.wire), hook,
            decision.expects_response, decision.outcome)


_TOPICS = [("ok1",), ("ok1", "ok2"), ("ok1", "ok1"), (), ("no",), ("ok1", "no"), ("no", "ok2"), ("ghost",),
           ("ok1", "ghost"), (_RESERVED,), ("ok1", _RESERVED), ("bad name",), ("..", "ok1")]
_TRANSACTIONS = [(None, bytes(_PLAIN)), ("tx-ok", bytes(_PLAIN)), ("tx-no", bytes(_PLAIN)),  # the id unchecked
                 ("tx-ok", bytes(_TXN)), ("tx-no", bytes(_TXN)), (None, bytes(_TXN))]


def _frames(version: int, rng: random.Random) -> list[bytes]:
    frames = [request_frame(ApiKey.PRODUCE, version, 7, _produce(version, acks, txn_id, records, *names), "c")
              for acks in (-1, 0, 1) for txn_id, records in _TRANSACTIONS for names in _TOPICS]
    frames += [_sized(frame[4:] + b"\x00\x01") for frame in frames[:3]]  # trailing bytes: the canonical body
    frames += [_sized(broken) for broken in _mutations(frames[1][4:], rng)]  # cut, padded, flipped
    return frames


@pytest.mark.parametrize(("record_allowed", "shadow"), [(False, "none"), (True, "none"), (False, "active")],
                         ids=["allowed-not-logged", "log-allowed", "shadow-acls"])
@pytest.mark.parametrize("version", _VERSIONS)
def test_an_authorized_walked_produce_is_decided_and_audited_as_a_decoded_one(
        base: RequestContext, routes: RouteTable, tmp_path: Path, version: int, record_allowed: bool,
        shadow: str) -> None:
    walking, decoding = _sides(base, routes, tmp_path, record_allowed, shadow)
    rng = random.Random(f"authorized walked produce v{version}")
    outcomes, events = set(), set()
    for frame in _frames(version, rng):
        walked = _outcome(walking, frame)
        assert walked == _outcome(decoding, frame), frame.hex()
        events.update((e["event"], e["decision"]) for e in walked[1])
        kind = walked[0][0]
        outcomes.add(kind if kind == "refused" else walked[0][2] if kind == "reply" else walked[0][-1])
    if version >= 3:  # below, v0-2 are refused after the decode
        assert {"allowed", "denied", "partial", "refused"} <= outcomes
        assert ("authorization", "DENIED") in events
        assert (("authorization", "ALLOWED") in events) is record_allowed
        assert (("shadow", "WOULD_DENY") in events) is (shadow == "active")


def _decide(context: RequestContext, routes: RouteTable, txn_id: str | None, records: bytes, *names: str) -> Any:
    return decide(context, memoryview(request_frame(ApiKey.PRODUCE, 11, 7, _produce(11, -1, txn_id, records, *names),
                                                    "c")), routes[ApiKey.PRODUCE])


def test_an_allowed_produce_with_an_authorizer_is_relayed_undecoded_and_unrecorded(
        base: RequestContext, routes: RouteTable, tmp_path: Path, decoded: list[str]) -> None:
    context = base._replace(authorization=_authorization(tmp_path / "a.log", record_allowed=False))
    inactive_shadow = base._replace(authorization=_authorization(tmp_path / "b.log", False, shadow="inactive"))
    for txn_id, records in ((None, bytes(_PLAIN)), ("tx-ok", bytes(_TXN))):
        for requester in (context, inactive_shadow):
            decision = _decide(requester, routes, txn_id, records, "ok1", "ok2")
            assert isinstance(decision, RelayRequest) and decision.outcome == "allowed" and decision.hook is None
    assert decoded == []
    assert context.authorization is not None and context.authorization.audit.events == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("case", ["denied topic", "denied transactional id", "unknown topic id", "reserved topic",
                                  "log allowed", "shadow ACLs"])
def test_an_authorized_produce_the_shortcut_cannot_answer_is_decoded_and_recorded(
        base: RequestContext, routes: RouteTable, tmp_path: Path, decoded: list[str], case: str) -> None:
    authorization = _authorization(tmp_path / "a.log", record_allowed=case == "log allowed",
                                   shadow="active" if case == "shadow ACLs" else "none")
    names, txn_id, records = ("ok1",), None, bytes(_PLAIN)
    if case == "shadow ACLs":
        names = ("ok2",)  # allowed, and the candidate set would deny it
    if case == "denied topic":
        names = ("ok1", "no")
    elif case == "denied transactional id":
        txn_id, records = "tx-no", bytes(_TXN)
    elif case == "unknown topic id":
        names = ("ghost",)
    elif case == "reserved topic":
        names = (_RESERVED,)
    context = base._replace(authorization=authorization, misses=TopicIdMisses())
    if case == "unknown topic id":  # only v13 names topics by id
        decide(context, memoryview(request_frame(ApiKey.PRODUCE, 13, 7, _produce(13, -1, txn_id, records, *names),
                                                 "c")), routes[ApiKey.PRODUCE])
        assert context.misses.missed
    else:
        _decide(context, routes, txn_id, records, *names)
    assert decoded == ["ProduceRequest"]
    events = authorization.audit.events  # type: ignore[attr-defined]
    if case == "log allowed":
        assert [(e["resource_name"], e["decision"]) for e in events] == [("ok1", "ALLOWED")]
    elif case == "shadow ACLs":
        assert [(e["event"], e["resource_name"], e["decision"]) for e in events] == [("shadow", "ok2", "WOULD_DENY")]
    elif case != "unknown topic id":
        assert any(e["decision"] == "DENIED" for e in events)
