"""The compose client's probe of the upstream leg (scripts/compose/client.py), against loopback stand-ins.

The probe passes only for a listener that is TLS and answers nothing before SASL, as Kafka's SASL_SSL listener does;
a plaintext broker (the Tansu stand-in of old) or a TLS listener without SASL must fail it.
"""

from __future__ import annotations

import importlib.util
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

from tests.tls_material import write_tls_material

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def client() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compose_client", ROOT / "scripts/compose/client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


def _read_frame(sock: socket.socket) -> bytes:
    return _read(sock, struct.unpack(">i", _read(sock, 4))[0])


def _serve_one(conn: socket.socket, tls: ssl.SSLContext | None, answers: bool) -> None:
    conn.settimeout(10)
    try:
        sock = tls.wrap_socket(conn, server_side=True) if tls else conn
        request = _read_frame(sock)
        if answers:  # a response header: the request's correlation id
            sock.sendall(struct.pack(">ii", 4, struct.unpack(">i", request[4:8])[0]))
        sock.close()
    except (OSError, ssl.SSLError, struct.error):  # plaintext bytes on a TLS listener, a reset
        conn.close()


@contextmanager
def listener(tls: ssl.SSLContext | None, answers: bool) -> Iterator[tuple[str, int]]:
    """A loopback listener serving the probe's two connections."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        for _ in range(2):
            try:
                conn, _ = server.accept()
            except OSError:
                return
            _serve_one(conn, tls, answers)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[:2]
    finally:
        server.shutdown(socket.SHUT_RDWR)  # wakes an accept() still waiting for a connection the probe skipped
        server.close()
        thread.join(10)


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    files = write_tls_material(tmp_path_factory.mktemp("tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(files.server_cert, files.server_key)
    return context


def test_a_tls_listener_that_answers_nothing_before_sasl_passes(client: ModuleType,
                                                                 tls_server: ssl.SSLContext) -> None:
    with listener(tls_server, answers=False) as address:
        assert client.upstream_requires_sasl_ssl(address) is True


def test_a_plaintext_broker_fails(client: ModuleType) -> None:
    with listener(None, answers=True) as address:
        assert client.upstream_requires_sasl_ssl(address) is False


def test_a_tls_listener_that_answers_without_sasl_fails(client: ModuleType, tls_server: ssl.SSLContext) -> None:
    with listener(tls_server, answers=True) as address:
        assert client.upstream_requires_sasl_ssl(address) is False
