"""bench/latency.py's consumer stamps each record when it arrives, not when a batch call gives up waiting.

librdkafka's ``consume(n, timeout)`` returns once it has n records or the timeout has passed, so a
consumer that stamps records after such a call reads every arrival up to the timeout late. The fake
consumer below keeps those semantics on a fake clock: records arrive at set instants, and a call that
waits moves the clock on as the real one would.
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

import bench.latency as latency
from bench.latency import STAMP, Spec

RATE = 1000  # records per second: one every millisecond, far fewer than a batch call asks for
WARMUP_S, SECONDS = 0.01, 0.05


@dataclass(slots=True)
class FakeClock:
    ns: int = 1_000_000_000

    def time_ns(self) -> int:
        return self.ns

    def monotonic(self) -> float:
        return self.ns / 1e9


@dataclass(slots=True)
class FakeMessage:
    payload: bytes

    def error(self) -> None:
        return None

    def value(self) -> bytes:
        return self.payload


@dataclass(slots=True)
class FakeConsumer:
    """Records sent at ``arrivals`` (ns) arrive the instant they are sent."""

    clock: FakeClock
    arrivals: list[int]
    taken: int = 0
    calls: list[tuple[str, float]] = field(default_factory=list)

    def assign(self, partitions: Any) -> None:
        pass

    def close(self) -> None:
        pass

    def _arrived(self) -> int:
        return sum(1 for at in self.arrivals[self.taken:] if at <= self.clock.ns)

    def _take(self, n: int) -> list[FakeMessage]:
        start = self.taken
        self.taken += n
        return [FakeMessage(STAMP.pack(self.arrivals[i], i) + b"\0" * 8) for i in range(start, self.taken)]

    def poll(self, timeout: float) -> FakeMessage | None:
        self.calls.append(("poll", timeout))
        if not self._arrived():
            nxt = self.arrivals[self.taken] if self.taken < len(self.arrivals) else None
            limit = self.clock.ns + int(timeout * 1e9)
            if nxt is None or nxt > limit:
                self.clock.ns = limit
                return None
            self.clock.ns = nxt
        return self._take(1)[0]

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        self.calls.append(("consume", timeout))
        if self.taken == 0 and timeout >= 1.0:  # the start-up call: connected, before any record is sent
            return []
        limit = self.clock.ns + int(timeout * 1e9)
        # Waits for num_messages records or the timeout, whichever is first (librdkafka's consume_batch).
        while self._arrived() < num_messages:
            ahead = [at for at in self.arrivals[self.taken:] if at > self.clock.ns]
            if not ahead or ahead[0] > limit:
                self.clock.ns = max(self.clock.ns, limit)
                break
            self.clock.ns = ahead[0]
        return self._take(min(num_messages, self._arrived()))


def test_each_record_is_stamped_when_it_arrives(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    spec = Spec({}, "t", RATE, 64, WARMUP_S, SECONDS, 0.0, 5)
    start = clock.ns + 1_000_000
    arrivals = [start + i * 1_000_000_000 // RATE for i in range(spec.total)]
    fake = FakeConsumer(clock, arrivals)
    monkeypatch.setattr(latency, "Consumer", lambda config: fake)
    # The time module itself (the consumer reads time.time_ns and time.monotonic); undone after the test.
    monkeypatch.setattr("time.time_ns", clock.time_ns)
    monkeypatch.setattr("time.monotonic", clock.monotonic)
    out: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
    latency.consume(spec, threading.Event(), out)  # type: ignore[arg-type]
    result = out.get_nowait()
    assert result["received"] == spec.total
    # Every record is read the instant it arrives: no latency is added by the way it is read.
    assert result["p99.9"] == 0.0, result
