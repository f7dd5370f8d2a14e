"""bench/availability/quota_model.py: Kafka's quota algorithm (the gateway's SampledRate and throttle
formula) holds an ideal client to its quota over minutes, lets a new client burst, and swings over 20 s.

These are the properties the closing figures of issue #21 rest on; if the rate or the throttle formula
changed (say, a window that forgot the num - 1 floor, or a throttle that ignored the window), they break.
"""

from __future__ import annotations

from bench.availability.quota_model import ideal_client, summary
from gateway.quotas.rate import QuotaWindow

QUOTA = 1_000_000.0


def test_an_ideal_client_is_held_to_the_quota_over_minutes() -> None:
    got = summary(ideal_client(QUOTA, 100_000, 400, 1.0, QuotaWindow()), QUOTA, 400, 22)
    assert 0.97 <= got["sustained"] <= 1.03


def test_a_new_client_bursts_by_the_windows_kafka_grants_it() -> None:
    # (num - 1) windows' worth may go at once: 10 MB at 1 MB/s, so the first 20 s carry ~30 MB.
    got = summary(ideal_client(QUOTA, 1_000_000, 100, 1.0, QuotaWindow()), QUOTA, 100, 22)
    assert 1.2 <= got["first_20s"] <= 1.4


def test_the_rate_over_20_s_swings_as_the_burst_leaves_the_window() -> None:
    got = summary(ideal_client(QUOTA, 1_000_000, 200, 1.0, QuotaWindow()), QUOTA, 200, 22)
    assert got["any_20s_min"] < 0.9 and got["any_20s_max"] > 1.1


def test_without_a_quota_breach_nothing_is_throttled() -> None:
    # a client slower than its quota (one 100 kB request per 200 ms = 0.5 MB/s) is never muted
    sent = ideal_client(QUOTA, 100_000, 60, 200.0, QuotaWindow())
    assert len(sent) == 300
