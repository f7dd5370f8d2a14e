"""Quota metrics (bounded by the configured entities, plus "other") and the rate-limited THROTTLED audit event."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.ops.audit import AuditLog
from gateway.ops.metrics import Metrics
from gateway.quotas.book import QuotaBook
from gateway.quotas.observe import quota_sensors
from gateway.quotas.sensors import AUDIT_INTERVAL_MS, QuotaSensors
from gateway.quotas.state import state_from_json
from protocol.api_keys import ApiKey
from protocol.messages import request_frame
from tests.authz.test_policies_data import request
from tests.gateway.session.session_driver import gateway_for

SETTINGS = {"quota.window.num": 11, "quota.window.size.seconds": 1}


class Clock:
    now = 50.0

    def __call__(self) -> float:
        return self.now


def _sensors(metrics: Metrics, audit: AuditLog | None = None) -> tuple[QuotaSensors, Clock]:
    sensors = quota_sensors(SETTINGS, metrics, audit)
    clock = Clock()
    sensors._clock = clock
    return sensors, clock


def test_byte_series_are_one_per_configured_entity_plus_other(tmp_path: Path) -> None:
    metrics = Metrics(("PLAINTEXT",))
    sensors, _ = _sensors(metrics)
    for user in ("u1", "u2", "u3"):  # three users under one default quota: one series
        sensors.record("producer_byte_rate", f"user={user}", "user=<default>", 1e9, 1000)
    sensors.record("producer_byte_rate", "user=alice", "user=alice", 1e9, 500)
    body = request(ApiKey.PRODUCE, 9, acks=1, timeout_ms=1, topic_data=[])
    wire = request_frame(ApiKey.PRODUCE, 9, 1, body)
    traffic = metrics.traffic("PLAINTEXT")
    for _ in range(1000):  # 1000 Produce frames seen in all: the rest is "other"
        traffic.request_frame(memoryview(wire))
    text = metrics.render()
    lines = [line for line in text.splitlines() if line.startswith("ksgate_quota_bytes_total{")]
    assert sorted(lines) == sorted([
        'ksgate_quota_bytes_total{quota="producer_byte_rate",entity="user=<default>"} 3000',
        'ksgate_quota_bytes_total{quota="producer_byte_rate",entity="user=alice"} 500',
        f'ksgate_quota_bytes_total{{quota="producer_byte_rate",entity="other"}} {1000 * len(wire) - 3500}',
        'ksgate_quota_bytes_total{quota="consumer_byte_rate",entity="other"} 0'])


def test_throttle_time_is_exported_per_entity(tmp_path: Path) -> None:
    metrics = Metrics(())
    sensors, _ = _sensors(metrics)
    earned = sensors.record("producer_byte_rate", "user=alice", "user=alice", 100.0, 2000)  # 200 B/s over 10 s
    assert earned == 10_000
    text = metrics.render()
    assert 'ksgate_quota_throttle_time_seconds_total{quota="producer_byte_rate",entity="user=alice"} 10' in text
    assert 'ksgate_quota_throttled_total{quota="producer_byte_rate",entity="user=alice"} 1' in text


def test_throttled_audit_events_are_one_per_entity_per_interval_with_the_count(tmp_path: Path) -> None:
    audit = AuditLog(str(tmp_path / "audit.log"))
    sensors, clock = _sensors(Metrics(()), audit)
    for _ in range(5):
        sensors.record("producer_byte_rate", "user=alice", "user=alice", 100.0, 2000)
    sensors.record("producer_byte_rate", "user=bob", "user=bob", 100.0, 2000)
    clock.now += AUDIT_INTERVAL_MS / 1000
    sensors.record("producer_byte_rate", "user=alice", "user=alice", 100.0, 2000)
    audit.close()
    events = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    assert [(e["entity"], e["count"], e["decision"]) for e in events] == [
        ("user=alice", 1, "THROTTLED"), ("user=bob", 1, "THROTTLED"), ("user=alice", 5, "THROTTLED")]
    assert events[0]["quota"] == "producer_byte_rate" and events[0]["throttle_time_ms"] > 0


def test_sensors_beyond_the_cap_drop_the_least_recently_used(tmp_path: Path) -> None:
    sensors = QuotaSensors(max_sensors=2, clock=Clock())
    for user in ("a", "b", "a", "c"):
        sensors.record("producer_byte_rate", f"user={user}", "user=<default>", 1e9, 10)
    assert sensors.rate_of("producer_byte_rate", "user=a") > 0
    assert sensors.rate_of("producer_byte_rate", "user=b") == 0  # dropped: least recently used


def test_the_gateway_measures_over_the_configured_window_and_exports_the_quota_series(tmp_path: Path) -> None:
    gateway = gateway_for(tmp_path, **{"quota.window.num": 5, "quota.window.size.seconds": 2})
    assert (gateway.ctx.quota_sensors.window.num, gateway.ctx.quota_sensors.window.size_ms) == (5, 2000)
    text = gateway.ctx.metrics.render()
    assert 'ksgate_quota_bytes_total{quota="producer_byte_rate",entity="other"} 0' in text
    assert "# TYPE ksgate_quota_throttle_time_seconds_total counter" in text


def test_a_removed_quota_keeps_its_counters_but_no_longer_shows_a_bound(tmp_path: Path) -> None:
    """The gateway's gauge asks the book in force: a bound removed (or changed) since the traffic is not shown
    as in force; the counters stay (totals since start)."""
    gateway = gateway_for(tmp_path)
    book = QuotaBook(state_from_json([{"entity": {"user": "alice"}, "values": {"producer_byte_rate": 1000}}]))
    gateway.ctx.quotas = book
    gateway.ctx.quota_sensors.record("producer_byte_rate", "user=alice", "user=alice", 1000.0, 50_000)
    series = '{quota="producer_byte_rate",entity="user=alice"}'
    assert f"ksgate_quota_bound{series} 1000\n" in gateway.ctx.metrics.render()
    book.replace({})
    text = gateway.ctx.metrics.render()
    assert f"ksgate_quota_bound{series}" not in text
    assert f"ksgate_quota_throttled_total{series} 1\n" in text
