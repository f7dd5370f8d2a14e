"""The quota sensors of one gateway process: one rate per quota entity, shared by its connections.

As on a Kafka broker, every connection of an entity (``user=alice``, or one user's client id under
a ``<default>`` entity) adds to the same rate, so opening more connections buys no more bandwidth
(per gateway instance: N instances allow up to N times the quota, as N brokers do). Sensors exist
only for entities with a quota; the least recently used are dropped beyond ``max_sensors``.

Per configured entity (the book's label, ``user=<default>`` for all users under the default) the
totals the metrics export are kept here too, and a THROTTLED audit event is written at most once
per ``AUDIT_INTERVAL_MS`` per entity, with the number of throttles it stands for.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from gateway.quotas.lookup import CONTROLLER_MUTATION_RATE, REQUEST_PERCENTAGE
from gateway.quotas.mutation import MutationBuckets
from gateway.quotas.mutation_request import MutationVerdict
from gateway.quotas.rate import QuotaWindow, SampledRate, throttle_time_ms

AUDIT_INTERVAL_MS = 10_000
MAX_SENSORS = 100_000


@dataclass(slots=True)
class EntityTotals:
    """What one configured quota entity did, for /metrics (counters since start)."""

    kind: str
    entity: str
    recorded: float = 0.0  # bytes, or CPU percent-seconds for request_percentage
    throttle_ms: int = 0
    throttled: int = 0
    bound: float = 0.0
    # THROTTLED audit events: when one was last written, and how many throttles since
    audit_at_ms: float = float("-inf")
    unaudited: int = 0


ThrottleSink = Callable[[EntityTotals, str, int, int], None]  # (totals, sensor entity, throttle ms, count)


class QuotaSensors:
    __slots__ = ("_clock", "_rates", "audit", "max_sensors", "mutations", "totals", "window")

    def __init__(self, window: QuotaWindow | None = None, *, max_sensors: int = MAX_SENSORS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window or QuotaWindow()
        self.max_sensors = max_sensors
        self._clock = clock
        self._rates: OrderedDict[tuple[str, str], SampledRate] = OrderedDict()
        self.totals: dict[tuple[str, str], EntityTotals] = {}
        self.audit: ThrottleSink | None = None  # set by the server when the audit log is on
        self.mutations = MutationBuckets(self.window, max_buckets=max_sensors, clock=clock)

    def now_ms(self) -> float:
        return self._clock() * 1000.0

    def record(self, kind: str, sensor: str, label: str, bound: float, value: float) -> int:
        """Add ``value`` to ``sensor``'s rate; the throttle time (ms) the client has earned, 0 if within."""
        now = self.now_ms()
        rate = self._rate(kind, sensor)
        rate.record(value, now)
        totals = self._totals(kind, label, bound)
        totals.recorded += value
        measured = rate.measure(now)
        if measured <= bound:
            return 0
        throttle = throttle_time_ms(measured, bound, rate.window_ms(now))
        if kind == REQUEST_PERCENTAGE:  # as Kafka: a request-time throttle lasts at most one window
            throttle = min(throttle, self.window.size_ms)
        if throttle > 0:
            self._throttled(totals, sensor, throttle, now)
        return throttle

    def mutated(self, sensor: str, label: str, bound: float, verdict: MutationVerdict) -> None:
        """controller_mutation_rate judged a request: its totals (a refusal counts as a throttle)."""
        totals = self._totals(CONTROLLER_MUTATION_RATE, label, bound)
        if verdict.throttle_ms > 0:
            self._throttled(totals, sensor, verdict.throttle_ms, self.now_ms())

    def rate_of(self, kind: str, sensor: str) -> float:
        """The current rate of a sensor (0 when it has none): for tests and the metrics."""
        rate = self._rates.get((kind, sensor))
        return rate.measure(self.now_ms()) if rate is not None else 0.0

    def _rate(self, kind: str, sensor: str) -> SampledRate:
        key = (kind, sensor)
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = SampledRate(self.window)
            if len(self._rates) > self.max_sensors:
                self._rates.popitem(last=False)
        else:
            self._rates.move_to_end(key)
        return rate

    def _totals(self, kind: str, label: str, bound: float) -> EntityTotals:
        totals = self.totals.get((kind, label))
        if totals is None:
            totals = self.totals[(kind, label)] = EntityTotals(kind, label)
        totals.bound = bound
        return totals

    def _throttled(self, totals: EntityTotals, sensor: str, throttle: int, now: float) -> None:
        totals.throttle_ms += throttle
        totals.throttled += 1
        totals.unaudited += 1
        if self.audit is not None and now - totals.audit_at_ms >= AUDIT_INTERVAL_MS:
            count, totals.unaudited, totals.audit_at_ms = totals.unaudited, 0, now
            self.audit(totals, sensor, throttle, count)
