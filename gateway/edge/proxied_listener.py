"""A listener behind a load balancer that speaks the PROXY protocol.

Each accepted connection must come from a trusted network and start with a PROXY header;
the header is read exactly (never a byte of the TLS ClientHello after it), then the socket
is handed to asyncio, with TLS if the listener has it, under the client's real address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.edge.proxy_protocol import V2_SIGNATURE, Command, ProxyHeader, ProxyHeaderReader, ProxyProtocolError
from gateway.logs import get_logger

log = get_logger(component="proxy-protocol")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Makes a connection's protocol object for the client's (host, port), as the header states it.
ConnectionFactory = Callable[[tuple[str, int]], asyncio.BaseProtocol]


def trusted(host: str, networks: tuple[Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


async def read_proxy_header(sock: socket.socket, reader: ProxyHeaderReader) -> ProxyHeader:
    """Read exactly one PROXY header from ``sock``: its bytes and nothing after them."""
    loop = asyncio.get_running_loop()
    # 12 bytes: no header is shorter ("PROXY UNKNOWN\r\n" is 15, v2 at least 16).
    first = await _recv_exactly(loop, sock, 12)
    header = reader.feed(first)
    if first == V2_SIGNATURE:
        fixed = await _recv_exactly(loop, sock, 4)
        header = reader.feed(fixed)  # refuses an oversized length before its bytes are read
        if header is None:
            header = reader.feed(await _recv_exactly(loop, sock, int.from_bytes(fixed[2:4], "big")))
    while header is None:  # v1: a line of at most 107 bytes, read up to its CRLF
        header = reader.feed(await _recv_exactly(loop, sock, 1))
    return header


async def _recv_exactly(loop: asyncio.AbstractEventLoop, sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = await loop.sock_recv(sock, n - len(data))
        if not chunk:
            raise ProxyProtocolError("the connection closed inside its PROXY header")
        data += chunk
    return data


@dataclass(slots=True)
class ProxiedServer:
    """Accepts on one listening socket; quacks like asyncio's Server where the gateway needs it."""

    sock: socket.socket
    networks: tuple[Network, ...]
    factory: ConnectionFactory
    ssl_context: ssl.SSLContext | None
    header_timeout_s: float
    v2_max_bytes: int = 4096
    listener: str = ""
    _task: asyncio.Task[None] | None = None
    _pending: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def sockets(self) -> list[socket.socket]:
        return [self.sock]

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._accept_forever())

    async def _accept_forever(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(self.sock)
            except OSError as exc:  # e.g. EMFILE: keep serving the connections there are
                log.warning("accept_failed", listener=self.listener, error=repr(exc))
                await asyncio.sleep(0.1)
                continue
            conn.setblocking(False)
            if not trusted(str(peer[0]), self.networks):
                # Anyone else could state any address: nothing is read from it.
                log.warning("proxy_untrusted_peer", listener=self.listener, peer=f"{peer[0]}:{peer[1]}")
                conn.close()
                continue
            task = loop.create_task(self._admit(conn, (str(peer[0]), int(peer[1]))))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _admit(self, conn: socket.socket, peer: tuple[str, int]) -> None:
        try:
            header = await asyncio.wait_for(read_proxy_header(conn, ProxyHeaderReader(self.v2_max_bytes)),
                                            self.header_timeout_s)
        except (ProxyProtocolError, TimeoutError, OSError) as exc:
            log.warning("proxy_header_refused", listener=self.listener, peer=f"{peer[0]}:{peer[1]}",
                        reason=str(exc) or type(exc).__name__)
            conn.close()
            return
        if header.command is Command.LOCAL:  # the balancer's health check: nothing to serve
            conn.close()
            return
        client = header.source or peer  # UNKNOWN/UNSPEC: the balancer cannot tell, the peer stands
        loop = asyncio.get_running_loop()
        extra: dict[str, Any] = {}
        if self.ssl_context is not None:
            extra["ssl_handshake_timeout"] = self.header_timeout_s
        try:
            await loop.connect_accepted_socket(lambda: self.factory(client), conn, ssl=self.ssl_context, **extra)
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            log.info("tls_handshake_failed", listener=self.listener, client=f"{client[0]}:{client[1]}",
                     error=repr(exc))
            conn.close()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for task in list(self._pending):
            task.cancel()
        self.sock.close()

    async def wait_closed(self) -> None:
        tasks = [t for t in (self._task, *self._pending) if t is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
