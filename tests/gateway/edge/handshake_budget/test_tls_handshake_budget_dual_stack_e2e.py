"""On a dual-stack listener the TLS handshake budget is per client address, however it is spelt.

A client connecting over IPv4 and one connecting to the IPv4-mapped address ::ffff:127.0.0.1 are
the same address, 127.0.0.1 (auth/client_address.py): they draw on one budget, so a flooder
gains nothing by alternating spellings.  ::1 is another address: a 127.0.0.1 flooder does not
defer it.  Asserted on the budget's own counters and the gateway's metrics, not on timings.
"""

from __future__ import annotations

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
FLOODER, MAPPED, HONEST = "127.0.0.1", "::ffff:127.0.0.1", "::1"


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind((HONEST, 0))
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")


@pytest.fixture
def gateway(broker: EmbeddedBroker, tls: TlsFiles) -> Iterator[GatewayThread]:
    running = budget_gateway(broker, tls, bind_host="::")  # dual-stack: IPv6 and IPv4
    try:
        yield running
    finally:
        running.stop()


def _tcp(gateway: GatewayThread, host: str) -> socket.socket:
    """A TCP connection to ``host`` (the gateway's port) from ``host`` itself, as AF_INET6 unless dotted."""
    family = socket.AF_INET if "." in host and ":" not in host else socket.AF_INET6
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.bind((host, 0))
    sock.connect((host, gateway.port))
    return sock


def _tls(gateway: GatewayThread, tls: TlsFiles, host: str) -> ssl.SSLSocket:
    return ssl.create_default_context(cafile=str(tls.ca)).wrap_socket(_tcp(gateway, host), server_hostname="localhost")


def _answered(sock: ssl.SSLSocket) -> bool:
    sock.sendall(request_frame(ApiKey.API_VERSIONS, 3, 7, API_VERSIONS))
    return len(sock.recv(4)) == 4


def test_ipv4_and_ipv4_mapped_flooders_share_one_budget_and_an_ipv6_client_is_not_deferred(
        gateway: GatewayThread, tls: TlsFiles) -> None:
    budget, metrics = gateway.gateway.handshake_budget, gateway.gateway.ctx.metrics
    with _tls(gateway, tls, FLOODER) as first:  # 127.0.0.1's burst of one, spent over IPv4
        # then one more connection in each spelling: both wait, on 127.0.0.1's budget
        waiting = [_tcp(gateway, FLOODER), _tcp(gateway, MAPPED)]
        try:
            with _tls(gateway, tls, HONEST) as honest:  # accepted after them: the backlog is FIFO
                assert _answered(honest)
                assert gateway.call(budget.waiting, FLOODER) == 2
                assert gateway.call(budget.waiting) == 2  # nothing counted under another spelling
                assert gateway.call(budget.waiting, HONEST) == 0
                assert gateway.call(metrics.tls_handshakes_deferred.value, ("SSL",)) == 2  # the honest one: not
                assert gateway.call(metrics.tls_handshakes_waiting.value, ()) == 2
                assert gateway.call(gateway.gateway.limits.open_from, FLOODER) == 3
        finally:
            for sock in waiting:
                sock.close()
        assert _answered(first)
