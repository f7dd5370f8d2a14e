"""Acceptance (#21): client quotas in the replicated security store. A quota added, changed or removed
through one instance is in force in the other's quota book a Fetch later; a new instance replays them."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.commands.cli import main as ksgate
from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.api_keys import ApiKey
from tests.conformance.wire import Connection, Endpoint
from tests.harness import GatewayThread

PBR = "producer_byte_rate"


@pytest.fixture(scope="module")
def instances(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[tuple[Path, list[GatewayThread]]]:
    directory: Path = tmp_path_factory.mktemp("replicated-quotas")
    settings: dict[str, Any] = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": "StandardAuthorizer",
        "ksgate.security.store": "KAFKA", "ksgate.security.store.topic": f"_ksgate_security_{uuid.uuid4().hex[:8]}",
        "super.users": "User:admin", "connection.failed.authentication.delay.ms": 10}
    config = directory / "gateway.yaml"
    config.write_text(yaml.safe_dump({**settings, "upstream.bootstrap.servers": broker.bootstrap}))
    password = directory / "admin.pw"
    password.write_text("admin-secret\n")
    assert ksgate(["users", "add", "admin", "--config", str(config), "--password-file", str(password)]) == 0
    running = [GatewayThread(broker.bootstrap, settings, protocol="SASL_PLAINTEXT").start() for _ in range(2)]
    yield config, running
    for gateway in running:
        gateway.stop()


def _alter(gateway: GatewayThread, op: dict[str, Any]) -> None:
    admin = Connection(Endpoint(gateway.bootstrap, None), "admin", "admin-secret")
    try:
        outcome = admin.exchange(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [
            {"entity": [{"entity_type": "user", "entity_name": "alice"}], "ops": [op]}]})
    finally:
        admin.close()
    assert outcome.body is not None and [e["error_code"] for e in outcome.body["entries"]] == [0], outcome


def _applied_on(other: GatewayThread, op: dict[str, Any], through: GatewayThread) -> float:
    """Make the change through ``through``; seconds until ``other``'s quota store applied it (an event, no polling)."""
    applied = threading.Event()
    assert other.gateway.quota_store is not None
    unsubscribe = other.gateway.quota_store.subscribe(lambda _state: applied.set())
    try:
        start = time.monotonic()
        _alter(through, op)
        assert applied.wait(10), "the other instance never applied the change"
        return time.monotonic() - start
    finally:
        unsubscribe()


def test_add_change_and_remove_reach_the_other_instance(instances: tuple[Path, list[GatewayThread]]) -> None:
    _, (first, second) = instances
    took = [_applied_on(second, {"key": PBR, "value": 1_000_000.0, "remove": False}, through=first)]
    assert second.gateway.ctx.quotas.lookup("alice", "app", PBR) == (1_000_000.0, "user=alice")
    took.append(_applied_on(second, {"key": PBR, "value": 2_000_000.0, "remove": False}, through=first))
    assert second.gateway.ctx.quotas.lookup("alice", "app", PBR) == (2_000_000.0, "user=alice")
    took.append(_applied_on(first, {"key": PBR, "value": 0.0, "remove": True}, through=second))
    assert first.gateway.ctx.quotas.lookup("alice", "app", PBR) is None
    print(f"applied on the other instance after {', '.join(f'{t * 1000:.0f}' for t in took)} ms")  # -s shows it


def test_a_new_instance_replays_the_quotas(instances: tuple[Path, list[GatewayThread]],
                                           broker: EmbeddedBroker) -> None:
    config, (first, _) = instances
    _alter(first, {"key": "consumer_byte_rate", "value": 5000.0, "remove": False})
    settings = {k: v for k, v in yaml.safe_load(config.read_text()).items() if k != "upstream.bootstrap.servers"}
    late = GatewayThread(broker.bootstrap, settings, protocol="SASL_PLAINTEXT").start()
    try:
        assert late.gateway.ctx.quotas.lookup("alice", "", "consumer_byte_rate") == (5000.0, "user=alice")
    finally:
        late.stop()


def test_ksgate_quotas_writes_to_the_security_topic(instances: tuple[Path, list[GatewayThread]]) -> None:
    config, (_, second) = instances
    applied = threading.Event()
    assert second.gateway.quota_store is not None
    unsubscribe = second.gateway.quota_store.subscribe(lambda _state: applied.set())
    try:
        assert ksgate(["quotas", "--config", str(config), "--alter", "--add-config", "request_percentage=25",
                       "--client", "batch"]) == 0
        assert applied.wait(10)
    finally:
        unsubscribe()
    assert second.gateway.ctx.quotas.lookup("anyone", "batch", "request_percentage") == (25.0, "client-id=batch")
