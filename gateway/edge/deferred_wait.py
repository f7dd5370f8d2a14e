"""Waiting out an accepted connection's deferral while watching whether its peer is still there.

A connection over its address's handshake budget (or connection_creation_rate) is accepted and
waits before the gateway reads it.  A peer that closes or resets meanwhile (a flooder that
connects and leaves, or sends a ClientHello and leaves) would otherwise keep its place among
its address's waiting connections, its descriptor and its max.connections.per.ip count until
its turn came, only then to cost a handshake's key share and signature and fail.  The watch
ends that wait at once.

It asks the kernel for the peer's hang-up alone (EPOLLRDHUP: its FIN; EPOLLHUP/EPOLLERR: a
reset), not for readability: a ClientHello already sent waits in the socket, unread, without
waking the loop.  One epoll set per gateway holds every waiting socket and is itself watched by
the event loop.  Without epoll (not Linux) the wait is a plain sleep.
"""

from __future__ import annotations

import asyncio
import select
import socket

TURN, PEER_GONE = True, False  # wait_turn()'s answers
_HANGUP = getattr(select, "EPOLLRDHUP", 0) | getattr(select, "EPOLLHUP", 0) | getattr(select, "EPOLLERR", 0)


class HangupWatch:
    """The peers of waiting sockets, watched for hanging up; ``close()`` when the gateway stops."""

    __slots__ = ("_epoll", "_loop", "_waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: dict[int, asyncio.Future[bool]] = {}  # bounded by the waiting connections
        self._epoll = select.epoll() if hasattr(select, "epoll") else None
        if self._epoll is not None:
            loop.add_reader(self._epoll.fileno(), self._hung_up)

    def __len__(self) -> int:
        return len(self._waiting)

    async def wait_turn(self, sock: socket.socket, delay_s: float) -> bool:
        """After ``delay_s``: TURN; earlier, PEER_GONE as soon as the peer closes or resets ``sock``."""
        outcome: asyncio.Future[bool] = self._loop.create_future()
        timer = self._loop.call_later(delay_s, _settle, outcome, TURN)
        fd = sock.fileno()
        if self._epoll is not None:
            self._epoll.register(fd, _HANGUP)
            self._waiting[fd] = outcome
        try:
            return await outcome
        finally:
            timer.cancel()
            if self._waiting.pop(fd, None) is not None and self._epoll is not None and not self._epoll.closed:
                self._epoll.unregister(fd)  # before the socket is handed on, or closed

    def _hung_up(self) -> None:
        if self._epoll is None:
            return
        for fd, _ in self._epoll.poll(0):
            outcome = self._waiting.pop(fd, None)
            self._epoll.unregister(fd)  # level-triggered: it would fire until then
            if outcome is not None:
                _settle(outcome, PEER_GONE)

    def close(self) -> None:
        if self._epoll is not None and not self._epoll.closed:
            self._loop.remove_reader(self._epoll.fileno())
            self._epoll.close()


def _settle(outcome: asyncio.Future[bool], value: bool) -> None:
    if not outcome.done():
        outcome.set_result(value)
