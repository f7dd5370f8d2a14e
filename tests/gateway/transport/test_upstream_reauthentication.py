"""The gateway logs its upstream link in again (KIP-368) on a live connection, with fake transports: answers
to earlier requests still reach the client (streamed ones too), the login's own answers never reach the
session, new requests wait for the login, and a refused or unanswered login closes the client's connection."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

import gateway.transport.client_connection as client_connection
from gateway.server import Gateway
from gateway.transport.client_connection import ClientConnection
from gateway.transport.upstream_link import UpstreamLink
from protocol.api_keys import ApiKey
from protocol.header import decode_request_header
from protocol.messages import decode_response, request_frame, response_frame
from tests.authz.test_policies_data import request
from tests.gateway.session.session_driver import CLIENT, gateway_for
from tests.gateway.session.test_session import FETCH_V, METADATA_V, metadata, metadata_answer
from tests.gateway.transport.test_client_connection_flow import FakeTransport

PASSWORD = "gateway-secret"
SASL_UPSTREAM = {"upstream.security.protocol": "SASL_PLAINTEXT", "upstream.sasl.mechanism": "PLAIN",
                 "upstream.sasl.username": "ksgate", "upstream.sasl.password": PASSWORD,
                 "upstream.connect.timeout.ms": 300}
LIFETIME_MS = 60_000  # granted at the first login (the fake open_upstream's)
TIMER = "upstream-login"


class UpstreamTransport(FakeTransport):
    """The upstream socket: an event set at each write, for the test to wait on the gateway's next request."""

    def __init__(self, protocol: Any) -> None:
        super().__init__(protocol)
        self.wrote = asyncio.Event()

    def write(self, data: Any) -> None:
        super().write(data)
        self.wrote.set()

    def requests(self) -> list[tuple[int, int, dict[str, Any]]]:
        """(api key, correlation id, body) of each request written so far; consumed."""
        out, wire = [], bytes(self.written)
        self.written.clear()
        self.wrote.clear()
        while wire:
            size = struct.unpack_from(">i", wire)[0]
            payload = memoryview(wire[4 : 4 + size])
            header, schema = decode_request_header(payload)
            out.append((header.api_key, header.correlation_id,
                        schema.request_codec(header.api_version).decode(payload[header.size :])))
            wire = wire[4 + size :]
        return out

    async def next_requests(self) -> list[tuple[int, int, dict[str, Any]]]:
        await asyncio.wait_for(self.wrote.wait(), 5)
        return self.requests()


@dataclass
class Connected:
    conn: ClientConnection
    client: FakeTransport
    upstream: UpstreamTransport
    link: UpstreamLink

    def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            buffer = self.conn.get_buffer(len(view))
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            view = view[n:]
            self.conn.buffer_updated(n)

    def login_delay_s(self) -> float:
        timers = self.conn._timers or {}
        return timers[TIMER].when() - asyncio.get_running_loop().time()

    async def tasks_done(self) -> None:
        await asyncio.wait_for(asyncio.gather(*(self.conn._tasks or ())), 5)


@pytest.fixture
def sasl_upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gateway:
    async def open_upstream(ctx: Any, targets: Any, new_link: Callable[[], UpstreamLink], log: Any) -> Any:
        link = new_link()
        link.connection_made(UpstreamTransport(link))  # type: ignore[arg-type]
        return link, "10.9.9.9:9092", LIFETIME_MS  # as if logged in, granted this lifetime

    monkeypatch.setattr(client_connection, "open_upstream", open_upstream)
    return gateway_for(tmp_path, **SASL_UPSTREAM)


async def _connected(gateway: Gateway) -> Connected:
    conn = ClientConnection(gateway.ctx, "PLAINTEXT", None, CLIENT)
    client = FakeTransport(conn)
    conn.connection_made(client)  # type: ignore[arg-type]
    await asyncio.gather(*(conn._tasks or ()))  # the upstream link is up
    link = conn.upstream
    assert link is not None and isinstance(link.transport, UpstreamTransport)
    return Connected(conn, client, link.transport, link)


def _handshake_answer(correlation_id: int) -> bytes:
    return response_frame(ApiKey.SASL_HANDSHAKE, 1, correlation_id, {"error_code": 0, "mechanisms": ["PLAIN"]})


def _authenticate_answer(correlation_id: int, lifetime_ms: int, error_code: int = 0) -> bytes:
    return response_frame(ApiKey.SASL_AUTHENTICATE, 2, correlation_id, {
        "error_code": error_code, "error_message": "Authentication failed: Invalid username or password"
        if error_code else None, "auth_bytes": b"", "session_lifetime_ms": lifetime_ms})


def _client_answers(client: FakeTransport, api_key: int, version: int) -> list[tuple[int, dict[str, Any]]]:
    out, wire = [], bytes(client.written)
    while wire:
        size = struct.unpack_from(">i", wire)[0]
        out.append(decode_response(wire[4 : 4 + size], api_key, version))
        wire = wire[4 + size :]
    return out


async def _login_due(c: Connected) -> tuple[int, int, dict[str, Any]]:
    """The re-authentication timer fires (called as the loop would, without waiting ~50 s); the handshake sent."""
    c.conn._timer_fired(TIMER)
    assert not c.client.reading  # no new client request is read while the link logs in
    [handshake] = await c.upstream.next_requests()
    return handshake


def test_answers_to_earlier_requests_reach_the_client_while_the_link_logs_in_again(sasl_upstream: Gateway) -> None:
    async def scenario() -> None:
        c = await _connected(sasl_upstream)
        assert 0.85 * LIFETIME_MS / 1000 - 1 <= c.login_delay_s() <= 0.95 * LIFETIME_MS / 1000
        c.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
        [(_, earlier_id, _)] = c.upstream.requests()
        key, handshake_id, body = await _login_due(c)
        assert key == ApiKey.SASL_HANDSHAKE and handshake_id < 0 and body["mechanism"] == "PLAIN"
        # Bytes read before the pause took effect: the request waits for the login, it is not relayed.
        c.send(request_frame(ApiKey.METADATA, METADATA_V, 2, metadata("b")))
        assert c.upstream.written == b""
        # The broker answers the earlier request first, then the handshake, in one read.
        c.link.data_received(response_frame(ApiKey.METADATA, METADATA_V, earlier_id, metadata_answer("a"))
                             + _handshake_answer(handshake_id))
        [(client_id, answer)] = _client_answers(c.client, ApiKey.METADATA, METADATA_V)
        assert client_id == 1 and answer["topics"][0]["name"] == "a"
        assert not c.client.closed  # the session never saw the handshake's answer (it would refuse its id)
        [(key, authenticate_id, _)] = await c.upstream.next_requests()
        assert key == ApiKey.SASL_AUTHENTICATE and authenticate_id < 0
        c.link.data_received(_authenticate_answer(authenticate_id, 30_000))
        [(key, _, waited)] = await c.upstream.next_requests()  # the request that waited goes out now
        await c.tasks_done()
        assert key == ApiKey.METADATA and waited["topics"][0]["name"] == "b"
        assert c.client.reading and not c.client.closed
        assert 0.85 * 30 - 1 <= c.login_delay_s() <= 0.95 * 30  # the next login, from the new lifetime

    asyncio.run(scenario())


def test_a_response_streamed_while_the_link_logs_in_keeps_streaming(sasl_upstream: Gateway) -> None:
    async def scenario() -> None:
        c = await _connected(sasl_upstream)
        c.send(request_frame(ApiKey.FETCH, FETCH_V, 7, request(ApiKey.FETCH, FETCH_V, topics=[])))
        [(_, fetch_id, _)] = c.upstream.requests()
        _, handshake_id, _ = await _login_due(c)
        # A large Fetch answer (passed through as is: its bytes are not decoded when streamed), in chunks.
        body = bytes(range(256)) * 1024
        fetch = struct.pack(">ii", 4 + len(body), fetch_id) + body
        streamed = sasl_upstream.ctx.counters.streamed_responses
        c.link.data_received(fetch[:8 * 1024])
        assert sasl_upstream.ctx.counters.streamed_responses == streamed + 1
        assert len(c.client.written) == 8 * 1024  # on its way before the rest has arrived
        c.link.data_received(fetch[8 * 1024 :] + _handshake_answer(handshake_id))
        assert bytes(c.client.written) == struct.pack(">ii", 4 + len(body), 7) + body  # the client's id
        [(key, authenticate_id, _)] = await c.upstream.next_requests()
        assert key == ApiKey.SASL_AUTHENTICATE
        c.link.data_received(_authenticate_answer(authenticate_id, 30_000))
        await c.tasks_done()
        assert c.client.reading and not c.client.closed

    asyncio.run(scenario())


def test_a_refused_reauthentication_closes_the_client_connection_with_its_reason(sasl_upstream: Gateway) -> None:
    async def scenario() -> list[dict[str, Any]]:
        c = await _connected(sasl_upstream)
        _, handshake_id, _ = await _login_due(c)
        with capture_logs() as logs:
            c.link.data_received(_handshake_answer(handshake_id))
            [(_, authenticate_id, _)] = await c.upstream.next_requests()
            c.link.data_received(_authenticate_answer(authenticate_id, 0, error_code=58))  # SASL_AUTHENTICATION_FAILED
            await c.tasks_done()
        assert c.client.closed and c.upstream.closed
        return logs

    logs = asyncio.run(scenario())
    [refused] = [entry for entry in logs if entry["event"] == "connection_refused"]
    assert "upstream re-authentication failed" in refused["reason"] and "Invalid username" in refused["reason"]
    assert not any(PASSWORD in str(entry) for entry in logs)


def test_an_unanswered_reauthentication_closes_the_client_connection(sasl_upstream: Gateway) -> None:
    async def scenario() -> list[dict[str, Any]]:
        c = await _connected(sasl_upstream)
        with capture_logs() as logs:
            await _login_due(c)  # never answered: upstream.connect.timeout.ms (300) bounds the wait
            await c.tasks_done()
        assert c.client.closed and c.upstream.closed
        return logs

    [refused] = [entry for entry in asyncio.run(scenario()) if entry["event"] == "connection_refused"]
    assert "no answer within 300 ms (upstream.connect.timeout.ms)" in refused["reason"]


def test_a_link_lost_during_the_reauthentication_closes_the_client_connection(sasl_upstream: Gateway) -> None:
    async def scenario() -> list[dict[str, Any]]:
        c = await _connected(sasl_upstream)
        with capture_logs() as logs:
            await _login_due(c)
            c.link.connection_lost(None)  # the broker closed the link: the login reports it (not its timeout)
            await c.tasks_done()
        assert c.client.closed
        return logs

    [refused] = [entry for entry in asyncio.run(scenario()) if entry["event"] == "connection_refused"]
    assert refused["reason"] == "upstream re-authentication failed: upstream closed the connection"


def test_an_upstream_flooding_the_login_with_answers_closes_the_connection_without_queueing_them(
        sasl_upstream: Gateway) -> None:
    async def scenario() -> list[dict[str, Any]]:
        c = await _connected(sasl_upstream)
        _, handshake_id, _ = await _login_due(c)
        with capture_logs() as logs:
            # Answers nobody asked for, all with the login's ids (negative): the login holds only a few unread.
            c.link.data_received(b"".join(_handshake_answer(handshake_id) for _ in range(1000)))
            await c.tasks_done()
        assert c.client.closed and c.upstream.closed
        return logs

    [refused] = [entry for entry in asyncio.run(scenario()) if entry["event"] == "connection_refused"]
    assert "answers nobody asked for" in refused["reason"]
