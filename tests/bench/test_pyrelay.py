"""bench/anchors/pyrelay.py: the do-nothing CPython relay passes bytes unchanged both ways, stays bounded when a
client stops reading, and closes the client when its upstream cannot be reached.

In-process, on uvloop and on asyncio's own loop, against an asyncio upstream on loopback.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import pytest

from bench.anchors import pyrelay
from gateway.commands.embedded_broker import free_port

WAIT_S = 20.0


def run_on(kind: str, test: Callable[[], Awaitable[None]]) -> None:
    loop = pyrelay.new_loop(kind)
    try:
        loop.run_until_complete(asyncio.wait_for(test(), WAIT_S))
    finally:
        loop.close()


class Upstream(asyncio.Protocol):
    """Echoes, or on connection writes ``flood`` bytes at once (kept in its buffer while the relay does not read)."""

    def __init__(self, flood: bytes = b"") -> None:
        self.flood = flood
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if self.flood:
            self.transport.write(self.flood)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)


@asynccontextmanager
async def relayed(upstream_side: Callable[[], asyncio.Protocol],
                  half: type[pyrelay.ClientHalf] | None = None) -> AsyncIterator[int]:
    """The port of a relay (pyrelay.start's, or one of ``half``s) in front of an upstream on loopback; both servers
    are closed afterwards, also when the test fails."""
    loop = asyncio.get_running_loop()
    upstream = await loop.create_server(upstream_side, "127.0.0.1", 0)
    target, port = ("127.0.0.1", upstream.sockets[0].getsockname()[1]), free_port()
    if half is None:
        relay = await pyrelay.start(port, target)
    else:
        make = half
        relay = await loop.create_server(lambda: make(target), "127.0.0.1", port)
    try:
        yield port
    finally:
        relay.close()
        upstream.close()


@pytest.mark.parametrize("kind", pyrelay.LOOPS)
def test_bytes_cross_the_relay_unchanged_both_ways(kind: str) -> None:
    async def test() -> None:
        async with relayed(Upstream) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            payload = bytes(range(256)) * 4096  # 1 MiB, more than one read
            writer.write(payload)
            assert await reader.readexactly(len(payload)) == payload
            writer.close()
    run_on(kind, test)


@pytest.mark.parametrize("kind", pyrelay.LOOPS)
def test_a_client_that_stops_reading_stops_the_relay_reading_its_upstream(kind: str) -> None:
    """The relay's write buffer to the client reaches its high-water mark: it stops reading the upstream then, so
    the rest waits in the upstream's buffer, not in the relay; everything arrives once the client reads."""
    flood = bytes(range(256)) * (32 * 4096)  # 32 MiB, far beyond the kernel's loopback buffers
    paused: list[asyncio.Event] = []  # made on the running loop
    halves: list[pyrelay.Half] = []

    class Watched(pyrelay.ClientHalf):
        __slots__ = ()

        def pause_writing(self) -> None:
            super().pause_writing()
            halves.append(self)
            paused[0].set()

    async def test() -> None:
        paused.append(asyncio.Event())
        loop = asyncio.get_running_loop()
        upstream_side = Upstream(flood)
        async with relayed(lambda: upstream_side, Watched) as port:
            client = socket.create_connection(("127.0.0.1", port))
            await paused[0].wait()  # the relay -> client buffer is full
            half = halves[0]
            assert half.peer is not None and half.peer.transport is not None and half.transport is not None
            assert not half.peer.transport.is_reading()  # the upstream is no longer read
            assert upstream_side.transport is not None and upstream_side.transport.get_write_buffer_size() > 0
            client.setblocking(False)
            received = bytearray()
            while len(received) < len(flood):
                received += await loop.sock_recv(client, 1 << 20)
            assert received == flood  # nothing lost or reordered across the pause and resume
            client.close()
    run_on(kind, test)


@pytest.mark.parametrize("kind", pyrelay.LOOPS)
def test_the_client_is_closed_when_its_upstream_refuses(kind: str) -> None:
    async def test() -> None:
        port, nobody = free_port(), free_port()  # nothing listens on nobody
        relay = await pyrelay.start(port, ("127.0.0.1", nobody))
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await reader.read() == b""  # closed, no bytes
        writer.close()
        relay.close()
    run_on(kind, test)



@pytest.mark.broker
def test_relay_ab_measures_ksgate_against_the_floor_through_a_broker_that_advertises_the_relay() -> None:
    """A smoke run (2 blocks of 50 requests), not a measurement: every request went through each proxy, so each
    used some CPU per request; had the client left the relay after bootstrap, B's CPU per request would be ~0."""
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(repo / "bench" / "anchors" / "relay_ab.py"), "--tree-a", str(repo),
                           "--floor", "uvloop", "--blocks", "2", "--block", "50"],
                          capture_output=True, text=True, timeout=180, cwd=repo, check=False,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = {line.split(" ", 1)[0]: line for line in done.stdout.splitlines() if " CPU per request median " in line}
    assert "(pyrelay on uvloop)" in lines["B"] and str(repo) in lines["A"]
    for line in lines.values():
        assert float(line.split(" CPU per request median ")[1].split()[0]) > 5.0
    # Each pair's ratio, the figure that compares runs taken in different minutes: below 1, pyrelay doing less.
    ratio = next(line for line in done.stdout.splitlines() if line.startswith("B / A per block pair: median "))
    assert 0.0 < float(ratio.split("median ")[1].split()[0]) < 1.0


def test_relay_ab_quartiles_of_one_pair_of_blocks_are_that_pair() -> None:
    """``--blocks 1`` gives one pair, which statistics.quantiles refuses; the summary must still print."""
    from bench.anchors.relay_ab import quartiles

    assert quartiles([-3.25], "+.1f") == "-3.2 to -3.2"
    assert quartiles([1.0, 2.0, 3.0, 4.0, 5.0], ".2f") == "1.50 to 4.50"  # Python's default (exclusive) method
