"""Waiting out an accepted connection's deferral while watching whether its peer is still there.

A connection over its address's handshake budget (or connection_creation_rate) is accepted and
waits before the gateway reads it.  A peer that closes or resets meanwhile without sending
anything (a flooder that connects and leaves) would otherwise keep its place among its
address's waiting connections, its descriptor and its max.connections.per.ip count until its
turn came, only then to fail its handshake.  Watching the socket ends that wait at once.

Once the peer has sent something (its ClientHello) the watch stops: the bytes stay in the
socket for the handshake (peeked, never read), and a readable socket cannot be watched again
without spinning until they are read.
"""

from __future__ import annotations

import asyncio
import socket

TURN, PEER_GONE = True, False  # wait_turn()'s answers


async def wait_turn(sock: socket.socket, delay_s: float) -> bool:
    """After ``delay_s``: TURN; earlier, PEER_GONE once the peer closed or reset ``sock`` having sent nothing."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[bool] = loop.create_future()
    fd = sock.fileno()
    timer = loop.call_later(delay_s, _settle, outcome, TURN)
    loop.add_reader(fd, _peek, loop, sock, fd, outcome)
    try:
        return await outcome
    finally:
        timer.cancel()
        loop.remove_reader(fd)


def _peek(loop: asyncio.AbstractEventLoop, sock: socket.socket, fd: int, outcome: asyncio.Future[bool]) -> None:
    try:
        peeked = sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return  # a spurious wake-up: keep watching
    except OSError:  # reset: the peer is gone
        peeked = b""
    loop.remove_reader(fd)  # either way nothing more to watch: gone, or its bytes wait for the handshake
    if not peeked:
        _settle(outcome, PEER_GONE)


def _settle(outcome: asyncio.Future[bool], value: bool) -> None:
    if not outcome.done():
        outcome.set_result(value)
