"""Produce through a gateway with no authorizer (ksgate's default) in front of Apache Kafka 4.4, where a
Produce is walked, not decoded (protocol/entities/topic_prepass.py): confluent-kafka and Kafka's own Java
producer, several record sizes, acks 0/1/all, every compression, idempotent and transactional producers and a
request naming several topics; every record read back from the broker intact and in order, and every Produce
the gateway relayed relayed by the walk (the gateway runs in this process: its stage is watched, not mocked)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from gateway.session import request_stage
from gateway.session.policy_check import check_topics
from protocol.api_keys import ApiKey
from protocol.entities.topic_prepass import prepass_for
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.clients import TIMEOUT_S, create_topic
from tests.apache_kafka.java_clients import JavaRunner, java_available
from tests.harness import GatewayThread

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
PARTITIONS = 3
# Empty to past librdkafka's and Java's default batch size (16 KiB) and large enough to be a batch alone.
SIZES = (0, 1, 100, 20_000, 300_000)
# (header key, value) pairs ride in the record; a record batch's CRC covers them, as it does keys and values.
Record = tuple[bytes | None, bytes | None, list[tuple[str, str | bytes | None]]]


@dataclass(slots=True)
class WalkWatch:
    """What the request stage did with each Produce while a test ran: the topics each walk named (by name up
    to v12, by id from v13), the walks relayed as they came, and the Produce requests that took the full decode
    instead (check_topics)."""

    walked_topics: list[tuple[str | uuid.UUID, ...]] = field(default_factory=list)
    relayed_walked: list[int] = field(default_factory=list)
    decoded: list[int] = field(default_factory=list)


@pytest.fixture(scope="module")
def bare_gateway(kafka: KafkaBroker) -> Iterator[GatewayThread]:
    gateway = GatewayThread(kafka.bootstrap("PLAINTEXT"), {"authorizer.class.name": ""}).start()
    assert gateway.gateway.ctx.negotiated  # started, and with no authorizer (below: no Produce is decoded)
    yield gateway
    gateway.stop()


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> WalkWatch:
    """Wraps the stage's walk, its walked relay and its full-path topic check; list.append is atomic, so the
    gateway's loop (or a worker) may record while the test thread waits."""
    seen = WalkWatch()
    relay_walked = request_stage._relay_walked

    def watched_prepass_for(spec: Any, version: int, keep: tuple[str, ...]) -> Any:
        walk = prepass_for(spec, version, keep)
        if spec.api_key != ApiKey.PRODUCE:
            return walk

        def watched_walk(body: Any, names: list[str], ids: list[uuid.UUID]) -> Any:
            kept = walk(body, names, ids)
            seen.walked_topics.append((*names, *ids))
            return kept
        return watched_walk

    def watched_relay_walked(route: Any, *args: Any) -> Any:
        seen.relayed_walked.append(route.api_key)
        return relay_walked(route, *args)

    def watched_check_topics(requester: Any, route: Any, *args: Any) -> Any:
        seen.decoded.append(route.api_key)
        return check_topics(requester, route, *args)

    monkeypatch.setattr(request_stage, "prepass_for", watched_prepass_for)
    monkeypatch.setattr(request_stage, "_relay_walked", watched_relay_walked)
    monkeypatch.setattr(request_stage, "check_topics", watched_check_topics)
    return seen


def _relayed_produces(gateway: GatewayThread) -> int:
    return int(gateway.call(gateway.gateway.ctx.metrics.relayed_requests.value, ("Produce",)))


def _assert_every_produce_walked(gateway: GatewayThread, watch: WalkWatch, relayed_before: int) -> None:
    relayed = _relayed_produces(gateway) - relayed_before
    assert relayed > 0
    assert ApiKey.PRODUCE not in watch.decoded, "a Produce took the full decode"
    assert watch.relayed_walked.count(ApiKey.PRODUCE) == relayed == len(watch.walked_topics)


def _topic(kafka: KafkaBroker, prefix: str, partitions: int = PARTITIONS) -> str:
    """A new topic whose every partition the broker already leads.  CreateTopics answers when the controller
    has the topic; the broker takes up leadership a moment later, and an acks=0 record sent in between is
    dropped with nobody told (the answer that would say NOT_LEADER_OR_FOLLOWER is never sent)."""
    topic = f"walked-{prefix}-{uuid.uuid4().hex[:6]}"
    create_topic(kafka.client_config(), topic, partitions)
    consumer = Consumer({**kafka.client_config(), "group.id": f"probe-{topic}"})
    try:
        deadline = time.monotonic() + TIMEOUT_S
        for partition in range(partitions):
            while True:  # ListOffsets is answered by the partition's leader, as Produce is
                try:
                    consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=1.0)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)  # polling the broker's state: there is no event to wait for
    finally:
        consumer.close()
    return topic


def _walked_topics(kafka: KafkaBroker, watch: WalkWatch, topics: list[str]) -> list[set[str]]:
    """Each walk's topics by name (``topics``' ids resolved through the broker; an unknown id stays an id)."""
    admin = AdminClient(kafka.client_config())
    ids = {}
    for topic, future in admin.describe_topics(TopicCollection(topics)).items():
        described = future.result(timeout=TIMEOUT_S).topic_id
        ids[uuid.UUID(int=((described.get_most_significant_bits() & (2**64 - 1)) << 64)
                      | (described.get_least_significant_bits() & (2**64 - 1)))] = topic
    return [{ids.get(named, str(named)) if isinstance(named, uuid.UUID) else named for named in walk}
            for walk in watch.walked_topics]


def _records(count: int) -> list[Record]:
    """Values of every size in SIZES, half random (incompressible), half repetitive; a null key, a null value
    and headers here and there; each value starts with its index, so a reordering shows."""
    records: list[Record] = []
    for i in range(count):
        size = SIZES[i % len(SIZES)]
        body = os.urandom(size) if i % 2 else bytes([i % 251]) * size
        value = None if i == 3 else f"{i:05d}|".encode() + body
        key = None if i % 4 == 1 else f"key-{i}".encode()
        headers: list[tuple[str, str | bytes | None]] = (
            [("n", str(i).encode()), ("blob", os.urandom(i % 7))] if i % 3 == 0 else [])
        records.append((key, value, headers))
    return records


def _read_partition(kafka: KafkaBroker, topic: str, partition: int, count: int,
                    isolation: str = "read_uncommitted") -> list[Record]:
    """The first ``count`` records of one partition, read from the broker itself (not through the gateway)."""
    consumer = Consumer({**kafka.client_config(), "group.id": f"reader-{topic}", "enable.auto.commit": False,
                         "isolation.level": isolation})
    got: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(got), 1.0):
                assert message.error() is None, message.error()
                got.append((message.key(), message.value(), _headers(message.headers())))
    finally:
        consumer.close()
    return got


def _headers(headers: Any) -> list[tuple[str, str | bytes | None]]:
    """A message's headers as the list they were produced as (librdkafka gives None for none)."""
    return list(headers or [])


def _produce(config: dict[str, Any], topic: str, records: list[Record]) -> None:
    producer = Producer(config)
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            errors.append(error)

    for i, (key, value, headers) in enumerate(records):
        producer.produce(topic, value, key, partition=i % PARTITIONS, headers=headers, on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(TIMEOUT_S)
    assert left == 0 and not errors, f"{left} records not acknowledged, errors: {errors[:3]}"


def _assert_read_back(kafka: KafkaBroker, topic: str, records: list[Record],
                      isolation: str = "read_uncommitted") -> None:
    for partition in range(PARTITIONS):
        expected = records[partition::PARTITIONS]
        got = _read_partition(kafka, topic, partition, len(expected), isolation)
        assert got == expected, (partition, len(got), len(expected), [(k, v[:8] if v else v) for k, v, _ in got])


CASES = {  # name: librdkafka settings
    "acks0-uncompressed": {"acks": 0, "enable.idempotence": False, "compression.type": "none"},
    "acks1-gzip": {"acks": 1, "enable.idempotence": False, "compression.type": "gzip"},
    "acks1-snappy": {"acks": 1, "enable.idempotence": False, "compression.type": "snappy"},
    "acks-all-lz4-idempotent": {"acks": "all", "enable.idempotence": True, "compression.type": "lz4"},
    "acks-all-zstd-idempotent": {"acks": "all", "enable.idempotence": True, "compression.type": "zstd"},
}


@pytest.mark.parametrize("case", CASES)
def test_confluent_kafka_produces_through_the_walk_intact_and_in_order(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch, case: str) -> None:
    topic = _topic(kafka, case)
    records = _records(40)
    before = _relayed_produces(bare_gateway)
    _produce({"bootstrap.servers": bare_gateway.bootstrap, "linger.ms": 20, **CASES[case]}, topic, records)
    _assert_read_back(kafka, topic, records)
    _assert_every_produce_walked(bare_gateway, watch, before)
    assert all(walk == {topic} for walk in _walked_topics(kafka, watch, [topic]))


def test_a_transactional_producer_commits_and_aborts_through_the_walk(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch) -> None:
    topic = _topic(kafka, "tx")
    committed, aborted, later = _records(12), _records(6), _records(9)
    before = _relayed_produces(bare_gateway)
    producer = Producer({"bootstrap.servers": bare_gateway.bootstrap, "transactional.id": f"tx-{topic}",
                         "compression.type": "lz4", "linger.ms": 20})
    producer.init_transactions(TIMEOUT_S)
    for batch, commit in ((committed, True), (aborted, False), (later, True)):
        producer.begin_transaction()
        for i, (key, value, headers) in enumerate(batch):
            producer.produce(topic, value, key, partition=i % PARTITIONS, headers=headers)
        producer.flush(TIMEOUT_S)
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
    # read_committed: the aborted records, between the two committed runs, would break the sequence.
    for partition in range(PARTITIONS):
        expected = committed[partition::PARTITIONS] + later[partition::PARTITIONS]
        assert _read_partition(kafka, topic, partition, len(expected), "read_committed") == expected
    _assert_every_produce_walked(bare_gateway, watch, before)


@pytest.fixture(scope="module")
def java(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> tuple[JavaRunner, Path]:
    """Kafka 4.4's Java code and a client properties file for the bare (PLAINTEXT) gateway."""
    if not java_available():
        pytest.skip("no java/javac on PATH")
    directory = tmp_path_factory.mktemp("walked-java")
    properties = directory / "plaintext.properties"
    properties.write_text("security.protocol=PLAINTEXT\n")
    return JavaRunner(kafka.lib, directory / "java"), properties


def _values(kafka: KafkaBroker, topic: str, count: int, isolation: str = "read_uncommitted") -> list[bytes | None]:
    """The values of the first ``count`` records of a one-partition topic."""
    return [value for _, value, _ in _read_partition(kafka, topic, 0, count, isolation)]


def test_the_java_producer_idempotent_and_transactional_produces_through_the_walk(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path]) -> None:
    runner, properties = java
    plain, transactional = _topic(kafka, "java", 1), _topic(kafka, "java-tx", 1)
    before = _relayed_produces(bare_gateway)
    runner.client("produce", properties, bare_gateway.bootstrap, plain, "25")
    runner.client("transact", properties, bare_gateway.bootstrap, transactional, f"tx-{transactional}",
                  "commit:3,abort:2,commit:4")
    assert _values(kafka, plain, 25) == [f"record-{i}".encode() for i in range(25)]
    committed = [f"0-commit-{i}" for i in range(3)] + [f"2-commit-{i}" for i in range(4)]
    assert _values(kafka, transactional, 7, "read_committed") == [value.encode() for value in committed]
    _assert_every_produce_walked(bare_gateway, watch, before)


def test_one_java_produce_request_names_several_topics_and_is_walked(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path]) -> None:
    runner, properties = java
    topics = [_topic(kafka, f"spread{i}", 1) for i in range(3)]
    before = _relayed_produces(bare_gateway)
    runner.client("spread", properties, bare_gateway.bootstrap, ",".join(topics), "30")
    for topic in topics:
        assert _values(kafka, topic, 30) == [f"{topic}-{i}".encode() for i in range(30)]
    _assert_every_produce_walked(bare_gateway, watch, before)
    walks = _walked_topics(kafka, watch, topics)
    assert all(walk <= set(topics) for walk in walks) and any(len(walk) > 1 for walk in walks), walks


@pytest.mark.parametrize(("acks", "codec"), [("0", "gzip"), ("1", "zstd"), ("all", "snappy")])
def test_kafka_console_producer_lines_arrive_in_order_through_the_walk(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path],
        acks: str, codec: str) -> None:
    runner, properties = java
    topic = _topic(kafka, f"console-{codec}", 1)
    lines = [f"line-{i}-" + "x" * (i * 37 % 5000) for i in range(60)]
    before = _relayed_produces(bare_gateway)
    runner.tool(PRODUCER, bare_gateway.bootstrap, properties, "--topic", topic, "--compression-codec", codec,
                "--request-required-acks", acks, stdin="\n".join(lines) + "\n")
    assert _values(kafka, topic, len(lines)) == [line.encode() for line in lines]
    _assert_every_produce_walked(bare_gateway, watch, before)

