"""Acceptance: client quotas enforced on real clients (librdkafka) through the gateway to Tansu.

alice has producer_byte_rate=1000000 (and, for the consumer test, consumer_byte_rate): a producer
sending as fast as it can is answered with throttle_time_ms (librdkafka's throttle callback and its
statistics' ``throttle`` window see it), while bob's admin client on the same gateway is answered.
The behaviour is asserted here; the achieved rates are figures for bench/availability/quotas.py.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ThrottleEvent
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.quotas.lookup import DictQuotas
from gateway.stores.file_users import FileCredentialStore
from tests.harness import GatewayThread

QUOTA = 1_000_000.0
VALUE = b"v" * 10_000
RECORDS = 2_000


@pytest.fixture(scope="module")
def quota_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    path: Path = tmp_path_factory.mktemp("quota-users") / "users.json"
    store = FileCredentialStore(path)
    store.upsert_user("alice", "alice-secret")
    store.upsert_user("bob", "bob-secret")
    running = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(path),
        "ksgate.sasl.plain.allow.insecure": True}, protocol="SASL_PLAINTEXT")
    running.gateway.ctx.quotas = DictQuotas({("user=alice", "producer_byte_rate"): QUOTA,
                                             ("user=alice", "consumer_byte_rate"): QUOTA})
    running.start()
    yield running
    running.stop()


def _client(gateway: GatewayThread, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}


def _create(gateway: GatewayThread, topic: str) -> None:
    admin = AdminClient(_client(gateway, "bob"))  # referenced until answered (its handle answers the futures)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=15)


class Throttles:
    """What librdkafka reported: throttle callbacks and the statistics' ``throttle`` window."""

    def __init__(self) -> None:
        self.seen = threading.Event()  # a throttle callback with a throttle time above 0
        self.in_stats = threading.Event()  # statistics whose throttle window is above 0
        self.events: list[ThrottleEvent] = []
        self.stats_max = 0

    def on_throttle(self, event: ThrottleEvent) -> None:  # also called when the throttle time drops back to 0
        self.events.append(event)
        if event.throttle_time > 0:
            self.seen.set()

    def on_stats(self, text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            self.stats_max = max(self.stats_max, broker.get("throttle", {}).get("max", 0))
        if self.stats_max > 0:
            self.in_stats.set()


def test_a_producer_over_its_quota_is_throttled_while_admin_on_the_same_gateway_is_answered(
        quota_gateway: GatewayThread) -> None:
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    _create(quota_gateway, topic)
    seen = Throttles()
    producer = Producer({**_client(quota_gateway, "alice"), "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 4096,
                         "statistics.interval.ms": 200, "throttle_cb": seen.on_throttle, "stats_cb": seen.on_stats})
    stop = threading.Event()

    def produce_flat_out() -> None:
        while not stop.is_set():
            try:
                producer.produce(topic, VALUE)
            except BufferError:  # its queue is full: the gateway is holding it back
                producer.poll(0.05)
            producer.poll(0)

    sender = threading.Thread(target=produce_flat_out, daemon=True)
    sender.start()
    try:
        assert seen.seen.wait(60), "no throttle_time_ms reached the producer"
        # alice is muted now; bob's admin client on the same gateway is answered meanwhile
        admin = AdminClient(_client(quota_gateway, "bob"))
        assert topic in admin.list_topics(timeout=10).topics
        assert admin.describe_cluster(request_timeout=10).result(timeout=15).nodes
        assert seen.in_stats.wait(30), "librdkafka's statistics show no throttle"
    finally:
        stop.set()
        sender.join(30)
        producer.purge()
        producer.flush(10)
    throttled = quota_gateway.gateway.ctx.quota_sensors.totals[("producer_byte_rate", "user=alice")]
    assert throttled.throttled > 0 and throttled.throttle_ms > 0


def test_a_consumer_over_its_quota_is_throttled(quota_gateway: GatewayThread) -> None:
    topic = f"quota-fetch-{uuid.uuid4().hex[:8]}"
    _create(quota_gateway, topic)
    producer = Producer(_client(quota_gateway, "bob"))  # bob has no quota: fills the topic quickly
    for _ in range(RECORDS):  # 20 MB: twice what the consumer may read in the 10 s a new rate is measured over
        try:
            producer.produce(topic, VALUE)
        except BufferError:
            producer.poll(0.1)
            producer.produce(topic, VALUE)
    assert producer.flush(60) == 0
    seen = Throttles()
    consumer = Consumer({**_client(quota_gateway, "alice"), "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "statistics.interval.ms": 200, "throttle_cb": seen.on_throttle, "stats_cb": seen.on_stats,
                         "fetch.max.bytes": 5_000_000, "max.partition.fetch.bytes": 5_000_000})
    consumer.subscribe([topic])
    try:
        got = 0
        while not (seen.seen.is_set() and seen.in_stats.is_set()):
            got += sum(1 for m in consumer.consume(100, 0.5) if m.error() is None)
            assert got < RECORDS or seen.seen.is_set(), "all records read and never throttled"
            assert got < RECORDS or seen.in_stats.wait(10), "librdkafka's statistics show no throttle"
    finally:
        consumer.close()
    throttled = quota_gateway.gateway.ctx.quota_sensors.totals[("consumer_byte_rate", "user=alice")]
    assert throttled.throttled > 0
