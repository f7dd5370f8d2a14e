"""A client certificate refused in the TLS handshake (#18 item 8): the client gets the fatal alert that names
the problem, and the audit log an authentication failure (mechanism SSL), against a real gateway on Tansu.

Without a certificate, with one from a foreign CA, with an expired one; Python's ssl (TLS 1.3 and 1.2)
and confluent-kafka (librdkafka) as clients.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.tls_material import client_context, issue_cert, make_ca, write_tls_material
from tests.wire_client import request_frame


@dataclass(slots=True, frozen=True)
class Refusal:
    """A client certificate the gateway refuses, and what it must say about it."""

    name: str
    cert: Path | None
    key: Path | None
    failure: str  # the audit record's failure class
    alert_13: str  # the alert OpenSSL names on the client, TLS 1.3
    alert_12: str  # … and TLS 1.2


@dataclass(slots=True)
class Gateway:
    thread: GatewayThread
    ca: Path
    refusals: dict[str, Refusal]
    client_cert: Path
    client_key: Path

    def audit_failures(self) -> list[dict[str, Any]]:
        path = self.thread.directory / "audit.log"
        lines = path.read_text().splitlines() if path.exists() else []
        return [e for e in map(json.loads, filter(None, lines))
                if e["event"] == "authentication" and e["decision"] == "FAILED"]

    def wait_for_failure(self, failure: str, before: int) -> dict[str, Any]:
        """The first audit failure of class ``failure`` after the ``before`` failures already there: the
        gateway writes it once the event loop has the handshake's error, just after the client's alert."""
        deadline = time.monotonic() + 10
        while True:
            found = [e for e in self.audit_failures()[before:] if e["failure"] == failure]
            if found or time.monotonic() > deadline:
                assert found, f"no {failure} authentication failure in the audit log"
                return found[0]
            time.sleep(0.02)


@pytest.fixture(scope="module")
def gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    directory = tmp_path_factory.mktemp("tls-refusals")
    ca = make_ca()
    files = write_tls_material(directory, ca=ca, client_subject="CN=alice")
    issue_cert(make_ca("CN=someone else's CA"), "CN=mallory", dns_names=(), ip_addresses=()).write_pem(
        directory / "foreign.pem", directory / "foreign.key")
    # Signed by the gateway's own CA, but its validity ended a day ago.
    issue_cert(ca, "CN=alice", dns_names=(), ip_addresses=(), valid_days=-1).write_pem(
        directory / "expired.pem", directory / "expired.key")
    refusals = {r.name: r for r in (
        Refusal("none", None, None, "no_certificate", "CERTIFICATE_REQUIRED", "HANDSHAKE_FAILURE"),
        Refusal("foreign-ca", directory / "foreign.pem", directory / "foreign.key", "unknown_ca",
                "UNKNOWN_CA", "UNKNOWN_CA"),
        Refusal("expired", directory / "expired.pem", directory / "expired.key", "certificate_expired",
                "CERTIFICATE_EXPIRED", "CERTIFICATE_EXPIRED"),
    )}
    thread = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(files.server_cert), "ssl.key.location": str(files.server_key),
        "ssl.truststore.location": str(files.ca), "ssl.client.auth": "required"}, protocol="SSL").start()
    yield Gateway(thread, files.ca, refusals, files.client_cert, files.client_key)
    thread.stop()


REFUSALS = ("none", "foreign-ca", "expired")


def _api_versions_over(tls: ssl.SSLSocket) -> bytes:
    """Send ApiVersions and read: with TLS 1.3 the client's side of the handshake ends before the
    server has checked its certificate, so the alert arrives on the first read."""
    tls.sendall(request_frame(ApiKey.API_VERSIONS, 3, 1, {"client_software_name": "t",
                                                          "client_software_version": "1"}))
    return tls.recv(4)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2], ids=["tls1.3", "tls1.2"])
@pytest.mark.parametrize("name", REFUSALS)
def test_python_ssl_gets_the_alert_naming_the_certificate_problem_and_the_refusal_is_audited(
        gateway: Gateway, name: str, version: ssl.TLSVersion) -> None:
    refusal = gateway.refusals[name]
    context = client_context(gateway.ca, refusal.cert, refusal.key)
    context.minimum_version = context.maximum_version = version
    before = len(gateway.audit_failures())
    connection = socket.create_connection(("127.0.0.1", gateway.thread.port), timeout=10)
    with pytest.raises(ssl.SSLError) as raised, context.wrap_socket(connection, server_hostname="localhost") as tls:
        _api_versions_over(tls)
    alert = refusal.alert_13 if version is ssl.TLSVersion.TLSv1_3 else refusal.alert_12
    assert "ALERT" in str(raised.value.reason) and alert in str(raised.value.reason), raised.value
    record = gateway.wait_for_failure(refusal.failure, before)
    assert (record["mechanism"], record["client_host"], record["listener"]) == ("SSL", "127.0.0.1", "SSL")
    assert record["principal"] is None and record["attempted_user"] is None


def test_a_valid_certificate_is_still_served(gateway: Gateway) -> None:
    context = client_context(gateway.ca, gateway.client_cert, gateway.client_key)
    with context.wrap_socket(socket.create_connection(("127.0.0.1", gateway.thread.port), timeout=10),
                             server_hostname="localhost") as tls:
        assert len(_api_versions_over(tls)) == 4  # a response's size prefix


@pytest.mark.parametrize("name", REFUSALS)
def test_confluent_kafka_reports_the_alert_naming_the_certificate_problem(gateway: Gateway, name: str) -> None:
    refusal = gateway.refusals[name]
    errors: list[str] = []
    settings: dict[str, Any] = {
        "bootstrap.servers": gateway.thread.bootstrap, "security.protocol": "SSL",
        "ssl.ca.location": str(gateway.ca), "error_cb": lambda error: errors.append(str(error)),
        "reconnect.backoff.ms": 2000, "log_level": 0}
    if refusal.cert is not None:
        settings.update({"ssl.certificate.location": str(refusal.cert), "ssl.key.location": str(refusal.key)})
    before = len(gateway.audit_failures())
    admin = AdminClient(settings)
    wanted = refusal.alert_13.lower().replace("_", " ")  # OpenSSL's text: "tlsv13 alert certificate required"
    deadline = time.monotonic() + 15
    while not any(wanted in e for e in errors) and time.monotonic() < deadline:
        admin.poll(0.2)
    assert any(wanted in e for e in errors), errors
    assert gateway.wait_for_failure(refusal.failure, before)["client_host"] == "127.0.0.1"
