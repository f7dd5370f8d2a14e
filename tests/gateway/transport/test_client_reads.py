"""The client connection's read path makes no system call of its own: asyncio.get_running_loop() checks the
process id (getpid) each time, one of the seven system calls a relayed request cost (strace, bench/README.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.transport import client_connection
from gateway.transport.client_connection import ClientConnection
from protocol.api_keys import ApiKey
from protocol.messages import decode_response, request_frame
from tests.gateway.session.session_driver import CLIENT, UPSTREAM, gateway_for


class RecordingTransport:
    """What the connection writes to its client, and nothing else of a socket."""

    def __init__(self) -> None:
        self.written = bytearray()

    def write(self, data: Any) -> None:
        self.written += bytes(data)

    def writelines(self, pieces: Any) -> None:
        for piece in pieces:
            self.write(piece)

    def is_closing(self) -> bool:
        return False

    def is_reading(self) -> bool:
        return True


async def test_a_read_does_not_ask_asyncio_for_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    connection = ClientConnection(gateway_for(tmp_path).ctx, "PLAINTEXT", None, CLIENT)
    transport = RecordingTransport()
    connection.transport = transport  # type: ignore[assignment]
    connection.session.connected(CLIENT)  # its OpenUpstream is dropped: no socket is opened here
    connection.session.upstream_ready(f"{UPSTREAM[0]}:{UPSTREAM[1]}")
    request = request_frame(ApiKey.API_VERSIONS, 3, 42, {"client_software_name": "t", "client_software_version": "1"})

    def asked(*_: object) -> asyncio.AbstractEventLoop:
        raise AssertionError("asyncio.get_running_loop() on the read path: a getpid system call per read")

    buffer = connection.get_buffer(-1)
    buffer[: len(request)] = request
    monkeypatch.setattr(client_connection.asyncio, "get_running_loop", asked)
    connection.buffer_updated(len(request))
    monkeypatch.undo()
    correlation_id, answer = decode_response(bytes(transport.written[4:]), ApiKey.API_VERSIONS, 3)
    assert correlation_id == 42 and answer["error_code"] == 0
    assert connection.last_active == pytest.approx(asyncio.get_running_loop().time(), abs=1.0)
