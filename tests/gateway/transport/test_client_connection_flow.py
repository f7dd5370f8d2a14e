"""The asyncio adapter's flow control with fake transports: a write that fills the client's
socket pauses reading it, even when the event that wrote still has a resume in its actions."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gateway.transport.client_connection as client_connection
from gateway.transport.client_connection import ClientConnection
from gateway.transport.upstream_link import UpstreamLink
from protocol.api_keys import ApiKey
from protocol.messages import request_frame, response_frame
from tests.gateway.session.session_driver import CLIENT, gateway_for
from tests.gateway.session.test_session import METADATA_V, metadata, metadata_answer


class FakeTransport:
    """Buffers what is written; like asyncio's, calls ``pause_writing`` from inside ``write``
    once the buffer is above its high-water mark."""

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol
        self.high = 64 * 1024
        self.written = bytearray()
        self.reading = True
        self.closed = False
        self._protocol_paused = False

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = high if high is not None else self.high

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def write(self, data: Any) -> None:
        self.written += bytes(data)
        if len(self.written) > self.high and not self._protocol_paused:
            self._protocol_paused = True
            self.protocol.pause_writing()

    def writelines(self, pieces: list[Any]) -> None:
        self.write(b"".join(bytes(p) for p in pieces))

    def get_write_buffer_size(self) -> int:
        return len(self.written)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading


def _receive(conn: ClientConnection, data: bytes) -> None:
    view = memoryview(data)
    while view:
        buffer = conn.get_buffer(len(view))
        n = min(len(buffer), len(view))
        buffer[:n] = view[:n]
        view = view[n:]
        conn.buffer_updated(n)


def _upstream_ids(wire: bytes) -> list[int]:
    ids, at = [], 0
    while at + 12 <= len(wire):
        size = struct.unpack_from(">i", wire, at)[0]
        ids.append(struct.unpack_from(">i", wire, at + 8)[0])  # size, api key, version, correlation id
        at += 4 + size
    return ids


def test_a_write_that_fills_the_client_socket_pauses_reading_despite_an_older_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gateway = gateway_for(tmp_path, **{"queued.max.requests": 1, "connection.buffer.max.bytes": 64})
    upstream: dict[str, Any] = {}

    async def open_upstream(ctx: Any, targets: Any, new_link: Callable[[], UpstreamLink], log: Any) -> Any:
        link = new_link()
        link.connection_made(FakeTransport(link))  # type: ignore[arg-type]
        upstream["link"] = link
        return link, "10.9.9.9:9092", 0

    monkeypatch.setattr(client_connection, "open_upstream", open_upstream)

    async def scenario() -> FakeTransport:
        conn = ClientConnection(gateway.ctx, "PLAINTEXT", None, CLIENT)
        client = FakeTransport(conn)
        conn.connection_made(client)  # type: ignore[arg-type]
        await asyncio.gather(*(conn._tasks or ()))  # the upstream link is up
        _receive(conn, request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
        assert not client.reading  # queued.max.requests (1) is taken
        link: UpstreamLink = upstream["link"]
        [upstream_id] = _upstream_ids(bytes(link.transport.written))  # type: ignore[union-attr]
        # The answer frees the slot (a resume) and, written, fills the client's socket (a pause).
        link.data_received(response_frame(ApiKey.METADATA, METADATA_V, upstream_id, metadata_answer("a")))
        return client

    client = asyncio.run(scenario())
    assert len(client.written) > 64  # the answer went out, above the high-water mark
    assert not client.reading  # the pause, made while the resume was still to run, stands
