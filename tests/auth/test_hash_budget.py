"""The per-address budget of password hashes, driven by a fake clock: over budget it delays, fairly by
user, and never turns away a known user's attempt because of someone else's."""

from __future__ import annotations

from auth.hash_budget import Admission, HashBudget


class Clock:
    def __init__(self) -> None:
        self.now = 5_000_000.0

    def __call__(self) -> float:
        return self.now


def _budget(rate: float = 10, burst: float = 3, queue_per_ip: int = 100, queue_per_user: int = 4,
            max_tracked_ips: int = 100) -> tuple[HashBudget[str], Clock]:
    clock = Clock()
    return HashBudget(rate, burst, queue_per_ip, queue_per_user, max_tracked_ips, clock_ms=clock), clock


def test_hashes_within_the_burst_start_at_once() -> None:
    budget, _ = _budget(burst=3)
    assert [budget.offer("10.0.0.1", "bob", True, f"t{i}").admission for i in range(3)] == [Admission.NOW] * 3
    assert budget.next_due_ms() is None


def test_over_budget_a_known_user_waits_for_the_next_token_instead_of_being_refused() -> None:
    budget, clock = _budget(rate=10, burst=1)
    assert budget.offer("10.0.0.1", "bob", True, "bob-1").admission is Admission.NOW
    assert budget.offer("10.0.0.1", "alice", True, "alice-1").admission is Admission.WAIT
    assert budget.next_due_ms() == 100  # one token every 100 ms
    clock.now += 99
    assert budget.due() == []
    clock.now += 1
    assert budget.due() == ["alice-1"]
    assert budget.waiting() == 0


def test_one_users_flood_delays_another_user_by_one_turn_not_by_its_whole_queue() -> None:
    budget, clock = _budget(rate=10, burst=1, queue_per_user=50)
    budget.offer("10.0.0.1", "bob", True, "bob-0")
    for i in range(1, 30):
        assert budget.offer("10.0.0.1", "bob", True, f"bob-{i}").admission is Admission.WAIT
    assert budget.offer("10.0.0.1", "alice", True, "alice").admission is Admission.WAIT
    served: list[str] = []
    while "alice" not in served:
        clock.now += 100
        served += budget.due()
    assert served == ["bob-1", "alice"]  # round-robin by user: alice's turn comes after one of bob's


def test_a_newcomer_does_not_jump_the_queue_when_a_token_accrues() -> None:
    budget, clock = _budget(rate=10, burst=1)
    budget.offer("10.0.0.1", "bob", True, "bob-1")
    budget.offer("10.0.0.1", "alice", True, "alice-1")
    clock.now += 100  # a token, but alice waits for it
    assert budget.offer("10.0.0.1", "carol", True, "carol-1").admission is Admission.WAIT
    assert budget.due() == ["alice-1"]


def test_over_budget_an_unknown_user_is_answered_without_a_hash() -> None:
    budget, _ = _budget(burst=1)
    assert budget.offer("10.0.0.1", "mallory-1", False, "m1").admission is Admission.NOW  # decoy hash in budget
    assert budget.offer("10.0.0.1", "mallory-2", False, "m2").admission is Admission.UNKNOWN_USER
    assert budget.offer("10.0.0.1", "alice", True, "alice").admission is Admission.WAIT  # never turned away
    assert budget.waiting("10.0.0.1") == 1


def test_a_user_with_its_share_waiting_is_answered_without_a_hash_and_others_still_wait() -> None:
    budget, _ = _budget(burst=1, queue_per_user=2)
    budget.offer("10.0.0.1", "bob", True, "bob-0")
    assert [budget.offer("10.0.0.1", "bob", True, f"bob-{i}").admission for i in (1, 2, 3)] == \
        [Admission.WAIT, Admission.WAIT, Admission.USER_QUEUE_FULL]
    assert budget.offer("10.0.0.1", "alice", True, "alice").admission is Admission.WAIT


def test_a_full_address_queue_makes_room_from_the_user_with_the_most_waiting() -> None:
    budget, clock = _budget(burst=1, queue_per_ip=4, queue_per_user=10)
    budget.offer("10.0.0.1", "bob", True, "bob-0")
    for i in range(1, 5):
        budget.offer("10.0.0.1", "bob", True, f"bob-{i}")
    offer = budget.offer("10.0.0.1", "alice", True, "alice")
    assert (offer.admission, offer.displaced) == (Admission.WAIT, "bob-4")  # bob's newest makes room
    assert budget.waiting("10.0.0.1") == 4
    served: list[str] = []
    for _ in range(2):
        clock.now += 100
        served += budget.due()
    assert served == ["bob-1", "alice"]


def test_a_full_address_queue_of_equals_turns_away_the_newcomer_not_a_waiting_user() -> None:
    budget, _ = _budget(burst=1, queue_per_ip=2)
    budget.offer("10.0.0.1", "x", True, "x-0")
    budget.offer("10.0.0.1", "a", True, "a")
    budget.offer("10.0.0.1", "b", True, "b")
    offer = budget.offer("10.0.0.1", "c", True, "c")
    assert (offer.admission, offer.displaced) == (Admission.USER_QUEUE_FULL, None)


def test_the_budget_is_per_address() -> None:
    budget, _ = _budget(burst=1)
    budget.offer("10.0.0.1", "bob", True, "b1")
    assert budget.offer("10.0.0.1", "bob", True, "b2").admission is Admission.WAIT
    assert budget.offer("10.0.0.2", "bob", True, "b3").admission is Admission.NOW
    assert budget.offer("::1", "mallory", False, "m").admission is Admission.NOW


def test_tokens_refill_up_to_the_burst_only() -> None:
    budget, clock = _budget(rate=10, burst=3)
    for i in range(3):
        budget.offer("10.0.0.1", "u", True, f"a{i}")
    clock.now += 60_000  # a minute idle: 3 tokens, not 600
    admissions = [budget.offer("10.0.0.1", "u", True, f"b{i}").admission for i in range(4)]
    assert admissions == [Admission.NOW] * 3 + [Admission.WAIT]


def test_a_ticket_no_longer_wanted_spends_no_token() -> None:
    budget, clock = _budget(rate=10, burst=1)
    budget.offer("10.0.0.1", "bob", True, "bob-0")
    budget.offer("10.0.0.1", "bob", True, "gone")
    budget.offer("10.0.0.1", "alice", True, "alice")
    clock.now += 100
    assert budget.due(lambda ticket: ticket != "gone") == ["alice"]


def test_idle_addresses_are_forgotten_beyond_the_cap_but_not_those_with_attempts_waiting() -> None:
    budget, clock = _budget(burst=1, max_tracked_ips=3)
    budget.offer("10.0.0.1", "bob", True, "b0")
    budget.offer("10.0.0.1", "bob", True, "b1")  # waits: 10.0.0.1 must be kept
    for i in range(2, 10_000):
        budget.offer(f"10.0.{i // 256}.{i % 256}", "u", False, "x")
        clock.now += 1
    assert len(budget) == 3
    assert budget.waiting("10.0.0.1") == 1
    clock.now += 100
    assert budget.due() == ["b1"]


def test_a_zero_rate_disables_the_budget() -> None:
    budget, _ = _budget(rate=0, burst=1)
    assert all(budget.offer("10.0.0.1", "mallory", False, str(i)).admission is Admission.NOW for i in range(100))
    assert len(budget) == 0 and budget.next_due_ms() is None
