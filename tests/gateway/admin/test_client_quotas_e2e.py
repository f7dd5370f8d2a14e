"""Acceptance (#21): the client-quota APIs answered by the gateway in front of Tansu (which has none):
authorized as Kafka does, stored in ksgate.quota.file, in force in the gateway's quota book at once."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.quotas.state import QuotaState
from protocol.api_keys import ApiKey
from tests.conformance.wire import Connection, Endpoint
from tests.harness import GatewayThread, secured_gateway

ALICE_PRODUCER = {"entries": [{"entity": [{"entity_type": "user", "entity_name": "alice"}],
                               "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}]}],
                  "validate_only": False}
EVERYTHING = {"components": [], "strict": False}


@pytest.fixture(scope="module")
def quota_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[GatewayThread, Path]]:
    directory = tmp_path_factory.mktemp("quotas")
    gateway = secured_gateway(broker.bootstrap, directory, extra={
        "ksgate.quota.file": str(directory / "quotas.json"), "connection.failed.authentication.delay.ms": 10})
    yield gateway, directory / "quotas.json"
    gateway.stop()


def _as(gateway: GatewayThread, user: str) -> Connection:
    return Connection(Endpoint(gateway.bootstrap, None), user, f"{user}-secret")


def _answer(connection: Connection, key: ApiKey, body: dict[str, Any]) -> dict[str, Any]:
    outcome = connection.exchange(key, 1, body)
    assert outcome.kind == "response" and outcome.body is not None, outcome
    return outcome.body


def test_a_quota_set_through_the_gateway_is_stored_described_and_in_force(
        quota_gateway: tuple[GatewayThread, Path]) -> None:
    gateway, path = quota_gateway
    changed = threading.Event()
    assert gateway.gateway.quota_store is not None
    unsubscribe = gateway.gateway.quota_store.subscribe(lambda _state: changed.set())
    admin = _as(gateway, "admin")
    try:
        answer = _answer(admin, ApiKey.ALTER_CLIENT_QUOTAS, ALICE_PRODUCER)
        assert [e["error_code"] for e in answer["entries"]] == [0]
        assert changed.wait(10)
        assert gateway.gateway.ctx.quotas.lookup("alice", "any-client", "producer_byte_rate") == (1048576.0,
                                                                                                  "user=alice")
        described = _answer(admin, ApiKey.DESCRIBE_CLIENT_QUOTAS, EVERYTHING)
        assert described["entries"] == [{"entity": [{"entity_type": "user", "entity_name": "alice"}],
                                         "values": [{"key": "producer_byte_rate", "value": 1048576.0}]}]
        assert json.loads(path.read_text())["quotas"] == [{"entity": {"user": "alice"},
                                                           "values": {"producer_byte_rate": 1048576}}]
        removal = {**ALICE_PRODUCER, "entries": [{**ALICE_PRODUCER["entries"][0], "ops": [  # type: ignore[dict-item]
            {"key": "producer_byte_rate", "value": 0.0, "remove": True}]}]}
        assert [e["error_code"] for e in _answer(admin, ApiKey.ALTER_CLIENT_QUOTAS, removal)["entries"]] == [0]
        assert gateway.gateway.ctx.quotas.lookup("alice", "any-client", "producer_byte_rate") is None
    finally:
        unsubscribe()
        admin.close()


def test_without_cluster_rights_the_quota_apis_answer_cluster_authorization_failed(
        quota_gateway: tuple[GatewayThread, Path]) -> None:
    gateway, _ = quota_gateway
    alice = _as(gateway, "alice")
    try:
        described = _answer(alice, ApiKey.DESCRIBE_CLIENT_QUOTAS, EVERYTHING)
        assert (described["error_code"], described["entries"]) == (31, None)
        altered = _answer(alice, ApiKey.ALTER_CLIENT_QUOTAS, ALICE_PRODUCER)
        assert [(e["error_code"], e["error_message"]) for e in altered["entries"]] == [
            (31, "Cluster authorization failed.")]
    finally:
        alice.close()
    assert gateway.gateway.quota_store is not None
    state: QuotaState = gateway.gateway.quota_store.quotas()
    assert not any(e.name("user") == "alice" for e in state)


def test_without_a_quota_store_the_quota_apis_answer_none_set_and_refuse_changes(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """Never relayed (they would read and set the quotas of the gateway's own principal on the broker),
    but still offered: kafka-configs --describe --entity-type users asks DescribeClientQuotas first."""
    gateway = secured_gateway(broker.bootstrap, tmp_path)
    try:
        admin = _as(gateway, "admin")
        described = _answer(admin, ApiKey.DESCRIBE_CLIENT_QUOTAS, EVERYTHING)
        assert (described["error_code"], described["entries"]) == (0, [])
        altered = _answer(admin, ApiKey.ALTER_CLIENT_QUOTAS, ALICE_PRODUCER)
        [entry] = altered["entries"]
        assert entry["error_code"] != 0 and "ksgate.quota.file" in entry["error_message"]
        assert _answer(admin, ApiKey.DESCRIBE_CLIENT_QUOTAS, EVERYTHING)["entries"] == []
        admin.close()
    finally:
        gateway.stop()
