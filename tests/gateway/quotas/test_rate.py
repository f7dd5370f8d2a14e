"""Kafka's quota rate and throttle time, with hand-computed figures (window 11 × 1 s unless said)."""

from __future__ import annotations

import pytest

from gateway.quotas.rate import QuotaWindow, SampledRate, throttle_time_ms

WINDOW = QuotaWindow(11, 1000)


def test_a_new_rate_is_measured_over_ten_full_windows_not_its_first_milliseconds() -> None:
    rate = SampledRate(WINDOW)
    rate.record(1000, 0)
    assert rate.window_ms(0) == 10_000  # (num - 1) windows while fewer have elapsed
    assert rate.measure(0) == pytest.approx(100.0)
    assert rate.measure(500) == pytest.approx(1000 / 10.5)  # 500 ms elapsed + 10 windows


def test_once_the_samples_span_more_than_ten_windows_the_elapsed_time_is_the_window() -> None:
    rate = SampledRate(WINDOW)
    for second in range(12):  # one record per second: the 12th reuses the first sample's slot
        rate.record(1000, second * 1000)
    # the oldest sample now started at t=1000; at t=11500 that is 10.5 s ago
    assert rate.window_ms(11_500) == 10_500
    assert rate.measure(11_500) == pytest.approx(11_000 / 10.5)


def test_samples_older_than_the_whole_window_are_forgotten() -> None:
    rate = SampledRate(WINDOW)
    rate.record(5000, 0)
    assert rate.measure(10_999) > 0
    assert rate.measure(11_000) == 0  # num × window after it started


def test_a_record_within_the_current_window_adds_to_its_sample() -> None:
    rate = SampledRate(QuotaWindow(2, 1000))
    rate.record(100, 0)
    rate.record(100, 999)
    rate.record(100, 1000)  # a new sample
    rate.record(100, 2000)  # the oldest slot, reused: the first two records are gone
    assert rate.measure(2000) == pytest.approx(200 / 1.0)  # 2000 - 1000 elapsed, one full window


def test_throttle_time_is_kafkas_formula() -> None:
    # 12000 bytes at once against 1000 B/s: 1200 B/s over 10 s; (1200-1000)/1000 × 10000 = 2000 ms
    rate = SampledRate(WINDOW)
    rate.record(12_000, 0)
    assert throttle_time_ms(rate.measure(0), 1000, rate.window_ms(0)) == 2000
    assert throttle_time_ms(1000.0, 1000, 10_000) == 0  # at the bound is within it
    assert throttle_time_ms(999.0, 1000, 10_000) == 0
    assert throttle_time_ms(1000.06, 1000, 10_000) == 1  # 0.6 ms rounds to 1, 0.4 ms to 0
    assert throttle_time_ms(1000.04, 1000, 10_000) == 0
