"""queued.max.request.bytes: one process-wide budget for the buffers of requests being received.

Sans-IO bookkeeping: a connection asks for a frame's whole size once its size prefix is read
and before any buffer beyond the small scratch one is allocated; a refused ask waits in line
and the connection stops reading until ``release`` hands the bytes over.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

UNBOUNDED = -1  # Kafka's value for "no limit"
# Frames up to this size may pass large ones waiting in line, and have a reserve of their own:
# a Metadata or a small Produce never waits behind a 100 MB request.
SMALL_FRAME_BYTES = 1024 * 1024
MAX_RESERVE_BYTES = 16 * 1024 * 1024


class MemoryWaiter(Protocol):
    """The connection a waiting frame belongs to, as the budget wakes it (its adapter)."""

    def memory_granted(self) -> None:
        """Another connection's release granted this one's waiting frame: read on (called by the loop)."""


@dataclass(slots=True, eq=False)
class MemoryTicket:
    """One frame's claim on the budget; ``wake`` is called (by the adapter) once a waiting claim is granted."""

    nbytes: int
    wake: Callable[[], None] | None = None
    granted: bool = False


@dataclass(slots=True)
class RequestMemoryBudget:
    """Bytes of large requests in flight, granted whole so that every holder can finish.

    A frame holds its full size from its prefix to its last byte: whoever holds part of the
    budget needs nothing more to complete, so the budget cannot deadlock.  Large frames
    wait in arrival order (none overtakes another) and leave a reserve to frames up to
    SMALL_FRAME_BYTES; a frame larger than the whole budget is admitted when it is alone.
    """

    limit: int = UNBOUNDED
    in_use: int = 0
    peak: int = 0  # the most ever in use (figures and tests)
    released: int = 0  # bytes released ever (the server gives memory back after large releases)
    _waiting: deque[MemoryTicket] = field(default_factory=deque)

    @property
    def reserve(self) -> int:
        """Bytes large frames leave to small ones."""
        return 0 if self.limit < 0 else min(self.limit // 8, MAX_RESERVE_BYTES)

    def waiting(self) -> int:
        return len(self._waiting)

    def ask(self, ticket: MemoryTicket) -> bool:
        """Grant the ticket now (True) or put it in line (False: its holder pauses reading)."""
        if self._fits(ticket.nbytes, blocked=self._large_waiting()):
            self._grant(ticket)
            return True
        self._waiting.append(ticket)
        return False

    def release(self, ticket: MemoryTicket) -> list[MemoryTicket]:
        """The ticket's frame is complete, or its connection gone; the waiting tickets granted now."""
        if ticket.granted:
            ticket.granted = False
            self.in_use -= ticket.nbytes
            self.released += ticket.nbytes
            return self._admit_waiting()
        if ticket in self._waiting:  # a connection closed while waiting in line
            self._waiting.remove(ticket)
        return self._admit_waiting()  # a large ticket leaving the line may unblock those behind it

    def _admit_waiting(self) -> list[MemoryTicket]:
        granted: list[MemoryTicket] = []
        blocked = False  # an earlier large ticket still waits: later large ones keep their place
        for ticket in list(self._waiting):
            if self._fits(ticket.nbytes, blocked):
                self._waiting.remove(ticket)
                self._grant(ticket)
                granted.append(ticket)
            elif ticket.nbytes > SMALL_FRAME_BYTES:
                blocked = True
        return granted

    def _fits(self, nbytes: int, blocked: bool) -> bool:
        if self.limit < 0:
            return True
        if nbytes <= SMALL_FRAME_BYTES:
            return self.in_use + nbytes <= self.limit
        if blocked:
            return False
        return self.in_use + nbytes <= self.limit - self.reserve or self.in_use == 0

    def _large_waiting(self) -> bool:
        return any(ticket.nbytes > SMALL_FRAME_BYTES for ticket in self._waiting)

    def _grant(self, ticket: MemoryTicket) -> None:
        ticket.granted = True
        self.in_use += ticket.nbytes
        self.peak = max(self.peak, self.in_use)


class ReceiveGate:
    """One connection's side of the budget (protocol.frame_receiver.FrameGate): at most one
    ticket, for the frame being received; the tickets its releases granted, for the adapter
    to wake their connections."""

    __slots__ = ("_ticket", "budget", "waiter", "woken")

    def __init__(self, budget: RequestMemoryBudget, waiter: MemoryWaiter | None) -> None:
        self.budget = budget
        # How another connection's release reaches this one: the waiter itself, its bound method made only
        # for a frame that asks (one stored by every idle connection was 64 bytes).
        self.waiter = waiter
        self._ticket: MemoryTicket | None = None
        # Replaced, never edited: an idle connection keeps the shared empty tuple, not a list of its own.
        self.woken: tuple[Callable[[], None], ...] = ()

    def admit(self, nbytes: int) -> bool:
        self._ticket = MemoryTicket(nbytes, self.waiter.memory_granted if self.waiter is not None else None)
        return self.budget.ask(self._ticket)

    def complete(self) -> None:
        """The frame is complete, or the connection gone (granted or still in line)."""
        if self._ticket is not None:
            ticket, self._ticket = self._ticket, None
            if woken := tuple(t.wake for t in self.budget.release(ticket) if t.wake is not None):
                self.woken += woken

    def take_woken(self) -> tuple[Callable[[], None], ...]:
        woken, self.woken = self.woken, ()
        return woken
