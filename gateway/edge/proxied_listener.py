"""A listener behind a load balancer that speaks the PROXY protocol.

Each accepted connection must come from a trusted network and start with a PROXY header;
the header is read exactly (never a byte of the TLS ClientHello after it), so the socket can
then be handed to asyncio, with TLS if the listener has it, under the client's real address.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

from auth.client_address import ClientAddress
from gateway.edge.proxy_protocol import (
    DEFAULT_V2_MAX_BYTES,
    V2_SIGNATURE,
    Command,
    ProxyHeader,
    ProxyHeaderReader,
    ProxyProtocolError,
)
from gateway.ops.audit import REASON_CHARS, bounded_name
from gateway.ops.logs import get_logger

log = get_logger(component="proxy-protocol")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def trusted(peer: ClientAddress, networks: tuple[Network, ...]) -> bool:
    """Whether the balancer's (canonical: a dual-stack socket's IPv4 peer is IPv4) address is in a trusted network."""
    try:
        address = ipaddress.ip_address(peer.host)
    except ValueError:
        return False
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


async def proxied_client(sock: socket.socket, peer: ClientAddress, networks: tuple[Network, ...],
                         timeout_s: float, listener: str, v2_max_bytes: int = DEFAULT_V2_MAX_BYTES
                         ) -> ClientAddress | None:
    """The client's address from a trusted peer's PROXY header, or None once ``sock`` has been closed
    (untrusted peer, malformed or late header, or a LOCAL health check)."""
    if not trusted(peer, networks):
        # Anyone else could state any address: nothing is read from it.
        log.warning("proxy_untrusted_peer", listener=listener, peer=str(peer))
        sock.close()
        return None
    try:
        header = await asyncio.wait_for(read_proxy_header(sock, ProxyHeaderReader(v2_max_bytes)), timeout_s)
    except (ProxyProtocolError, TimeoutError, OSError) as exc:
        log.warning("proxy_header_refused", listener=listener, peer=str(peer),
                    reason=bounded_name(str(exc), REASON_CHARS) or type(exc).__name__)
        sock.close()
        return None
    if header.command is Command.LOCAL:  # the balancer's own health check: nothing to serve
        sock.close()
        return None
    return header.source or peer  # UNKNOWN/UNSPEC: the balancer cannot tell, the peer stands
