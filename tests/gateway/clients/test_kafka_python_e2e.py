"""Acceptance: kafka-python (a pure-Python client) through the gateway to a real Tansu broker."""

from __future__ import annotations

import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from gateway.commands.embedded_broker import EmbeddedBroker
from tests.harness import GatewayThread

GROUP_TIMEOUTS = {"session_timeout_ms": 6000, "max_poll_interval_ms": 7000, "heartbeat_interval_ms": 1000}


def _drain(consumer: KafkaConsumer, expected: int, timeout_s: float = 40) -> list[tuple[bytes, bytes]]:
    got: list[tuple[bytes, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend((r.key, r.value) for r in records)
    return got


def test_kafka_python_create_produce_group_consume_commit_and_delete(
        gateway: GatewayThread, broker: EmbeddedBroker) -> None:
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=gateway.bootstrap, request_timeout_ms=15000)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])

    producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, acks="all", enable_idempotence=True,
                             linger_ms=5)
    futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode()) for i in range(2000)]
    producer.flush(timeout=30)
    assert all(f.succeeded() for f in futures)
    producer.close()

    group = f"kpg-{uuid.uuid4().hex[:6]}"
    consumer = KafkaConsumer(topic, bootstrap_servers=gateway.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False, **GROUP_TIMEOUTS)
    got = _drain(consumer, 2000)
    assert sorted(got) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(2000))
    consumer.commit()
    partitions = [TopicPartition(topic, p) for p in range(2)]
    assert sum(consumer.committed(tp) or 0 for tp in partitions) == 2000
    ends = consumer.end_offsets(partitions)
    consumer.close()

    # The same answers directly from the broker: the gateway is transparent.
    direct = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    assert direct.end_offsets(partitions) == ends
    direct.close()

    cluster = admin.describe_cluster()
    listener = gateway.config.listeners[0]
    assert cluster["brokers"]
    for node in cluster["brokers"]:
        assert node["port"] == gateway.config.node_port(listener, node["broker_id"])
    admin.delete_topics([topic])
    admin.close()


def test_kafka_python_sees_only_gateway_addresses(gateway: GatewayThread, broker: EmbeddedBroker) -> None:
    consumer = KafkaConsumer(bootstrap_servers=gateway.bootstrap)
    consumer.topics()  # forces a metadata round trip
    brokers = consumer._client.cluster.brokers()
    consumer.close()
    assert brokers
    assert all(b.port != broker.port for b in brokers)
    listener = gateway.config.listeners[0]
    assert {(b.host, b.port) for b in brokers} == {
        ("127.0.0.1", gateway.config.node_port(listener, b.node_id)) for b in brokers}
