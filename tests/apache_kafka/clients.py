"""confluent-kafka helpers for the Kafka tests: create a topic, produce, read a partition back."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

TIMEOUT_S = 20.0


def create_topic(config: Mapping[str, Any], topic: str, partitions: int = 1) -> None:
    admin = AdminClient(dict(config))  # kept alive until the futures resolve (its end cancels them)
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def produce(config: Mapping[str, Any], topic: str, values: list[bytes]) -> None:
    """Produce ``values`` (acks=all, idempotent) and wait until every one is acknowledged."""
    producer = Producer({**config, "enable.idempotence": True, "acks": "all"})
    errors: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            errors.append(error)

    for value in values:
        producer.produce(topic, value, on_delivery=delivered)
    left = producer.flush(TIMEOUT_S)
    assert left == 0 and not errors, f"{left} records not acknowledged, errors: {errors[:3]}"


def read_back(config: Mapping[str, Any], topic: str, count: int, partition: int = 0) -> list[bytes]:
    """The first ``count`` records of ``topic``/``partition`` (fewer if they do not arrive in time)."""
    consumer = Consumer({**config, "group.id": f"reader-{topic}", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(count - len(got), 1.0):
                value = message.value()
                if message.error() is None and value is not None:
                    got.append(value)
    finally:
        consumer.close()
    return got


def round_trip(config: Mapping[str, Any], topic: str, count: int = 20) -> list[bytes]:
    """Create ``topic``, produce ``count`` records, return what reading the partition gives back."""
    create_topic(config, topic)
    values = [f"record-{i}".encode() for i in range(count)]
    produce(config, topic, values)
    return read_back(config, topic, count)
