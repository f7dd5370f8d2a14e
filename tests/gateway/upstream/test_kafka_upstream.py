"""ksgate's own link to Apache Kafka for real: SASL_SSL (SCRAM-SHA-256/512, PLAIN) and mTLS, the broker's
certificate and host name verified; what clients see; and what the operator sees when the link is refused."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from auth.cert_tools import issue_cert, make_ca
from gateway.upstream.client import UpstreamError
from protocol.api_keys import ApiKey
from tests.apache_kafka import KafkaBroker, kafka_lib
from tests.apache_kafka.broker import GATEWAY_USER
from tests.apache_kafka.clients import create_topic, read_back, round_trip
from tests.harness import GatewayProcess, GatewayThread
from tests.hosts_file import can_edit_hosts, hosts_entries
from tests.wire_client import WireClient, request_frame

MODES = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "SSL")
# Short, so that a refused upstream shows on /readyz within a few seconds.
READINESS_TIMEOUT_MS = 1500


def upstream_settings(kafka: KafkaBroker, mode: str, user: str = GATEWAY_USER,
                      password: str | None = None, ca: Path | None = None) -> tuple[str, dict[str, Any]]:
    """The broker address and the gateway's upstream.* keys for ``mode`` (a SASL mechanism, or SSL: mTLS)."""
    trust = {"upstream.ssl.truststore.location": str(ca or kafka.ca)}
    if mode == "SSL":
        return kafka.bootstrap("SSL"), {
            "upstream.security.protocol": "SSL", **trust,
            "upstream.ssl.keystore.location": str(kafka.gateway_cert),
            "upstream.ssl.key.location": str(kafka.gateway_key)}
    return kafka.bootstrap("SASL_SSL"), {
        "upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": mode, **trust,
        "upstream.sasl.username": user, "upstream.sasl.password": password or kafka.users[user]}


def _another_broker(directory: Path) -> KafkaBroker:
    lib = kafka_lib()
    assert lib is not None
    return KafkaBroker(lib, directory)


@pytest.fixture
def own_kafka(tmp_path: Path, kafka: KafkaBroker) -> Iterator[KafkaBroker]:
    """A broker this test may stop and restart (``kafka``, shared, must stay as it is; depending
    on it also gives the skip when there are no jars)."""
    with _another_broker(tmp_path / "own-kafka") as running:
        yield running


@pytest.fixture(scope="module")
def spare_kafka(tmp_path_factory: pytest.TempPathFactory, kafka: KafkaBroker) -> Iterator[KafkaBroker]:
    """A broker whose listeners these tests reconfigure, each one listener and restoring it after."""
    with _another_broker(tmp_path_factory.mktemp("spare-kafka")) as running:
        yield running


@pytest.mark.parametrize("mode", MODES)
def test_relays_produce_and_consume_over_each_secured_upstream_link(kafka: KafkaBroker, mode: str) -> None:
    address, settings = upstream_settings(kafka, mode)
    gateway = GatewayThread(address, settings).start()
    try:
        topic = f"up-{mode.lower()}-{uuid.uuid4().hex[:6]}"
        assert round_trip({"bootstrap.servers": gateway.bootstrap}, topic) == [
            f"record-{i}".encode() for i in range(20)]
    finally:
        gateway.stop()


@pytest.mark.parametrize("mode", ["SCRAM-SHA-512", "SSL"])
def test_clients_see_only_the_gateways_addresses(kafka: KafkaBroker, mode: str) -> None:
    address, settings = upstream_settings(kafka, mode)
    gateway = GatewayThread(address, settings).start()
    try:
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
        brokers = admin.list_topics(timeout=10).brokers
        nodes = admin.describe_cluster().result(timeout=10).nodes
        listener = gateway.config.listeners[0]
        expected = {(gateway.host, gateway.config.node_port(listener, node_id)) for node_id in brokers}
        assert {(str(b.host), b.port) for b in brokers.values()} == expected
        assert {(n.host, n.port) for n in nodes} == expected
        kafka_ports = set(kafka.layout.ports.values())
        assert not {b.port for b in brokers.values()} & kafka_ports
    finally:
        gateway.stop()


def test_a_wrong_service_password_fails_start_up_naming_the_credentials(kafka: KafkaBroker) -> None:
    address, settings = upstream_settings(kafka, "SCRAM-SHA-512", password="not-the-password")
    with pytest.raises(UpstreamError, match="credentials"):
        GatewayThread(address, settings).start()


def test_an_untrusted_broker_certificate_fails_start_up_naming_the_certificate(
        kafka: KafkaBroker, tmp_path: Path) -> None:
    other_ca = make_ca("CN=a CA that did not sign the broker").write(tmp_path / "other-ca.pem")
    address, settings = upstream_settings(kafka, "SCRAM-SHA-512", ca=other_ca)
    with pytest.raises(UpstreamError, match=r"(?i)certificate") as refused:
        GatewayThread(address, settings).start()
    assert not refused.value.retriable and refused.value.cause == "tls"


def test_a_broker_name_the_certificate_does_not_cover_is_refused(kafka: KafkaBroker) -> None:
    # The broker's certificate names localhost and 127.0.0.1; reached under another name that
    # resolves to the same address, the name does not match and the link must not be used.
    if not can_edit_hosts():
        pytest.skip("needs a writable /etc/hosts (root) for a name the certificate does not cover")
    address, settings = upstream_settings(kafka, "SSL")
    port = address.rsplit(":", 1)[1]
    name = f"unlisted-{uuid.uuid4().hex[:6]}.kafka.test"
    with hosts_entries("127.0.0.1", [name]), pytest.raises(UpstreamError, match="Hostname mismatch"):
        GatewayThread(f"{name}:{port}", settings).start()


def test_a_rotated_service_credential_turns_readyz_503_with_one_log_line_naming_it(
        kafka: KafkaBroker, tmp_path: Path) -> None:
    user = f"svc-{uuid.uuid4().hex[:6]}"
    kafka.set_scram_password(user, "first-password")
    address, settings = upstream_settings(kafka, "SCRAM-SHA-512", user=user)
    with GatewayProcess(address, tmp_path, {
            **settings, "ksgate.readiness.upstream.timeout.ms": READINESS_TIMEOUT_MS}) as gateway:
        gateway.wait_readyz(200)
        kafka.set_scram_password(user, "rotated-password")  # the cluster's operator rotated it; ksgate was not told
        body = gateway.wait_readyz(503)
        assert "credentials" in body
        failures = gateway.events("upstream_probe_failed")
        assert len(failures) == 1, failures
        assert "credentials" in failures[0]["error"] and failures[0]["cause"] == "authentication"


def test_an_untrusted_broker_certificate_turns_readyz_503_with_one_log_line_naming_it(
        spare_kafka: KafkaBroker, tmp_path: Path) -> None:
    address, settings = upstream_settings(spare_kafka, "SCRAM-SHA-512")
    with GatewayProcess(address, tmp_path, {
            **settings, "ksgate.readiness.upstream.timeout.ms": READINESS_TIMEOUT_MS}) as gateway:
        gateway.wait_readyz(200)
        # The broker's certificate is replaced by one with the same names from a CA ksgate does not trust.
        rogue = issue_cert(make_ca("CN=another CA"), "CN=localhost", dns_names=("localhost",),
                           ip_addresses=("127.0.0.1",))
        keystore = tmp_path / "rogue-keystore.pem"
        keystore.write_bytes(rogue.key_pem() + rogue.chain_pem())
        key = "listener.name.sasl_ssl.ssl.keystore.location"
        spare_kafka.alter_broker_config({key: str(keystore)}, listener="PLAINTEXT")
        try:
            body = gateway.wait_readyz(503)
        finally:
            spare_kafka.alter_broker_config({key: str(spare_kafka.tls / "broker-keystore.pem")}, listener="PLAINTEXT")
        assert "certificate" in body.lower()
        failures = gateway.events("upstream_probe_failed")
        assert len(failures) == 1, failures
        assert "certificate" in failures[0]["error"].lower() and failures[0]["cause"] == "tls"


def test_a_broker_restart_mid_produce_loses_no_acknowledged_record(own_kafka: KafkaBroker) -> None:
    from confluent_kafka import KafkaError, Producer

    address, settings = upstream_settings(own_kafka, "SCRAM-SHA-512")
    gateway = GatewayThread(address, settings).start()
    try:
        config = {"bootstrap.servers": gateway.bootstrap}
        topic = f"restart-{uuid.uuid4().hex[:6]}"
        create_topic(config, topic)
        acknowledged: list[bytes] = []
        errors: list[KafkaError] = []

        def delivered(error: KafkaError | None, message: Any) -> None:
            (errors.append(error) if error is not None else acknowledged.append(message.value()))

        producer = Producer({**config, "enable.idempotence": True, "acks": "all", "linger.ms": 5})

        def produce(first: int, count: int) -> None:
            for i in range(first, first + count):
                producer.produce(topic, f"r{i}".encode(), on_delivery=delivered)
                producer.poll(0)

        produce(0, 20_000)
        while len(acknowledged) < 2000 and not errors:  # some acknowledged, most still in flight
            producer.poll(0.05)
        own_kafka.stop()  # SIGTERM: Kafka's controlled shutdown
        produce(20_000, 1000)  # more while the broker is gone
        own_kafka.start()  # the same ports and data directory
        produce(21_000, 1000)
        assert producer.flush(120) == 0
        assert not errors, errors[:3]
        read = read_back(config, topic, len(acknowledged))
        assert len(acknowledged) == 22_000
        assert sorted(read) == sorted(acknowledged)  # nothing lost, nothing twice (idempotence)
    finally:
        gateway.stop()


def test_a_refused_client_certificate_fails_start_up_at_once_as_a_tls_refusal(kafka: KafkaBroker) -> None:
    # TLS 1.3: the handshake completes on our side and the broker's refusal comes as an alert on
    # the first read; retrying cannot help, so start-up must not wait out its timeout.
    address, settings = upstream_settings(kafka, "SSL")
    del settings["upstream.ssl.keystore.location"], settings["upstream.ssl.key.location"]
    with pytest.raises(UpstreamError) as refused:
        GatewayThread(address, {**settings, "ksgate.upstream.startup.timeout.ms": 5000}).start()
    assert not refused.value.retriable and refused.value.cause == "tls"
    assert "certificate" in str(refused.value).lower()


def test_a_client_certificate_the_broker_stops_trusting_turns_readyz_503_while_clients_keep_connecting(
        spare_kafka: KafkaBroker, tmp_path: Path) -> None:
    address, settings = upstream_settings(spare_kafka, "SSL")
    with GatewayProcess(address, tmp_path, {
            **settings, "ksgate.readiness.upstream.timeout.ms": READINESS_TIMEOUT_MS}) as gateway:
        gateway.wait_readyz(200)
        other_ca = make_ca("CN=a CA that did not sign the gateway").write(tmp_path / "other-ca.pem")
        key = "listener.name.ssl.ssl.truststore.location"
        spare_kafka.alter_broker_config({key: str(other_ca)}, listener="PLAINTEXT")
        # Each client connection opens an upstream link whose TLS handshake succeeds on our side:
        # that must not count as the upstream answering.
        stop = threading.Event()
        clients = threading.Thread(target=_connect_until, args=(gateway.bootstrap, stop), daemon=True)
        clients.start()
        try:
            body = gateway.wait_readyz(503)
        finally:
            stop.set()
            clients.join(10)
            spare_kafka.alter_broker_config({key: str(spare_kafka.ca)}, listener="PLAINTEXT")
        assert "certificate" in body.lower()
        failures = gateway.events("upstream_probe_failed")
        assert len(failures) == 1, failures
        assert failures[0]["cause"] == "tls"


def _connect_until(bootstrap: str, stop: threading.Event) -> None:
    """New client connections, each sending Metadata, until ``stop``."""
    while not stop.is_set():
        try:
            client = WireClient(bootstrap, timeout_s=2.0)
        except OSError:
            continue
        try:
            client.send(request_frame(ApiKey.METADATA, 12, 1, {
                "topics": [], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False,
            }, "probe"))
            client.read_frame()
        except OSError:
            pass
        finally:
            client.sock.close()
        stop.wait(0.05)


@contextmanager
def _reauthenticating_kafka(tmp_path: Path, name: str, lifetime_ms: int) -> Iterator[tuple[KafkaBroker, str,
                                                                                            dict[str, Any]]]:
    """A broker of its own whose SASL_SSL listener grants sessions of ``lifetime_ms`` (KIP-368), and the
    gateway's upstream address and settings for it (SCRAM-SHA-512)."""
    lib = kafka_lib()
    assert lib is not None
    with KafkaBroker(lib, tmp_path / name, extra_properties={
            "listener.name.sasl_ssl.connections.max.reauth.ms": str(lifetime_ms)}) as broker:
        address, settings = upstream_settings(broker, "SCRAM-SHA-512")
        yield broker, address, settings


def test_client_connections_outlive_the_brokers_reauthentication_deadline(
        kafka: KafkaBroker, tmp_path: Path) -> None:
    deadline_ms = 1500
    with _reauthenticating_kafka(tmp_path, "reauth-kafka", deadline_ms) as (_, address, settings):
        gateway = GatewayThread(address, settings).start()
        try:
            client = WireClient(gateway.bootstrap)
            began = time.monotonic()
            answers = 0
            # One client connection, one request every 100 ms, for twice the deadline.
            while time.monotonic() - began < 2 * deadline_ms / 1000:
                client.send(request_frame(ApiKey.METADATA, 12, answers, {
                    "topics": [], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False,
                }, "reauth"))
                try:
                    client.read_response(ApiKey.METADATA, 12)
                except ConnectionError as exc:
                    raise AssertionError(f"disconnected after {answers} answers") from exc
                answers += 1
                time.sleep(0.1)  # pacing the requests, not synchronisation: the deadline is wall time
            client.sock.close()
        finally:
            gateway.stop()


def test_a_refused_reauthentication_closes_the_client_connection_with_its_reason(
        kafka: KafkaBroker, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The gateway's password changes between its login and its re-authentication: the broker refuses
    the second login, and the client on that link is disconnected (not left hanging), the reason logged."""
    deadline_ms = 1500
    with _reauthenticating_kafka(tmp_path, "reauth-refused-kafka", deadline_ms) as (broker, address, settings):
        old_password = settings["upstream.sasl.password"]
        gateway = GatewayThread(address, settings).start()
        try:
            client = WireClient(gateway.bootstrap)
            client.send(request_frame(ApiKey.METADATA, 12, 1, {
                "topics": [], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False,
            }, "reauth"))
            client.read_response(ApiKey.METADATA, 12)  # the link is up and logged in
            new_password = f"changed-{uuid.uuid4().hex}"
            broker.set_scram_password(GATEWAY_USER, new_password)
            # The re-authentication is due within 95 % of the deadline, its refusal right after.
            assert client.is_closed_by_peer(timeout_s=2 * deadline_ms / 1000 + 5)
            log = capfd.readouterr().err  # the in-process gateway logs JSON lines to stderr
            refusals = [json.loads(line) for line in log.splitlines() if '"connection_refused"' in line]
            assert any("upstream re-authentication failed" in r["reason"] and "invalid credentials" in r["reason"]
                       for r in refusals), log[-2000:]
            assert old_password not in log and new_password not in log
        finally:
            gateway.stop()


def _deny_anonymous(admin: AdminClient, topic: str) -> None:
    """A DENY of everything on ``topic`` for the gateway's unauthenticated clients, through the gateway."""
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.ALL, AclPermissionType.DENY)
    for future in admin.create_acls([binding]).values():
        future.result(timeout=30)


def _new_visible_topic(admin: AdminClient) -> str:
    """A topic created through the gateway, once its Metadata lists it (Kafka's metadata catches up)."""
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    deadline = time.monotonic() + 30
    while topic not in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, f"{topic} never listed"
        time.sleep(0.05)
    return topic


def test_the_security_stores_connections_outlive_the_brokers_reauthentication_deadline(
        kafka: KafkaBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The replicated store's own connections to Kafka (its tail long-polling Fetch, its writer) log in again
    on the same connection: over three lifetimes neither is reconnected, and changes made meanwhile, the
    writer idle past its lifetime before each, are written and honoured."""
    lifetime_ms = 2000
    with _reauthenticating_kafka(tmp_path, "store-reauth-kafka", lifetime_ms) as (broker, address, settings):
        settings.update({
            "ksgate.security.store": "KAFKA", "ksgate.security.store.topic": f"_ksgate_security_{uuid.uuid4().hex[:8]}",
            # As in production, far under the lifetime's last 5 % (100 ms here): the tail's next Fetch,
            # and so its login again, comes before the lifetime ends.
            "ksgate.security.store.fetch.max.wait.ms": 50})
        caplog.set_level(logging.INFO, logger="ksgate.store")  # its reconnections: a warning (tail), info (writer)
        gateway = GatewayThread(address, settings).start()
        try:
            store = gateway.gateway.security_topic
            assert store is not None
            admin = AdminClient({"bootstrap.servers": gateway.bootstrap})  # PLAINTEXT: User:ANONYMOUS
            denied = [_new_visible_topic(admin)]
            _deny_anonymous(admin, denied[0])  # the writer's first write opens it, once the tail applies
            writer = store._writer
            assert writer is not None
            # From here, both connections are up: a brand-new topic's first Fetch may have met
            # NOT_LEADER_OR_FOLLOWER and reconnected the tail, before and unrelated to any lifetime.
            caplog.clear()
            began = time.monotonic()
            for lifetimes in (1.25, 2.5, 3.25):  # the writer idle past its lifetime before each change
                topic = _new_visible_topic(admin)
                # Wall time is what the broker counts: there is no event to wait for.
                time.sleep(max(0.0, began + lifetimes * lifetime_ms / 1000 - time.monotonic()))
                _deny_anonymous(admin, topic)
                denied.append(topic)
                listed = set(admin.list_topics(timeout=10).topics)
                assert not listed & set(denied), "every DENY honoured"
            assert store._writer is writer, "the writer was reconnected"
        finally:
            gateway.stop()
        reconnects = [r.getMessage() for r in caplog.records if r.name == "ksgate.store"
                      and (r.levelno >= logging.WARNING or "connection lost" in r.getMessage())]
        assert not reconnects, reconnects
        assert broker.gateway_password not in caplog.text
