"""A fair budget of password hashes per client address, sans-IO (the clock is passed in).

Only PLAIN's PBKDF2 is costly on the gateway, so only it asks here.  A hash beyond the address's
budget waits its turn (fairly, user by user) instead of being refused: a flood slows itself and
whoever shares its address, but a correct password is never refused because of others' failures.
"""

from __future__ import annotations

import enum
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

DEFAULT_RATE_PER_IP = 20
DEFAULT_BURST_PER_IP = 20
DEFAULT_QUEUE_PER_IP = 256
DEFAULT_QUEUE_PER_USER = 8
DEFAULT_MAX_TRACKED_IPS = 10_000

Ticket = TypeVar("Ticket")


def monotonic_ms() -> float:
    return time.monotonic_ns() / 1_000_000


class Admission(enum.Enum):
    NOW = "now"  # hash at once (a token was spent)
    WAIT = "wait"  # queued: due() hands it out when the address has a token again
    UNKNOWN_USER = "unknown_user"  # over budget, and no credential exists: answer a failure, unhashed
    USER_QUEUE_FULL = "user_queue_full"  # this user already has its share waiting: answer a failure, unhashed


@dataclass(slots=True)
class _Source(Generic[Ticket]):
    """One address: its token bucket and the hashes waiting for a token, user by user."""

    tokens: float
    updated_ms: float
    waiting: OrderedDict[str, deque[Ticket]] = field(default_factory=OrderedDict)  # next user to serve first
    size: int = 0  # tickets waiting, all users


@dataclass(slots=True, frozen=True)
class Offer(Generic[Ticket]):
    """What ``offer`` decided, and a ticket already waiting that had to make room (answer it unhashed)."""

    admission: Admission
    displaced: Ticket | None = None


class HashBudget(Generic[Ticket]):
    """Token buckets of ``rate_per_s`` hashes a second (up to ``burst`` at once) per address.

    Over budget, a known user's attempt waits; the waiting are served round-robin by user, so one
    user's flood of guesses delays another user of the same address by at most one hash per user
    waiting.  An unknown user's attempt over budget is answered without its decoy hash: there is
    no correct credential to refuse.  Bounds: ``queue_per_user`` tickets per (address, user), beyond
    which that user's own new attempt is not hashed; ``queue_per_ip`` per address, beyond which the
    newest ticket of the user with the most waiting makes room; ``max_tracked_ips`` idle buckets
    (an address with tickets waiting is kept: those are bounded by its open connections).
    ``rate_per_s <= 0`` disables the budget (every hash runs at once).
    """

    __slots__ = ("_busy", "_clock", "_sources", "burst", "max_tracked_ips", "queue_per_ip", "queue_per_user",
                 "rate_per_s")

    def __init__(self, rate_per_s: float = DEFAULT_RATE_PER_IP, burst: float = DEFAULT_BURST_PER_IP,
                 queue_per_ip: int = DEFAULT_QUEUE_PER_IP, queue_per_user: int = DEFAULT_QUEUE_PER_USER,
                 max_tracked_ips: int = DEFAULT_MAX_TRACKED_IPS,
                 clock_ms: Callable[[], float] = monotonic_ms) -> None:
        self.rate_per_s = rate_per_s
        self.burst = max(1.0, burst)
        self.queue_per_ip = max(1, queue_per_ip)
        self.queue_per_user = max(1, queue_per_user)
        self.max_tracked_ips = max(1, max_tracked_ips)
        self._clock = clock_ms
        self._sources: OrderedDict[str, _Source[Ticket]] = OrderedDict()  # least recently used first
        self._busy: dict[str, _Source[Ticket]] = {}  # the addresses with tickets waiting (timers visit only these)

    def __len__(self) -> int:
        """Addresses tracked now."""
        return len(self._sources)

    def waiting(self, source: str | None = None) -> int:
        """Tickets waiting for a token (from ``source``, or from every address)."""
        if source is not None:
            return self._sources[source].size if source in self._sources else 0
        return sum(s.size for s in self._busy.values())

    def offer(self, source: str, user: str, known: bool, ticket: Ticket) -> Offer[Ticket]:
        """A hash wanted for ``user``'s attempt from ``source``; ``known``: the user has a credential."""
        if self.rate_per_s <= 0:
            return Offer(Admission.NOW)
        state = self._source(source)
        # Nobody jumps the queue: while others wait, a newcomer's token belongs to them.
        if state.size == 0 and state.tokens >= 1:
            state.tokens -= 1
            return Offer(Admission.NOW)
        if not known:
            return Offer(Admission.UNKNOWN_USER)
        line = state.waiting.get(user)
        if line is not None and len(line) >= self.queue_per_user:
            return Offer(Admission.USER_QUEUE_FULL)
        displaced: Ticket | None = None
        if state.size >= self.queue_per_ip:
            victim = max(state.waiting, key=lambda name: len(state.waiting[name]))
            # Counting the newcomer, is its own user (one of) the largest? Then it is the one turned away.
            if len(state.waiting[victim]) <= (len(line) if line is not None else 0) + 1:
                return Offer(Admission.USER_QUEUE_FULL)
            displaced = self._pop_newest(state, victim)
        if line is None:
            line = state.waiting[user] = deque()
        line.append(ticket)
        state.size += 1
        self._busy[source] = state
        return Offer(Admission.WAIT, displaced)

    def due(self, wanted: Callable[[Ticket], bool] = lambda _ticket: True) -> list[Ticket]:
        """Waiting tickets whose address has a token now, to hash now; round-robin by user.
        A ticket no longer ``wanted`` (its connection closed) is dropped without spending a token."""
        ready: list[Ticket] = []
        for source, state in list(self._busy.items()):
            self._refill(state)
            while state.size and state.tokens >= 1:
                user, line = next(iter(state.waiting.items()))
                ticket = line.popleft()
                state.size -= 1
                if wanted(ticket):
                    state.tokens -= 1
                    ready.append(ticket)
                if line:
                    state.waiting.move_to_end(user)  # its next ticket goes behind every other user's
                else:
                    del state.waiting[user]
            if not state.size:
                del self._busy[source]
        return ready

    def next_due_ms(self) -> float | None:
        """How long until ``due`` has something (0: now); None when nothing waits."""
        if self.rate_per_s <= 0:
            return None
        now = self._clock()
        waits = [max(0.0, (1 - s.tokens) * 1000 / self.rate_per_s - (now - s.updated_ms))
                 for s in self._busy.values()]
        return min(waits) if waits else None

    # --- helpers ----------------------------------------------------------------------------

    def _source(self, source: str) -> _Source[Ticket]:
        state = self._sources.get(source)
        if state is None:
            self._forget_idle()
            state = self._sources[source] = _Source[Ticket](self.burst, self._clock())
        else:
            self._sources.move_to_end(source)
            self._refill(state)
        return state

    def _refill(self, state: _Source[Ticket]) -> None:
        now = self._clock()
        state.tokens = min(self.burst, state.tokens + (now - state.updated_ms) * self.rate_per_s / 1000)
        state.updated_ms = now

    def _forget_idle(self) -> None:
        """Make room for one more address: the least recently used with nothing waiting goes first."""
        while len(self._sources) >= self.max_tracked_ips:
            idle = next((name for name, s in self._sources.items() if not s.size), None)
            if idle is None:
                return
            del self._sources[idle]

    @staticmethod
    def _pop_newest(state: _Source[Ticket], user: str) -> Ticket:
        line = state.waiting[user]
        ticket = line.pop()
        state.size -= 1
        if not line:
            del state.waiting[user]
        return ticket
