"""What the walked-Produce tests against Apache Kafka 4.4 share (test_produce_walked_kafka.py without an
authorizer, test_produce_walked_authorized_kafka.py with one): a watch on the request stage's walk, fresh topics
whose partitions have leaders, records of every size, producing them with confluent-kafka and reading them back
from the broker itself."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from gateway.session import policy_check, request_stage
from protocol.api_keys import ApiKey
from protocol.entities.topic_prepass import prepass_for
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.clients import TIMEOUT_S, create_topic
from tests.apache_kafka.java_clients import JavaRunner
from tests.harness import GatewayThread

PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
PARTITIONS = 3
# Empty to past librdkafka's and Java's default batch size (16 KiB) and large enough to be a batch alone.
SIZES = (0, 1, 100, 20_000, 300_000)
# (header key, value) pairs ride in the record; a record batch's CRC covers them, as it does keys and values.
Record = tuple[bytes | None, bytes | None, list[tuple[str, str | bytes | None]]]

CASES = {  # name: librdkafka settings
    "acks0-uncompressed": {"acks": 0, "enable.idempotence": False, "compression.type": "none"},
    "acks1-gzip": {"acks": 1, "enable.idempotence": False, "compression.type": "gzip"},
    "acks1-snappy": {"acks": 1, "enable.idempotence": False, "compression.type": "snappy"},
    "acks-all-lz4-idempotent": {"acks": "all", "enable.idempotence": True, "compression.type": "lz4"},
    "acks-all-zstd-idempotent": {"acks": "all", "enable.idempotence": True, "compression.type": "zstd"},
}


@dataclass(slots=True)
class WalkWatch:
    """What the request stage did with each Produce while a test ran: the topics each walk named (by name up
    to v12, by id from v13; with an authorizer a walk whose answer is no is recorded too), the walked relays
    with their authorization outcome (None without an authorizer, "allowed" with one), and the Produce requests
    that took the full decode instead (check_topics without an authorizer, authorize with one)."""

    walked_topics: list[tuple[str | uuid.UUID, ...]] = field(default_factory=list)
    relayed_walked: list[tuple[int, str | None]] = field(default_factory=list)
    decoded: list[int] = field(default_factory=list)


def watch_walks(monkeypatch: pytest.MonkeyPatch) -> WalkWatch:
    """Wraps the stage's walks (its own, and the one policy_check.allowed_walked runs with an authorizer), its
    walked relay and its two full paths; list.append is atomic, so the gateway's loop (or a worker) may record
    while the test thread waits."""
    seen = WalkWatch()
    relay_walked, check_topics, authorize = request_stage._relay_walked, policy_check.check_topics, \
        policy_check.authorize

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
        decision = relay_walked(route, *args)
        seen.relayed_walked.append((route.api_key, decision.outcome))
        return decision

    def watched_check_topics(requester: Any, route: Any, *args: Any) -> Any:
        seen.decoded.append(route.api_key)
        return check_topics(requester, route, *args)

    def watched_authorize(requester: Any, authorization: Any, route: Any, *args: Any) -> Any:
        seen.decoded.append(route.api_key)
        return authorize(requester, authorization, route, *args)

    for module in (request_stage, policy_check):
        monkeypatch.setattr(module, "prepass_for", watched_prepass_for)
    monkeypatch.setattr(request_stage, "_relay_walked", watched_relay_walked)
    monkeypatch.setattr(request_stage, "check_topics", watched_check_topics)
    monkeypatch.setattr(request_stage, "authorize", watched_authorize)
    return seen


def relayed_produces(gateway: GatewayThread) -> int:
    return int(gateway.call(gateway.gateway.ctx.metrics.relayed_requests.value, ("Produce",)))


def assert_every_produce_walked(gateway: GatewayThread, watch: WalkWatch, relayed_before: int,
                                outcome: str | None = None) -> None:
    """Every Produce relayed since ``relayed_before`` was walked and relayed as it came, with ``outcome``."""
    relayed = relayed_produces(gateway) - relayed_before
    assert relayed > 0
    assert ApiKey.PRODUCE not in watch.decoded, "a Produce took the full decode"
    assert watch.relayed_walked.count((ApiKey.PRODUCE, outcome)) == relayed == len(watch.walked_topics), watch


def new_topic(kafka: KafkaBroker, prefix: str, partitions: int = PARTITIONS) -> str:
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


def walked_topics(kafka: KafkaBroker, watch: WalkWatch, topics: list[str]) -> list[set[str]]:
    """Each walk's topics by name (``topics``' ids resolved through the broker; an unknown id stays an id)."""
    admin = AdminClient(kafka.client_config())
    ids = {}
    for topic, future in admin.describe_topics(TopicCollection(topics)).items():
        described = future.result(timeout=TIMEOUT_S).topic_id
        ids[uuid.UUID(int=((described.get_most_significant_bits() & (2**64 - 1)) << 64)
                      | (described.get_least_significant_bits() & (2**64 - 1)))] = topic
    return [{ids.get(named, str(named)) if isinstance(named, uuid.UUID) else named for named in walk}
            for walk in watch.walked_topics]


def records(count: int) -> list[Record]:
    """Values of every size in SIZES, half random (incompressible), half repetitive; a null key, a null value
    and headers here and there; each value starts with its index, so a reordering shows."""
    made: list[Record] = []
    for i in range(count):
        size = SIZES[i % len(SIZES)]
        body = os.urandom(size) if i % 2 else bytes([i % 251]) * size
        value = None if i == 3 else f"{i:05d}|".encode() + body
        key = None if i % 4 == 1 else f"key-{i}".encode()
        headers: list[tuple[str, str | bytes | None]] = (
            [("n", str(i).encode()), ("blob", os.urandom(i % 7))] if i % 3 == 0 else [])
        made.append((key, value, headers))
    return made


def read_partition(kafka: KafkaBroker, topic: str, partition: int, count: int,
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
                headers: Any = message.headers()  # librdkafka gives None for none
                got.append((message.key(), message.value(), list(headers or [])))
    finally:
        consumer.close()
    return got


def produce(config: dict[str, Any], topic: str, batch: list[Record]) -> None:
    """Produce ``batch`` round-robin over the partitions; every record acknowledged without error."""
    producer = Producer(config)
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            errors.append(error)

    for i, (key, value, headers) in enumerate(batch):
        producer.produce(topic, value, key, partition=i % PARTITIONS, headers=headers, on_delivery=delivered)
        producer.poll(0)
    left = producer.flush(TIMEOUT_S)
    assert left == 0 and not errors, f"{left} records not acknowledged, errors: {errors[:3]}"


def transact_and_read_back(kafka: KafkaBroker, config: dict[str, Any], topic: str) -> None:
    """A transactional producer (id ``tx-<topic>``) commits, aborts and commits again; read_committed, the
    aborted records, between the two committed runs, would break the sequence."""
    committed, aborted, later = records(12), records(6), records(9)
    producer = Producer({**config, "transactional.id": f"tx-{topic}", "compression.type": "lz4", "linger.ms": 20})
    producer.init_transactions(TIMEOUT_S)
    for batch, commit in ((committed, True), (aborted, False), (later, True)):
        producer.begin_transaction()
        for i, (key, value, headers) in enumerate(batch):
            producer.produce(topic, value, key, partition=i % PARTITIONS, headers=headers)
        producer.flush(TIMEOUT_S)
        (producer.commit_transaction if commit else producer.abort_transaction)(TIMEOUT_S)
    for partition in range(PARTITIONS):
        expected = committed[partition::PARTITIONS] + later[partition::PARTITIONS]
        assert read_partition(kafka, topic, partition, len(expected), "read_committed") == expected


def assert_read_back(kafka: KafkaBroker, topic: str, batch: list[Record], isolation: str = "read_uncommitted") -> None:
    for partition in range(PARTITIONS):
        expected = batch[partition::PARTITIONS]
        got = read_partition(kafka, topic, partition, len(expected), isolation)
        assert got == expected, (partition, len(got), len(expected), [(k, v[:8] if v else v) for k, v, _ in got])


def values(kafka: KafkaBroker, topic: str, count: int, isolation: str = "read_uncommitted") -> list[bytes | None]:
    """The values of the first ``count`` records of a one-partition topic."""
    return [value for _, value, _ in read_partition(kafka, topic, 0, count, isolation)]


# -- the scenarios both files run, each through its own gateway ------------------------------------------------

def produce_case(kafka: KafkaBroker, config: dict[str, Any], case: str) -> str:
    """40 records of every size through ``config``'s gateway with librdkafka's CASES[case], read back; the topic."""
    topic = new_topic(kafka, case)
    batch = records(40)
    produce({**config, "linger.ms": 20, **CASES[case]}, topic, batch)
    assert_read_back(kafka, topic, batch)
    return topic


def java_produce_and_transact(kafka: KafkaBroker, java: JavaRunner, properties: Path, bootstrap: str) -> None:
    """Kafka's Java producer, idempotent (acks=all) then transactional (id ``tx-<topic>``), read back."""
    plain, transactional = new_topic(kafka, "java", 1), new_topic(kafka, "java-tx", 1)
    java.client("produce", properties, bootstrap, plain, "25")
    java.client("transact", properties, bootstrap, transactional, f"tx-{transactional}", "commit:3,abort:2,commit:4")
    assert values(kafka, plain, 25) == [f"record-{i}".encode() for i in range(25)]
    committed = [f"0-commit-{i}" for i in range(3)] + [f"2-commit-{i}" for i in range(4)]
    assert values(kafka, transactional, 7, "read_committed") == [value.encode() for value in committed]


def java_spread(kafka: KafkaBroker, java: JavaRunner, properties: Path, bootstrap: str) -> list[str]:
    """Kafka's Java producer writing to three topics at once (one request names several), read back; the topics."""
    topics = [new_topic(kafka, f"spread{i}", 1) for i in range(3)]
    java.client("spread", properties, bootstrap, ",".join(topics), "30")
    for topic in topics:
        assert values(kafka, topic, 30) == [f"{topic}-{i}".encode() for i in range(30)]
    return topics


def console_produce(kafka: KafkaBroker, java: JavaRunner, properties: Path, bootstrap: str, acks: str,
                    codec: str) -> None:
    """kafka-console-producer's lines with ``acks`` and ``codec``, read back in order."""
    topic = new_topic(kafka, f"console-{codec}", 1)
    lines = [f"line-{i}-" + "x" * (i * 37 % 5000) for i in range(60)]
    java.tool(PRODUCER, bootstrap, properties, "--topic", topic, "--compression-codec", codec,
              "--request-required-acks", acks, stdin="\n".join(lines) + "\n")
    assert values(kafka, topic, len(lines)) == [line.encode() for line in lines]
