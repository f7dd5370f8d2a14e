"""queued.max.request.bytes: the request-memory budget, its gate on the frame receiver, and
the session pausing only the connection whose frame waits."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.session import actions as act
from gateway.session.request_memory import (
    SMALL_FRAME_BYTES,
    MemoryTicket,
    ReceiveGate,
    RequestMemoryBudget,
)
from protocol.frame_receiver import FrameReceiver
from tests.gateway.session.session_driver import Driver, gateway_for

MiB = 1024 * 1024
SCRATCH = FrameReceiver.SCRATCH_BYTES


def _ticket(nbytes: int) -> MemoryTicket:
    return MemoryTicket(nbytes)


def test_a_large_frame_waits_when_the_budget_is_spent_and_gets_it_when_another_completes() -> None:
    budget = RequestMemoryBudget(100 * MiB)
    first, second = _ticket(60 * MiB), _ticket(60 * MiB)
    assert budget.ask(first)
    assert not budget.ask(second)
    assert budget.in_use == 60 * MiB and budget.waiting() == 1
    assert budget.release(first) == [second]
    assert second.granted and budget.in_use == 60 * MiB and budget.waiting() == 0


def test_large_frames_are_granted_in_arrival_order() -> None:
    budget = RequestMemoryBudget(100 * MiB)
    holder, big, medium = _ticket(50 * MiB), _ticket(80 * MiB), _ticket(20 * MiB)
    assert budget.ask(holder)
    assert not budget.ask(big)
    assert not budget.ask(medium)  # it would fit, but must not overtake the one before it
    assert budget.release(holder) == [big]
    assert budget.release(big) == [medium]


def test_a_small_frame_passes_large_ones_waiting_and_has_a_reserve() -> None:
    budget = RequestMemoryBudget(100 * MiB)
    assert budget.reserve > SMALL_FRAME_BYTES
    holder = _ticket(100 * MiB - budget.reserve)
    assert budget.ask(holder)
    assert not budget.ask(_ticket(2 * MiB))  # large frames leave the reserve alone
    small = _ticket(SMALL_FRAME_BYTES)
    assert budget.ask(small)  # not behind the large one waiting, and from the reserve


def test_a_frame_larger_than_the_whole_budget_is_admitted_alone() -> None:
    budget = RequestMemoryBudget(10 * MiB)
    huge = _ticket(50 * MiB)
    assert budget.ask(huge)  # never refuse a request socket.request.max.bytes allows
    later = _ticket(2 * MiB)
    assert not budget.ask(later)
    assert budget.release(huge) == [later]


def test_a_ticket_withdrawn_from_the_line_unblocks_those_behind_it() -> None:
    budget = RequestMemoryBudget(100 * MiB)
    holder, big, medium = _ticket(50 * MiB), _ticket(90 * MiB), _ticket(20 * MiB)
    budget.ask(holder)
    budget.ask(big)
    budget.ask(medium)
    assert budget.release(big) == [medium]  # the big one's connection closed while waiting
    assert budget.in_use == 70 * MiB


def test_unbounded_grants_everything_and_still_counts() -> None:
    budget = RequestMemoryBudget(-1)
    tickets = [_ticket(100 * MiB) for _ in range(5)]
    assert all(budget.ask(t) for t in tickets)
    assert budget.in_use == 500 * MiB


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(min_value=SCRATCH, max_value=120 * MiB), min_size=1, max_size=30),
       order=st.randoms(use_true_random=False))
def test_every_frame_is_granted_eventually_and_the_budget_holds_unless_a_frame_is_alone(
        sizes: list[int], order: object) -> None:
    """No deadlock: holders need nothing more to finish, so completing them in any order
    grants every waiting frame; in use never exceeds the limit except by one frame alone."""
    import random

    assert isinstance(order, random.Random)
    budget = RequestMemoryBudget(100 * MiB)
    tickets = [_ticket(n) for n in sizes]
    for ticket in tickets:
        budget.ask(ticket)
    done = 0
    while done < len(tickets):
        holders = [t for t in tickets if t.granted]
        assert holders, "waiting frames, and nobody holding memory to release"
        assert budget.in_use <= budget.limit or len(holders) == 1
        budget.release(order.choice(holders))
        done += 1
    assert budget.in_use == 0 and budget.waiting() == 0


def _large_frame_head(size: int) -> bytes:
    return struct.pack(">i", size) + b"\x00" * 100


def test_a_receiver_refused_by_its_gate_allocates_nothing_beyond_its_scratch_until_admitted() -> None:
    budget = RequestMemoryBudget(10 * MiB)
    assert budget.ask(_ticket(10 * MiB))  # someone else holds it all
    receiver = FrameReceiver(limit=100 * MiB)
    receiver.gate = ReceiveGate(budget, None)
    buf = receiver.get_buffer()
    head = _large_frame_head(5 * MiB)
    buf[: len(head)] = head
    buf.release()
    assert receiver.buffer_updated(len(head)) == []
    assert receiver.waiting == 5 * MiB + 4
    assert receiver.held() == SCRATCH
    receiver.admitted()
    assert receiver.held() > SCRATCH and receiver.waiting == 0


def test_the_budget_is_released_when_the_frame_completes() -> None:
    budget = RequestMemoryBudget(100 * MiB)
    receiver = FrameReceiver(limit=100 * MiB)
    receiver.gate = ReceiveGate(budget, None)
    payload = b"p" * (3 * SCRATCH)
    data, frames = struct.pack(">i", len(payload)) + payload, []
    while data:
        buf = receiver.get_buffer()
        n = min(len(buf), len(data))
        buf[:n] = data[:n]
        buf.release()
        data = data[n:]
        if receiver.waiting == 0 and budget.in_use:
            assert budget.in_use == len(payload) + 4
        frames.extend(receiver.buffer_updated(n))
    assert [bytes(f[4:]) for f in frames] == [payload]
    assert budget.in_use == 0


def test_only_the_connection_whose_frame_waits_pauses_and_it_reads_on_once_memory_frees(tmp_path: Path) -> None:
    gateway = gateway_for(tmp_path)
    budget = gateway.ctx.request_memory = RequestMemoryBudget(8 * MiB)
    holder, waiter, small = Driver.connect(gateway), Driver.connect(gateway), Driver.connect(gateway)
    holder.send(_large_frame_head(6 * MiB))  # half-sent and stalled
    assert budget.in_use == 6 * MiB + 4 and not holder.reading_paused
    waiter.send(_large_frame_head(6 * MiB))
    assert waiter.reading_paused and budget.waiting() == 1
    small.send(_large_frame_head(200 * 1024))  # a smaller frame goes on, from the reserve
    assert not small.reading_paused
    holder.record(holder.session.client_lost())
    assert holder.session.receiver.held() == 0  # the cut-short frame's buffer is let go at once
    assert len(holder.wakes) == 1
    holder.wakes.pop()()
    assert not waiter.reading_paused
    assert waiter.session.receiver.held() > SCRATCH
    assert budget.in_use == 6 * MiB + 4 + 200 * 1024 + 4


def test_a_closed_connection_frees_its_receive_buffer_and_its_budget(tmp_path: Path) -> None:
    gateway = gateway_for(tmp_path)
    budget = gateway.ctx.request_memory = RequestMemoryBudget(64 * MiB)
    driver = Driver.connect(gateway)
    driver.send(_large_frame_head(30 * MiB) + b"x" * (4 * MiB))
    assert driver.session.receiver.held() >= 4 * MiB
    driver.record(driver.session.client_lost())
    assert driver.session.receiver.held() == 0
    assert budget.in_use == 0
    assert not [a for a in driver.actions if isinstance(a, act.WakeReaders)]
