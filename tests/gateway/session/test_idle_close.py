"""connections.max.idle.ms as one lazily re-armed timer per connection (gateway/transport/idle_close.py),
driven by a fake clock: no sockets, no sleeping."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.transport.idle_close import BUSY_RECHECK_S, IdleClose


@dataclass
class FakeTimer:
    when: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeLoop:
    now: float = 100.0
    timers: list[FakeTimer] = field(default_factory=list)

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.now + delay, callback)
        self.timers.append(timer)
        return timer

    def advance_to(self, when: float) -> None:
        """Run every timer due by ``when``, in order, as the loop would."""
        while due := sorted((t for t in self.timers if not t.cancelled and t.when <= when), key=lambda t: t.when):
            timer = due[0]
            self.timers.remove(timer)
            self.now = timer.when
            timer.callback()
        self.now = when

    @property
    def pending(self) -> list[FakeTimer]:
        return [t for t in self.timers if not t.cancelled]


@dataclass
class FakeConnection:
    last_active: float
    in_flight: int = 0
    closed: list[tuple[float, str]] = field(default_factory=list)
    clock: FakeLoop | None = None

    @property
    def busy(self) -> bool:
        return self.in_flight > 0

    def close_idle(self, reason: str) -> None:
        assert self.clock is not None
        self.closed.append((self.clock.now, reason))


def watched(limit_ms: int) -> tuple[FakeLoop, FakeConnection, IdleClose]:
    loop = FakeLoop()
    conn = FakeConnection(last_active=loop.now, clock=loop)
    idle = IdleClose(limit_ms, loop, conn)
    idle.start()
    return loop, conn, idle


def test_a_connection_that_sends_nothing_is_closed_once_the_limit_has_passed() -> None:
    loop, conn, _ = watched(600)
    loop.advance_to(100.6)
    assert conn.closed == []  # idle for exactly the limit: not more than it
    loop.advance_to(101.0)
    assert [when for when, _ in conn.closed] == [100.601]
    assert "connections.max.idle.ms" in conn.closed[0][1] and "600 ms" in conn.closed[0][1]
    assert loop.pending == []  # closed once, nothing left armed


def test_activity_moves_the_deadline_without_touching_the_timer() -> None:
    loop, conn, _ = watched(1000)
    loop.advance_to(100.9)
    conn.last_active = 100.9  # the client sent a request, answered at once
    loop.advance_to(101.5)
    assert conn.closed == []
    assert [t.when for t in loop.pending] == [101.9]  # re-armed for the new deadline when the old one fired
    loop.advance_to(103.0)
    assert [round(when, 3) for when, _ in conn.closed] == [101.901]


def test_a_connection_waiting_for_a_response_is_not_idle() -> None:
    loop, conn, _ = watched(1000)
    conn.in_flight = 1  # e.g. a long-polling Fetch sent at 100.0
    loop.advance_to(105.0)
    assert conn.closed == []
    assert len(loop.pending) == 1 and loop.pending[0].when - 105.0 <= BUSY_RECHECK_S
    conn.in_flight = 0  # answered at 105: the client has still sent nothing since 100.0, as before
    loop.advance_to(106.0)
    assert len(conn.closed) == 1 and conn.closed[0][0] <= 105.0 + BUSY_RECHECK_S


def test_a_closed_connection_leaves_no_timer() -> None:
    loop, conn, idle = watched(1000)
    idle.stop()
    loop.advance_to(200.0)
    assert conn.closed == [] and loop.pending == []
    idle.stop()  # twice is harmless (connection_lost after an abort)


def test_one_timer_per_connection_whatever_the_traffic() -> None:
    loop, conn, _ = watched(1000)
    for step in range(1, 50):  # a request every 100 ms for 5 s
        conn.last_active = 100.0 + step / 10
        loop.advance_to(conn.last_active)
        assert len(loop.pending) == 1
    assert conn.closed == []
