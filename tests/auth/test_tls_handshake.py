"""Real loopback TLS handshakes: mutual TLS identities, protocol limits, and certificate hot reload."""

from __future__ import annotations

import asyncio
import logging
import queue
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from auth.peer_identity import peer_subject
from auth.principal import ANONYMOUS, KafkaPrincipal, SslAuthContext
from auth.principal_builder import DefaultPrincipalBuilder
from auth.ssl_principal_mapping import SslPrincipalMapper
from auth.tls import TlsContextProvider
from tests.tls_material import CertificateAuthority, TlsFiles, client_context, issue_cert, make_ca, write_tls_material

CLIENT_DN = "CN=alice,OU=eng,O=Acme,C=US"


@dataclass(slots=True, frozen=True)
class Accepted:
    subject: str | None
    version: str | None
    cipher: str | None


class TlsEchoServer:
    """A blocking TLS echo server: one thread per connection, handshake results in a queue."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self._context = context
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._results: queue.Queue[Accepted | Exception] = queue.Queue()
        self._closing = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while True:
            conn, _ = self._listener.accept()
            if self._closing:
                conn.close()
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            tls = self._context.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            self._results.put(exc)
            conn.close()
            return
        cipher = tls.cipher()
        self._results.put(Accepted(peer_subject(tls), tls.version(), cipher[0] if cipher else None))
        with tls:
            try:
                while data := tls.recv(4096):
                    tls.sendall(data)
            except OSError:
                pass

    def next_handshake(self) -> Accepted | Exception:
        return self._results.get(timeout=10)

    def close(self) -> None:
        self._closing = True
        socket.create_connection(("127.0.0.1", self.port), timeout=10).close()  # wakes accept()
        self._thread.join(10)
        self._listener.close()


def connect(port: int, context: ssl.SSLContext, server_hostname: str | None = "localhost") -> ssl.SSLSocket:
    return context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                               server_hostname=server_hostname)


def echo(tls: ssl.SSLSocket, payload: bytes = b"ping") -> bytes:
    tls.sendall(payload)
    return tls.recv(4096)


def server_serial(tls: ssl.SSLSocket | ssl.SSLObject) -> int:
    der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
def ca() -> CertificateAuthority:
    return make_ca()


@pytest.fixture
def files(tmp_path: Path, ca: CertificateAuthority) -> TlsFiles:
    return write_tls_material(tmp_path, ca=ca, client_subject=CLIENT_DN)


def provider_for(files: TlsFiles, **extra: str) -> TlsContextProvider:
    config = {"ssl.keystore.location": str(files.server_cert), "ssl.key.location": str(files.server_key),
              "ssl.truststore.location": str(files.ca), **{k.replace("_", "."): v for k, v in extra.items()}}
    return TlsContextProvider.from_settings(config)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[TlsEchoServer] = []

    def start(context: ssl.SSLContext) -> TlsEchoServer:
        servers.append(TlsEchoServer(context))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_mutual_tls_gives_the_server_the_client_dn_and_its_mapped_principal(files: TlsFiles, serve: Any) -> None:
    server = serve(provider_for(files, ssl_client_auth="required").context)
    with connect(server.port, client_context(files.ca, files.client_cert, files.client_key)) as tls:
        assert echo(tls) == b"ping"
    accepted = server.next_handshake()
    assert isinstance(accepted, Accepted)
    assert accepted.subject == CLIENT_DN
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L,DEFAULT")
    builder = DefaultPrincipalBuilder(ssl_mapper=mapper.principal_name)
    assert builder.build(SslAuthContext("SSL", "127.0.0.1", accepted.subject)) == KafkaPrincipal("User", "alice@eng")


def test_requested_client_auth_without_a_certificate_gives_no_subject(files: TlsFiles, serve: Any) -> None:
    server = serve(provider_for(files, ssl_client_auth="requested").context)
    with connect(server.port, client_context(files.ca)) as tls:
        assert echo(tls) == b"ping"
    accepted = server.next_handshake()
    assert isinstance(accepted, Accepted)
    assert accepted.subject is None
    assert DefaultPrincipalBuilder().build(SslAuthContext("SSL", "127.0.0.1", accepted.subject)) == ANONYMOUS


def test_no_client_auth_ignores_the_client_certificate(files: TlsFiles, serve: Any) -> None:
    server = serve(provider_for(files).context)
    with connect(server.port, client_context(files.ca, files.client_cert, files.client_key)) as tls:
        assert echo(tls) == b"ping"
    accepted = server.next_handshake()
    assert isinstance(accepted, Accepted) and accepted.subject is None


def test_required_client_auth_rejects_a_client_without_a_certificate(files: TlsFiles, serve: Any) -> None:
    server = serve(provider_for(files, ssl_client_auth="required").context)
    with connect(server.port, client_context(files.ca)) as tls, pytest.raises(OSError):
        echo(tls)  # TLS 1.3: the client learns of the rejection on its first read
    assert isinstance(server.next_handshake(), ssl.SSLError)


def test_client_certificate_from_an_unknown_ca_is_rejected_even_when_only_requested(
        files: TlsFiles, serve: Any, tmp_path: Path) -> None:
    stranger = write_tls_material(tmp_path / "stranger", client_subject=CLIENT_DN)
    server = serve(provider_for(files, ssl_client_auth="requested").context)
    with connect(server.port, client_context(files.ca, stranger.client_cert, stranger.client_key)) as tls, \
            pytest.raises(OSError):
        echo(tls)
    assert isinstance(server.next_handshake(), ssl.SSLError)


def test_tls_1_2_clients_are_served_by_default_and_refused_when_only_tls_1_3_is_enabled(
        files: TlsFiles, serve: Any) -> None:
    client = client_context(files.ca)
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    default = serve(provider_for(files).context)
    with connect(default.port, client) as tls:
        assert tls.version() == "TLSv1.2"
    only13 = serve(provider_for(files, ssl_enabled_protocols="TLSv1.3").context)
    with pytest.raises(ssl.SSLError):
        connect(only13.port, client)


def test_cipher_suites_limit_what_tls_1_2_negotiates(files: TlsFiles, serve: Any) -> None:
    suite = "ECDHE-ECDSA-AES256-GCM-SHA384"
    server = serve(provider_for(files, ssl_cipher_suites=suite, ssl_enabled_protocols="TLSv1.2").context)
    with connect(server.port, client_context(files.ca)) as tls:
        assert tls.cipher()[0] == suite  # type: ignore[index]


# --- hot reload -------------------------------------------------------------------------------


def replace_server_cert(files: TlsFiles, ca: CertificateAuthority, subject: str = "CN=localhost",
                        dns_names: tuple[str, ...] = ("localhost",)) -> int:
    issued = issue_cert(ca, subject, dns_names=dns_names)
    issued.write_pem(files.server_cert, files.server_key)
    return issued.serial_number


def test_reload_with_the_same_dn_serves_new_handshakes_and_keeps_open_connections(
        files: TlsFiles, ca: CertificateAuthority, serve: Any) -> None:
    provider = provider_for(files)
    old_serial = provider.current.certificate.serial_number
    server = serve(provider.context)  # the context captured once, as a server would
    client = client_context(files.ca)
    with connect(server.port, client) as before:
        assert server_serial(before) == old_serial
        new_serial = replace_server_cert(files, ca)
        assert provider.reload_if_changed() is True
        assert provider.reload_if_changed() is False  # nothing changed since
        with connect(server.port, client) as after:
            assert server_serial(after) == new_serial != old_serial
            assert echo(after, b"new") == b"new"
        assert echo(before, b"still here") == b"still here"


def test_reload_hands_over_handshakes_that_send_no_server_name(
        files: TlsFiles, ca: CertificateAuthority, serve: Any) -> None:
    provider = provider_for(files)
    server = serve(provider.context)
    new_serial = replace_server_cert(files, ca)
    assert provider.reload()
    with connect(server.port, client_context(files.ca, check_hostname=False), server_hostname=None) as tls:
        assert server_serial(tls) == new_serial


@pytest.mark.parametrize("allowed", [False, True])
def test_reload_refuses_a_different_dn_unless_allowed(files: TlsFiles, ca: CertificateAuthority, serve: Any,
                                                      caplog: pytest.LogCaptureFixture, allowed: bool) -> None:
    provider = provider_for(files, ssl_allow_dn_changes=str(allowed).lower())
    old_serial = provider.current.certificate.serial_number
    server = serve(provider.context)
    new_serial = replace_server_cert(files, ca, subject="CN=localhost,O=Other")
    with caplog.at_level(logging.ERROR, logger="ksgate.tls"):
        assert provider.reload() is allowed
    with connect(server.port, client_context(files.ca)) as tls:
        assert server_serial(tls) == (new_serial if allowed else old_serial)
    refused = [r for r in caplog.records if r.name == "ksgate.tls" and "ssl.allow.dn.changes" in r.getMessage()]
    assert bool(refused) is not allowed


def test_dn_comparison_ignores_case_like_x500principal(files: TlsFiles, ca: CertificateAuthority) -> None:
    provider = provider_for(files)
    replace_server_cert(files, ca, subject="CN=LOCALHOST")
    assert provider.reload() is True


@pytest.mark.parametrize("allowed", [False, True])
def test_reload_refuses_different_sans_unless_allowed(files: TlsFiles, ca: CertificateAuthority, serve: Any,
                                                      caplog: pytest.LogCaptureFixture, allowed: bool) -> None:
    provider = provider_for(files, ssl_allow_san_changes=str(allowed).lower())
    old_serial = provider.current.certificate.serial_number
    server = serve(provider.context)
    new_serial = replace_server_cert(files, ca, dns_names=("localhost", "kafka.example.com"))
    with caplog.at_level(logging.ERROR, logger="ksgate.tls"):
        assert provider.reload() is allowed
    with connect(server.port, client_context(files.ca)) as tls:
        assert server_serial(tls) == (new_serial if allowed else old_serial)
    refused = [r for r in caplog.records if r.name == "ksgate.tls" and "ssl.allow.san.changes" in r.getMessage()]
    assert bool(refused) is not allowed


def test_broken_files_keep_the_old_certificate_until_they_are_fixed(
        files: TlsFiles, ca: CertificateAuthority, serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    provider = provider_for(files)
    old_serial = provider.current.certificate.serial_number
    server = serve(provider.context)
    files.server_key.write_text("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
    with caplog.at_level(logging.ERROR, logger="ksgate.tls"):
        assert provider.reload_if_changed() is False
    assert any("keeping the current certificate" in r.getMessage() for r in caplog.records)
    assert provider.reload_if_changed() is False  # the failed files are not retried until they change
    with connect(server.port, client_context(files.ca)) as tls:
        assert server_serial(tls) == old_serial
    new_serial = replace_server_cert(files, ca)
    assert provider.reload_if_changed() is True
    with connect(server.port, client_context(files.ca)) as tls:
        assert server_serial(tls) == new_serial


async def test_asyncio_server_created_once_serves_the_reloaded_certificate(
        files: TlsFiles, ca: CertificateAuthority) -> None:
    provider = provider_for(files, ssl_client_auth="required")
    subjects: asyncio.Queue[str | None] = asyncio.Queue()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await subjects.put(peer_subject(writer.get_extra_info("ssl_object")))
        while data := await reader.read(4096):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=provider.context)
    port = server.sockets[0].getsockname()[1]
    client = client_context(files.ca, files.client_cert, files.client_key)

    async def open_client() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost"), 10)

    async with server:
        reader1, writer1 = await open_client()
        old_serial = server_serial(writer1.get_extra_info("ssl_object"))
        assert await asyncio.wait_for(subjects.get(), 10) == CLIENT_DN
        new_serial = replace_server_cert(files, ca)
        assert provider.reload()
        reader2, writer2 = await open_client()
        assert server_serial(writer2.get_extra_info("ssl_object")) == new_serial != old_serial
        assert await asyncio.wait_for(subjects.get(), 10) == CLIENT_DN  # mTLS still verified after hand-over
        for reader, writer in ((reader1, writer1), (reader2, writer2)):
            writer.write(b"ping")
            assert await asyncio.wait_for(reader.readexactly(4), 10) == b"ping"
            writer.close()
            await writer.wait_closed()


@pytest.mark.skipif(shutil.which("keytool") is None, reason="needs a JDK's keytool")
def test_pkcs12_stores_made_by_keytool_serve_mutual_tls(tmp_path: Path, serve: Any) -> None:
    def keytool(*args: str) -> None:
        subprocess.run(["keytool", "-noprompt", "-storetype", "PKCS12", "-storepass", "changeit", *args],
                       check=True, capture_output=True, timeout=120)

    keystore, truststore, exported = tmp_path / "broker.p12", tmp_path / "trust.p12", tmp_path / "broker.pem"
    keytool("-genkeypair", "-alias", "broker", "-keystore", str(keystore), "-keyalg", "EC", "-groupname",
            "secp256r1", "-dname", "CN=localhost,OU=kafka,O=Acme", "-ext", "SAN=dns:localhost", "-validity", "2")
    keytool("-exportcert", "-rfc", "-alias", "broker", "-keystore", str(keystore), "-file", str(exported))
    # The broker trusts its own (self-signed) certificate, so it can also serve as the client's.
    keytool("-importcert", "-alias", "broker", "-file", str(exported), "-keystore", str(truststore))
    provider = TlsContextProvider.from_settings({
        "ssl.keystore.location": str(keystore), "ssl.keystore.type": "PKCS12", "ssl.keystore.password": "changeit",
        "ssl.truststore.location": str(truststore), "ssl.truststore.type": "PKCS12",
        "ssl.truststore.password": "changeit", "ssl.client.auth": "required"})
    assert provider.current.subject == "CN=localhost,OU=kafka,O=Acme"
    server = serve(provider.context)
    with connect(server.port, client_context(exported)) as tls, pytest.raises(OSError):
        echo(tls)  # no client certificate: refused
    assert isinstance(server.next_handshake(), ssl.SSLError)
    key, _, _ = pkcs12.load_key_and_certificates(keystore.read_bytes(), b"changeit")
    assert key is not None
    client_key = tmp_path / "client.key"
    client_key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                             serialization.NoEncryption()))
    with connect(server.port, client_context(exported, exported, client_key)) as tls:
        assert echo(tls) == b"ping"
    accepted = server.next_handshake()
    assert isinstance(accepted, Accepted) and accepted.subject == "CN=localhost,OU=kafka,O=Acme"
