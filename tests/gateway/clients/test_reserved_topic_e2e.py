"""Hostile clients (#10, findings 1 and 3) against a real gateway with the replicated store in front of Tansu:
the store's topic stays unreachable whatever cluster-level permission a principal holds, a follower Fetch is
refused outright, and illegal topic names never reach the upstream."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from gateway.commands.cli import main as ksgate
from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.scram_wire import scram_login
from tests.wire_client import WireClient, request_frame

TOPIC_AUTHORIZATION_FAILED = 29
INVALID_TOPIC_EXCEPTION = 17
UNKNOWN_TOPIC_OR_PARTITION = 3
ILLEGAL_NAMES = ["a/../b", "nul\x00byte", "new\nline", "sp ace", "co:lon", "ünïcode", "x" * 260, ".", ".."]


class Setup:
    def __init__(self, broker: EmbeddedBroker, directory: Path) -> None:
        self.broker = broker
        self.store_topic = f"_ksgate_security_{uuid.uuid4().hex[:8]}"
        self.settings: dict[str, Any] = {
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "authorizer.class.name": "StandardAuthorizer", "ksgate.security.store": "KAFKA",
            "ksgate.security.store.topic": self.store_topic,
            "super.users": "User:admin", "allow.everyone.if.no.acl.found": False,
            "connection.failed.authentication.delay.ms": 10,
        }
        config = directory / "gateway.yaml"
        config.write_text(yaml.safe_dump({**self.settings, "upstream.bootstrap.servers": broker.bootstrap}))
        for user in ("admin", "ops"):
            password = directory / f"{user}.pw"
            password.write_text(f"{user}-secret\n")
            assert ksgate(["users", "add", user, "--config", str(config), "--password-file", str(password)]) == 0
        self.gateway = GatewayThread(broker.bootstrap, self.settings, protocol="SASL_PLAINTEXT").start()

    def login(self, user: str) -> WireClient:
        client, error = scram_login(self.gateway.bootstrap, user, f"{user}-secret")
        assert error == 0
        return client

    def upstream_topics(self) -> dict[str, Any]:
        """The broker's own view, straight from Tansu (not through the gateway)."""
        return AdminClient({"bootstrap.servers": self.broker.bootstrap}).list_topics(timeout=10).topics


@pytest.fixture(scope="module")
def setup(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    running = Setup(broker, tmp_path_factory.mktemp("reserved"))
    admin = AdminClient({"bootstrap.servers": running.gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    # ops holds every cluster-level right and nothing on topics: the shortcuts that skipped the reservation.
    bindings = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:ops", "*",
                           operation, AclPermissionType.ALLOW)
                for operation in (AclOperation.CLUSTER_ACTION, AclOperation.DELETE, AclOperation.CREATE,
                                  AclOperation.ALTER, AclOperation.DESCRIBE)]
    bindings.append(AclBinding(ResourceType.TOPIC, "legal-", ResourcePatternType.PREFIXED, "User:ops", "*",
                               AclOperation.ALL, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings).values():
        future.result(timeout=10)
    yield running
    running.gateway.stop()


def _fetch_v12(topic: str, replica_id: int) -> dict[str, Any]:
    return {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "", "replica_id": replica_id,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}


@pytest.mark.parametrize("user", ["ops", "admin"])
def test_a_follower_fetch_of_the_store_topic_is_refused_outright(setup: Setup, user: str) -> None:
    client = setup.login(user)
    client.send(request_frame(ApiKey.FETCH, 12, 7, _fetch_v12(setup.store_topic, replica_id=111)))
    assert client.is_closed_by_peer(), "a follower Fetch must close the connection, not return records"
    client.close()


def test_a_follower_fetch_of_any_topic_is_refused_even_with_cluster_action(setup: Setup) -> None:
    client = setup.login("ops")
    client.send(request_frame(ApiKey.FETCH, 12, 7, _fetch_v12("legal-anything", replica_id=1)))
    assert client.is_closed_by_peer()
    client.close()


@pytest.mark.parametrize("user", ["ops", "admin"])
def test_delete_topics_cannot_delete_the_store_topic_with_cluster_delete(setup: Setup, user: str) -> None:
    client = setup.login(user)
    client.send(request_frame(ApiKey.DELETE_TOPICS, 5, 8, {"topic_names": [setup.store_topic],
                                                           "timeout_ms": 5000}))
    _, response = client.read_response(ApiKey.DELETE_TOPICS, 5)
    client.close()
    assert [r["error_code"] for r in response["responses"]] == [TOPIC_AUTHORIZATION_FAILED]
    assert setup.store_topic in setup.upstream_topics(), "the store's topic was deleted"


def test_create_topics_naming_the_store_topic_gets_an_authorization_error(setup: Setup) -> None:
    client = setup.login("ops")
    client.send(request_frame(ApiKey.CREATE_TOPICS, 4, 9, {"topics": [
        {"name": setup.store_topic, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 5000, "validate_only": False}))
    _, response = client.read_response(ApiKey.CREATE_TOPICS, 4)
    client.close()
    # not TOPIC_ALREADY_EXISTS: the answer must not even reveal that the topic exists
    assert [t["error_code"] for t in response["topics"]] == [TOPIC_AUTHORIZATION_FAILED]


def test_create_topics_answers_invalid_topic_for_each_illegal_name_and_creates_the_legal_one(setup: Setup) -> None:
    legal = f"legal-{uuid.uuid4().hex[:6]}"
    names = [*ILLEGAL_NAMES, legal]
    client = setup.login("admin")  # authorized for every name: what is left is Kafka's name validation
    client.send(request_frame(ApiKey.CREATE_TOPICS, 5, 10, {"topics": [
        {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
        for name in names], "timeout_ms": 5000, "validate_only": False}))
    _, response = client.read_response(ApiKey.CREATE_TOPICS, 5)
    client.close()
    codes = {t["name"]: t["error_code"] for t in response["topics"]}
    assert codes == {**{name: INVALID_TOPIC_EXCEPTION for name in ILLEGAL_NAMES}, legal: 0}
    upstream = setup.upstream_topics()
    assert legal in upstream
    assert not set(ILLEGAL_NAMES) & set(upstream), "an illegal topic reached the broker"


def test_metadata_auto_creation_of_an_illegal_name_answers_invalid_topic(setup: Setup) -> None:
    client = setup.login("admin")
    client.send(request_frame(ApiKey.METADATA, 9, 11, {
        "topics": [{"name": "sp ace"}], "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False}))
    _, response = client.read_response(ApiKey.METADATA, 9)
    client.close()
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [("sp ace", INVALID_TOPIC_EXCEPTION)]
    assert "sp ace" not in setup.upstream_topics()


def test_produce_to_an_illegal_name_answers_unknown_topic_and_creates_nothing(setup: Setup) -> None:
    client = setup.login("admin")
    client.send(request_frame(ApiKey.PRODUCE, 7, 12, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": "a/../b", "partition_data": [{"index": 0, "records": None}]}]}))
    _, response = client.read_response(ApiKey.PRODUCE, 7)
    client.close()
    partition = response["responses"][0]["partition_responses"][0]
    assert partition["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert "a/../b" not in setup.upstream_topics()


def test_without_an_authorizer_illegal_names_still_get_kafkas_errors(broker: EmbeddedBroker) -> None:
    gateway = GatewayThread(broker.bootstrap, {"authorizer.class.name": ""}).start()
    legal = f"legal-{uuid.uuid4().hex[:6]}"
    try:
        client = WireClient(gateway.bootstrap)
        client.send(request_frame(ApiKey.CREATE_TOPICS, 5, 1, {"topics": [
            {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for name in ("sp ace", legal)], "timeout_ms": 5000, "validate_only": False}))
        _, response = client.read_response(ApiKey.CREATE_TOPICS, 5)
        client.close()
    finally:
        gateway.stop()
    assert {t["name"]: t["error_code"] for t in response["topics"]} == {"sp ace": INVALID_TOPIC_EXCEPTION, legal: 0}
    upstream = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
    assert legal in upstream and "sp ace" not in upstream


def test_a_real_admin_client_gets_invalid_topic_for_an_illegal_name(setup: Setup) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": setup.gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    future = admin.create_topics([NewTopic("co:lon", 1, 1)], operation_timeout=5)["co:lon"]
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=10)
    assert raised.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    assert "co:lon" not in setup.upstream_topics()
