"""acks=0 bursts: any number of pipelined acks=0 Produce requests on one connection all land.

Tansu answers acks=0 produces (Kafka does not); the gateway must drop those answers without
remembering every request, and must never close the connection over them.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.api_keys import ApiKey
from protocol.record_batch import encode_batch
from tests.harness import GatewayThread
from tests.wire_client import WireClient, request_frame

BURST = 100_000
PRODUCE_V = 9


def _topic(admin: AdminClient, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
        future.result(timeout=15)
    return name


def _values_landed(bootstrap: str, topic: str, expected: int, timeout_s: float = 120) -> set[bytes]:
    """The distinct record values in partition 0, read until ``expected`` of them (or the deadline).

    Read back rather than taken from ListOffsets: under concurrent appends Tansu's end offset
    can fall a few short of the records it holds (the records themselves are all there).
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"count-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: set[bytes] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < expected and time.monotonic() < deadline:
            for message in consumer.consume(5000, 0.5):
                value = message.value()
                if message.error() is None and value is not None:
                    values.add(value)
    finally:
        consumer.close()
    return values


def test_100k_pipelined_acks0_produce_requests_on_one_connection_all_land(gateway: GatewayThread) -> None:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    topic = _topic(admin, "acks0-burst")
    now_ms = int(time.time() * 1000)
    client = WireClient(gateway.bootstrap, timeout_s=60)
    try:
        chunk: list[bytes] = []
        for n in range(BURST):  # one record each, numbered, every request's id distinct
            batch = encode_batch([(None, b"%d" % n)], timestamp_ms=now_ms)
            chunk.append(request_frame(ApiKey.PRODUCE, PRODUCE_V, n, {
                "transactional_id": None, "acks": 0, "timeout_ms": 1000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}))
            if len(chunk) == 1000:
                client.send(b"".join(chunk))
                chunk = []
        # A request that is answered, after the burst: the connection is still open and in order.
        client.send(request_frame(ApiKey.API_VERSIONS, 3, BURST, {"client_software_name": "t",
                                                                 "client_software_version": "1"}))
        correlation_id, body = client.read_response(ApiKey.API_VERSIONS, 3)
        assert (correlation_id, body["error_code"]) == (BURST, 0)
        assert _values_landed(gateway.bootstrap, topic, BURST) == {b"%d" % n for n in range(BURST)}
    finally:
        client.close()


def test_confluent_kafka_acks0_producer_lands_100k_records(gateway: GatewayThread) -> None:
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    topic = _topic(admin, "acks0-librdkafka")
    # Small batches, many requests in flight: the pattern that crossed the old 1,024-id memory.
    producer = Producer({"bootstrap.servers": gateway.bootstrap, "acks": 0, "linger.ms": 0,
                         "batch.num.messages": 10, "max.in.flight.requests.per.connection": 1_000_000,
                         "queue.buffering.max.messages": BURST})
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    for i in range(BURST):
        producer.produce(topic, value=b"%d" % i, partition=0, on_delivery=report)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "records still queued after 60 s"
    assert failures == []
    assert _values_landed(gateway.bootstrap, topic, BURST) == {b"%d" % n for n in range(BURST)}
