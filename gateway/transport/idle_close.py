"""Kafka's connections.max.idle.ms for every connection of one event loop: shared timers, re-armed lazily.

A sweep over every connection every half second did work per open connection on the event
loop (milliseconds at 10,000 connections, stalling every client); one loop timer per connection
cost ~0.6 KiB each (handle, libuv timer, callback). Here connections wait in buckets, one per
tick their deadline falls in, and each bucket has one loop timer. Activity only updates a
timestamp; when a bucket's timer fires, each of its connections is closed, or put in the bucket
of its new deadline. A close comes at most one tick late, never early.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """What of the event loop is used (a fake in tests)."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[int], None], tick: int, /) -> Timer: ...


class Watched(Protocol):
    """The connection: when its client last sent bytes (on the clock's time), whether a
    response is outstanding, how to close it, and the bucket it waits in (the watch's to set)."""

    last_active: float
    idle_tick: int | None

    @property
    def busy(self) -> bool: ...

    def close_idle(self, reason: str) -> None: ...


# While a response is outstanding the connection is not idle (as before): look again this
# often, the old sweep's period, so a close after a long request keeps its old timing.
BUSY_RECHECK_S = 0.5
# A timer may fire up to a clock tick early: never re-arm for less than this.
MIN_DELAY_S = 0.001
# The buckets' width: a tenth of the limit, at most a second (a 600 s limit: at most 600 timers
# however many connections; a close at most 1 s late).
MAX_TICK_S = 1.0


@dataclass(slots=True)
class IdleWatch:
    """Closes each started connection once its client has sent nothing for more than ``limit_ms``
    while no response was outstanding."""

    limit_ms: int
    clock: Clock
    _due: dict[int, set[Watched]] = field(default_factory=dict, init=False)  # by tick
    _timers: dict[int, Timer] = field(default_factory=dict, init=False)
    tick_s: float = field(init=False)

    def __post_init__(self) -> None:
        self.tick_s = max(min(MAX_TICK_S, self.limit_ms / 10_000), MIN_DELAY_S)

    @property
    def timers(self) -> int:
        return len(self._timers)

    def start(self, conn: Watched) -> None:
        self._put(conn, self.clock.time() + self.limit_ms / 1000)

    def stop(self, conn: Watched) -> None:
        tick, conn.idle_tick = conn.idle_tick, None
        if tick is None or (bucket := self._due.get(tick)) is None:
            return
        bucket.discard(conn)
        if not bucket:
            del self._due[tick]
            self._timers.pop(tick).cancel()

    def _put(self, conn: Watched, when: float) -> None:
        tick = math.ceil(when / self.tick_s)
        bucket = self._due.get(tick)
        if bucket is None:
            bucket = self._due[tick] = set()
            delay = max(tick * self.tick_s - self.clock.time(), MIN_DELAY_S)
            self._timers[tick] = self.clock.call_later(delay, self._fire, tick)
        bucket.add(conn)
        conn.idle_tick = tick

    def _fire(self, tick: int) -> None:
        self._timers.pop(tick, None)
        limit_s = self.limit_ms / 1000
        for conn in list(self._due.pop(tick, ())):
            if conn.idle_tick != tick:  # stopped meanwhile (closed by a close earlier in this bucket)
                continue
            conn.idle_tick = None
            now = self.clock.time()
            deadline = conn.last_active + limit_s
            if conn.busy:
                self._put(conn, now + min(limit_s, BUSY_RECHECK_S))
            elif now > deadline:
                conn.close_idle(f"idle for more than {self.limit_ms} ms (connections.max.idle.ms)")
            else:
                self._put(conn, max(deadline, now + MIN_DELAY_S))
