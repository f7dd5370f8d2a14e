"""What a connection deferred by its address's TLS handshake budget holds is given back on every path.

It holds a place among its address's waiting connections (``HandshakeBudget.waiting``, the
metric ksgate_tls_handshakes_waiting), its max.connections.per.ip count and its descriptor.
Each must be released exactly once whether its wait ends at its turn, by its task's
cancellation (before its first step: its coroutine never runs; or during the wait), by its peer
leaving, or by the gateway shutting down.  The deferred sockets here are real TCP connections
handed to the gateway's admission on its loop, so the test chooses the instant of cancellation.
A PROXY-protocol connection waiting for its header is held to the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import Iterator

import pytest

from auth.cert_tools import TlsFiles
from auth.client_address import ClientAddress
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.server import Gateway
from protocol.api_keys import ApiKey
from tests.gateway.edge.handshake_budget.kit import budget_gateway
from tests.harness import GatewayThread
from tests.wire_client import request_frame

FLOODER = "127.0.0.1"
API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}
ENDED_WITHIN_S = 30.0  # a generous bound for a task that must end now (the deferral itself is 100 s)


@pytest.fixture
def gateway(broker: EmbeddedBroker, tls: TlsFiles) -> Iterator[GatewayThread]:
    running = budget_gateway(broker, tls, rate_per_s=0.01)  # one handshake at once, then one per 100 s
    try:
        yield running
    finally:
        running.stop()


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    """(client side, server side) of a loopback TCP connection, the server side non-blocking as accepted."""
    with socket.create_server(("127.0.0.1", 0)) as listening:
        client = socket.create_connection(listening.getsockname())
        server, _ = listening.accept()
    server.setblocking(False)
    return client, server


def _on_loop(gateway: GatewayThread, coroutine: object) -> object:
    assert gateway.loop is not None
    return asyncio.run_coroutine_threadsafe(coroutine, gateway.loop).result(timeout=ENDED_WITHIN_S + 10)  # type: ignore[arg-type]


async def _admit_deferred(gw: Gateway, server_side: socket.socket) -> set[asyncio.Task[None]]:
    """Admit ``server_side`` as a connection from FLOODER (whose burst is spent: it is deferred); its tasks."""
    before = set(gw._handshakes)
    gw._admit(gw.config.listeners[0], None, server_side, ClientAddress.of(FLOODER, server_side.getpeername()[1]))
    return set(gw._handshakes) - before


def _counts(gateway: GatewayThread) -> tuple[int, float, int]:
    """(the flooder's waiting connections, the waiting gauge, the flooder's open connection count)."""
    gw = gateway.gateway
    return gateway.call(lambda: (gw.handshake_budget.waiting(FLOODER),
                                 gw.ctx.metrics.tls_handshakes_waiting.value(()), gw.limits.open_from(FLOODER)))


def _tls_connection(gateway: GatewayThread, tls: TlsFiles) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", gateway.port), timeout=30, source_address=(FLOODER, 0))
    return ssl.create_default_context(cafile=str(tls.ca)).wrap_socket(raw, server_hostname="localhost")


def _answered(sock: ssl.SSLSocket) -> bool:
    sock.sendall(request_frame(ApiKey.API_VERSIONS, 3, 7, API_VERSIONS))
    return len(sock.recv(4)) == 4


def _client_hello() -> bytes:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with contextlib.suppress(ssl.SSLWantReadError):  # it waits for the server's answer: the hello is out
        hello.do_handshake()
    return outgoing.read()


def _peer_closed(client: socket.socket) -> bool:
    client.settimeout(ENDED_WITHIN_S)
    try:
        return client.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("when", ["before_its_first_step", "during_its_wait"])
def test_a_deferred_connection_whose_task_is_cancelled_gives_back_its_place_count_and_descriptor(
        gateway: GatewayThread, tls: TlsFiles, when: str) -> None:
    gw = gateway.gateway
    with _tls_connection(gateway, tls):  # the burst: from now on FLOODER's connections wait
        client, server_side = _tcp_pair()

        async def admit_then_cancel() -> tuple[int, int]:
            tasks = await _admit_deferred(gw, server_side)
            held = gw.handshake_budget.waiting(FLOODER), gw.limits.open_from(FLOODER)
            if when == "during_its_wait":
                await asyncio.sleep(0)  # one step: the task is in its wait
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)  # their done callbacks ran before this returns
            return held

        with client:
            assert _on_loop(gateway, admit_then_cancel()) == (1, 2)  # deferred: waiting, and counted
            assert _counts(gateway) == (0, 0, 1)  # only the handshaken connection is left
            assert _peer_closed(client)  # and its descriptor is closed


@pytest.mark.parametrize("leaves", ["closes", "resets", "sends_a_hello_then_closes"])
def test_a_deferred_connection_whose_peer_leaves_is_let_go_at_once(gateway: GatewayThread, tls: TlsFiles,
                                                                    leaves: str) -> None:
    gw = gateway.gateway
    failed = gateway.call(gw.ctx.metrics.tls_handshake_failures.value, ("SSL", "failed"))
    with _tls_connection(gateway, tls):
        client, server_side = _tcp_pair()

        async def admit_then_wait_for_the_task() -> tuple[int, bool]:
            tasks = await _admit_deferred(gw, server_side)
            held = gw.handshake_budget.waiting(FLOODER)
            await asyncio.sleep(0)  # its wait has begun
            if leaves == "resets":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif leaves == "sends_a_hello_then_closes":  # its turn would cost a key share and a signature
                client.sendall(_client_hello())
            client.close()
            _, pending = await asyncio.wait(tasks, timeout=ENDED_WITHIN_S)  # ends long before its 100 s turn
            return held, not pending

        assert _on_loop(gateway, admit_then_wait_for_the_task()) == (1, True)
        assert _counts(gateway) == (0, 0, 1)
        assert server_side.fileno() == -1
        # counted as the failed handshake it would have been at its turn
        assert gateway.call(gw.ctx.metrics.tls_handshake_failures.value, ("SSL", "failed")) == failed + 1


def test_shutdown_gives_back_what_waiting_connections_hold(broker: EmbeddedBroker, tls: TlsFiles) -> None:
    gateway = budget_gateway(broker, tls, rate_per_s=0.01)
    gw = gateway.gateway
    pairs = [_tcp_pair() for _ in range(3)]
    try:
        with _tls_connection(gateway, tls):
            for _, server_side in pairs:
                _on_loop(gateway, _admit_deferred(gw, server_side))
            assert _counts(gateway) == (3, 3, 4)
            gateway.stop()
        assert gw.handshake_budget.waiting() == 0
        assert gw.ctx.metrics.tls_handshakes_waiting.value(()) == 0
        # what is still counted is held by the handshaken connection alone (closed as the loop ended)
        assert gw.limits.total == len(gw._connections) == 1
        assert all(_peer_closed(client) for client, _ in pairs)
    finally:
        gateway.stop()
        for client, _ in pairs:
            client.close()


def test_a_deferred_connection_is_handshaken_and_served_at_its_turn(broker: EmbeddedBroker, tls: TlsFiles) -> None:
    """The watch on a waiting socket is removed before the event loop's transport takes it."""
    gateway = budget_gateway(broker, tls, rate_per_s=20.0)  # one at once, the next 50 ms later
    try:
        gw = gateway.gateway
        with _tls_connection(gateway, tls) as first, _tls_connection(gateway, tls) as second:
            assert _answered(first) and _answered(second)
            assert gateway.call(gw.ctx.metrics.tls_handshakes_deferred.value, ("SSL",)) >= 1
            assert _counts(gateway) == (0, 0, 2)
    finally:
        gateway.stop()


@pytest.mark.parametrize("when", ["before_its_first_step", "while_it_reads"])
def test_a_connection_cancelled_before_its_proxy_header_gives_back_its_pending_count_and_descriptor(
        broker: EmbeddedBroker, tls: TlsFiles, when: str) -> None:
    """The same for a PROXY-protocol listener's connection whose header is not read yet: counted
    against max.connections from accept, its count and descriptor released however its task ends."""
    gateway = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "listener.name.ssl.ksgate.proxy.protocol": True,
        "listener.name.ssl.ksgate.proxy.protocol.trusted.networks": "127.0.0.0/8",
    }, protocol="SSL", advertised_host="localhost").start()
    gw = gateway.gateway
    client, server_side = _tcp_pair()

    async def accept_then_cancel() -> int:
        before = set(gw._handshakes)
        gw._accept(gw.config.listeners[0], None, server_side, ClientAddress.of(FLOODER, server_side.getpeername()[1]))
        pending = gw._proxied_pending
        if when == "while_it_reads":
            await asyncio.sleep(0)  # one step: it waits for the header
        tasks = set(gw._handshakes) - before
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        return pending

    try:
        with client:
            assert _on_loop(gateway, accept_then_cancel()) == 1
            assert gateway.call(lambda: gw._proxied_pending) == 0
            assert _peer_closed(client)
    finally:
        gateway.stop()
