"""The per-address throttle of failed authentications, driven by a fake clock."""

from __future__ import annotations

from auth.login_throttle import LoginThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 5_000_000

    def __call__(self) -> int:
        return self.now


def _throttle(limit: int = 3, window_ms: int = 1000, max_hosts: int = 100) -> tuple[LoginThrottle, Clock]:
    clock = Clock()
    return LoginThrottle(limit, window_ms, max_hosts, clock_ms=clock), clock


def test_the_address_is_refused_once_it_reaches_the_limit_within_the_window() -> None:
    throttle, clock = _throttle(limit=3)
    for _ in range(2):
        throttle.record_failure("10.0.0.1")
        clock.now += 10
    assert not throttle.refuses("10.0.0.1")
    throttle.record_failure("10.0.0.1")
    assert throttle.refuses("10.0.0.1")


def test_failures_age_out_of_the_window() -> None:
    throttle, clock = _throttle(limit=3, window_ms=1000)
    start = clock.now
    for offset in (0, 100, 200):
        clock.now = start + offset
        throttle.record_failure("10.0.0.1")
    assert throttle.refuses("10.0.0.1")  # 3 failures within 200 ms
    clock.now = start + 999  # the first failure is 999 ms old: still inside
    assert throttle.refuses("10.0.0.1")
    clock.now = start + 1000  # the first is exactly window_ms old: out; two remain
    assert not throttle.refuses("10.0.0.1")


def test_failures_spread_wider_than_the_window_never_throttle() -> None:
    throttle, clock = _throttle(limit=3, window_ms=1000)
    for _ in range(20):
        throttle.record_failure("10.0.0.1")
        assert not throttle.refuses("10.0.0.1")
        clock.now += 600


def test_the_throttle_is_per_address() -> None:
    throttle, _ = _throttle(limit=2)
    throttle.record_failure("10.0.0.1")
    throttle.record_failure("10.0.0.1")
    assert throttle.refuses("10.0.0.1")
    assert not throttle.refuses("10.0.0.2")
    assert not throttle.refuses("::1")


def test_memory_is_bounded_by_the_tracked_address_cap() -> None:
    throttle, clock = _throttle(limit=2, max_hosts=50)
    for i in range(10_000):
        throttle.record_failure(f"10.{i // 65536}.{i // 256 % 256}.{i % 256}")
        clock.now += 1
    assert len(throttle) == 50
    # the most recent addresses are the ones remembered
    last = "10.0.39.15"  # i = 9999
    throttle.record_failure(last)
    assert throttle.refuses(last)
    assert not throttle.refuses("10.0.0.0")  # long forgotten


def test_failures_kept_per_address_are_capped_at_the_limit() -> None:
    throttle, clock = _throttle(limit=3, window_ms=1000)
    for _ in range(1000):
        throttle.record_failure("10.0.0.1")
    assert len(throttle._failures["10.0.0.1"]) == 3
    clock.now += 1000
    assert not throttle.refuses("10.0.0.1")  # all expired together
    assert len(throttle) == 0  # and the address is forgotten


def test_a_limit_of_zero_disables_the_throttle() -> None:
    throttle, _ = _throttle(limit=0)
    for _ in range(100):
        throttle.record_failure("10.0.0.1")
    assert not throttle.refuses("10.0.0.1") and len(throttle) == 0


def test_recording_says_when_the_address_reaches_the_limit() -> None:
    throttle, clock = _throttle(limit=3, window_ms=1000)
    assert [throttle.record_failure("10.0.0.1") for _ in range(3)] == [False, False, True]
    clock.now += 5000  # the old failures aged out: reaching the limit again is news again
    assert [throttle.record_failure("10.0.0.1") for _ in range(3)] == [False, False, True]
