"""The Apache Kafka test kit itself: the shared broker's listeners answer, and ksgate relays to it."""

from __future__ import annotations

import socket
import ssl
import uuid
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.clients import round_trip
from tests.harness import secured_gateway
from tests.tls_material import client_context
from tests.wire_client import read_frame, request_frame


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_kafka_sasl_ssl_listener_relays_records_for_an_authenticated_super_user(
        kafka: KafkaBroker, mechanism: str) -> None:
    topic = f"kit-direct-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    config = kafka.client_config("SASL_SSL", mechanism=mechanism)
    assert round_trip(config, topic) == [f"record-{i}".encode() for i in range(20)]


def test_kafka_refuses_an_ordinary_user_without_acls(kafka: KafkaBroker) -> None:
    # allow.everyone.if.no.acl.found=false: alice authenticates but may not create a topic.
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        round_trip(kafka.client_config("SASL_SSL", user="alice"), f"kit-denied-{uuid.uuid4().hex[:6]}")


def test_kafka_ssl_listener_needs_a_client_certificate(kafka: KafkaBroker) -> None:
    host, port = kafka.bootstrap("SSL").rsplit(":", 1)

    def api_versions_over_tls(context: ssl.SSLContext) -> bytes:
        with socket.create_connection((host, int(port)), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(request_frame(ApiKey.API_VERSIONS, 3, 1, {
                "client_software_name": "kit", "client_software_version": "1"}, "kit"))
            return read_frame(tls)

    assert api_versions_over_tls(client_context(kafka.ca, kafka.gateway_cert, kafka.gateway_key))
    # TLS 1.3: the handshake completes on the client's side; the refusal is an alert on the first read.
    with pytest.raises(ssl.SSLError, match="CERTIFICATE"):
        api_versions_over_tls(client_context(kafka.ca))


def test_kafka_tool_classes_run_against_the_broker(kafka: KafkaBroker) -> None:
    topic = f"kit-tool-{uuid.uuid4().hex[:6]}"
    kafka.run_tool("org.apache.kafka.tools.TopicCommand",
                   ["--bootstrap-server", kafka.bootstrap("SSL"), "--create", "--topic", topic],
                   kafka.tool_properties("SSL"))
    assert topic in kafka.admin().list_topics(timeout=10).topics


def test_ksgate_relays_sasl_clients_to_kafka(kafka: KafkaBroker, tmp_path: Path) -> None:
    gateway = secured_gateway(kafka.bootstrap("PLAINTEXT"), tmp_path)
    try:
        config = {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": "admin-secret"}
        topic = f"kit-gateway-{uuid.uuid4().hex[:6]}"
        assert round_trip(config, topic) == [f"record-{i}".encode() for i in range(20)]
        assert "User:admin" in gateway.gateway.ctx.counters.authenticated
    finally:
        gateway.stop()
