"""Throttling of failed authentications per source address, sans-IO (the clock is passed in).

After ``limit`` failures from one address within ``window_ms``, its attempts are refused before any
credential is checked, until enough of those failures have aged out of the window.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

DEFAULT_FAILURES_PER_IP = 10
DEFAULT_WINDOW_MS = 60_000
DEFAULT_MAX_TRACKED_IPS = 10_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class LoginThrottle:
    """Failure times per address, at most ``limit`` each, for at most ``max_hosts`` addresses.

    Memory is bounded by max_hosts × limit timestamps: when a new address would exceed
    ``max_hosts``, the address whose last failure is oldest is forgotten (the one most
    likely to have aged out anyway).  Refused attempts are not failures: a client that
    keeps trying gets ``limit`` attempts per window, no more and no fewer.
    ``limit <= 0`` disables the throttle.
    """

    __slots__ = ("_clock", "_failures", "limit", "max_hosts", "window_ms")

    def __init__(self, limit: int = DEFAULT_FAILURES_PER_IP, window_ms: int = DEFAULT_WINDOW_MS,
                 max_hosts: int = DEFAULT_MAX_TRACKED_IPS, clock_ms: Callable[[], int] = monotonic_ms) -> None:
        self.limit = limit
        self.window_ms = window_ms
        self.max_hosts = max_hosts
        self._clock = clock_ms
        self._failures: OrderedDict[str, deque[int]] = OrderedDict()  # oldest last failure first

    def __len__(self) -> int:
        """Addresses tracked now."""
        return len(self._failures)

    def refuses(self, host: str) -> bool:
        """Whether an attempt from ``host`` must be refused without checking its credentials."""
        if self.limit <= 0:
            return False
        times = self._failures.get(host)
        if times is None:
            return False
        self._expire(host, times, self._clock())
        return len(times) >= self.limit

    def record_failure(self, host: str) -> bool:
        """Count a failure; True when it brings ``host`` to the limit (it is refused from now on)."""
        if self.limit <= 0 or self.max_hosts <= 0:
            return False
        now = self._clock()
        times = self._failures.get(host)
        if times is None:
            while len(self._failures) >= self.max_hosts:
                self._failures.popitem(last=False)
            times = self._failures[host] = deque(maxlen=self.limit)
        else:
            self._failures.move_to_end(host)
        times.append(now)  # maxlen: the oldest falls off, the count stays at most limit
        return len(times) == self.limit and now - times[0] < self.window_ms

    def _expire(self, host: str, times: deque[int], now: int) -> None:
        horizon = now - self.window_ms
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[host]
