"""The per-address TLS handshake budget, sans-IO: a clock passed in, no sockets."""

from __future__ import annotations

from gateway.edge.handshake_budget import QUEUE_FULL, Deferral, HandshakeBudget


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _budget(clock: Clock, **kwargs: float) -> HandshakeBudget:
    settings = {"rate_per_s": 10.0, "burst": 3, "queue_per_ip": 4, **kwargs}
    return HandshakeBudget(settings["rate_per_s"], int(settings["burst"]), int(settings["queue_per_ip"]),
                           clock=clock)


def test_a_burst_starts_at_once_then_each_new_connection_waits_for_the_next_slot() -> None:
    clock = Clock()
    budget = _budget(clock)
    assert [budget.offer("10.0.0.1") for _ in range(3)] == [Deferral(0.0)] * 3
    delays = [budget.offer("10.0.0.1") for _ in range(3)]
    assert [round(d.delay_s, 6) for d in delays if d is not None] == [0.1, 0.2, 0.3]
    assert budget.waiting("10.0.0.1") == 3 and budget.waiting() == 3


def test_another_address_is_not_paused_by_the_offender() -> None:
    clock = Clock()
    budget = _budget(clock)
    for _ in range(7):
        budget.offer("10.0.0.1")
    assert budget.offer("10.0.0.2") == Deferral(0.0)
    assert budget.waiting("10.0.0.2") == 0


def test_the_budget_refills_nobody_is_locked_out() -> None:
    clock = Clock()
    budget = _budget(clock)
    for _ in range(4):
        budget.offer("10.0.0.1")
    budget.started("10.0.0.1")
    clock.now += 0.4  # 4 slots at 10/s: the one deferred is used, the burst of 3 is back
    assert [budget.offer("10.0.0.1") for _ in range(3)] == [Deferral(0.0)] * 3
    assert budget.waiting("10.0.0.1") == 0


def test_the_wait_is_bounded_per_address_and_its_slot_is_not_spent_when_refused() -> None:
    clock = Clock()
    budget = _budget(clock, queue_per_ip=2)
    for _ in range(5):  # 3 at once, 2 waiting
        assert budget.offer("10.0.0.1") is not QUEUE_FULL
    assert budget.offer("10.0.0.1") is QUEUE_FULL
    clock.now += 0.1  # the first waiting connection's turn
    budget.started("10.0.0.1")  # its wait over: room for one more, at the slot after the last
    later = budget.offer("10.0.0.1")
    assert later is not None and round(later.delay_s, 6) == 0.2  # 0.3 had the refused one spent a slot


def test_rate_zero_disables_the_budget() -> None:
    budget = _budget(Clock(), rate_per_s=0)
    assert all(budget.offer("10.0.0.1") == Deferral(0.0) for _ in range(1000))
    assert len(budget) == 0


def test_tracked_addresses_are_bounded_but_those_with_connections_waiting_are_kept() -> None:
    clock = Clock()
    budget = HandshakeBudget(10.0, 1, 4, max_tracked_ips=3, clock=clock)
    budget.offer("10.0.0.1")
    budget.offer("10.0.0.1")  # waiting
    for i in range(2, 50):
        budget.offer(f"10.0.1.{i}")
    assert len(budget) <= 3
    assert budget.waiting("10.0.0.1") == 1
    follow = budget.offer("10.0.0.1")  # still paced: its state was not forgotten
    assert follow is not None and follow.delay_s > 0


def test_connections_that_left_while_waiting_do_not_push_the_wait_beyond_its_bound() -> None:
    """A deferred connection whose peer leaves stops waiting but keeps its slot: an address that
    connects and leaves fast is refused once its schedule is a full queue's worth ahead, so its
    next connection never waits longer than queue_per_ip / rate_per_s."""
    clock = Clock()
    budget = _budget(clock, queue_per_ip=4)  # 10/s: at most 0.4 s of waiting
    for _ in range(3):  # the burst
        budget.offer("10.0.0.1")
    delays = []
    for _ in range(20):  # each deferred, then gone at once (started: its wait is over)
        slot = budget.offer("10.0.0.1")
        if slot is not None:
            delays.append(slot.delay_s)
            budget.started("10.0.0.1")
    assert len(delays) == 4 and max(delays) <= 0.4 + 1e-9
    assert budget.offer("10.0.0.1") is QUEUE_FULL and budget.waiting("10.0.0.1") == 0
    clock.now += 0.4  # a queue's worth later the address is served again
    assert budget.offer("10.0.0.1") is not QUEUE_FULL
