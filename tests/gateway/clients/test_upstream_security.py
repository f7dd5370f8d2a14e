"""The gateway's own link to the brokers: TLS (CA, hostname check) and SASL as a service principal.

Tansu 0.6 cannot run an authenticated broker with users in this environment (memory
storage refuses SCRAM user creation, file storage is unsupported with --authentication),
so the authenticated, TLS-terminating upstream here is a second ksgate (SASL_SSL, SCRAM)
in front of Tansu: the same wire protocol a secured Kafka broker speaks.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from auth.cert_tools import TlsFiles, write_tls_material
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.config import ConfigError
from gateway.stores.file_users import FileCredentialStore
from gateway.upstream.client import UpstreamError
from tests.harness import GatewayThread


@pytest.fixture(scope="module")
def secured_upstream(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
                     ) -> Iterator[tuple[GatewayThread, TlsFiles]]:
    directory = tmp_path_factory.mktemp("upstream")
    tls = write_tls_material(directory)
    FileCredentialStore(directory / "users.json").upsert_user("ksgate-svc", "svc-secret")
    upstream = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ksgate.credentials.file": str(directory / "users.json"),
    }, protocol="SASL_SSL", advertised_host="localhost").start()
    yield upstream, tls
    upstream.stop()


def _front(upstream: GatewayThread, tls: TlsFiles, password: str = "svc-secret") -> GatewayThread:
    return GatewayThread(upstream.bootstrap, {
        "upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "SCRAM-SHA-512",
        "upstream.sasl.username": "ksgate-svc", "upstream.sasl.password": password,
        "upstream.ssl.truststore.location": str(tls.ca),
    }).start()


def test_relays_through_a_tls_and_scram_secured_upstream_as_the_service_principal(
        secured_upstream: tuple[GatewayThread, TlsFiles]) -> None:
    upstream, tls = secured_upstream
    front = _front(upstream, tls)
    try:
        topic = f"up-sec-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": front.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(timeout=15)
        producer = Producer({"bootstrap.servers": front.bootstrap})
        for i in range(10):
            producer.produce(topic, str(i).encode())
        assert producer.flush(15) == 0
        consumer = Consumer({"bootstrap.servers": front.bootstrap, "group.id": "x", "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        while len(got) < 10:
            batch = consumer.consume(10, 5.0)
            assert batch, "no records through the secured upstream"
            got.extend(m.value() for m in batch if m.error() is None)
        consumer.close()
        assert got == [str(i).encode() for i in range(10)]
        assert set(upstream.gateway.ctx.counters.authenticated) == {"User:ksgate-svc"}
        # Clients of the front gateway only ever see the front gateway's addresses.
        brokers = admin.list_topics(timeout=10).brokers
        assert {b.port for b in brokers.values()} == {
            front.config.node_port(front.config.listeners[0], n) for n in brokers}
    finally:
        front.stop()


def test_wrong_service_password_fails_start_up_with_a_clear_error(
        secured_upstream: tuple[GatewayThread, TlsFiles]) -> None:
    upstream, tls = secured_upstream
    with pytest.raises(UpstreamError, match="credentials"):
        _front(upstream, tls, password="wrong")


def test_untrusted_upstream_certificate_fails_start_up(secured_upstream: tuple[GatewayThread, TlsFiles],
                                                      tmp_path: Path) -> None:
    upstream, _ = secured_upstream
    other = write_tls_material(tmp_path)  # a different CA
    with pytest.raises(UpstreamError, match=r"(?i)certificate"):
        _front(upstream, other)


def test_sasl_upstream_without_credentials_is_a_config_error(secured_upstream: tuple[GatewayThread, TlsFiles]) -> None:
    upstream, _ = secured_upstream
    with pytest.raises(ConfigError, match=r"upstream\.sasl"):
        GatewayThread(upstream.bootstrap, {"upstream.security.protocol": "SASL_SSL"})
