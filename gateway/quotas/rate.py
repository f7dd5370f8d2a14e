"""Kafka's quota rate: a sum over ``quota.window.num`` samples of ``quota.window.size.seconds``.

Our own code for the semantics of Kafka's metrics ``Rate`` over a windowed sum, which is what a
Kafka broker measures client quotas with:

- a value is added to the current sample; a sample is complete once its window has elapsed,
  and the next one (reusing the oldest slot once all exist) starts at the time of the record;
- samples older than ``num × window`` are reset before measuring;
- the rate is the sum of the samples over the elapsed time since the oldest sample started,
  but never over less than ``num - 1`` full windows (so a new client is not judged on its
  first milliseconds), and never over less than 1 ms;
- a quota is violated when the rate is above the bound (a rate equal to it is fine), and the
  throttle time is ``round((rate - bound) / bound × window)`` ms: how long the client must stay
  silent for the rate over the window to come back to the bound.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class QuotaWindow:
    """``quota.window.num`` and ``quota.window.size.seconds`` (Kafka's names and defaults)."""

    num: int = 11
    size_ms: int = 1000


class SampledRate:
    """A rate per second, measured as a Kafka broker measures a client's quota."""

    __slots__ = ("_current", "_starts", "_values", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self._starts: list[float] = []  # when each sample's window began (ms)
        self._values: list[float] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        starts = self._starts
        if not starts:
            starts.append(now_ms)
            self._values.append(0.0)
        elif now_ms - starts[self._current] >= self.window.size_ms:  # complete: move to the next sample
            self._current = (self._current + 1) % self.window.num
            if self._current >= len(starts):
                starts.append(now_ms)
                self._values.append(0.0)
            else:
                starts[self._current] = now_ms
                self._values[self._current] = 0.0
        self._values[self._current] += value

    def measure(self, now_ms: float) -> float:
        """The rate per second at ``now_ms``."""
        self._purge(now_ms)
        return sum(self._values) / (self.window_ms(now_ms) / 1000.0)

    def window_ms(self, now_ms: float) -> float:
        """The time the rate is measured over (after expired samples were reset)."""
        self._purge(now_ms)
        size = self.window.size_ms
        oldest = min(self._starts) if self._starts else now_ms
        elapsed = now_ms - oldest
        full = int(elapsed / size)
        least = self.window.num - 1
        if full < least:
            elapsed += (least - full) * size
        return max(elapsed, 1.0)

    def _purge(self, now_ms: float) -> None:
        expire = self.window.num * self.window.size_ms
        starts, values = self._starts, self._values
        for i, start in enumerate(starts):
            if now_ms - start >= expire:
                starts[i] = now_ms
                values[i] = 0.0


def throttle_time_ms(rate: float, bound: float, window_ms: float) -> int:
    """Kafka's throttle time for a measured ``rate`` over ``bound``: 0 unless the rate exceeds it."""
    if rate <= bound:
        return 0
    if bound <= 0:  # a zero quota: silent for the whole window (Kafka's formula divides by it)
        return int(window_ms)
    return int((rate - bound) / bound * window_ms + 0.5)  # Java's Math.round (half up; the value is > 0)
