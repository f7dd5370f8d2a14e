"""configs/production-sasl-ssl.yaml, as docs/production.md tells an operator to run it, against Apache Kafka
over SASL_SSL: the first super user created in the replicated store, ``ksgate run``, records relayed.

Only what differs between the example deployment and the test kit's loopback cluster comes from KSGATE_*
variables (addresses, files, the single node's replication factor); the file itself is read unchanged."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from auth.cert_tools import issue_cert, make_ca
from gateway.commands.embedded_broker import free_port
from gateway.config import load_config
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.clients import read_back, round_trip
from tests.harness import free_port_block

ROOT = Path(__file__).resolve().parents[3]
CONFIG = ROOT / "configs" / "production-sasl-ssl.yaml"
ADMIN, ADMIN_PASSWORD = "platform-admin", "platform-admin-pw-1"
READY_TIMEOUT_S = 90.0
TOPICS = "production-"  # what the test's clients use, as an application's prefix would be
# docs/production.md's rights for the gateway's own principal, as kafka-acls arguments ({store}: its topic).
GATEWAY_RIGHTS = (
    ("--operation", "All", "--topic", TOPICS, "--resource-pattern-type", "prefixed"),
    ("--operation", "All", "--group", TOPICS, "--resource-pattern-type", "prefixed"),
    ("--operation", "All", "--transactional-id", TOPICS, "--resource-pattern-type", "prefixed"),
    ("--operation", "Read", "--operation", "Write", "--operation", "Describe", "--operation", "Create",
     "--topic", "{store}"),
)


def _environment(kafka: KafkaBroker, directory: Path, port: int, metrics_port: int) -> dict[str, str]:
    ca = make_ca("CN=ksgate production test CA")
    ca.write(directory / "ca.pem")
    issue_cert(ca, "CN=localhost", dns_names=("localhost",), ip_addresses=("127.0.0.1",)).write_pem(
        directory / "server.pem", directory / "server.key")
    variables = {
        "KSGATE_LISTENERS": f"SASL_SSL://127.0.0.1:{port}",
        "KSGATE_ADVERTISED_LISTENERS": f"SASL_SSL://localhost:{port}",
        "KSGATE_SSL_KEYSTORE_LOCATION": str(directory / "server.pem"),
        "KSGATE_SSL_KEY_LOCATION": str(directory / "server.key"),
        "KSGATE_UPSTREAM_BOOTSTRAP_SERVERS": kafka.bootstrap("SASL_SSL"),
        "KSGATE_UPSTREAM_SSL_TRUSTSTORE_LOCATION": str(kafka.ca),
        "KSGATE_SECURITY_STORE_TOPIC": f"_ksgate_security_{uuid.uuid4().hex[:8]}",
        "KSGATE_SECURITY_STORE_REPLICATION_FACTOR": "1",  # a single-node cluster
        "KSGATE_DELEGATION_TOKEN_SECRET_KEY": uuid.uuid4().hex,
        "KSGATE_AUDIT_LOG_FILE": str(directory / "audit.log"),
        "KSGATE_METRICS_LISTENER": f"127.0.0.1:{metrics_port}",
    }
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("KSGATE_")}
    return {**inherited, **variables, "PYTHONPATH": str(ROOT)}


def _wait_ready(process: subprocess.Popen[bytes], metrics_port: int, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"ksgate run exited {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError, urllib.error.URLError), urllib.request.urlopen(
                f"http://127.0.0.1:{metrics_port}/readyz", timeout=2) as answer:
            if answer.status == 200:
                return
        with contextlib.suppress(subprocess.TimeoutExpired):  # the next probe, or the process's death
            process.wait(0.25)
    pytest.fail(f"ksgate was not ready within {READY_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def _running_gateway(environment: dict[str, str], metrics_port: int, log: Path) -> Iterator[None]:
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(CONFIG)],
                                   env=environment, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        _wait_ready(process, metrics_port, log)
        yield
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_file_is_only_overridden_where_the_test_cluster_differs() -> None:
    # Read as written (no environment): SASL_SSL both ways, deny by default, the replicated store.
    config = load_config(CONFIG, env={"KSGATE_UPSTREAM_SASL_PASSWORD": "x"})
    settings = config.settings
    assert settings["upstream.security.protocol"] == "SASL_SSL"
    assert settings["ksgate.security.store"] == "KAFKA"
    assert settings["allow.everyone.if.no.acl.found"] is False
    assert settings["upstream.ssl.endpoint.identification.algorithm"] == "https"


def _transaction(client: dict[str, str], topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({**client, "transactional.id": f"{TOPICS}tx-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value)
    producer.commit_transaction(30)


def _group_read(client: dict[str, str], topic: str, count: int) -> list[bytes]:
    """Read ``count`` records of ``topic`` as a member of a new group, committing its offsets."""
    from confluent_kafka import Consumer

    consumer = Consumer({**client, "group.id": f"{TOPICS}group-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            got += [m.value() or b"" for m in consumer.consume(count - len(got), 1.0) if m.error() is None]
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def _gateway_principal_on(kafka: KafkaBroker, store_topic: str) -> tuple[str, str]:
    """A SCRAM user on the cluster with exactly the documented rights (not the kit's super user)."""
    user, password = f"ksgate-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    admin = ["--bootstrap-server", kafka.bootstrap("SASL_SSL")]
    kafka.run_tool("org.apache.kafka.tools.ConfigCommand", [
        *admin, "--alter", "--entity-type", "users", "--entity-name", user,
        "--add-config", f"SCRAM-SHA-512=[password={password}]"], kafka.tool_properties())
    for rights in GATEWAY_RIGHTS:
        kafka.run_tool("org.apache.kafka.tools.AclCommand", [
            *admin, "--add", "--allow-principal", f"User:{user}", *(a.format(store=store_topic) for a in rights)],
            kafka.tool_properties())
    return user, password


def test_production_config_relays_to_kafka_over_sasl_ssl(kafka: KafkaBroker, tmp_path: Path) -> None:
    port, metrics_port = free_port_block(8), free_port()
    environment = _environment(kafka, tmp_path, port, metrics_port)
    user, password = _gateway_principal_on(kafka, environment["KSGATE_SECURITY_STORE_TOPIC"])
    environment.update({"KSGATE_UPSTREAM_SASL_USERNAME": user, "KSGATE_UPSTREAM_SASL_PASSWORD": password})
    # The first super user goes into the replicated store before the gateway serves anyone.
    subprocess.run([sys.executable, "-m", "gateway", "users", "add", "--config", str(CONFIG), ADMIN,
                    "--password-stdin"], input=ADMIN_PASSWORD.encode(), env=environment, cwd=ROOT,
                   check=True, capture_output=True, timeout=120)
    client = {"bootstrap.servers": f"localhost:{port}", "security.protocol": "SASL_SSL",
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": ADMIN, "sasl.password": ADMIN_PASSWORD,
              "ssl.ca.location": str(tmp_path / "ca.pem")}
    topic = f"{TOPICS}{uuid.uuid4().hex[:6]}"
    with _running_gateway(environment, metrics_port, tmp_path / "ksgate.log"):
        assert round_trip(client, topic, 10) == [f"record-{i}".encode() for i in range(10)]
        _transaction(client, topic, [b"tx-0", b"tx-1"])  # the transactional-id and group rights
        assert _group_read(client, topic, 12) == [f"record-{i}".encode() for i in range(10)] + [b"tx-0", b"tx-1"]
    # The records are on the cluster itself, read there directly.
    direct = kafka.client_config("SASL_SSL")
    assert read_back(direct, topic, 10) == [f"record-{i}".encode() for i in range(10)]
