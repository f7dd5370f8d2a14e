"""Password hashes from every connection, started within each address's budget (auth.hash_budget).

A hash within budget goes to the verification pool at once; one over budget waits (a timer hands it
to the pool when its address has a token again), or is answered unhashed when the budget says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from auth.hash_budget import Admission, HashBudget
from auth.sasl.mechanism import HashClaim
from gateway.ops.logs import get_logger
from gateway.session.actions import HashSkipped, QueueFull
from gateway.transport.verification_pool import VerificationPool

Done = Callable[[bytes | BaseException], None]
log = get_logger(component="hash_budget")
WARNING_INTERVAL_S = 10.0  # at most one warning this often: a flood must not flood the log

_SKIP_REASONS = {
    Admission.UNKNOWN_USER: ("unknown user {user!r}, not hashed: {source} is over its hash budget "
                             "(ksgate.authentication.hash.rate.per.ip)", "bad_credentials"),
    Admission.USER_QUEUE_FULL: ("not hashed: {user!r} from {source} already has its share of attempts waiting "
                                "for a hash (ksgate.authentication.hash.queue.per.user / .queue.per.ip)",
                                "throttled"),
}


@dataclass(slots=True, eq=False)  # identity: a ticket is found again by ``is``
class _Waiting:
    claim: HashClaim
    job: Callable[[], bytes] = field(repr=False)
    done: Done = field(repr=False)
    wanted: Callable[[], bool] = field(repr=False)


class HashScheduler:
    """Runs on the event loop; ``pool`` does the hashing, ``budget`` decides when."""

    def __init__(self, pool: VerificationPool, budget: HashBudget[_Waiting] | None = None) -> None:
        self.pool = pool
        self.budget: HashBudget[_Waiting] = budget if budget is not None else HashBudget()
        self._timer: asyncio.TimerHandle | None = None
        self._over_budget = 0  # attempts delayed or answered unhashed since the last warning
        self._warned_at = float("-inf")

    def submit(self, claim: HashClaim | None, job: Callable[[], bytes], done: Done,
               wanted: Callable[[], bool] = lambda: True) -> None:
        """Hash now, later, or never (``done`` then gets HashSkipped or QueueFull); ``wanted``: whether the
        connection still waits for the result when its turn comes (a closed one gives its turn away)."""
        if claim is None:
            self._start(job, done)
            return
        ticket = _Waiting(claim, job, done, wanted)
        offer = self.budget.offer(claim.source, claim.user, claim.known, ticket)
        if offer.displaced is not None:
            self._skip(offer.displaced, Admission.USER_QUEUE_FULL)
        if offer.admission is Admission.NOW:
            self._start(job, done)
            return
        if offer.admission is Admission.WAIT:
            self._arm()
        else:
            self._skip(ticket, offer.admission)
        self._note_over_budget(claim)

    def close(self) -> None:
        """At shutdown: nothing more is started; the pool drops what it queued."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.pool.close()

    # --- helpers ----------------------------------------------------------------------------

    def _start(self, job: Callable[[], bytes], done: Done) -> None:
        if not self.pool.submit(job, done):
            asyncio.get_running_loop().call_soon(done, QueueFull())

    def _skip(self, ticket: _Waiting, admission: Admission) -> None:
        text, failure_class = _SKIP_REASONS[admission]
        reason = text.format(user=ticket.claim.user, source=ticket.claim.source)
        asyncio.get_running_loop().call_soon(ticket.done, HashSkipped(reason, failure_class))

    def _note_over_budget(self, claim: HashClaim) -> None:
        self._over_budget += 1
        now = asyncio.get_running_loop().time()
        if now - self._warned_at >= WARNING_INTERVAL_S:
            log.warning("hash_budget_exceeded", client_host=claim.source, attempted_user=claim.user,
                        over_budget_attempts=self._over_budget, waiting=self.budget.waiting(),
                        hint="PLAIN attempts from this address are delayed (known users) or answered "
                             "without a hash (unknown users); see ksgate.authentication.hash.*")
            self._over_budget = 0
            self._warned_at = now

    def _arm(self) -> None:
        """One timer for every address: at the earliest moment one of them has a token again."""
        delay_ms = self.budget.next_due_ms()
        if delay_ms is None:
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay_ms / 1000
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = loop.call_at(when, self._release)

    def _release(self) -> None:
        self._timer = None
        # A connection that closed while it waited gives its turn to the next (no token spent).
        for ticket in self.budget.due(lambda waiting: waiting.wanted()):
            self._start(ticket.job, ticket.done)
        self._arm()
