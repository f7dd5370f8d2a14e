"""Admin answers of one connection, one store write at a time, in request order.

A connection sees its own admin changes, as on a Kafka broker (which handles one request at a
time): a local answer that arrives while a store write runs, or behind others that wait, waits
in its reserved slot until the writes before it are done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from gateway.session.response_queue import ResponseSlot

Request = TypeVar("Request")


@dataclass(slots=True)
class LocalAnswers(Generic[Request]):
    busy: bool = False  # a store write runs
    # A list, not a deque: every connection has one and almost all never wait (an empty deque is 0.7 KiB).
    # A tuple replaced on change, not a list: the empty tuple is shared, and a list kept by every connection
    # was 56 bytes (waiting answers are few: each holds a request slot, at most queued.max.requests).
    waiting: tuple[tuple[ResponseSlot, Request], ...] = ()

    def must_wait(self) -> bool:
        return self.busy or bool(self.waiting)

    def wait(self, slot: ResponseSlot, request: Request) -> None:
        self.waiting += ((slot, request),)

    def next(self) -> tuple[ResponseSlot, Request] | None:
        """The oldest waiting answer, once no store write runs."""
        if self.busy or not self.waiting:
            return None
        first, self.waiting = self.waiting[0], self.waiting[1:]
        return first
