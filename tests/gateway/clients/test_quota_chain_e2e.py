"""Acceptance (#21), the whole chain: a quota set through AlterClientQuotas on the gateway is stored (the
file store, or the replicated store shared by two instances), reaches the quota book and throttles a
librdkafka producer of that user, not another user's beside it; removed, it stops. Upstream: Tansu."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.commands.cli import main as ksgate
from gateway.commands.embedded_broker import EmbeddedBroker
from tests.gateway.clients.quota_chain import (
    PBR,
    Flood,
    alter_quota,
    book_changed,
    create_topic,
    metric,
    sasl,
    throttles_alice_not_bob_until_removed,
)
from tests.harness import GatewayThread, secured_gateway

QUOTA = 100_000.0  # bytes/s: a flood of 10 kB records is over it within a few seconds
ALICE = {"user": "alice"}


@pytest.fixture(scope="module")
def file_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    directory = tmp_path_factory.mktemp("chain-file")
    gateway = secured_gateway(broker.bootstrap, directory, users=("admin", "alice", "bob"), extra={
        "ksgate.quota.file": str(directory / "quotas.json"), "allow.everyone.if.no.acl.found": True})
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def replicated(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[GatewayThread]]:
    """Two instances sharing one security topic on the upstream (ksgate.security.store: KAFKA)."""
    directory: Path = tmp_path_factory.mktemp("chain-replicated")
    settings: dict[str, Any] = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": "StandardAuthorizer",
        "ksgate.security.store": "KAFKA",
        "ksgate.security.store.topic": f"_ksgate_security_{uuid.uuid4().hex[:8]}", "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": True, "connection.failed.authentication.delay.ms": 10}
    config = directory / "gateway.yaml"
    config.write_text(yaml.safe_dump({**settings, "upstream.bootstrap.servers": broker.bootstrap}))
    for user in ("admin", "alice", "bob"):
        password = directory / f"{user}.pw"
        password.write_text(f"{user}-secret\n")
        assert ksgate(["users", "add", user, "--config", str(config), "--password-file", str(password)]) == 0
    running = [GatewayThread(broker.bootstrap, settings, protocol="SASL_PLAINTEXT").start() for _ in range(2)]
    yield running
    for gateway in running:
        gateway.stop()


def test_a_quota_set_through_the_gateway_with_the_file_store_throttles_that_user_only(
        file_gateway: GatewayThread) -> None:
    throttles_alice_not_bob_until_removed(
        lambda value: alter_quota(file_gateway, ALICE, PBR, value), file_gateway, QUOTA)


def test_a_quota_set_on_one_instance_throttles_on_the_other_sharing_the_replicated_store(
        replicated: list[GatewayThread]) -> None:
    first, second = replicated
    throttles_alice_not_bob_until_removed(lambda value: alter_quota(first, ALICE, PBR, value), second, QUOTA)


def test_a_quota_change_reaches_the_other_instance_within_a_second(replicated: list[GatewayThread]) -> None:
    """Add, change, remove through one instance: the other's book has each after one Fetch of the security
    topic. The wait is on the store's event; the latencies are printed (-s), figures, not assertions."""
    first, second = replicated
    took = []
    for value in (500_000.0, 250_000.0, None):
        with book_changed(second) as changed:
            start = time.monotonic()
            alter_quota(first, {"user": "carol"}, PBR, value)
            assert changed.wait(10), "the other instance never applied the change"
            took.append(time.monotonic() - start)
        found = second.gateway.ctx.quotas.lookup("carol", "any", PBR)
        assert found == (None if value is None else (value, "user=carol"))
    print(f"applied on the other instance after {', '.join(f'{t * 1000:.0f}' for t in took)} ms")


def test_precedence_end_to_end_each_client_gets_the_bound_of_the_entity_that_matches_it(
        file_gateway: GatewayThread) -> None:
    """A <default> user quota and a user + client-id quota: bob (no quota of his own) is bound by the
    default, alice's client "ingest" by her user + client-id entity; the series name which applied."""
    default_user, alice_ingest = {"user": None}, {"user": "alice", "client-id": "ingest"}
    topic = f"precedence-{uuid.uuid4().hex[:8]}"
    create_topic(file_gateway, topic)
    with book_changed(file_gateway) as changed:
        alter_quota(file_gateway, default_user, PBR, 200_000.0)
        alter_quota(file_gateway, alice_ingest, PBR, 100_000.0)
        assert changed.wait(10)
    assert file_gateway.gateway.ctx.quotas.lookup("bob", "rdkafka", PBR) == (200_000.0, "user=<default>")
    floods = [Flood(sasl(file_gateway, "bob"), topic).start(),
              Flood(sasl(file_gateway, "alice"), topic, client_id="ingest").start()]
    try:
        assert all(flood.throttled.wait(60) for flood in floods), "a client under a quota was never throttled"
        default_series = {"quota": PBR, "entity": "user=<default>"}
        pair_series = {"quota": PBR, "entity": "user=alice,client-id=ingest"}
        assert metric(file_gateway, "ksgate_quota_bound", **default_series) == 200_000.0
        assert metric(file_gateway, "ksgate_quota_bound", **pair_series) == 100_000.0
        assert metric(file_gateway, "ksgate_quota_throttled_total", **default_series) > 0
        assert metric(file_gateway, "ksgate_quota_throttled_total", **pair_series) > 0
        # the rates are kept per client: bob's under the default is his own, alice's under her pair
        sensors = file_gateway.gateway.ctx.quota_sensors
        assert sensors.rate_of(PBR, "user=bob") > 0
        assert sensors.rate_of(PBR, "user=alice,client-id=ingest") > 0
    finally:
        for flood in floods:
            flood.stop()
        alter_quota(file_gateway, default_user, PBR, None)
        alter_quota(file_gateway, alice_ingest, PBR, None)
