"""Produce through a gateway with no authorizer (ksgate's default) in front of Apache Kafka 4.4, where a
Produce is walked, not decoded (protocol/entities/topic_prepass.py): confluent-kafka and Kafka's own Java
producer, several record sizes, acks 0/1/all, every compression, idempotent and transactional producers and a
request naming several topics; every record read back from the broker intact and in order, and every Produce
the gateway relayed relayed by the walk (the gateway runs in this process: its stage is watched, not mocked).
The scenarios are walked_produce.py's, which test_produce_walked_authorized_kafka.py runs with an authorizer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.java_clients import JavaRunner, java_available
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
from tests.harness import GatewayThread


@pytest.fixture(scope="module")
def bare_gateway(kafka: KafkaBroker) -> Iterator[GatewayThread]:
    gateway = GatewayThread(kafka.bootstrap("PLAINTEXT"), {"authorizer.class.name": ""}).start()
    assert gateway.gateway.ctx.negotiated  # started, and with no authorizer (below: no Produce is decoded)
    yield gateway
    gateway.stop()


@pytest.mark.parametrize("case", CASES)
def test_confluent_kafka_produces_through_the_walk_intact_and_in_order(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch, case: str) -> None:
    before = relayed_produces(bare_gateway)
    topic = produce_case(kafka, {"bootstrap.servers": bare_gateway.bootstrap}, case)
    assert_every_produce_walked(bare_gateway, watch, before)
    assert all(walk == {topic} for walk in walked_topics(kafka, watch, [topic]))


def test_a_transactional_producer_commits_and_aborts_through_the_walk(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch) -> None:
    topic = new_topic(kafka, "tx")
    before = relayed_produces(bare_gateway)
    transact_and_read_back(kafka, {"bootstrap.servers": bare_gateway.bootstrap}, topic)
    assert_every_produce_walked(bare_gateway, watch, before)


@pytest.fixture(scope="module")
def java(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> tuple[JavaRunner, Path]:
    """Kafka 4.4's Java code and a client properties file for the bare (PLAINTEXT) gateway."""
    if not java_available():
        pytest.skip("no java/javac on PATH")
    directory = tmp_path_factory.mktemp("walked-java")
    properties = directory / "plaintext.properties"
    properties.write_text("security.protocol=PLAINTEXT\n")
    return JavaRunner(kafka.lib, directory / "java"), properties


def test_the_java_producer_idempotent_and_transactional_produces_through_the_walk(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path]) -> None:
    before = relayed_produces(bare_gateway)
    java_produce_and_transact(kafka, *java, bare_gateway.bootstrap)
    assert_every_produce_walked(bare_gateway, watch, before)


def test_one_java_produce_request_names_several_topics_and_is_walked(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path]) -> None:
    before = relayed_produces(bare_gateway)
    topics = java_spread(kafka, *java, bare_gateway.bootstrap)
    assert_every_produce_walked(bare_gateway, watch, before)
    walks = walked_topics(kafka, watch, topics)
    assert all(walk <= set(topics) for walk in walks) and any(len(walk) > 1 for walk in walks), walks


@pytest.mark.parametrize(("acks", "codec"), [("0", "gzip"), ("1", "zstd"), ("all", "snappy")])
def test_kafka_console_producer_lines_arrive_in_order_through_the_walk(
        kafka: KafkaBroker, bare_gateway: GatewayThread, watch: WalkWatch, java: tuple[JavaRunner, Path],
        acks: str, codec: str) -> None:
    before = relayed_produces(bare_gateway)
    console_produce(kafka, *java, bare_gateway.bootstrap, acks, codec)
    assert_every_produce_walked(bare_gateway, watch, before)
