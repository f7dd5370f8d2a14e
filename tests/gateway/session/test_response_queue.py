"""The per-connection response queue: order, id translation, acks=0."""

from __future__ import annotations

import sys

import pytest

from gateway.session.response_queue import ResponseQueue, with_correlation_id
from protocol.errors import DecodeError


class Latencies:
    """A latency observer that records what it is told."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, float]] = []

    def observe_latency(self, api_key: int, seconds: float) -> None:
        self.seen.append((api_key, seconds))


class ManualClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now


def test_responses_are_released_in_request_order_even_when_the_upstream_answers_out_of_order() -> None:
    q = ResponseQueue()
    first = q.expect_upstream(100, 3, 12)
    q.add_local(101, 18, 3, b"local")
    second = q.expect_upstream(102, 3, 12)
    slot = q.match_upstream(second)
    assert slot is not None
    slot.response, slot.ready = [b"second"], True
    assert q.pop_ready() == []  # the head is still waiting
    slot = q.match_upstream(first)
    assert slot is not None and slot.correlation_id == 100
    slot.response, slot.ready = [b"first"], True
    assert q.pop_ready() == [b"first", b"local", b"second"]
    assert len(q) == 0


def test_upstream_ids_are_unique_even_when_client_ids_repeat() -> None:
    q = ResponseQueue()
    ids = {q.expect_upstream(7, 3, 12) for _ in range(100)}
    assert len(ids) == 100


def test_unsolicited_response_is_an_error_but_acks0_answers_are_dropped() -> None:
    q = ResponseQueue()
    silent = q.expect_nothing()
    assert q.match_upstream(silent) is None
    with pytest.raises(DecodeError):
        q.match_upstream(12345)


def test_any_number_of_unanswered_acks0_requests_is_recognised_without_remembering_them() -> None:
    q = ResponseQueue()
    answered = q.expect_upstream(1, 3, 12)
    silent = [q.expect_nothing() for _ in range(100_000)]
    assert len(set(silent)) == len(silent)
    assert answered not in silent
    # The oldest acks=0 id is still recognised after 100,000 more (1,024 used to be the limit).
    assert all(q.match_upstream(upstream_id) is None for upstream_id in silent)
    assert len(q) == 1
    slot = q.match_upstream(answered)
    assert slot is not None and slot.correlation_id == 1
    with pytest.raises(DecodeError):
        q.match_upstream(answered)  # an answered id is matched once


def test_answered_and_unanswered_ids_never_collide_across_wraparound() -> None:
    q = ResponseQueue()
    q._next_id = q._next_unanswered = 0x3FFF_FFFE  # near the end of both ranges
    answered = [q.expect_upstream(n, 3, 12) for n in range(4)]
    silent = [q.expect_nothing() for _ in range(4)]
    assert all(0 <= upstream_id < 0x4000_0000 for upstream_id in answered)
    assert all(0x4000_0000 <= upstream_id <= 0x7FFF_FFFF for upstream_id in silent)
    for n, upstream_id in enumerate(answered):
        slot = q.match_upstream(upstream_id)
        assert slot is not None and slot.correlation_id == n


def test_correlation_id_is_replaced_without_copying_the_payload() -> None:
    wire = memoryview(b"\x00\x00\x00\x08" + b"\x00\x00\x00\x01" + b"body")
    pieces = with_correlation_id(wire, 4, 42)
    assert b"".join(bytes(p) for p in pieces) == b"\x00\x00\x00\x08\x00\x00\x00\x2abody"
    assert isinstance(pieces[2], memoryview) and pieces[2].obj is wire.obj


def test_only_the_oldest_unhooked_slot_may_stream() -> None:
    q = ResponseQueue()
    first = q.expect_upstream(1, 1, 15)
    second = q.expect_upstream(2, 1, 15)
    assert q.streamable(second) is None  # the first response has not been sent yet
    slot = q.streamable(first)
    assert slot is not None and slot.correlation_id == 1
    assert q.start_streaming(first) is slot
    assert q.streamable(second) is not None  # now it is the head
    hooked = ResponseQueue()
    upstream_id = hooked.expect_upstream(3, 3, 12, hook=lambda body: body)
    assert hooked.streamable(upstream_id) is None  # a hook needs the whole response


def test_each_response_released_feeds_the_latency_observer_once_with_its_api() -> None:
    latencies = Latencies()
    seen = latencies.seen
    q = ResponseQueue(latencies)
    upstream = q.expect_upstream(1, 3, 12)
    q.add_local(2, 18, 3, b"versions")
    deferred = q.add_deferred(3, 30, 3)
    assert q.pop_ready() == [] and seen == []  # nothing written yet: nothing observed
    slot = q.match_upstream(upstream)
    assert slot is not None
    slot.response, slot.ready = [b"metadata"], True
    assert q.pop_ready() == [b"metadata", b"versions"]
    deferred.response, deferred.ready = [b"acls"], True
    assert q.pop_ready() == [b"acls"]
    assert [key for key, _ in seen] == [3, 18, 30]
    assert all(0 <= seconds < 5 for _, seconds in seen)


def test_a_streamed_response_is_observed_when_it_starts() -> None:
    latencies = Latencies()
    q = ResponseQueue(latencies)
    upstream = q.expect_upstream(1, 1, 12)
    assert q.streamable(upstream) is not None
    q.start_streaming(upstream)
    seen = [key for key, _ in latencies.seen]
    assert seen == [1] and q.pop_ready() == [] and [key for key, _ in latencies.seen] == [1]


def test_an_id_reserved_for_a_large_request_stays_in_the_answered_range_across_wraparound() -> None:
    # A reserved id in the acks=0 range would take an unanswered request's answer (Tansu sends one) for its own.
    queue = ResponseQueue()
    queue._next_id = 0x4000_0000 - 1  # the last id of the answered range
    reserved = queue.reserve_upstream_id()
    assert 0 <= reserved < 0x4000_0000
    assert reserved != queue.expect_nothing()


def test_latencies_are_measured_on_the_injected_clock() -> None:
    clock = ManualClock(100.0)
    latencies = Latencies()
    queue = ResponseQueue(latencies, clock=clock)
    slot = queue.match_upstream(queue.expect_upstream(1, 3, 12))
    assert slot is not None
    clock.now += 2.5
    slot.response, slot.ready = [b"answer"], True
    assert queue.pop_ready() == [b"answer"]
    assert latencies.seen == [(3, 2.5)]



def test_a_queue_with_nothing_awaited_keeps_no_table_of_its_earlier_requests() -> None:
    # An idle client's connection has had its answers; a dict emptied by pops keeps its table (~160 bytes).
    queue = ResponseQueue()
    fresh = sys.getsizeof(queue._awaiting)
    ids = [queue.expect_upstream(n, 3, 12) for n in range(3)]
    assert sys.getsizeof(queue._awaiting) > fresh
    for upstream_id in ids:
        assert queue.match_upstream(upstream_id) is not None
    assert sys.getsizeof(queue._awaiting) == fresh
    assert queue.match_upstream(queue.expect_upstream(3, 3, 12)) is not None  # and it is usable again
    streamed = ResponseQueue()
    streamed.start_streaming(streamed.expect_upstream(1, 1, 12))
    assert sys.getsizeof(streamed._awaiting) == fresh


class Sent:
    """A bytes-out counter that records what it is told."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def response(self, api_key: int, nbytes: int) -> None:
        self.seen.append((api_key, nbytes))


def test_each_response_released_counts_its_bytes_once_alone_or_with_others() -> None:
    latencies, sent = Latencies(), Sent()
    queue = ResponseQueue(latencies, sent)
    alone = queue.match_upstream(queue.expect_upstream(1, 0, 9))
    assert alone is not None
    second = queue.expect_upstream(2, 0, 9)  # not answered yet: the head goes out alone
    alone.response, alone.ready = [b"ab", b"cde"], True
    assert queue.pop_ready() == [b"ab", b"cde"] and len(queue) == 1
    assert sent.seen == [(0, 5)] and [key for key, _ in latencies.seen] == [0]
    queue.add_local(3, 18, 3, b"versions")  # ready behind a head that is not
    assert queue.pop_ready() == [] and sent.seen == [(0, 5)]
    head = queue.match_upstream(second)
    assert head is not None
    head.response, head.ready = [b"fghi"], True
    assert queue.pop_ready() == [b"fghi", b"versions"] and not len(queue)
    assert sent.seen == [(0, 5), (0, 4), (18, 8)] and [key for key, _ in latencies.seen] == [0, 0, 18]
