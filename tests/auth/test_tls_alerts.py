"""A failed server handshake sends its fatal alert before the close, on asyncio's and uvloop's SSL protocols alike,
and its failure class names the certificate problem (auth/tls_handshake.py); loopback sockets, no broker."""

from __future__ import annotations

import asyncio
import contextvars
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


def _pump(source: ssl.MemoryBIO, sink: ssl.MemoryBIO) -> None:
    if data := source.read():
        sink.write(data)


def test_a_completed_handshake_keeps_no_alert_route(tmp_path: Path) -> None:
    # The route (the socket and the outgoing BIO) is for a failing handshake's alert only; kept by each
    # open connection it was ~180 bytes of every idle TLS connection.
    files = write_tls_material(tmp_path)
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server_context = _server_context(files)
    server_context.verify_mode = ssl.CERT_NONE
    left, right = socket.socketpair()
    try:
        def wrap() -> ssl.SSLObject:  # in a context of its own: the route does not outlive this test
            send_handshake_alerts_to(left)
            return server_context.wrap_bio(server_in, server_out, server_side=True)

        server = contextvars.Context().run(wrap)
        client = client_context(files.ca).wrap_bio(client_in, client_out, server_hostname="localhost")
        assert server._alert_route is not None  # type: ignore[attr-defined]  # armed while the handshake runs
        done = {"client": False, "server": False}
        for _ in range(10):
            for name, end in (("client", client), ("server", server)):
                if not done[name]:
                    try:
                        end.do_handshake()
                        done[name] = True
                    except ssl.SSLWantReadError:
                        pass
            _pump(client_out, server_in)
            _pump(server_out, client_in)
            if all(done.values()):
                break
        assert all(done.values())
        assert server._alert_route is None  # type: ignore[attr-defined]
    finally:
        left.close()
        right.close()
