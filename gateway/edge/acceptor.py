"""Accepting client connections on a listening socket, one admit-or-refuse decision per TCP connection.

asyncio's create_server reveals a connection only after its TLS handshake; accepting here
lets the connection limits refuse an address before any TLS or Kafka byte is processed.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Callable

from auth.client_address import ClientAddress
from gateway.ops.logs import get_logger

log = get_logger(component="acceptor")

OnAccept = Callable[[socket.socket, ClientAddress], None]

# Out of descriptors or memory: accepting again at once would spin; asyncio waits the same.
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def set_ipv6_only(sock: socket.socket, ipv6_only: bool) -> None:
    """Before bind: an AF_INET6 listening socket serves IPv6 clients only, or IPv4 ones too (dual-stack).
    Always set, never the host's default (net.ipv6.bindv6only), so the listener means what its config says."""
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1 if ipv6_only else 0)


class Acceptor:
    """Accepts connections (a batch per readiness event) and hands each to ``on_accept``,
    non-blocking; the listening socket is closed by ``close()``.  Quacks like asyncio's
    Server where the gateway uses it (``sockets``, ``close``, ``wait_closed``)."""

    BATCH = 128  # connections accepted per wake-up, so a flood cannot starve other callbacks
    RETRY_AFTER_S = 1.0

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, on_accept: OnAccept) -> None:
        self._loop = loop
        self._sock = sock
        self._on_accept = on_accept
        self._closed = False
        loop.add_reader(sock.fileno(), self._ready)

    @property
    def sockets(self) -> list[socket.socket]:
        return [self._sock]

    def _ready(self) -> None:
        for _ in range(self.BATCH):
            try:
                conn, address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. ECONNABORTED: that connection is gone, others are not
                log.warning("accept_failed", error=repr(exc))
                if exc.errno in _RESOURCE_ERRNOS and not self._closed:
                    self._loop.remove_reader(self._sock.fileno())
                    self._loop.call_later(self.RETRY_AFTER_S, self._resume)
                return
            conn.setblocking(False)
            # The one place a direct client's address is made: every consumer gets this canonical value.
            self._on_accept(conn, ClientAddress.of_socket(address))

    def _resume(self) -> None:
        if not self._closed:
            self._loop.add_reader(self._sock.fileno(), self._ready)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.remove_reader(self._sock.fileno())
        self._sock.close()

    async def wait_closed(self) -> None:
        """Nothing to wait for: connections outlive their acceptor and are closed by their owner."""
