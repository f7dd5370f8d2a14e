"""Produce through a gateway with an authorizer (StandardAuthorizer semantics, no ACL means deny) in front of
Apache Kafka 4.4, where an allowed Produce is walked, asked about and relayed undecoded (authz/policies/produce.py
WALKED_PRODUCE, gateway/session/policy_check.py allowed_walked): walked_produce.py's scenarios as user alice with
WRITE on the topics and the transactional ids, every record read back from the broker and every Produce relayed
by the authorized walk.  A denied topic gets Kafka's own answer (the same producer against Kafka's SASL_SSL
listener with the same ACLs), after the walk, through the full path, audited; with ``ksgate.audit.log.allowed``
on, the walk is not taken at all (an allowed decision must then be recorded)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from protocol.api_keys import ApiKey
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.broker import CLIENT_USER
from tests.apache_kafka.clients import TIMEOUT_S
from tests.apache_kafka.java_clients import JavaRunner, java_available, scram_properties
from tests.gateway.upstream.walked_produce.kit import (
    CASES,
    WalkWatch,
    assert_every_produce_walked,
    console_produce,
    java_produce_and_transact,
    java_spread,
    new_topic,
    produce_case,
    relayed_produces,
    transact_and_read_back,
    walked_topics,
)
from tests.harness import GatewayThread, secured_gateway

USER = CLIENT_USER  # alice: the gateway's producer, and Kafka's ordinary user for the comparison
PRINCIPAL = f"User:{USER}"
# alice's grants on the gateway: WRITE on the tests' topics (walked_produce.new_topic names) and on their
# transactional ids (tx-<topic>); nothing else, and no ACL means deny.
GRANTS = ((ResourceType.TOPIC, "walked-"), (ResourceType.TRANSACTIONAL_ID, "tx-walked-"))


def _binding(resource: ResourceType, name: str, operation: AclOperation,
             permission: AclPermissionType = AclPermissionType.ALLOW,
             pattern: ResourcePatternType = ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(resource, name, pattern, PRINCIPAL, "*", operation, permission)


def _create_acls(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for future in admin.create_acls(bindings).values():
        future.result(timeout=TIMEOUT_S)


def _client(gateway: GatewayThread, user: str = USER) -> dict[str, Any]:
    """librdkafka settings for ``user`` (password ``<user>-secret``) of a secured_gateway."""
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": f"{user}-secret"}


def _gateway(kafka: KafkaBroker, directory: Path, log_allowed: bool) -> GatewayThread:
    gateway = secured_gateway(kafka.bootstrap("PLAINTEXT"), directory, ("admin", USER),
                              extra={"ksgate.audit.log.allowed": log_allowed})
    assert gateway.gateway.ctx.authorization is not None
    _create_acls(AdminClient(_client(gateway, "admin")), [
        _binding(resource, prefix, AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
        for resource, prefix in GRANTS])
    return gateway


@pytest.fixture(scope="module")
def authz_gateway(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    """Allowed decisions not recorded (the default): the authorized walk's precondition."""
    gateway = _gateway(kafka, tmp_path_factory.mktemp("walked-authz"), log_allowed=False)
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def java(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> tuple[JavaRunner, Path]:
    """Kafka 4.4's Java code and alice's client properties (SCRAM-SHA-512 over SASL_PLAINTEXT)."""
    if not java_available():
        pytest.skip("no java/javac on PATH")
    directory = tmp_path_factory.mktemp("walked-authz-java")
    return JavaRunner(kafka.lib, directory / "java"), scram_properties(directory / "alice.properties", USER)


def _audit(gateway: GatewayThread) -> list[dict[str, Any]]:
    """The gateway's Produce authorization events so far."""
    log = Path(gateway.config.settings["ksgate.audit.log.file"])
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [e for e in events if e["event"] == "authorization" and e["api_key"] == ApiKey.PRODUCE]


@pytest.mark.parametrize("case", CASES)
def test_confluent_kafka_produces_through_the_authorized_walk(
        kafka: KafkaBroker, authz_gateway: GatewayThread, watch: WalkWatch, case: str) -> None:
    before = relayed_produces(authz_gateway)
    topic = produce_case(kafka, _client(authz_gateway), case)
    assert_every_produce_walked(authz_gateway, watch, before, "allowed")
    assert all(walk == {topic} for walk in walked_topics(kafka, watch, [topic]))


def test_a_transactional_producer_commits_and_aborts_through_the_authorized_walk(
        kafka: KafkaBroker, authz_gateway: GatewayThread, watch: WalkWatch) -> None:
    topic = new_topic(kafka, "tx")
    before = relayed_produces(authz_gateway)
    transact_and_read_back(kafka, _client(authz_gateway), topic)
    assert_every_produce_walked(authz_gateway, watch, before, "allowed")


def test_the_java_producer_idempotent_and_transactional_produces_through_the_authorized_walk(
        kafka: KafkaBroker, authz_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path]) -> None:
    before = relayed_produces(authz_gateway)
    java_produce_and_transact(kafka, *java, authz_gateway.bootstrap)
    assert_every_produce_walked(authz_gateway, watch, before, "allowed")


def test_one_java_produce_request_names_several_topics_and_is_walked_with_an_authorizer(
        kafka: KafkaBroker, authz_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path]) -> None:
    before = relayed_produces(authz_gateway)
    topics = java_spread(kafka, *java, authz_gateway.bootstrap)
    assert_every_produce_walked(authz_gateway, watch, before, "allowed")
    walks = walked_topics(kafka, watch, topics)
    assert all(walk <= set(topics) for walk in walks) and any(len(walk) > 1 for walk in walks), walks


@pytest.mark.parametrize(("acks", "codec"), [("0", "gzip"), ("1", "zstd"), ("all", "snappy")])
def test_kafka_console_producer_lines_arrive_in_order_through_the_authorized_walk(
        kafka: KafkaBroker, authz_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path],
        acks: str, codec: str) -> None:
    before = relayed_produces(authz_gateway)
    console_produce(kafka, *java, authz_gateway.bootstrap, acks, codec)
    assert_every_produce_walked(authz_gateway, watch, before, "allowed")


# -- a denied topic ------------------------------------------------------------------------------------------------

def _deliveries(config: dict[str, Any], topics: list[str], count: int) -> dict[str, list[int | None]]:
    """``count`` records to each topic in turn (acks=1, no retries, one producer: a request may name both); each
    record's delivery error code (None: written), by topic."""
    producer = Producer({**config, "acks": 1, "enable.idempotence": False, "retries": 0, "linger.ms": 50})
    outcome: dict[str, list[int | None]] = {topic: [] for topic in topics}

    def delivered(error: KafkaError | None, message: Any) -> None:
        outcome[message.topic()].append(None if error is None else error.code())

    for i in range(count):
        for topic in topics:
            producer.produce(topic, f"{topic}-{i}".encode(), on_delivery=delivered)
    assert producer.flush(TIMEOUT_S) == 0
    return outcome


def _denial(topic: str) -> list[AclBinding]:
    """WRITE denied on ``topic`` (an ALLOW elsewhere cannot override it), DESCRIBE allowed: the producer's
    Metadata finds the topic, so its Produce is what is refused."""
    return [_binding(ResourceType.TOPIC, topic, AclOperation.WRITE, AclPermissionType.DENY),
            _binding(ResourceType.TOPIC, topic, AclOperation.DESCRIBE)]


def _on_kafka(kafka: KafkaBroker, allowed: str, denied: str) -> dict[str, Any]:
    """alice's ACLs on Kafka itself as on the gateway (literal, so the broker shared by the session's other tests
    gains nothing else), once Kafka's authorizer has them; her settings for Kafka's SASL_SSL listener."""
    kafka.create_acls([*(_binding(ResourceType.TOPIC, topic, AclOperation.WRITE) for topic in (allowed, denied)),
                       *_denial(denied)])
    return kafka.client_config("SASL_SSL", user=USER)


def test_a_denied_topic_gets_kafkas_answer_after_the_walk_through_the_full_path_and_is_audited(
        kafka: KafkaBroker, authz_gateway: GatewayThread, watch: WalkWatch) -> None:
    allowed, denied = new_topic(kafka, "deny-ok", 1), new_topic(kafka, "deny-no", 1)
    _create_acls(AdminClient(_client(authz_gateway, "admin")), _denial(denied))
    through_kafka = _deliveries(_on_kafka(kafka, allowed, denied), [allowed, denied], 10)
    before = relayed_produces(authz_gateway)
    through_gateway = _deliveries(_client(authz_gateway), [allowed, denied], 10)

    assert through_gateway == through_kafka == {
        allowed: [None] * 10, denied: [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 10}
    walks = walked_topics(kafka, watch, [allowed, denied])
    naming_denied = sum(denied in walk for walk in walks)
    # Every Produce was walked; each one naming the denied topic then took the decode and the policy, which
    # answered it (or relayed its allowed part), and no other did.
    assert naming_denied > 0 and watch.decoded.count(ApiKey.PRODUCE) == naming_denied, (walks, watch)
    assert watch.relayed_walked == [(ApiKey.PRODUCE, "allowed")] * (len(walks) - naming_denied)
    assert relayed_produces(authz_gateway) - before == len(walks) - sum(walk == {denied} for walk in walks)
    denials = [e for e in _audit(authz_gateway) if e["resource_name"] == denied]
    assert denials and all((e["principal"], e["operation"], e["resource_type"], e["decision"])
                           == (PRINCIPAL, "WRITE", "TOPIC", "DENIED") for e in denials), denials
    assert not [e for e in _audit(authz_gateway) if e["decision"] == "ALLOWED"]  # log.allowed is off


# -- ksgate.audit.log.allowed on ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def logging_gateway(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    gateway = _gateway(kafka, tmp_path_factory.mktemp("walked-authz-logged"), log_allowed=True)
    yield gateway
    gateway.stop()


def test_with_allowed_decisions_logged_no_produce_is_walked(
        kafka: KafkaBroker, logging_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path]) -> None:
    before = relayed_produces(logging_gateway)
    topic = produce_case(kafka, _client(logging_gateway), "acks-all-lz4-idempotent")
    java_produce_and_transact(kafka, *java, logging_gateway.bootstrap)
    relayed = relayed_produces(logging_gateway) - before
    assert relayed > 0 and watch.decoded.count(ApiKey.PRODUCE) == relayed
    assert watch.walked_topics == [] and watch.relayed_walked == []
    allowed = [e for e in _audit(logging_gateway) if e["decision"] == "ALLOWED" and e["resource_name"] == topic]
    assert allowed and all((e["principal"], e["operation"], e["resource_type"]) == (PRINCIPAL, "WRITE", "TOPIC")
                           for e in allowed), allowed
