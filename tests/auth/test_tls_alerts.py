"""A failed server handshake sends its fatal alert before the close, on asyncio's and uvloop's SSL protocols alike,
and its failure class names the certificate problem (auth/tls_handshake.py); loopback sockets, no broker."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import uvloop

from auth.tls_handshake import AlertingSSLContext, certificate_failure, send_handshake_alerts_to
from tests.tls_material import TlsFiles, client_context, write_tls_material

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop,
                                                              "uvloop": uvloop.new_event_loop}


def _server_context(files: TlsFiles) -> ssl.SSLContext:
    context = AlertingSSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.server_cert, files.server_key)
    context.load_verify_locations(files.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _serve_one(loop: asyncio.AbstractEventLoop, listener: socket.socket, context: ssl.SSLContext,
               outcome: list[BaseException | None]) -> None:
    async def serve() -> None:
        sock, _ = await loop.sock_accept(listener)
        sock.setblocking(False)
        send_handshake_alerts_to(sock)
        try:
            transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, sock, ssl=context,
                                                              ssl_handshake_timeout=10)
            outcome.append(None)
            transport.close()
        except (ssl.SSLError, OSError) as exc:
            outcome.append(exc)

    loop.run_until_complete(serve())
    loop.close()


@pytest.mark.parametrize("loop_name", list(LOOPS))
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2], ids=["tls1.3", "tls1.2"])
def test_a_client_without_a_certificate_gets_the_alert_on_either_event_loop(
        tmp_path: Path, loop_name: str, version: ssl.TLSVersion) -> None:
    files = write_tls_material(tmp_path)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    outcome: list[BaseException | None] = []
    server = threading.Thread(target=_serve_one, args=(LOOPS[loop_name](), listener, _server_context(files), outcome))
    server.start()
    client = client_context(files.ca)
    client.minimum_version = client.maximum_version = version
    try:
        with pytest.raises(ssl.SSLError) as raised, client.wrap_socket(
                socket.create_connection(listener.getsockname(), timeout=10), server_hostname="localhost") as tls:
            tls.sendall(b"\0\0\0\0")
            tls.recv(1)  # TLS 1.3: the client's handshake ends before the server checks; the alert comes here
    finally:
        server.join(10)
        listener.close()
    assert raised.value.reason == ("TLSV13_ALERT_CERTIFICATE_REQUIRED" if version is ssl.TLSVersion.TLSv1_3
                                   else "SSLV3_ALERT_HANDSHAKE_FAILURE")
    assert len(outcome) == 1 and isinstance(outcome[0], ssl.SSLError)
    assert certificate_failure(outcome[0]) == "no_certificate"


def _verify_error(code: int) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.verify_code = code
    return exc


@pytest.mark.parametrize(("exc", "failure"), [
    (_verify_error(10), "certificate_expired"),
    (_verify_error(9), "certificate_not_yet_valid"),
    (_verify_error(20), "unknown_ca"),
    (_verify_error(18), "unknown_ca"),
    (_verify_error(23), "bad_certificate"),  # revoked
    (ssl.SSLError(1, "wrong version number"), None),  # not TLS at all: no certificate was looked at
    (ConnectionResetError(), None),
    (TimeoutError(), None),
])
def test_only_certificate_refusals_have_a_failure_class(exc: BaseException, failure: str | None) -> None:
    assert certificate_failure(exc) == failure
