"""Acceptance: librdkafka (confluent-kafka) through the gateway to a real Tansu broker."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from gateway.commands.embedded_broker import EmbeddedBroker
from tests.harness import GatewayThread

RECORDS = 20_000
GROUP_TIMEOUTS = {"session.timeout.ms": 6000, "max.poll.interval.ms": 7000, "heartbeat.interval.ms": 1000}


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def admin(gateway: GatewayThread) -> AdminClient:
    return AdminClient({"bootstrap.servers": gateway.bootstrap})


def _create(admin: AdminClient, name: str, partitions: int = 3) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=15)


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "acks": "all"})
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    for i in range(count):
        producer.produce(topic, value=f"value-{i}".encode(), key=f"k{i}".encode(), on_delivery=report)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0, "records still in flight after 30 s"
    assert failures == []


def _consume(consumer: Consumer, expected: int, timeout_s: float = 40) -> list[tuple[bytes, bytes]]:
    got: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if msg.error() is None:
                got.append((msg.key(), msg.value()))
    return got


def test_metadata_lists_only_gateway_addresses(gateway: GatewayThread, broker: EmbeddedBroker,
                                               admin: AdminClient) -> None:
    metadata = admin.list_topics(timeout=10)
    listener = gateway.config.listeners[0]
    assert metadata.brokers, "no brokers in metadata"
    for node_id, node in metadata.brokers.items():
        assert (node.host, node.port) == ("127.0.0.1", gateway.config.node_port(listener, node_id))
        assert node.port != broker.port


def test_describe_cluster_shows_gateway_nodes(gateway: GatewayThread, broker: EmbeddedBroker,
                                              admin: AdminClient) -> None:
    cluster = admin.describe_cluster(request_timeout=10).result(timeout=15)
    listener = gateway.config.listeners[0]
    assert cluster.nodes
    for node in cluster.nodes:
        assert node.port == gateway.config.node_port(listener, node.id)
        assert node.port != broker.port


def test_idempotent_produce_of_20k_records_reads_back_intact_by_assign(
        gateway: GatewayThread, admin: AdminClient) -> None:
    topic = _topic("assign")
    _create(admin, topic)
    _produce(gateway.bootstrap, topic, RECORDS)
    streamed_before = gateway.gateway.ctx.counters.streamed_responses
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got = _consume(consumer, RECORDS)
    consumer.close()
    assert len(got) == RECORDS
    assert sorted(got) == sorted((f"k{i}".encode(), f"value-{i}".encode()) for i in range(RECORDS))
    # Large Fetch responses went through the streaming path (forwarded as they arrived), intact.
    assert gateway.gateway.ctx.counters.streamed_responses > streamed_before


def test_megabyte_produce_requests_arrive_intact_through_reused_receive_buffers(
        gateway: GatewayThread, admin: AdminClient) -> None:
    """~1 MB Produce requests, pipelined, are each read into a pooled buffer of their own (reused
    once relayed): every value reads back byte for byte, in order."""
    topic = _topic("big")
    _create(admin, topic, partitions=1)
    takes_before = gateway.gateway.ctx.frame_buffers.takes
    values = [os.urandom(300_000) + i.to_bytes(4, "big") for i in range(30)]  # 3 per 1 MB request
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "acks": "all", "linger.ms": 50,
                         "batch.size": 1_000_000, "compression.type": "none"})
    failures: list[KafkaError] = []
    for value in values:
        producer.produce(topic, value=value, on_delivery=lambda err, _msg: err and failures.append(err))
    assert producer.flush(30) == 0 and failures == []
    consumer = Consumer({"bootstrap.servers": gateway.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = [value for _key, value in _consume(consumer, len(values))]
    consumer.close()
    assert got == values
    # Large requests went through the pool (whose idle buffers are let go after a second).
    assert gateway.gateway.ctx.frame_buffers.takes > takes_before


def _offsets(admin: AdminClient, tp: TopicPartition) -> tuple[int, int]:
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=10).offset
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(timeout=10).offset
    return earliest, latest


def test_list_offsets_through_gateway_match_the_broker(gateway: GatewayThread, broker: EmbeddedBroker,
                                                       admin: AdminClient) -> None:
    topic = _topic("offsets")
    _create(admin, topic, partitions=1)
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "linger.ms": 0})
    for i in range(5):  # one batch each, so the offsets are unambiguous
        producer.produce(topic, value=str(i).encode())
        assert producer.flush(10) == 0
    tp = TopicPartition(topic, 0)
    through_gateway = _offsets(admin, tp)
    direct = _offsets(AdminClient({"bootstrap.servers": broker.bootstrap}), tp)
    assert through_gateway == direct
    assert through_gateway == (0, 5)


@pytest.fixture
def group_topic(gateway: GatewayThread, admin: AdminClient) -> Iterator[str]:
    topic = _topic("group")
    _create(admin, topic, partitions=2)
    _produce(gateway.bootstrap, topic, 1000)
    yield topic


def test_consumer_group_commits_leaves_and_rejoins_from_committed_offsets(
        gateway: GatewayThread, group_topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:6]}"
    settings = {"bootstrap.servers": gateway.bootstrap, "group.id": group,
                "auto.offset.reset": "earliest", "enable.auto.commit": False, **GROUP_TIMEOUTS}
    first = Consumer(settings)
    first.subscribe([group_topic])
    seen: list[tuple[bytes, bytes]] = _consume(first, 1000)
    assert len(seen) == 1000
    first.commit(asynchronous=False)
    committed = first.committed([TopicPartition(group_topic, p) for p in range(2)], timeout=10)
    assert sum(tp.offset for tp in committed) == 1000
    first.close()  # LeaveGroup

    _produce(gateway.bootstrap, group_topic, 10)  # values value-0..9 again, new offsets
    second = Consumer(settings)
    second.subscribe([group_topic])
    resumed = _consume(second, 10, timeout_s=40)
    extra = _consume(second, 1, timeout_s=2)
    second.close()
    assert sorted(resumed) == sorted((f"k{i}".encode(), f"value-{i}".encode()) for i in range(10))
    assert extra == [], "records before the committed offsets were delivered again"


def test_delete_topics_removes_the_topic(gateway: GatewayThread, admin: AdminClient) -> None:
    topic = _topic("delete")
    _create(admin, topic, partitions=1)
    assert topic in admin.list_topics(timeout=10).topics
    for future in admin.delete_topics([topic]).values():
        future.result(timeout=15)
    deadline = time.monotonic() + 10
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)  # metadata is eventually consistent; no event to wait on
    assert topic not in admin.list_topics(timeout=10).topics
