"""``ksgate init --kafka-host``: the broker side of docker-compose.yml's SASL_SSL upstream leg.

The keystore must open with the password in its credentials file (as apache/kafka reads it), carry a certificate for
the host ksgate dials that chains to the CA ksgate trusts, and the two copies of the gateway's password must agree.
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from gateway.commands.cli import main
from gateway.commands.init_upstream import UpstreamLayout
from tests.tls_material import IssuedCertificate, client_context


def _init(root: Path, *extra: str) -> UpstreamLayout:
    assert main(["init", "--dir", str(root), *extra]) == 0
    return UpstreamLayout(root)


def _keystore(layout: UpstreamLayout) -> IssuedCertificate:
    password = layout.broker_keystore_creds.read_bytes()
    key, cert, chain = pkcs12.load_key_and_certificates(layout.broker_keystore.read_bytes(), password)
    assert key is not None and cert is not None and chain
    return IssuedCertificate(cert, key, chain[0])  # type: ignore[arg-type]


def test_init_writes_kafkas_keystore_and_the_gateways_password(tmp_path: Path) -> None:
    layout = _init(tmp_path, "--kafka-host", "kafka")
    issued = _keystore(layout)
    names = issued.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["kafka"]
    ca = x509.load_pem_x509_certificate(layout.gateway_ca.read_bytes())
    issued.certificate.verify_directly_issued_by(ca)
    assert layout.gateway_ca.read_bytes() != (tmp_path / "certs/ca.pem").read_bytes(), \
        "the upstream leg must not trust the clients' CA"
    password = layout.gateway_password.read_text()
    assert len(password) >= 32 and password == layout.broker_gateway_password.read_text()
    assert password != _init(tmp_path.parent / "other", "--kafka-host", "kafka").gateway_password.read_text()
    assert layout.gateway_password.stat().st_mode & 0o077 == 0, "the gateway's password is readable by others"
    # The broker runs under its image's uid, not init's: its files must be readable by others.
    for path in (layout.broker_keystore, layout.broker_keystore_creds, layout.broker_gateway_password):
        assert path.stat().st_mode & 0o004, f"{path.name} is unreadable for the broker's user"


def _handshake(tmp_path: Path, layout: UpstreamLayout, server_hostname: str) -> str | None:
    """A TLS handshake of a client trusting the upstream CA with a server presenting Kafka's keystore."""
    issued = _keystore(layout)
    issued.write_pem(tmp_path / "kafka.pem", tmp_path / "kafka.key")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "kafka.pem", tmp_path / "kafka.key")
    server_side, client_side = socket.socketpair()
    server_side.settimeout(10)

    def serve() -> None:
        try:
            server_context.wrap_socket(server_side, server_side=True).close()
        except (ssl.SSLError, OSError):  # the client refused the certificate
            server_side.close()

    server = threading.Thread(target=serve)
    server.start()
    try:
        with client_context(layout.gateway_ca).wrap_socket(client_side, server_hostname=server_hostname) as tls:
            return tls.version()
    finally:
        client_side.close()
        server.join(10)


def test_a_client_trusting_the_upstream_ca_accepts_kafkas_certificate_for_kafka_only(tmp_path: Path) -> None:
    layout = _init(tmp_path, "--kafka-host", "kafka")
    assert _handshake(tmp_path, layout, "kafka") is not None
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tmp_path, layout, "elsewhere")


def test_a_second_run_keeps_the_upstream_files(tmp_path: Path) -> None:
    layout = _init(tmp_path, "--kafka-host", "kafka")
    before = {path: path.read_bytes() for path in layout.files()}
    _init(tmp_path, "--kafka-host", "kafka")
    assert {path: path.read_bytes() for path in layout.files()} == before


def test_a_missing_file_renews_them_all_so_they_still_match(tmp_path: Path) -> None:
    layout = _init(tmp_path, "--kafka-host", "kafka")
    old_password = layout.gateway_password.read_text()
    layout.broker_gateway_password.unlink()
    _init(tmp_path, "--kafka-host", "kafka")
    assert layout.gateway_password.read_text() == layout.broker_gateway_password.read_text() != old_password
    ca = x509.load_pem_x509_certificate(layout.gateway_ca.read_bytes())
    _keystore(layout).certificate.verify_directly_issued_by(ca)


def test_without_kafka_host_init_makes_no_upstream_files(tmp_path: Path) -> None:
    layout = _init(tmp_path)
    assert not any(path.exists() for path in layout.files())
