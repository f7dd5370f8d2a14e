"""What operators see of the quotas: /metrics series per configured entity, and THROTTLED audit events.

The series' cardinality is bounded by the configuration: one per configured quota entity (a
``<default>`` entity is one series for all the clients under it), plus one ``other`` series for
the Produce and Fetch bytes of everyone without a byte-rate quota.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from gateway.ops.audit import AuditLog
from gateway.ops.metrics import Metrics
from gateway.quotas.lookup import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from gateway.quotas.rate import QuotaWindow
from gateway.quotas.sensors import EntityTotals, QuotaSensors
from protocol.api_keys import ApiKey

Series = Iterator[tuple[tuple[str, ...], float]]
Configured = Callable[[str, str], float | None]  # (kind, entity label) → the bound in force now, or None
OTHER = "other"
_BYTE_QUOTAS = {PRODUCER_BYTE_RATE: (ApiKey.PRODUCE, False), CONSUMER_BYTE_RATE: (ApiKey.FETCH, True)}


def quota_sensors(settings: Mapping[str, Any], metrics: Metrics, audit: AuditLog | None,
                  configured: Configured | None = None) -> QuotaSensors:
    """The process's quota sensors, with quota.window.* from the configuration, exported and audited;
    ``configured`` says which bounds are in force now (the book's), for the ksgate_quota_bound gauge."""
    sensors = QuotaSensors(QuotaWindow(settings["quota.window.num"], settings["quota.window.size.seconds"] * 1000))
    export(sensors, metrics, configured)
    if audit is not None and audit.enabled:
        def throttled(totals: EntityTotals, client: str, throttle_ms: int, count: int) -> None:
            audit.quota_throttled(entity=totals.entity, client=client, quota=totals.kind, bound=totals.bound,
                                  throttle_ms=throttle_ms, count=count)
        sensors.audit = throttled
    return sensors


def export(sensors: QuotaSensors, metrics: Metrics, configured: Configured | None = None) -> None:
    labels = ("quota", "entity")
    r = metrics.registry
    r.collected("counter", "ksgate_quota_bytes_total",
                "Produce request and Fetch response bytes (whole frames) counted against producer_byte_rate and "
                "consumer_byte_rate, by configured quota entity; entity=\"other\": clients without such a quota.",
                labels, lambda: _bytes(sensors, metrics))
    r.collected("counter", "ksgate_quota_throttle_time_seconds_total",
                "Throttle time given to clients over a quota (their throttle_time_ms, and their socket muted), "
                "by quota type and configured entity.", labels,
                lambda: ((k, t.throttle_ms / 1000) for k, t in sensors.totals.items()))
    r.collected("counter", "ksgate_quota_throttled_total",
                "Responses throttled for a client over a quota, by quota type and configured entity.", labels,
                lambda: ((k, t.throttled) for k, t in sensors.totals.items()))
    r.collected("gauge", "ksgate_quota_bound",
                "The bound of each quota entity that has recorded traffic and still has that quota (bytes/s, "
                "or percent of one core).", labels, lambda: _bounds(sensors, configured))


def _bounds(sensors: QuotaSensors, configured: Configured | None) -> Series:
    # A removed quota keeps its counters (totals since start) but has no bound any more: a gauge
    # showing the last one would tell operators a limit is in force when none is.
    for key, totals in list(sensors.totals.items()):
        bound = totals.bound if configured is None else configured(*key)
        if bound is not None:
            yield key, bound


def _bytes(sensors: QuotaSensors, metrics: Metrics) -> Series:
    for kind, (api_key, sent) in _BYTE_QUOTAS.items():
        counted = 0.0
        for (k, entity), totals in list(sensors.totals.items()):
            if k == kind:
                counted += totals.recorded
                yield (kind, entity), totals.recorded
        yield (kind, OTHER), max(0.0, metrics.api_bytes(api_key, sent) - counted)
