"""Fairness: while one connection's large request is being handled, other connections are served.

The policy (request path) or the response hook (response path) of the large request is held
on an event until the other client has had its answer; on the event loop that answer could
never come (the loop would be the one held), so these tests need no timing assumptions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from authz.request_policy import Relay, Rewrite, Verdict
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.context import GatewayContext
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.wire_client import WireClient, request_frame

HOLD_S = 30  # the longest the large request is held (only reached if the test fails)


@pytest.fixture(scope="module")
def strict_gateway(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    gateway = GatewayThread(broker.bootstrap, {"allow.everyone.if.no.acl.found": False}).start()
    yield gateway
    gateway.stop()


def _metadata(names: list[str]) -> dict[str, Any]:
    return {"topics": [{"name": name} for name in names], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


class Hold:
    """Entered by the large request's processing; released by the test."""

    def __init__(self) -> None:
        self.entered, self.released = threading.Event(), threading.Event()

    def __call__(self) -> None:
        self.entered.set()
        self.released.wait(HOLD_S)


Policy = Callable[[dict[str, Any], int, Any], Verdict]


def _one_small_answer(gateway: GatewayThread) -> dict[str, Any]:
    """Another client's one-topic Metadata, answered (denied: no ACLs) by the gateway itself."""
    other = WireClient(gateway.bootstrap, timeout_s=HOLD_S / 2)
    try:
        other.send(request_frame(ApiKey.METADATA, 9, 7, _metadata(["small"])))
        return other.read_response(ApiKey.METADATA, 9)[1]
    finally:
        other.close()


def _route_policy(monkeypatch: pytest.MonkeyPatch, ctx: GatewayContext, key: int, policy: Policy) -> None:
    """The gateway's route table with ``key``'s policy replaced (routes are immutable: the table is swapped)."""
    monkeypatch.setattr(ctx, "routes", MappingProxyType({**ctx.routes, key: replace(ctx.routes[key], policy=policy)}))


def test_a_large_request_in_authorization_does_not_hold_other_connections(
        strict_gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = strict_gateway.gateway.ctx
    policy = ctx.routes[ApiKey.METADATA].policy
    assert policy is not None
    hold = Hold()

    def held(request: dict[str, Any], version: int, view: Any) -> Verdict:
        if len(request["topics"] or []) > 1000:
            hold()
        return policy(request, version, view)

    _route_policy(monkeypatch, ctx, ApiKey.METADATA, held)
    names = [f"denied-{i}" for i in range(50_000)]
    large = WireClient(strict_gateway.bootstrap, timeout_s=HOLD_S * 2)
    try:
        # The large request, and pipelined behind it on the same connection a small one.
        large.send(request_frame(ApiKey.METADATA, 9, 1, _metadata(names))
                   + request_frame(ApiKey.API_VERSIONS, 3, 2, {"client_software_name": "t",
                                                               "client_software_version": "1"}))
        assert hold.entered.wait(HOLD_S)
        try:
            small = _one_small_answer(strict_gateway)
        finally:
            hold.released.set()
        assert [t["name"] for t in small["topics"]] == ["small"]
        first, body = large.read_response(ApiKey.METADATA, 9)
        assert first == 1 and len(body["topics"]) == len(names)
        assert {t["error_code"] for t in body["topics"]} == {29}  # TOPIC_AUTHORIZATION_FAILED
        second, _ = large.read_response(ApiKey.API_VERSIONS, 3)
        assert second == 2  # the order of one connection's answers is kept
    finally:
        large.close()


def test_a_large_response_in_its_hook_does_not_hold_other_connections(
        strict_gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = strict_gateway.gateway.ctx
    policy = ctx.routes[ApiKey.METADATA].policy
    assert policy is not None
    hold = Hold()

    def held_hook(response: dict[str, Any]) -> dict[str, Any]:
        hold()
        return response

    def relayed(request: dict[str, Any], version: int, view: Any) -> Verdict:
        # Relay the many-topic request (its upstream answer is large) with a hook that holds.
        return Relay(held_hook) if len(request["topics"] or []) > 1000 else policy(request, version, view)

    _route_policy(monkeypatch, ctx, ApiKey.METADATA, relayed)
    names = [f"absent-{i}" for i in range(3_000)]  # a request under the offload size, a response over it
    large = WireClient(strict_gateway.bootstrap, timeout_s=HOLD_S * 2)
    try:
        large.send(request_frame(ApiKey.METADATA, 9, 1, _metadata(names)))
        assert hold.entered.wait(HOLD_S)
        try:
            small = _one_small_answer(strict_gateway)
        finally:
            hold.released.set()
        assert [t["name"] for t in small["topics"]] == ["small"]
        correlation_id, body = large.read_response(ApiKey.METADATA, 9)
        assert correlation_id == 1 and len(body["topics"]) == len(names)
    finally:
        large.close()


def test_a_large_relayed_request_keeps_its_place_among_the_connections_requests(gateway: GatewayThread) -> None:
    # Allowed (no ACLs, allow.everyone.if.no.acl.found): decided in the worker, relayed, and its
    # answer (decoded again for the topic-id cache and addresses) comes back between its neighbours.
    names = [f"relayed-absent-{i:05d}" for i in range(5_000)]
    versions = {"client_software_name": "t", "client_software_version": "1"}
    client = WireClient(gateway.bootstrap, timeout_s=HOLD_S)
    try:
        client.send(request_frame(ApiKey.API_VERSIONS, 3, 1, versions)
                    + request_frame(ApiKey.METADATA, 9, 2, _metadata(names))
                    + request_frame(ApiKey.METADATA, 9, 3, _metadata(["relayed-small"]))
                    + request_frame(ApiKey.API_VERSIONS, 3, 4, versions))
        assert client.read_response(ApiKey.API_VERSIONS, 3)[0] == 1
        correlation_id, large = client.read_response(ApiKey.METADATA, 9)
        assert correlation_id == 2 and sorted(t["name"] for t in large["topics"]) == names
        correlation_id, small = client.read_response(ApiKey.METADATA, 9)
        assert correlation_id == 3 and [t["name"] for t in small["topics"]] == ["relayed-small"]
        assert client.read_response(ApiKey.API_VERSIONS, 3)[0] == 4
    finally:
        client.close()


def test_the_response_of_a_large_request_is_handled_off_the_loop_however_small_the_upstreams_part(
        strict_gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch) -> None:
    # All 50,000 names are denied: the upstream is asked about none of them (a small answer), and
    # the policy's hook adds the 50,000 denied entries to it.
    ctx = strict_gateway.gateway.ctx
    policy = ctx.routes[ApiKey.METADATA].policy
    assert policy is not None
    hold = Hold()

    def hook_held(request: dict[str, Any], version: int, view: Any) -> Verdict:
        verdict = policy(request, version, view)
        if len(request["topics"] or []) <= 1000 or not isinstance(verdict, Relay | Rewrite):
            return verdict
        hook = verdict.on_response
        assert hook is not None

        def held(response: dict[str, Any]) -> dict[str, Any]:
            hold()
            return hook(response)

        return replace(verdict, on_response=held)

    _route_policy(monkeypatch, ctx, ApiKey.METADATA, hook_held)
    names = [f"denied-{i}" for i in range(50_000)]
    large = WireClient(strict_gateway.bootstrap, timeout_s=HOLD_S * 2)
    try:
        large.send(request_frame(ApiKey.METADATA, 9, 1, _metadata(names)))
        assert hold.entered.wait(HOLD_S)
        try:
            small = _one_small_answer(strict_gateway)
        finally:
            hold.released.set()
        assert [t["name"] for t in small["topics"]] == ["small"]
        correlation_id, body = large.read_response(ApiKey.METADATA, 9)
        assert correlation_id == 1 and {t["name"] for t in body["topics"]} >= set(names)
    finally:
        large.close()
