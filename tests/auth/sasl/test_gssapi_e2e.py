"""Acceptance: Kerberos (GSSAPI) clients authenticate through the gateway against a real MIT KDC.

librdkafka is exercised through Debian's kcat (the pip confluent-kafka wheel is built
without GSSAPI); kafka-python uses python-gssapi.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer

from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.kerberos import KerberosIdentity, KerberosRealm
from tests.wire_client import WireClient, request_frame


@pytest.fixture(scope="module")
def alice(kerberos_realm: KerberosRealm) -> KerberosIdentity:
    return kerberos_realm.add_user("alice")


@pytest.fixture(scope="module")
def gssapi_gateway(broker: EmbeddedBroker, kerberos_realm: KerberosRealm, alice: KerberosIdentity
                   ) -> Iterator[GatewayThread]:
    service = kerberos_realm.identity("kafka/localhost")
    patch = pytest.MonkeyPatch()
    for key, value in kerberos_realm.env(client=alice, service=service).items():
        patch.setenv(key, value)  # krb5 reads these when a context is created, in this process
    gateway = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "GSSAPI", "ksgate.sasl.kerberos.keytab": str(service.keytab),
        "ksgate.sasl.kerberos.server.host": "localhost"}, protocol="SASL_PLAINTEXT",
        advertised_host="localhost").start()
    yield gateway
    gateway.stop()
    patch.undo()


def test_kafka_python_gssapi_produces_and_consumes_as_the_short_name(gssapi_gateway: GatewayThread) -> None:
    common = {"bootstrap_servers": gssapi_gateway.bootstrap, "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": "kafka"}
    topic = f"krb-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(**common)
    for i in range(10):
        producer.send(topic, f"k{i}".encode())
    producer.flush(timeout=20)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **common)
    got = sorted(record.value for _, record in zip(range(10), consumer, strict=False))
    consumer.close()
    assert got == sorted(f"k{i}".encode() for i in range(10))
    assert set(gssapi_gateway.gateway.ctx.counters.authenticated) == {"User:alice"}


def _kcat(gateway: GatewayThread, alice: KerberosIdentity, *args: str, stdin: bytes | None = None) -> str:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.fail("kcat is not installed (scripts/test.sh installs it)")
    result = subprocess.run(
        [kcat, "-b", gateway.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=GSSAPI",
         "-X", "sasl.kerberos.service.name=kafka", "-X", f"sasl.kerberos.principal={alice.principal}",
         "-X", f"sasl.kerberos.keytab={alice.keytab}",
         "-X", f"sasl.kerberos.kinit.cmd=kinit -k -t {alice.keytab} -c {alice.ccache_name} {alice.principal}",
         *args], input=stdin, capture_output=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout.decode()


def test_librdkafka_gssapi_via_kcat_lists_gateway_brokers_and_round_trips(
        gssapi_gateway: GatewayThread, alice: KerberosIdentity) -> None:
    listing = _kcat(gssapi_gateway, alice, "-L")
    assert f"localhost:{gssapi_gateway.config.listeners[0].node_port_base + 111 - 0}" in listing
    topic = f"kcat-krb-{uuid.uuid4().hex[:6]}"
    _kcat(gssapi_gateway, alice, "-P", "-t", topic, stdin=b"one\ntwo\nthree\n")
    out = _kcat(gssapi_gateway, alice, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert sorted(out.split()) == ["one", "three", "two"]


def test_thirty_failed_gssapi_logins_from_an_address_do_not_lock_alice_out(
        broker: EmbeddedBroker, kerberos_realm: KerberosRealm, alice: KerberosIdentity) -> None:
    """Issue #18, item 1, for GSSAPI: garbage tokens from 127.0.0.1, then alice from the same address.
    The old per-address throttle key is set at its old default: it must be ignored."""
    service = kerberos_realm.identity("kafka/localhost")
    patch = pytest.MonkeyPatch()
    for key, value in kerberos_realm.env(client=alice, service=service).items():
        patch.setenv(key, value)
    gateway = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "GSSAPI", "ksgate.sasl.kerberos.keytab": str(service.keytab),
        "ksgate.sasl.kerberos.server.host": "localhost", "connection.failed.authentication.delay.ms": 20,
        "ksgate.authentication.failures.per.ip": 10}, protocol="SASL_PLAINTEXT", advertised_host="localhost").start()
    try:
        for attempt in range(30):
            client = WireClient(gateway.bootstrap)
            try:
                client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "GSSAPI"}))
                client.read_response(ApiKey.SASL_HANDSHAKE, 1)
                client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": b"forged-%d" % attempt}))
                assert client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"] == 58
            finally:
                client.close()
        producer = KafkaProducer(bootstrap_servers=gateway.bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka")
        producer.send(f"krb-lockout-{uuid.uuid4().hex[:6]}", b"x").get(timeout=20)
        producer.close()
        assert gateway.call(lambda: gateway.gateway.ctx.counters.authenticated.get("User:alice", 0)) >= 1
    finally:
        gateway.stop()
        patch.undo()
