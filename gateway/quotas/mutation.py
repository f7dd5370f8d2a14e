"""controller_mutation_rate (KIP-599): one token bucket of partition mutations per quota entity.

Kafka meters topic and partition creations and deletions with a token bucket, not a windowed rate:
a bound of R mutations per second allows a burst of R × ``quota.window.num`` ×
``quota.window.size.seconds`` and refills at R per second (the bucket starts full). As measured
on Kafka 4.4:

- strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): the topics of a request are
  taken in order, and a topic is refused (THROTTLING_QUOTA_EXCEEDED) only while the bucket is
  negative; the topic that empties it, even by far more than it held, passes. A request with a
  refused topic gets the time the bucket needs to refill to 0 as its throttle, others none;
- permissive (older versions, which have no such error): the request always passes and is
  counted; its throttle is the time the bucket, now negative, needs to refill to 0.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from gateway.quotas.rate import QuotaWindow

MAX_BUCKETS = 100_000


@dataclass(slots=True, frozen=True)
class Admission:
    """What the bucket says of one request: passed or refused, and the throttle time it earned."""

    accepted: tuple[bool, ...]  # per item (topic), in order
    throttle_ms: int


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at_ms: float


class MutationBuckets:
    """The buckets of one gateway process, one per sensor entity (as the byte-rate sensors), shared by
    all its connections; the least recently used are dropped beyond ``max_buckets`` (a dropped
    bucket comes back full: bounded memory costs at most one burst per evicted entity)."""

    __slots__ = ("_buckets", "_clock", "max_buckets", "window")

    def __init__(self, window: QuotaWindow | None = None, *, max_buckets: int = MAX_BUCKETS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window or QuotaWindow()
        self.max_buckets = max_buckets
        self._clock = clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def burst(self, rate: float) -> float:
        return rate * self.window.num * self.window.size_ms / 1000.0

    def admit(self, sensor: str, rate: float, mutations: list[int], *, strict: bool) -> Admission:
        """Count each item's ``mutations`` (partitions) against ``sensor``'s bucket (bound ``rate`` per
        second), in order; when ``strict``, an item that finds the bucket negative is refused, not counted."""
        bucket = self._refilled(sensor, rate, self._clock() * 1000.0)
        if not strict:
            bucket.tokens -= sum(mutations)
            throttle = _refill_ms(bucket.tokens, rate, self.window) if bucket.tokens < 0 else 0
            return Admission((True,) * len(mutations), throttle)
        accepted = []
        for count in mutations:
            passes = bucket.tokens >= 0
            if passes:
                bucket.tokens -= count
            accepted.append(passes)
        throttle = 0 if all(accepted) else _refill_ms(bucket.tokens, rate, self.window)
        return Admission(tuple(accepted), throttle)

    def refund(self, sensor: str, rate: float, mutations: int) -> None:
        """Give back mutations counted for topics the broker then refused (Kafka never counted them)."""
        bucket = self._refilled(sensor, rate, self._clock() * 1000.0)
        bucket.tokens = min(self.burst(rate), bucket.tokens + mutations)

    def tokens(self, sensor: str, rate: float) -> float:
        """The bucket's level now (full when it has none): for tests and the metrics."""
        return self._refilled(sensor, rate, self._clock() * 1000.0).tokens

    def _refilled(self, sensor: str, rate: float, now_ms: float) -> _Bucket:
        buckets = self._buckets
        bucket = buckets.get(sensor)
        burst = self.burst(rate)
        if bucket is None:
            bucket = buckets[sensor] = _Bucket(burst, now_ms)
            if len(buckets) > self.max_buckets:
                buckets.popitem(last=False)
            return bucket
        buckets.move_to_end(sensor)
        # A lowered quota caps the level at once; a raised one refills from where the bucket is.
        bucket.tokens = min(burst, bucket.tokens + rate * max(now_ms - bucket.at_ms, 0.0) / 1000.0)
        bucket.at_ms = now_ms
        return bucket


def _refill_ms(tokens: float, rate: float, window: QuotaWindow) -> int:
    """How long a bucket at ``tokens`` (< 0) needs to come back to 0 at ``rate`` per second, in ms."""
    if rate <= 0:  # a zero quota never refills: silent for the whole window, as the byte-rate quotas
        return window.num * window.size_ms
    return int(-tokens / rate * 1000.0 + 0.5)
