"""controller_mutation_rate's token bucket (KIP-599), driven by an injected clock."""

from __future__ import annotations

import pytest

from gateway.quotas.mutation import Admission, MutationBuckets
from gateway.quotas.rate import QuotaWindow


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


# (rate, steps): each step is (seconds to wait first, mutations, strict, expected admission).
CASES = {
    "the request that empties the bucket passes, even far beyond it": (1.0, [
        (0, [20], True, Admission((True,), 0)),
    ]),
    "a negative bucket refuses a strict request with the time to refill to 0": (1.0, [
        (0, [20], True, Admission((True,), 0)),  # 11 − 20 = −9
        (0, [1], True, Admission((False,), 9000)),
        (4, [1], True, Admission((False,), 5000)),  # refilled 4, nothing counted by the refusal
    ]),
    "back to 0, a strict request passes again": (1.0, [
        (0, [20], True, Admission((True,), 0)),
        (9, [3], True, Admission((True,), 0)),  # −9 + 9 = 0: not negative
        (0, [1], True, Admission((False,), 3000)),
    ]),
    "a permissive request is always counted, and throttled once the bucket is negative": (2.0, [
        (0, [20], False, Admission((True,), 0)),  # burst 22 → 2
        (0, [10], False, Admission((True,), 4000)),  # 2 − 10 = −8: 4 s at 2/s
        (0, [2], False, Admission((True,), 5000)),  # −10, counted although negative
    ]),
    "topics are taken in order: the one that finds the bucket negative is refused, not counted": (1.0, [
        (0, [4, 4, 4, 4, 1], True, Admission((True, True, True, False, False), 1000)),  # 11 → 7 → 3 → −1
        (1, [2], True, Admission((True,), 0)),  # 0 after a second: the refused topics cost nothing
    ]),
    "a permissive request counts all its topics": (1.0, [
        (0, [4, 4, 4, 4], False, Admission((True, True, True, True), 5000)),
    ]),
    "the refill never goes beyond the burst": (1.0, [
        (1000, [11], True, Admission((True,), 0)),  # a long pause refills to 11, no more
        (0, [1], True, Admission((True,), 0)),  # 0 is not negative
        (0, [1], True, Admission((False,), 1000)),
    ]),
    "a zero quota lets one request through, then refuses for a whole window": (0.0, [
        (0, [1], True, Admission((True,), 0)),
        (5, [1], True, Admission((False,), 11_000)),
    ]),
}


@pytest.mark.parametrize("rate, steps", CASES.values(), ids=CASES.keys())
def test_the_bucket(rate: float, steps: list[tuple[float, list[int], bool, Admission]]) -> None:
    clock = Clock()
    buckets = MutationBuckets(QuotaWindow(), clock=clock)
    for wait, count, strict, expected in steps:
        clock.now += wait
        assert buckets.admit("user=alice", rate, count, strict=strict) == expected


def test_entities_have_buckets_of_their_own() -> None:
    buckets = MutationBuckets(clock=Clock())
    assert buckets.admit("user=alice", 1.0, [20], strict=True).accepted == (True,)
    assert buckets.admit("user=alice", 1.0, [1], strict=True).accepted == (False,)
    assert buckets.admit("user=bob", 1.0, [1], strict=True) == Admission((True,), 0)


def test_a_lowered_quota_caps_the_bucket_at_once() -> None:
    buckets = MutationBuckets(clock=Clock())
    assert buckets.tokens("user=alice", 10.0) == 110.0
    assert buckets.tokens("user=alice", 1.0) == 11.0


def test_the_buckets_are_bounded_the_least_recently_used_dropped() -> None:
    buckets = MutationBuckets(max_buckets=2, clock=Clock())
    buckets.admit("a", 1.0, [20], strict=True)
    buckets.admit("b", 1.0, [1], strict=True)
    buckets.admit("c", 1.0, [1], strict=True)  # "a" goes: it comes back full
    assert buckets.tokens("a", 1.0) == 11.0


def test_a_refund_gives_back_no_more_than_the_burst() -> None:
    buckets = MutationBuckets(clock=Clock())
    buckets.admit("user=alice", 1.0, [20], strict=True)
    buckets.refund("user=alice", 1.0, 15)
    assert buckets.tokens("user=alice", 1.0) == 6.0
    buckets.refund("user=alice", 1.0, 15)
    assert buckets.tokens("user=alice", 1.0) == 11.0
