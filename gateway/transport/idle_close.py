"""Kafka's connections.max.idle.ms for one connection: one loop timer, re-armed lazily.

A sweep over every connection every half second did work per open connection on the event
loop (milliseconds at 10,000 connections, stalling every client). Here each connection has
one timer due when it could first be idle for too long; activity only updates a timestamp,
and the timer, when it fires, closes the connection or re-arms itself for the new deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Timer(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """What of the event loop is used (a fake in tests)."""

    def time(self) -> float: ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer: ...


class Watched(Protocol):
    """The connection: when its client last sent bytes (on the clock's time), whether a
    response is outstanding, and how to close it."""

    last_active: float

    @property
    def busy(self) -> bool: ...

    def close_idle(self, reason: str) -> None: ...


# While a response is outstanding the connection is not idle (as before): look again this
# often, the old sweep's period, so a close after a long request keeps its old timing.
BUSY_RECHECK_S = 0.5
# A timer may fire up to a clock tick early: never re-arm for less than this.
MIN_DELAY_S = 0.001


@dataclass(slots=True)
class IdleClose:
    """Closes ``conn`` once its client has sent nothing for more than ``limit_ms`` while no
    response was outstanding."""

    limit_ms: int
    clock: Clock
    conn: Watched
    _timer: Timer | None = field(default=None, init=False)

    def start(self) -> None:
        self._arm(self.limit_ms / 1000)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, delay_s: float) -> None:
        self._timer = self.clock.call_later(max(delay_s, MIN_DELAY_S), self._check)

    def _check(self) -> None:
        self._timer = None
        limit_s = self.limit_ms / 1000
        if self.conn.busy:
            self._arm(min(limit_s, BUSY_RECHECK_S))
            return
        deadline = self.conn.last_active + limit_s
        now = self.clock.time()
        if now > deadline:
            self.conn.close_idle(f"idle for more than {self.limit_ms} ms (connections.max.idle.ms)")
        else:
            self._arm(deadline - now)
