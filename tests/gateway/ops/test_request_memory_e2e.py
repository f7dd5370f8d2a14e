"""queued.max.request.bytes on the wire: many connections half-send large requests to a real
gateway (Tansu upstream); the budget holds, only they wait, and another client is served.

Scaled for CI: 20 connections × 20 MB requests, half sent, against a 48 MiB budget (two such
requests fit beside the reserve for small ones).  bench/availability/request_memory.py runs the full-size
case (20 × 100 MB) against the default budget and prints RSS and latency figures.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Iterator

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.frame_receiver import FrameReceiver
from tests.harness import GatewayThread
from tests.wire_client import assert_served

MiB = 1024 * 1024
BUDGET = 48 * MiB
CONNECTIONS = 20
SIZE = 20_000_000  # announced by each, half of it sent
WAIT_S = 30.0  # an upper bound on how long the gateway may take to reach each state, not a timing


@pytest.fixture
def budgeted(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    gateway = GatewayThread(broker.bootstrap, {"queued.max.request.bytes": BUDGET}).start()
    try:
        yield gateway
    finally:
        gateway.stop()


class HalfSenders:
    """Connections that announce SIZE bytes and push half of them, never blocking the test."""

    def __init__(self, address: str, count: int) -> None:
        host, port = address.rsplit(":", 1)
        self.socks: list[socket.socket] = []
        self.left: dict[socket.socket, int] = {}
        for _ in range(count):
            sock = socket.create_connection((host, int(port)))
            sock.sendall(struct.pack(">i", SIZE))
            sock.setblocking(False)
            self.socks.append(sock)
            self.left[sock] = SIZE // 2
        self._chunk = memoryview(bytes(MiB))

    def push_until(self, done: Callable[[], bool]) -> None:
        """Send what the gateway accepts until ``done()`` (checked between rounds)."""
        deadline = time.monotonic() + WAIT_S
        while not done():
            assert time.monotonic() < deadline, "the gateway did not reach the expected state"
            live = [sock for sock in self.left if sock.fileno() >= 0 and self.left[sock]]
            _, writable, _ = select.select([], live, [], 0.05)
            for sock in writable:
                try:
                    self.left[sock] -= sock.send(self._chunk[: min(len(self._chunk), self.left[sock])])
                except BlockingIOError:
                    continue

    def close(self, socks: list[socket.socket]) -> None:
        for sock in socks:
            sock.close()
            self.left.pop(sock, None)


def _state(gateway: GatewayThread) -> tuple[int, int, list[int]]:
    def read() -> tuple[int, int, list[int]]:
        budget = gateway.gateway.ctx.request_memory
        return budget.in_use, budget.waiting(), [c.session.receiver.held() for c in gateway.gateway._connections]
    state: tuple[int, int, list[int]] = gateway.call(read)
    return state


def _metric(gateway: GatewayThread, name: str) -> float:
    text: str = gateway.call(gateway.gateway.ctx.metrics.registry.render)
    [line] = [line for line in text.splitlines() if line.startswith(name + " ")]
    return float(line.split()[1])


def test_half_sent_large_requests_wait_for_the_budget_and_another_client_is_served(budgeted: GatewayThread) -> None:
    gateway = budgeted
    frame_bytes = SIZE + 4
    senders = HalfSenders(gateway.bootstrap, CONNECTIONS)
    try:
        admitted = 2  # two fit under the budget less its reserve for small requests
        senders.push_until(lambda: _state(gateway)[:2] == (admitted * frame_bytes, CONNECTIONS - admitted))
        in_use, _, held = _state(gateway)
        assert in_use <= BUDGET
        assert sum(held) <= BUDGET + CONNECTIONS * FrameReceiver.SCRATCH_BYTES
        assert sorted(held)[: CONNECTIONS - admitted] == [FrameReceiver.SCRATCH_BYTES] * (CONNECTIONS - admitted)
        assert _metric(gateway, "ksgate_request_memory_bytes") == admitted * frame_bytes
        assert _metric(gateway, "ksgate_request_memory_waiting") == CONNECTIONS - admitted
        assert_served(gateway.bootstrap)

        # The holders send their half, then give up: the next two in line get the budget and read on.
        ports = gateway.call(lambda: {c.session.client.port for c in gateway.gateway._connections
                                      if c.session.receiver.held() > FrameReceiver.SCRATCH_BYTES})
        holders = [sock for sock in senders.socks if sock.getsockname()[1] in ports]
        assert len(holders) == admitted
        senders.push_until(lambda: not any(senders.left[sock] for sock in holders))
        in_use, _, held = _state(gateway)
        assert in_use == admitted * frame_bytes and sum(held) <= BUDGET + CONNECTIONS * FrameReceiver.SCRATCH_BYTES
        senders.close(holders)
        senders.push_until(lambda: _state(gateway)[:2] == (admitted * frame_bytes, CONNECTIONS - 2 * admitted))
        assert_served(gateway.bootstrap)
    finally:
        senders.close(list(senders.socks))
    deadline = time.monotonic() + WAIT_S
    while _state(gateway) != (0, 0, []):
        assert time.monotonic() < deadline, f"request memory not released: {_state(gateway)}"
        time.sleep(0.05)
