"""A do-nothing TCP relay in CPython: the floor under any Python Kafka proxy on this machine (issue #23).

A bench helper, run as its own process.  Listens on 127.0.0.1:``--port``; each client connection gets its own
connection to ``--upstream`` and the bytes go across as they arrive, both ways: no framing, no decoding, no
rewriting (so the broker must advertise the relay's address, as for HAProxy: bench/anchors/haproxy_tls.py).
asyncio Protocols, on uvloop or on asyncio's own loop (``--loop``), as ksgate's transports are.  Bounded: a side
stops reading while its peer's write buffer is above the transport's high-water mark, and the client is not read
until its upstream connection is up.  ``--tls CERT KEY``: the client leg is TLS, terminated by the loop's own SSL
transport (``create_server(ssl=...)``, as ksgate's listeners), the upstream leg stays plain: the floor of any
CPython TLS terminator.

    python bench/anchors/pyrelay.py --port 9100 --upstream 127.0.0.1:9092 [--loop uvloop|asyncio]
        [--tls server.pem server.key]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import ssl
import sys
from pathlib import Path
from typing import cast

LOOPS = ("uvloop", "asyncio")
CONNECT_TIMEOUT_S = 10.0


class Half(asyncio.Protocol):
    """One side of a relayed connection: what it reads goes to its peer's transport, unchanged."""

    __slots__ = ("closed", "peer", "transport")

    def __init__(self, peer: Half | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer = peer  # the upstream's side knows its client from the start: it may be read at once
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio.Transport subclasses
        # Kafka's requests are small writes that must leave at once (asyncio sets it too; uvloop's may not).
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        assert self.peer is not None and self.peer.transport is not None  # not read before the peer exists
        self.peer.transport.write(data)

    # Our write buffer is full: stop reading the side that fills it, until it drains.
    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None and not self.peer.closed:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None and not self.peer.closed:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()  # after what it has buffered is written


class ClientHalf(Half):
    """The client's side: paused until its upstream connection is up, closed if that fails."""

    __slots__ = ("connecting", "early", "upstream")

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__()
        self.upstream = upstream
        self.connecting: asyncio.Task[None] | None = None
        self.early: list[bytes] = []  # read before the upstream was up: one read at most (then paused)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert self.transport is not None
        self.transport.pause_reading()  # the client's bytes wait in the kernel until there is a peer
        self.connecting = asyncio.get_running_loop().create_task(self.connect())

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            super().data_received(data)
            return
        # uvloop starts reading after connection_made returns, whatever it asked: pause now.
        assert self.transport is not None
        self.early.append(data)
        self.transport.pause_reading()

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        assert self.transport is not None
        try:
            _, upstream = await asyncio.wait_for(loop.create_connection(lambda: Half(self), *self.upstream),
                                                 CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError):
            self.transport.close()
            return
        if self.closed:
            upstream.transport.close()  # type: ignore[union-attr]
            return
        self.peer = upstream
        if self.early:
            upstream.transport.writelines(self.early)  # type: ignore[union-attr]
            self.early.clear()
        self.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.connecting is not None and not self.connecting.done():
            self.connecting.cancel()


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server context with OpenSSL's defaults and the options ksgate's listeners add (auth/tls.py): what a
    client negotiates here is what it negotiates with ksgate (haproxy_tls.py prints both)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    context.load_cert_chain(cert, key)
    return context


async def start(port: int, upstream: tuple[str, int], tls: ssl.SSLContext | None = None) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: ClientHalf(upstream), "127.0.0.1", port, backlog=1024, ssl=tls)


async def serve(port: int, upstream: tuple[str, int], tls: ssl.SSLContext | None) -> None:
    server = await start(port, upstream, tls)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def host_port(text: str) -> tuple[str, int]:
    host, port = text.rsplit(":", 1)
    return host, int(port)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True, help="listen on 127.0.0.1:PORT")
    parser.add_argument("--upstream", type=host_port, required=True, help="HOST:PORT to relay to")
    parser.add_argument("--loop", choices=LOOPS, default="uvloop")
    parser.add_argument("--tls", nargs=2, type=Path, metavar=("CERT", "KEY"),
                        help="terminate TLS on the client leg with this PEM certificate (chain) and key")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tls = server_context(*args.tls) if args.tls else None  # before the loop: a bad file fails at once
    loop = new_loop(args.loop)
    try:
        loop.run_until_complete(serve(args.port, args.upstream, tls))
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
