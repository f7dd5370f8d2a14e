"""A TLS handshake flood from one address pauses that address, not the others: through a real gateway.

The flooder is 127.0.0.1, the honest client 127.0.0.2 (loopback answers all of 127/8).  With a
budget of one handshake at once and one per 100 s, the flooder's later connections are accepted
and wait; the honest client's connection, accepted after them, is answered while they still wait.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator

import pytest

from auth.cert_tools import TlsFiles
from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.api_keys import ApiKey
from tests.gateway.edge.handshake_budget.kit import budget_gateway
from tests.harness import GatewayThread
from tests.wire_client import request_frame

API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}
FLOODER, HONEST = "127.0.0.1", "127.0.0.2"
QUEUE = 2


@pytest.fixture
def gateway(broker: EmbeddedBroker, tls: TlsFiles) -> Iterator[GatewayThread]:
    running = budget_gateway(broker, tls, queue=QUEUE)
    try:
        yield running
    finally:
        running.stop()


def _tls_connection(gateway: GatewayThread, tls: TlsFiles, source: str) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", gateway.port), timeout=30, source_address=(source, 0))
    return ssl.create_default_context(cafile=str(tls.ca)).wrap_socket(raw, server_hostname="localhost")


def _answered(sock: ssl.SSLSocket) -> bool:
    sock.sendall(request_frame(ApiKey.API_VERSIONS, 3, 7, API_VERSIONS))
    return len(sock.recv(4)) == 4  # the response's size prefix


def _metric(gateway: GatewayThread, name: str, *labels: str) -> float:
    value: float = gateway.call(getattr(gateway.gateway.ctx.metrics, name).value, tuple(labels))
    return value


def test_the_flooding_address_waits_while_another_address_is_answered(gateway: GatewayThread,
                                                                       tls: TlsFiles) -> None:
    first = _tls_connection(gateway, tls, FLOODER)  # the burst: handshaken at once
    # Then connections the flooder's budget has no slot for: accepted (TCP), their handshake deferred.
    waiting = [socket.create_connection(("127.0.0.1", gateway.port), source_address=(FLOODER, 0))
               for _ in range(QUEUE)]
    try:
        honest = _tls_connection(gateway, tls, HONEST)  # accepted after the flooder's: the backlog is FIFO
        with honest:
            assert _answered(honest)
            # answered while every one of the flooder's deferred connections still waits
            assert gateway.call(gateway.gateway.handshake_budget.waiting, FLOODER) == QUEUE
            assert gateway.call(gateway.gateway.handshake_budget.waiting, HONEST) == 0
            assert _metric(gateway, "tls_handshakes_waiting") == QUEUE
            assert _metric(gateway, "tls_handshakes_deferred", "SSL") == QUEUE
            # and the loop has not taken them: only the first and the honest one are its connections
            assert gateway.call(lambda: len(gateway.gateway._connections)) == 2
        with first:
            assert _answered(first)  # the offender is paused, not cut off
    finally:
        for sock in waiting:
            sock.close()


def test_beyond_its_queue_a_flooding_address_is_refused_at_accept_and_counted(gateway: GatewayThread,
                                                                              tls: TlsFiles) -> None:
    first = _tls_connection(gateway, tls, FLOODER)
    waiting = [socket.create_connection(("127.0.0.1", gateway.port), source_address=(FLOODER, 0))
               for _ in range(QUEUE)]
    try:
        with socket.create_connection(("127.0.0.1", gateway.port), source_address=(FLOODER, 0)) as over:
            over.settimeout(30)
            with contextlib.suppress(ConnectionResetError):  # closed at accept, before any TLS byte
                assert over.recv(1) == b""
        assert _metric(gateway, "connections_refused", "SSL", "tls_handshake_queue_per_ip") == 1
        with _tls_connection(gateway, tls, HONEST) as honest:
            assert _answered(honest)
    finally:
        first.close()
        for sock in waiting:
            sock.close()
