"""bench/anchors/pyrelay.py: the do-nothing CPython relay passes bytes unchanged both ways, stays bounded when a
client stops reading, and closes the client when its upstream cannot be reached; with ``--tls`` it terminates TLS
on the client leg only.

In-process, on uvloop and on asyncio's own loop, against an asyncio upstream on loopback; one test runs the relay
process with TLS between a Kafka client and Tansu.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import pytest

from auth.cert_tools import TlsFiles, write_tls_material
from bench.anchors import pyrelay
from bench.anchors.haproxy_tls import PyRelayProcess
from bench.anchors.kroxylicious import tls_client
from bench.throughput import create_topic, plain_client
from gateway.commands.embedded_broker import EmbeddedBroker, free_port

WAIT_S = 20.0


def run_on(kind: str, test: Callable[[], Awaitable[None]]) -> None:
    loop = pyrelay.new_loop(kind)
    try:
        loop.run_until_complete(asyncio.wait_for(test(), WAIT_S))
    finally:
        loop.close()


class Upstream(asyncio.Protocol):
    """Echoes, or on connection writes ``flood`` bytes at once (kept in its buffer while the relay does not read);
    keeps the first bytes it received."""

    def __init__(self, flood: bytes = b"") -> None:
        self.flood = flood
        self.transport: asyncio.Transport | None = None
        self.first = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        if self.flood:
            self.transport.write(self.flood)

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.first = self.first or data
        self.transport.write(data)


@asynccontextmanager
async def relayed(upstream_side: Callable[[], asyncio.Protocol], half: type[pyrelay.ClientHalf] | None = None,
                  tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """The port of a relay (pyrelay.start's, or one of ``half``s) in front of an upstream on loopback; both servers
    are closed afterwards, also when the test fails."""
    loop = asyncio.get_running_loop()
    upstream = await loop.create_server(upstream_side, "127.0.0.1", 0)
    target, port = ("127.0.0.1", upstream.sockets[0].getsockname()[1]), free_port()
    if half is None:
        relay = await pyrelay.start(port, target, tls)
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


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_material(tmp_path_factory.mktemp("tls"))


def client_context(tls: TlsFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.check_hostname = False
    return context


@pytest.mark.parametrize("kind", pyrelay.LOOPS)
def test_tls_is_terminated_on_the_client_leg_and_the_upstream_gets_the_plain_bytes(kind: str,
                                                                                     tls_files: TlsFiles) -> None:
    async def test() -> None:
        upstream_side = Upstream()
        server = pyrelay.server_context(tls_files.server_cert, tls_files.server_key)
        async with relayed(lambda: upstream_side, tls=server) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(tls_files),
                                                           server_hostname="localhost")
            assert writer.get_extra_info("ssl_object") is not None
            payload = bytes(range(256)) * 4096  # 1 MiB: many TLS records, more than one read
            writer.write(payload)
            assert await reader.readexactly(len(payload)) == payload
            assert upstream_side.first and payload.startswith(upstream_side.first)  # decrypted, not TLS records
            writer.close()
    run_on(kind, test)


def test_tls_takes_a_certificate_and_a_key_and_is_off_by_default() -> None:
    args = pyrelay.parse_args(["--port", "9100", "--upstream", "127.0.0.1:9092", "--tls", "s.pem", "s.key"])
    assert args.tls == [Path("s.pem"), Path("s.key")] and args.upstream == ("127.0.0.1", 9092)
    assert pyrelay.parse_args(["--port", "9100", "--upstream", "127.0.0.1:9092"]).tls is None
    with pytest.raises(SystemExit):
        pyrelay.parse_args(["--port", "9100", "--upstream", "127.0.0.1:9092", "--tls", "s.pem"])


@pytest.mark.broker
def test_a_tls_relay_process_carries_a_produce_and_a_fetch_between_a_kafka_client_and_tansu(
        tmp_path: Path, tls_files: TlsFiles) -> None:
    """The client speaks TLS, Tansu PLAINTEXT and advertises the relay: the record can only have gone through it."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    relay = PyRelayProcess(tmp_path, "pyrelay-tls-uvloop", "uvloop", tls_files)
    with EmbeddedBroker(log_path=tmp_path / "tansu.log", advertised=relay.bootstrap) as broker:
        relay.upstream = broker.bootstrap
        with relay:
            client = tls_client(plain_client(relay.bootstrap), tls_files)
            topic, value = f"tls-{uuid.uuid4().hex[:8]}", b"through the TLS floor"
            create_topic(AdminClient(client), topic, 1)
            producer = Producer(client)
            producer.produce(topic, value)
            assert producer.flush(20) == 0
            consumer = Consumer({**client, "group.id": topic, "enable.auto.commit": False})
            consumer.assign([TopicPartition(topic, 0, 0)])  # no group to join: a Fetch from offset 0
            try:
                message = consumer.poll(20)
                assert message is not None and message.error() is None and message.value() == value
            finally:
                consumer.close()


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
