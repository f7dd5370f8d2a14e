"""A client that leaves while the gateway is still logging its upstream link in: the link is closed with the
connection, so the login ends then, instead of waiting for upstream.connect.timeout.ms (and, at a gateway's
shutdown, instead of outliving the event loop as a pending task)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gateway.transport.client_connection as client_connection
from gateway.server import Gateway
from gateway.transport.client_connection import ClientConnection
from gateway.transport.upstream_link import UpstreamLink
from gateway.upstream.connector import log_in
from protocol.api_keys import ApiKey
from tests.gateway.session.session_driver import CLIENT, gateway_for
from tests.gateway.transport.test_client_connection_flow import FakeTransport
from tests.gateway.transport.test_upstream_reauthentication import SASL_UPSTREAM, UpstreamTransport


class ClosingTransport(UpstreamTransport):
    """Tells its protocol the connection is gone once closed, on the next loop turn, as a real transport does."""

    def close(self) -> None:
        if not self.closed:
            super().close()
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)


UPSTREAMS: list[ClosingTransport] = []  # the links' sockets, as the fake open_upstream made them


@pytest.fixture
def silent_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gateway:
    async def open_upstream(ctx: Any, targets: Any, new_link: Callable[[], UpstreamLink], log: Any) -> Any:
        link = new_link()
        UPSTREAMS.append(transport := ClosingTransport(link))
        link.connection_made(transport)  # type: ignore[arg-type]
        return link, "10.9.9.9:9092", await log_in(ctx, link)  # the real login: the broker never answers it

    UPSTREAMS.clear()
    monkeypatch.setattr(client_connection, "open_upstream", open_upstream)
    # A login that would wait a minute for its answer if nothing ended it.
    return gateway_for(tmp_path, **{**SASL_UPSTREAM, "upstream.connect.timeout.ms": 60_000})


def test_a_client_leaving_during_the_upstream_login_closes_the_link_and_ends_the_login(
        silent_upstream: Gateway) -> None:
    async def scenario() -> None:
        conn = ClientConnection(silent_upstream.ctx, "PLAINTEXT", None, CLIENT)
        conn.connection_made(FakeTransport(conn))  # type: ignore[arg-type]
        [login] = conn._tasks or ()
        await asyncio.sleep(0)  # the login starts: its handshake is written, its answer awaited
        [upstream] = UPSTREAMS
        [(key, _, _)] = await upstream.next_requests()
        assert key == ApiKey.SASL_HANDSHAKE and not login.done()
        conn.connection_lost(None)
        assert upstream.closed
        await asyncio.wait_for(login, 5)  # ends now; before, it waited out upstream.connect.timeout.ms
        assert conn.upstream is None  # never handed to the closed connection

    asyncio.run(scenario())



def test_a_client_leaving_while_its_upstream_link_connects_abandons_the_connect(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        connecting = asyncio.Event()

        async def open_upstream(ctx: Any, targets: Any, new_link: Callable[[], UpstreamLink], log: Any) -> Any:
            new_link()
            connecting.set()
            await asyncio.Future()  # the TCP connection never completes (a black-holed broker address)

        monkeypatch.setattr(client_connection, "open_upstream", open_upstream)
        gateway = gateway_for(tmp_path, **{**SASL_UPSTREAM, "upstream.connect.timeout.ms": 60_000})
        conn = ClientConnection(gateway.ctx, "PLAINTEXT", None, CLIENT)
        conn.connection_made(FakeTransport(conn))  # type: ignore[arg-type]
        [connect] = conn._tasks or ()
        await connecting.wait()
        conn.connection_lost(None)
        await asyncio.wait({connect}, timeout=5)
        assert connect.cancelled()  # not left pending until the gateway's loop closes
        assert conn.upstream is None

    asyncio.run(scenario())
