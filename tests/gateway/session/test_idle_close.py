"""connections.max.idle.ms with shared, lazily re-armed timers (gateway/transport/idle_close.py),
driven by a fake clock: no sockets, no sleeping."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.transport.idle_close import BUSY_RECHECK_S, IdleWatch


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

    def call_later(self, delay: float, callback: Callable[[int], None], tick: int, /) -> FakeTimer:
        timer = FakeTimer(self.now + delay, lambda: callback(tick))
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


@dataclass(eq=False)
class FakeConnection:
    last_active: float
    in_flight: int = 0
    closed: list[tuple[float, str]] = field(default_factory=list)
    clock: FakeLoop | None = None
    idle_tick: int | None = None
    watch: IdleWatch | None = None

    @property
    def busy(self) -> bool:
        return self.in_flight > 0

    def close_idle(self, reason: str) -> None:
        assert self.clock is not None and self.watch is not None
        self.closed.append((self.clock.now, reason))
        self.watch.stop(self)  # as the connection's connection_lost does


def watched(limit_ms: int, connections: int = 1) -> tuple[FakeLoop, list[FakeConnection], IdleWatch]:
    loop = FakeLoop()
    watch = IdleWatch(limit_ms, loop)
    conns = [FakeConnection(last_active=loop.now, clock=loop, watch=watch) for _ in range(connections)]
    for conn in conns:
        watch.start(conn)
    return loop, conns, watch


def test_a_connection_that_sends_nothing_is_closed_once_the_limit_has_passed() -> None:
    loop, [conn], watch = watched(600)
    loop.advance_to(100.6)
    assert conn.closed == []  # idle for exactly the limit: not more than it
    loop.advance_to(101.0)
    [(when, reason)] = conn.closed
    assert 100.6 < when <= 100.6 + watch.tick_s + 0.001  # at most one tick late
    assert "connections.max.idle.ms" in reason and "600 ms" in reason
    assert loop.pending == [] and watch.timers == 0  # closed once, nothing left armed


def test_activity_moves_the_deadline_without_touching_the_timer() -> None:
    loop, [conn], watch = watched(1000)
    loop.advance_to(100.9)
    conn.last_active = 100.9  # the client sent a request, answered at once
    loop.advance_to(101.5)
    assert conn.closed == []
    [timer] = loop.pending  # re-armed for the new deadline when the old one fired
    assert 101.9 <= timer.when <= 101.9 + watch.tick_s
    loop.advance_to(103.0)
    [(when, _)] = conn.closed
    assert 101.9 < when <= 101.9 + watch.tick_s + 0.001


def test_a_connection_waiting_for_a_response_is_not_idle() -> None:
    loop, [conn], watch = watched(1000)
    conn.in_flight = 1  # e.g. a long-polling Fetch sent at 100.0
    loop.advance_to(105.0)
    assert conn.closed == []
    assert len(loop.pending) == 1 and loop.pending[0].when - 105.0 <= BUSY_RECHECK_S + watch.tick_s
    conn.in_flight = 0  # answered at 105: the client has still sent nothing since 100.0, as before
    loop.advance_to(106.0)
    assert len(conn.closed) == 1 and conn.closed[0][0] <= 105.0 + BUSY_RECHECK_S + watch.tick_s


def test_a_closed_connection_leaves_no_timer() -> None:
    loop, [conn], watch = watched(1000)
    watch.stop(conn)
    loop.advance_to(200.0)
    assert conn.closed == [] and loop.pending == [] and watch.timers == 0
    watch.stop(conn)  # twice is harmless (connection_lost after an abort)


def test_one_timer_per_connection_at_most_whatever_the_traffic() -> None:
    loop, [conn], _ = watched(1000)
    for step in range(1, 50):  # a request every 100 ms for 5 s
        conn.last_active = 100.0 + step / 10
        loop.advance_to(conn.last_active)
        assert len(loop.pending) == 1
    assert conn.closed == []


def test_connections_due_in_the_same_tick_share_one_timer() -> None:
    # One loop timer per connection cost ~0.6 KiB of every idle connection.
    loop, conns, watch = watched(600_000, connections=100)
    assert len(loop.pending) == 1 and watch.timers == 1
    conns[0].last_active = 130.0  # one client spoke since: it alone is put in a later bucket
    loop.advance_to(100.0 + 600.0 + watch.tick_s + 0.001)
    assert [len(c.closed) for c in conns] == [0] + [1] * 99
    assert len(loop.pending) == 1
    loop.advance_to(800.0)
    assert len(conns[0].closed) == 1 and loop.pending == [] and watch.timers == 0


def test_connections_closed_by_a_bucket_leave_the_others_in_it_watched() -> None:
    # Closing one connection of a bucket while the bucket fires (its connection_lost stops it) must
    # neither skip the others nor keep the closed one in a new bucket.
    loop, conns, watch = watched(1000, connections=3)
    loop.advance_to(102.0)
    assert [len(c.closed) for c in conns] == [1, 1, 1]
    assert loop.pending == [] and watch.timers == 0 and all(c.idle_tick is None for c in conns)
