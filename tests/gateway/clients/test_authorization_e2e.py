"""Acceptance: Kafka's authorization semantics through the gateway, with real clients and Tansu.

A SASL gateway with users admin (super user), alice and bob; ACLs are managed through the
gateway's own admin API (CreateAcls/DeleteAcls), exactly as kafka-acls.sh would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError

from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread, secured_gateway
from tests.wire_client import WireClient, request_frame


@pytest.fixture(scope="module")
def authz_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    gateway = secured_gateway(broker.bootstrap, tmp_path_factory.mktemp("authz"), ("admin", "alice", "bob"),
                              "SCRAM-SHA-512,PLAIN",
                              {"ksgate.sasl.plain.allow.insecure": True, "ksgate.audit.log.allowed": True})
    yield gateway
    gateway.stop()


def _as(gateway: GatewayThread, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": f"{user}-secret", **extra}


def _allow(principal: str, resource: ResourceType, name: str, op: AclOperation,
           pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def _create_acls(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=10)


def _topic(admin: AdminClient, prefix: str, partitions: int = 1) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=15)
    return name


def _deliver(producer: Producer, topic: str) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer.produce(topic, b"x", on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    assert outcome, "no delivery report"
    return outcome[0]


def test_produce_is_allowed_on_granted_topics_and_denied_with_kafkas_error_elsewhere(
        authz_gateway: GatewayThread) -> None:
    admin = AdminClient(_as(authz_gateway, "admin"))
    mine, theirs = _topic(admin, "alice-own"), _topic(admin, "bob-own")
    _create_acls(admin, _allow("User:alice", ResourceType.TOPIC, "alice-", AclOperation.WRITE,
                               ResourcePatternType.PREFIXED),
                 _allow("User:alice", ResourceType.TOPIC, "alice-", AclOperation.DESCRIBE,
                        ResourcePatternType.PREFIXED))
    producer = Producer(_as(authz_gateway, "alice", **{"enable.idempotence": False}))
    assert _deliver(producer, mine) is None
    error = _deliver(producer, theirs)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_metadata_hides_topics_without_describe(authz_gateway: GatewayThread) -> None:
    admin = AdminClient(_as(authz_gateway, "admin"))
    visible, hidden = _topic(admin, "meta-visible"), _topic(admin, "meta-hidden")
    _create_acls(admin, _allow("User:bob", ResourceType.TOPIC, visible, AclOperation.DESCRIBE))
    topics = AdminClient(_as(authz_gateway, "bob")).list_topics(timeout=10).topics
    assert visible in topics and hidden not in topics
    assert hidden in admin.list_topics(timeout=10).topics  # the super user sees everything


def _one_record() -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=None, value=b"v", headers=[])
    return bytes(builder.build())


def _produce_error(client: WireClient, topic: str, correlation_id: int) -> int:
    client.send(request_frame(ApiKey.PRODUCE, 9, correlation_id, {
        "transactional_id": None, "acks": -1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": _one_record()}]}]}))
    _, body = client.read_response(ApiKey.PRODUCE, 9)
    error: int = body["responses"][0]["partition_responses"][0]["error_code"]
    return error


def test_an_acl_created_through_the_admin_api_applies_to_an_open_connection_and_is_revoked(
        authz_gateway: GatewayThread) -> None:
    admin = AdminClient(_as(authz_gateway, "admin"))
    topic = _topic(admin, "live")
    bob = WireClient(authz_gateway.bootstrap)  # one connection for the whole test
    _scram_login(bob, "bob")
    assert _produce_error(bob, topic, 10) == 29  # TOPIC_AUTHORIZATION_FAILED
    grant = _allow("User:bob", ResourceType.TOPIC, topic, AclOperation.WRITE)
    _create_acls(admin, grant)
    assert _produce_error(bob, topic, 11) == 0
    for future in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                                      "User:bob", "*", AclOperation.WRITE,
                                                      AclPermissionType.ALLOW)]).values():
        assert len(future.result(timeout=10)) == 1
    assert _produce_error(bob, topic, 12) == 29
    bob.close()


def test_describe_acls_lists_what_was_created(authz_gateway: GatewayThread) -> None:
    admin = AdminClient(_as(authz_gateway, "admin"))
    name = f"described-{uuid.uuid4().hex[:6]}"
    _create_acls(admin, _allow("User:carol", ResourceType.GROUP, name, AclOperation.READ))
    found = admin.describe_acls(AclBindingFilter(ResourceType.GROUP, name, ResourcePatternType.ANY, None, None,
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(timeout=10)
    assert [(b.name, b.principal, b.operation) for b in found] == [(name, "User:carol", AclOperation.READ)]


def test_non_super_user_cannot_manage_acls(authz_gateway: GatewayThread) -> None:
    alice = AdminClient(_as(authz_gateway, "alice"))
    futures = alice.create_acls([_allow("User:alice", ResourceType.TOPIC, "*", AclOperation.ALL)])
    with pytest.raises(KafkaException) as error:
        for future in futures.values():
            future.result(timeout=10)
    assert error.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_consumer_needs_read_on_topic_and_group(authz_gateway: GatewayThread) -> None:
    admin = AdminClient(_as(authz_gateway, "admin"))
    topic = _topic(admin, "consume")
    producer = Producer(_as(authz_gateway, "admin"))
    producer.produce(topic, b"secret")
    producer.flush(10)
    group = f"g-{uuid.uuid4().hex[:6]}"
    settings = _as(authz_gateway, "bob", **{"group.id": group, "auto.offset.reset": "earliest",
                                            "session.timeout.ms": 6000, "max.poll.interval.ms": 7000})
    denied = Consumer(settings)
    denied.subscribe([topic])
    errors = []
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        message = denied.poll(0.5)
        if message is not None and message.error():
            errors.append(message.error().code())
    denied.close()
    assert errors and errors[0] in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    _create_acls(admin, _allow("User:bob", ResourceType.TOPIC, topic, AclOperation.READ),
                 _allow("User:bob", ResourceType.GROUP, group, AclOperation.READ))
    allowed = Consumer(settings)
    allowed.assign([TopicPartition(topic, 0, 0)])
    message = None
    deadline = time.monotonic() + 15
    while message is None and time.monotonic() < deadline:
        candidate = allowed.poll(0.5)
        if candidate is not None and not candidate.error():
            message = candidate
    allowed.close()
    assert message is not None and message.value() == b"secret"


def test_kafka_python_sees_topic_authorization_failed(authz_gateway: GatewayThread) -> None:
    admin = AdminClient(_as(authz_gateway, "admin"))
    topic = _topic(admin, "kp-denied")
    producer = KafkaProducer(bootstrap_servers=authz_gateway.bootstrap, security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice",
                             sasl_plain_password="alice-secret", max_block_ms=8000, retries=0)
    with pytest.raises((TopicAuthorizationFailedError, Exception)) as error:
        producer.send(topic, b"x").get(timeout=10)
    producer.close()
    assert "Authorization" in type(error.value).__name__ or "authoriz" in str(error.value).lower()


def test_fetch_by_topic_id_of_a_denied_topic_returns_no_records(authz_gateway: GatewayThread) -> None:
    admin = AdminClient(_as(authz_gateway, "admin"))
    topic = _topic(admin, "by-id")
    producer = Producer(_as(authz_gateway, "admin"))
    producer.produce(topic, b"do not leak")
    producer.flush(10)
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=10).topic_id
    topic_id = uuid.UUID(int=((described.get_most_significant_bits() & (2**64 - 1)) << 64)
                         | (described.get_least_significant_bits() & (2**64 - 1)))
    client = WireClient(authz_gateway.bootstrap)
    _scram_login(client, "alice")
    fetch = {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
             "topics": [{"topic_id": topic_id, "partitions": [{
                 "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}
    client.send(request_frame(ApiKey.FETCH, 13, 9, fetch))
    _, body = client.read_response(ApiKey.FETCH, 13)
    partitions = [p for t in body["responses"] for p in t["partitions"]]
    assert partitions and all(p["error_code"] in (29, 100) for p in partitions)
    assert all(not p["records"] for p in partitions)


def _scram_login(client: WireClient, user: str) -> None:
    from auth.sasl.scram import ScramClient

    client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "SCRAM-SHA-512"}))
    client.read_response(ApiKey.SASL_HANDSHAKE, 1)
    scram = ScramClient("SCRAM-SHA-512", user, f"{user}-secret")
    client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": scram.first_message()}))
    _, first = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
    client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 3,
                              {"auth_bytes": scram.final_message(bytes(first["auth_bytes"]))}))
    _, final = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
    assert final["error_code"] == 0


def test_every_decision_is_in_the_audit_log(authz_gateway: GatewayThread) -> None:
    import json

    log = Path(authz_gateway.config.settings["ksgate.audit.log.file"])
    events = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = {(e["event"], e["decision"]) for e in events}
    assert ("authorization", "DENIED") in kinds and ("authorization", "ALLOWED") in kinds
    assert ("authentication", "SUCCEEDED") in kinds
    assert all("password" not in line.lower() for line in log.read_text().splitlines())


def _audit_events_of(gateway: GatewayThread, client: WireClient) -> list[dict[str, Any]]:
    import json

    port = client.sock.getsockname()[1]
    log = Path(gateway.config.settings["ksgate.audit.log.file"])
    return [e for e in map(json.loads, log.read_text().splitlines())
            if e["event"] == "authorization" and e["client_port"] == port]


def test_auto_creating_metadata_of_an_existing_topic_logs_no_create_denial(authz_gateway: GatewayThread) -> None:
    # A producer's Metadata (allow_auto_topic_creation) for a topic that exists: the CREATE probes are
    # implicit checks (Kafka's logIfDenied=false), an explicit CreateTopics denial is still a denial.
    admin = AdminClient(_as(authz_gateway, "admin"))
    topic = _topic(admin, "probe")
    _create_acls(admin, _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.DESCRIBE))  # never CREATE
    client = WireClient(authz_gateway.bootstrap)
    try:
        _scram_login(client, "alice")
        client.send(request_frame(ApiKey.METADATA, 12, 3, {
            "topics": [{"topic_id": uuid.UUID(int=0), "name": topic}], "allow_auto_topic_creation": True,
            "include_topic_authorized_operations": False}))
        _, metadata = client.read_response(ApiKey.METADATA, 12)
        assert [(t["name"], t["error_code"]) for t in metadata["topics"]] == [(topic, 0)]
        client.send(request_frame(ApiKey.CREATE_TOPICS, 7, 4, {
            "topics": [{"name": topic + "-new", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 5000, "validate_only": False}))
        _, created = client.read_response(ApiKey.CREATE_TOPICS, 7)
        assert created["topics"][0]["error_code"] == 29
        events = _audit_events_of(authz_gateway, client)
    finally:
        client.close()
    denied = [(e["api_name"], e["operation"], e["resource_type"], e["resource_name"]) for e in events
              if e["decision"] == "DENIED"]
    assert denied == [("CreateTopics", "CREATE", "TOPIC", topic + "-new")]
    assert ("Metadata", "DESCRIBE", topic, "ALLOWED") in {
        (e["api_name"], e["operation"], e["resource_name"], e["decision"]) for e in events}
