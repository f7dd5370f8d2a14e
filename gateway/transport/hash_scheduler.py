"""Password hashes from every connection, started within each address's budget (auth.hash_budget).

A hash within budget goes to the verification pool at once; one over budget waits (a timer hands it
to the pool when its address has a token again), or is answered unhashed when the budget says so.
Attempts that would compute the very same hash (the same user, password and credential: pods behind
one NAT restarting together, a client retrying on several connections) share one.
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
class _Hash:
    """One hash to compute, and every connection waiting for it (with whether it still waits)."""

    claim: HashClaim
    job: Callable[[], bytes] = field(repr=False)
    waiters: list[tuple[Done, Callable[[], bool]]] = field(default_factory=list, repr=False)

    def wanted(self) -> bool:
        return any(still() for _, still in self.waiters)


class HashScheduler:
    """Runs on the event loop; ``pool`` does the hashing, ``budget`` decides when."""

    def __init__(self, pool: VerificationPool, budget: HashBudget[_Hash] | None = None,
                 on_hashed: Callable[[], None] = lambda: None) -> None:
        self.pool = pool
        self.budget: HashBudget[_Hash] = budget if budget is not None else HashBudget()
        self._on_hashed = on_hashed  # once per hash computed (ksgate_password_hashes_total), shared or not
        self._timer: asyncio.TimerHandle | None = None
        self._by_key: dict[bytes, _Hash] = {}  # hashes waiting or running, by HashClaim.key
        self._over_budget = 0  # attempts delayed or answered unhashed since the last warning
        self._warned_at = float("-inf")

    def submit(self, claim: HashClaim | None, job: Callable[[], bytes], done: Done,
               wanted: Callable[[], bool] = lambda: True) -> None:
        """Hash now, later, or never (``done`` then gets HashSkipped or QueueFull); ``wanted``: whether the
        connection still waits for the result when its turn comes (a closed one gives its turn away)."""
        if claim is None:
            self._start(job, done)
            return
        same = self._by_key.get(claim.key) if claim.key else None
        if same is not None:  # the same hash is already waiting or running: its result serves both
            same.waiters.append((done, wanted))
            return
        ticket = _Hash(claim, job, [(done, wanted)])
        if claim.key:
            self._by_key[claim.key] = ticket
        offer = self.budget.offer(claim.source, claim.user, claim.known, ticket)
        if offer.displaced is not None:
            self._skip(offer.displaced, Admission.USER_QUEUE_FULL)
        if offer.admission is Admission.NOW:
            self._run(ticket)
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
        def hashed(result: bytes | BaseException) -> None:
            if isinstance(result, bytes):
                self._on_hashed()
            done(result)

        if not self.pool.submit(job, hashed):
            asyncio.get_running_loop().call_soon(done, QueueFull())

    def _run(self, ticket: _Hash) -> None:
        self._start(ticket.job, lambda result: self._finish(ticket, result))

    def _finish(self, ticket: _Hash, result: bytes | BaseException) -> None:
        if self._by_key.get(ticket.claim.key) is ticket:
            del self._by_key[ticket.claim.key]
        for done, _ in ticket.waiters:
            done(result)

    def _skip(self, ticket: _Hash, admission: Admission) -> None:
        text, failure_class = _SKIP_REASONS[admission]
        reason = text.format(user=ticket.claim.user, source=ticket.claim.source)
        asyncio.get_running_loop().call_soon(self._finish, ticket, HashSkipped(reason, failure_class))

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
        # A hash nobody waits for any more (every connection closed) gives its turn to the next.
        for ticket in self.budget.due(self._still_wanted):
            self._run(ticket)
        self._arm()

    def _still_wanted(self, ticket: _Hash) -> bool:
        if ticket.wanted():
            return True
        if self._by_key.get(ticket.claim.key) is ticket:
            del self._by_key[ticket.claim.key]
        return False
