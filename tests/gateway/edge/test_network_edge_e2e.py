"""Acceptance (#12): every broker on one TLS port by SNI, behind a real HAProxy (TCP mode, TLS passing through,
send-proxy-v2, from 127.0.0.2 so the balancer's address differs from the client's), with real clients.

Every test of the ``edge`` fixture runs twice: with Tansu upstream, and with Apache Kafka (marker ``kafka``)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer, KafkaProducer

from auth.cert_tools import issue_cert, make_ca
from gateway.commands.embedded_broker import EmbeddedBroker, free_port
from gateway.stores.file_users import FileCredentialStore
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.properties import NODE_ID as KAFKA_NODE
from tests.haproxy import HAProxy
from tests.harness import GatewayThread, free_port_block
from tests.hosts_file import can_edit_hosts, hosts_entries

DOMAIN = "edge.ksgate.test"
BOOTSTRAP = f"bootstrap.{DOMAIN}"
PATTERN = f"broker-{{nodeId}}.{DOMAIN}"
TANSU_NODE = 111

pytestmark = [
    pytest.mark.skipif(not HAProxy.available(), reason="needs Debian's haproxy (scripts/test.sh installs it)"),
    pytest.mark.skipif(not can_edit_hosts(), reason="names of the test domain resolve through /etc/hosts: needs root"),
]


class Edge:
    def __init__(self, upstream: str, node: int, directory: Path) -> None:
        self.upstream, self.node = upstream, node  # the broker's address and its node id
        ca = make_ca()
        self.ca = ca.write(directory / "ca.pem")
        issue_cert(ca, f"CN={DOMAIN}", dns_names=(DOMAIN, f"*.{DOMAIN}"), ip_addresses=()).write_pem(
            directory / "server.pem", directory / "server.key")
        self.users = directory / "users.json"
        store = FileCredentialStore(self.users)
        for user in ("alice", "bob"):
            store.upsert_user(user, f"{user}-secret")
        self.lb_port = free_port()
        self.gateway = GatewayThread(upstream, {
            "ssl.keystore.location": str(directory / "server.pem"), "ssl.key.location": str(directory / "server.key"),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "ksgate.credentials.file": str(directory / "users.json"),
            "advertised.listeners": f"SASL_SSL://{BOOTSTRAP}:{self.lb_port}",
            "listener.name.sasl_ssl.ksgate.sni.broker.host.pattern": PATTERN,
            "listener.name.sasl_ssl.ksgate.proxy.protocol": True,
            "listener.name.sasl_ssl.ksgate.proxy.protocol.trusted.networks": "127.0.0.2/32",
            "ksgate.audit.log.allowed": True,
            "connections.max.reauth.ms": 1500,  # KIP-368 re-authentication through the balancer, too
        }, protocol="SASL_SSL")
        self.audit = self.gateway.directory / "audit.log"
        self.balancer = HAProxy(f"127.0.0.1:{self.gateway.port}", port=self.lb_port)

    def client(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": f"{BOOTSTRAP}:{self.lb_port}", "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(self.ca), "sasl.mechanism": "PLAIN", "sasl.username": user,
                "sasl.password": f"{user}-secret"}

    def audit_events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module", params=[pytest.param("tansu", marks=pytest.mark.broker),
                                        pytest.param("kafka", marks=pytest.mark.kafka)])
def edge(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Edge]:
    if request.param == "kafka":
        kafka: KafkaBroker = request.getfixturevalue("kafka")
        running = Edge(kafka.bootstrap("PLAINTEXT"), KAFKA_NODE, tmp_path_factory.mktemp("edge-kafka"))
    else:
        tansu: EmbeddedBroker = request.getfixturevalue("broker")
        running = Edge(tansu.bootstrap, TANSU_NODE, tmp_path_factory.mktemp("edge"))
    with hosts_entries("127.0.0.1", [BOOTSTRAP, PATTERN.replace("{nodeId}", str(running.node))]):
        running.gateway.start()
        try:
            with running.balancer:
                yield running
        finally:
            running.gateway.stop()


def test_confluent_kafka_produces_and_consumes_through_one_port_by_sni(edge: Edge) -> None:
    topic = f"edge-{uuid.uuid4().hex[:6]}"
    producer = Producer(edge.client("alice"))
    for i in range(100):
        producer.produce(topic, f"record-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**edge.client("alice"), "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    for _ in range(300):
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(message.value())
        if len(seen) == 100:
            break
    consumer.close()
    assert sorted(seen) == sorted(f"record-{i}".encode() for i in range(100))  # partitions interleave


def test_kafka_python_produces_and_consumes_through_one_port_by_sni(edge: Edge) -> None:
    topic = f"edge-kp-{uuid.uuid4().hex[:6]}"
    settings: dict[str, Any] = {"bootstrap_servers": f"{BOOTSTRAP}:{edge.lb_port}", "security_protocol": "SASL_SSL",
                                "ssl_cafile": str(edge.ca), "sasl_mechanism": "PLAIN",
                                "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    producer = KafkaProducer(**settings)
    for i in range(20):
        producer.send(topic, f"kp-{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **settings)
    values = [record.value for record in consumer]
    consumer.close()
    assert sorted(values) == sorted(f"kp-{i}".encode() for i in range(20))


def test_metadata_shows_only_broker_names_on_the_balancer_port(edge: Edge) -> None:
    metadata = AdminClient(edge.client("alice")).list_topics(timeout=10)
    assert {(b.id, b.host, b.port) for b in metadata.brokers.values()} == \
        {(edge.node, f"broker-{edge.node}.{DOMAIN}", edge.lb_port)}


def test_the_audit_log_shows_the_clients_address_never_the_balancers(edge: Edge) -> None:
    AdminClient(edge.client("bob")).list_topics(timeout=10)
    hosts = {event["client_host"] for event in edge.audit_events()}
    assert "127.0.0.1" in hosts
    assert "127.0.0.2" not in hosts


def test_a_deny_acl_for_the_clients_host_applies(edge: Edge) -> None:
    topic = f"edge-deny-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(edge.client("alice"))
    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "127.0.0.1",
                      AclOperation.WRITE, AclPermissionType.DENY)
    for future in admin.create_acls([deny]).values():
        future.result(timeout=10)
    producer = Producer({**edge.client("bob"), "message.timeout.ms": 5000})
    errors: list[Any] = []
    producer.produce(topic, b"x", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    assert errors and errors[0] is not None and errors[0].code() == 29  # TOPIC_AUTHORIZATION_FAILED
    assert any(e.get("resource_name") == topic and e["decision"] == "DENIED" and e["client_host"] == "127.0.0.1"
               for e in edge.audit_events())


def test_an_unknown_server_name_gets_no_handshake(edge: Edge) -> None:
    context = ssl.create_default_context(cafile=str(edge.ca))
    for name in (f"evil.{DOMAIN}", f"broker-1x.{DOMAIN}"):
        with socket.create_connection(("127.0.0.1", edge.lb_port), timeout=10) as raw, \
                pytest.raises((ssl.SSLError, ConnectionError)):
            context.wrap_socket(raw, server_hostname=name).close()
    # and a client without SNI (an address instead of a name)
    bare = ssl.create_default_context(cafile=str(edge.ca))
    bare.check_hostname = False
    with socket.create_connection(("127.0.0.1", edge.lb_port), timeout=10) as raw, \
            pytest.raises((ssl.SSLError, ConnectionError)):
        bare.wrap_socket(raw).close()


def test_a_headerless_connection_from_an_untrusted_peer_gets_nothing(edge: Edge) -> None:
    with socket.create_connection(("127.0.0.1", edge.gateway.port), timeout=10) as raw:
        raw.sendall(b"PROXY TCP4 10.9.9.9 127.0.0.1 1234 9092\r\n")  # forged, and from 127.0.0.1: untrusted
        raw.settimeout(10)
        with contextlib.suppress(ConnectionResetError):  # a reset says nothing was served, as EOF does
            assert raw.recv(1) == b""


def test_a_real_client_straight_to_the_gateway_port_cannot_bypass_the_balancer(edge: Edge) -> None:
    admin = AdminClient({**edge.client("alice"), "bootstrap.servers": f"127.0.0.1:{edge.gateway.port}"})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


def test_two_workers_share_the_sni_port_and_each_routes_by_name(edge: Edge, tmp_path: Path) -> None:
    # Worker i serves its metrics on metrics_base + i: every port of the block must be free, not just the first.
    # Not free_port() + 1: bind(0) gives odd ports, and the even one above is among those the kernel hands to
    # outgoing connections; under load one may hold it, and worker 1 then never binds its endpoint.
    port = free_port_block(3)
    metrics_base = port + 1
    tls = edge.gateway.config.listeners[0].settings
    config = tmp_path / "ksgate.yaml"
    config.write_text(yaml.safe_dump({
        "listeners": f"SASL_SSL://127.0.0.1:{port}", "advertised.listeners": f"SASL_SSL://{BOOTSTRAP}:{port}",
        "listener.name.sasl_ssl.ksgate.sni.broker.host.pattern": PATTERN,
        "ssl.keystore.location": tls["ssl.keystore.location"], "ssl.key.location": tls["ssl.key.location"],
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(edge.users),
        "upstream.bootstrap.servers": edge.upstream, "ksgate.metrics.listener": f"127.0.0.1:{metrics_base}",
        "log.level": "WARNING"}))
    log = tmp_path / "gateway.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config), "--workers", "2"],
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        for worker in range(2):
            deadline = time.monotonic() + 30
            while not _ready(metrics_base + worker):
                assert time.monotonic() < deadline, f"worker {worker} never became ready:\n{log.read_text()[-3000:]}"
                time.sleep(0.1)
        settings = {**edge.client("alice"), "bootstrap.servers": f"{BOOTSTRAP}:{port}"}
        for _ in range(4):  # connections land on either worker; every one routes by name
            producer = Producer(settings)
            producer.produce(f"edge-workers-{uuid.uuid4().hex[:6]}", b"x")
            assert producer.flush(20) == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_re_authentication_keeps_working_through_the_balancer(edge: Edge) -> None:
    gateway = edge.gateway.gateway
    before = dict(gateway.ctx.counters.authenticated)
    producer = Producer({**edge.client("alice"), "sasl.mechanism": "SCRAM-SHA-256", "linger.ms": 0})
    topic = f"edge-reauth-{uuid.uuid4().hex[:6]}"
    deadline = time.monotonic() + 5  # several session lifetimes (connections.max.reauth.ms: 1500)
    sent = 0
    while time.monotonic() < deadline:
        producer.produce(topic, str(sent).encode())
        assert producer.flush(5) == 0
        sent += 1
        time.sleep(0.1)  # pacing the workload, not synchronisation
    logins = gateway.ctx.counters.authenticated["User:alice"] - before.get("User:alice", 0)
    # librdkafka holds a bootstrap and a broker connection: more logins than that means re-authentication.
    assert logins > 2


def test_mutual_tls_maps_the_client_certificate_on_the_sni_port(broker: EmbeddedBroker, tmp_path: Path) -> None:
    ca = make_ca()
    ca_pem = ca.write(tmp_path / "ca.pem")
    issue_cert(ca, f"CN={DOMAIN}", dns_names=(DOMAIN, f"*.{DOMAIN}"), ip_addresses=()).write_pem(
        tmp_path / "server.pem", tmp_path / "server.key")
    issue_cert(ca, "CN=Alice,OU=Engineering", dns_names=(), ip_addresses=()).write_pem(
        tmp_path / "client.pem", tmp_path / "client.key")
    port = free_port()
    gateway = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tmp_path / "server.pem"), "ssl.key.location": str(tmp_path / "server.key"),
        "ssl.truststore.location": str(ca_pem), "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([a-zA-Z]+),OU=Engineering$/$1/L,DEFAULT",
        "listeners": f"SSL://127.0.0.1:{port}", "advertised.listeners": f"SSL://{BOOTSTRAP}:{port}",
        "listener.name.ssl.ksgate.sni.broker.host.pattern": PATTERN}, protocol="SSL")
    gateway.port = port
    gateway.start()
    try:
        # Its own names: the edge fixture's, when still set up, may be another upstream's broker id.
        with hosts_entries("127.0.0.1", [BOOTSTRAP, PATTERN.replace("{nodeId}", str(TANSU_NODE))]):
            producer = Producer({"bootstrap.servers": f"{BOOTSTRAP}:{port}", "security.protocol": "SSL",
                                 "ssl.ca.location": str(ca_pem),
                                 "ssl.certificate.location": str(tmp_path / "client.pem"),
                                 "ssl.key.location": str(tmp_path / "client.key")})
            producer.produce(f"edge-mtls-{uuid.uuid4().hex[:6]}", b"x")
            assert producer.flush(20) == 0
            assert set(gateway.gateway.ctx.counters.authenticated) == {"User:alice"}
    finally:
        gateway.stop()
