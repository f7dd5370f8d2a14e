"""Without an authorizer a Produce is walked (protocol/entities/topic_prepass.py), not decoded, and decided the same.

decide() with the route's walk against decide() with the full decode (the route's ``walked`` unset), on the
same frames: valid bodies, acks=0, illegal topic names, trailing bytes, truncations and flipped bytes at every
Produce version: the same decision (type, ids, the relayed bytes, hook, whether an answer is expected, outcome)
or the same refusal, word for word.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gateway.session.request_context import RequestContext
from gateway.session.request_stage import AnswerLocally, RelayRequest, ReplyNow, decide
from gateway.session.response_stage import PipelineRefusal
from gateway.session.routes import RouteTable, route_of
from protocol.api_keys import ApiKey
from protocol.messages import decode_response, request_frame
from protocol.record_batch import encode_batch
from tests.gateway.session.session_driver import Driver, gateway_for
from tests.protocol.test_straight_decode import _mutations

_VERSIONS = range(0, 14)  # v0-2: refused after the walk, as after the decode
_RECORDS = encode_batch([(None, b"x" * 100)], timestamp_ms=0)


@pytest.fixture
def walking(tmp_path: Path) -> tuple[RequestContext, RouteTable]:
    """A request's context without an authorizer, and the gateway's routes (Produce's walks)."""
    session = Driver.connect(gateway_for(tmp_path)).session
    context: RequestContext = session._request_context()
    assert context.authorization is None and session.ctx.routes[ApiKey.PRODUCE].walked == ("acks",)
    return context, session.ctx.routes


def _decoding(routes: RouteTable) -> RouteTable:
    return {**routes, ApiKey.PRODUCE: replace(routes[ApiKey.PRODUCE], walked=None)}


def _produce(version: int, acks: int, *names: str) -> dict[str, Any]:
    by_id = version >= 13
    return {"transactional_id": None, "acks": acks, "timeout_ms": 1000, "topic_data": [
        {**({"topic_id": _topic_id(name)} if by_id else {"name": name}),
         "partition_data": [{"index": 0, "records": _RECORDS}, {"index": 1, "records": None}]} for name in names]}


def _topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


def _sized(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _outcome(context: RequestContext, routes: RouteTable, wire: bytes) -> tuple[Any, ...]:
    try:
        frame = memoryview(wire)
        decision = decide(context, frame, route_of(routes, frame))
    except PipelineRefusal as exc:
        return ("refused", str(exc))
    assert not isinstance(decision, AnswerLocally)
    if isinstance(decision, ReplyNow):
        return ("reply", decision.correlation_id, decision.outcome,
                decode_response(decision.frame[4:], decision.key, decision.version))
    assert isinstance(decision, RelayRequest)
    return ("relay", decision.key, decision.version, decision.correlation_id, bytes(decision.wire),
            decision.hook is None, decision.expects_response, decision.outcome)


@pytest.mark.parametrize("version", _VERSIONS)
def test_a_walked_produce_is_decided_as_a_decoded_one(walking: tuple[RequestContext, RouteTable],
                                                     version: int) -> None:
    context, routes = walking
    decoding = _decoding(routes)
    rng = random.Random(f"walked produce v{version}")
    frames = [request_frame(ApiKey.PRODUCE, version, 7, _produce(version, acks, *names), "c")
              for acks in (-1, 0, 1) for names in (("orders",), ("a", "b"), (), ("bad name",), ("..", "ok"))]
    frames += [_sized(frame[4:] + b"\x00\x01") for frame in frames[:3]]  # trailing bytes: the canonical body
    frames += [_sized(broken) for broken in _mutations(frames[1][4:], rng)]  # cut, padded, flipped
    for frame in frames:
        assert _outcome(context, routes, frame) == _outcome(context, decoding, frame), frame.hex()


def test_a_produce_without_an_authorizer_is_not_decoded(walking: tuple[RequestContext, RouteTable],
                                                        decoded: list[str]) -> None:
    context, routes = walking
    wire = request_frame(ApiKey.PRODUCE, 11, 7, _produce(11, -1, "orders"), "c")
    decision = decide(context, memoryview(wire), routes[ApiKey.PRODUCE])
    assert isinstance(decision, RelayRequest) and bytes(decision.wire) == wire and decision.expects_response
    assert decoded == []
    acks_zero = decide(context, memoryview(request_frame(ApiKey.PRODUCE, 11, 8, _produce(11, 0, "o"), "c")),
                       routes[ApiKey.PRODUCE])
    assert isinstance(acks_zero, RelayRequest) and not acks_zero.expects_response and decoded == []
    # An illegal name goes through the full decode and the policy (its per-partition errors), as before.
    illegal = decide(context, memoryview(request_frame(ApiKey.PRODUCE, 11, 9, _produce(11, -1, "a b"), "c")),
                     routes[ApiKey.PRODUCE])
    assert isinstance(illegal, ReplyNow) and decoded == ["ProduceRequest"]
