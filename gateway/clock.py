"""The clock a proxy session reads: an input, injected, so a test can drive time as it drives bytes.

The session never calls time.time() or time.monotonic() itself; its adapter hands it this
object (the system's clock in production, a hand-set one in tests).
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the epoch: what Kafka's session expiry and token lifetimes count in."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back: what latencies are measured with."""
        ...


class SystemClock:
    __slots__ = ()

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    # The C function itself, not a method wrapping it: read twice per relayed request (a slot's arrival, its
    # answer's latency), and a Python frame costs more than the read.
    monotonic = staticmethod(time.monotonic)


SYSTEM_CLOCK = SystemClock()
