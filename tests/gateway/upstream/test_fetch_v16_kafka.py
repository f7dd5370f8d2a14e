"""librdkafka and Kafka's Java client consume through ksgate from Apache Kafka 4.4 with Fetch v16+ (the
broker's own range, no longer capped at v15), in responses large enough to stream, and get every record."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator

import pytest

from protocol.api_keys import ApiKey
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.clients import create_topic, produce, read_back
from tests.apache_kafka.java_clients import JavaRunner
from tests.gateway.upstream.conftest import JavaGateway
from tests.gateway.upstream.test_java_clients import _NETWORK_DEBUG, WAIT_MS, _topic
from tests.harness import GatewayThread

COUNT = 300
VALUES = [f"big-{i:04}-".encode() + b"x" * 4000 for i in range(COUNT)]  # 1.2 MB: Fetch answers of 64 KiB and up


@pytest.fixture(scope="module")
def kafka_gateway(kafka: KafkaBroker) -> Iterator[GatewayThread]:
    running = GatewayThread(kafka.bootstrap("PLAINTEXT")).start()
    yield running
    running.stop()


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_librdkafka_fetches_at_v16_through_ksgate_and_reads_every_record(kafka_gateway: GatewayThread) -> None:
    ctx = kafka_gateway.gateway.ctx
    assert ctx.negotiated[ApiKey.FETCH][1] >= 16  # Kafka 4.4 offers v18: clients see its range
    topic = f"fetch16-{uuid.uuid4().hex[:8]}"
    config = {"bootstrap.servers": kafka_gateway.bootstrap}
    create_topic(config, topic)
    produce(config, topic, VALUES)
    lines = _Lines()
    logger = logging.getLogger(f"librdkafka-{topic}")
    logger.addHandler(lines)
    logger.setLevel(logging.DEBUG)
    streamed = ctx.counters.streamed_responses
    got = read_back({**config, "debug": "protocol", "logger": logger}, topic, COUNT)
    assert got == VALUES
    versions = {int(v) for line in lines.lines for v in re.findall(r"Sent FetchRequest \(v(\d+)", line)}
    assert versions and min(versions) >= 16, versions
    assert ctx.counters.streamed_responses > streamed  # the large answers streamed, trailer walked


def test_the_java_client_fetches_at_v16_up_through_ksgate_and_reads_every_record(
        java_gateway: JavaGateway, kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> None:
    topic = _topic(java_gateway, "fetch16")
    produce({"bootstrap.servers": kafka.bootstrap("PLAINTEXT")}, topic, VALUES)  # written straight to the broker
    java = JavaRunner(java_gateway.java.lib, tmp_path_factory.mktemp("java-fetch16"))
    (java.directory / "log4j2.properties").write_text(_NETWORK_DEBUG)  # every request header it sends, on stderr
    streamed = java_gateway.gateway.gateway.ctx.counters.streamed_responses
    done = java.client("consume", java_gateway.properties("bob"), java_gateway.bootstrap, topic,
                       f"demo-fetch16-{uuid.uuid4().hex[:6]}", "classic", "read_uncommitted", str(COUNT), WAIT_MS)
    assert sorted(done.stdout.split()) == sorted(v.decode() for v in VALUES)
    versions = {int(v) for v in re.findall(r"Sending FETCH request with header RequestHeader\(apiKey=FETCH, "
                                           r"apiVersion=(\d+)", done.stderr)}
    assert versions and min(versions) >= 16, versions
    assert java_gateway.gateway.gateway.ctx.counters.streamed_responses > streamed
