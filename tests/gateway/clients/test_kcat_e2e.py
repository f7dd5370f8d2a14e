"""Acceptance: Debian's own kcat (librdkafka 2.0.2) logs in with SCRAM over SASL_SSL, as the README tells users to.

librdkafka before 2.6.1 repeats the client nonce in its SCRAM client-final message
(librdkafka PR #4895); the gateway accepts exactly that form unless switched off.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from auth.cert_tools import TlsFiles, write_tls_material
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from tests.harness import GatewayThread

KCAT = "/usr/bin/kcat"  # the distribution's package, whatever librdkafka the venv's client bundles
LEGACY_NONCE = "ksgate.sasl.scram.legacy.librdkafka.nonce.enable"

pytestmark = pytest.mark.skipif(shutil.which(KCAT) is None,
                                reason="Debian's kcat is not installed (scripts/test.sh installs it)")


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TlsFiles]:
    directory = tmp_path_factory.mktemp("kcat")
    tls = write_tls_material(directory)
    FileCredentialStore(directory / "users.json").upsert_user("alice", "alice-secret")
    return directory, tls


def _gateway(broker: EmbeddedBroker, directory: Path, tls: TlsFiles, **extra: object) -> GatewayThread:
    return GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "ksgate.credentials.file": str(directory / "users.json"),
        "connection.failed.authentication.delay.ms": 10, **extra,
    }, protocol="SASL_SSL", advertised_host="localhost").start()


@pytest.fixture(scope="module")
def sasl_ssl_gateway(broker: EmbeddedBroker, material: tuple[Path, TlsFiles]) -> Iterator[GatewayThread]:
    running = _gateway(broker, *material)
    yield running
    running.stop()


def _kcat_list(gateway: GatewayThread, directory: Path, tls: TlsFiles, password: str = "alice-secret"
               ) -> subprocess.CompletedProcess[str]:
    """``kcat -F alice.properties -L``, the README's command, with a librdkafka property file."""
    properties = directory / f"alice-{gateway.port}.properties"
    properties.write_text(
        f"bootstrap.servers={gateway.bootstrap}\nsecurity.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.username=alice\nsasl.password={password}\nssl.ca.location={tls.ca}\n")
    return subprocess.run([KCAT, "-F", str(properties), "-L", "-m", "8"], capture_output=True, text=True,
                          timeout=60, check=False)


def test_debians_kcat_lists_metadata_through_sasl_ssl_scram(sasl_ssl_gateway: GatewayThread,
                                                           material: tuple[Path, TlsFiles]) -> None:
    result = _kcat_list(sasl_ssl_gateway, *material)
    assert result.returncode == 0, result.stderr
    assert "Metadata for all topics" in result.stdout
    assert "brokers:" in result.stdout
    assert sasl_ssl_gateway.gateway.ctx.counters.authenticated.get("User:alice", 0) >= 1
    text = sasl_ssl_gateway.gateway.ctx.metrics.render()
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="SCRAM-SHA-256"}' in text
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="SCRAM-SHA-256"} 0\n' not in text


def _audit(gateway: GatewayThread) -> list[dict[str, Any]]:
    path = gateway.directory / "audit.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_debians_kcat_with_a_wrong_password_is_still_refused(broker: EmbeddedBroker,
                                                            material: tuple[Path, TlsFiles]) -> None:
    gateway = _gateway(broker, *material)
    try:
        result = _kcat_list(gateway, *material, password="wrong")
        assert result.returncode != 0
        assert "Authentication failed" in result.stderr
        failures = {event["failure"] for event in _audit(gateway) if event["event"] == "authentication"}
        assert failures == {"bad_credentials"}
    finally:
        gateway.stop()


def test_the_legacy_form_is_refused_when_switched_off(broker: EmbeddedBroker,
                                                      material: tuple[Path, TlsFiles]) -> None:
    gateway = _gateway(broker, *material, **{LEGACY_NONCE: False})
    try:
        result = _kcat_list(gateway, *material)
        assert result.returncode != 0
        assert "Authentication failed" in result.stderr
        assert gateway.gateway.ctx.counters.authentication_failures >= 1
        # The audit tells a nonce mismatch from a wrong password.
        failures = {event["failure"] for event in _audit(gateway) if event["event"] == "authentication"}
        assert failures == {"nonce_mismatch"}
    finally:
        gateway.stop()
