"""The in-order response queue of one client connection.

Kafka clients expect responses in request order, as a Kafka broker (which handles one
request per connection at a time) delivers them.  Some responses come from the upstream,
others from the gateway itself (ApiVersions, denied requests, the ACL and user admin APIs).  Each request
gets a slot when it arrives; slots are released strictly from the head.

Upstream requests carry a gateway-assigned correlation id, so a response is matched to
its slot even when the upstream answers out of order (Tansu does) or the client reuses
ids; the client's own id is restored on the way back.

Requests nobody waits for (Produce with acks=0) take their ids from a disjoint range, so
an upstream that answers them anyway (Tansu does) is recognised by the id alone: no memory
per unanswered request, however many a client pipelines.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.clock import SYSTEM_CLOCK
from protocol.errors import DecodeError

WireBytes = bytes | bytearray | memoryview
_I32 = struct.Struct(">i")


@dataclass(slots=True)
class ResponseSlot:
    """One client request's place in its connection's response order (not a merge slot: authz/policies/merge.py)."""

    correlation_id: int  # the client's
    api_key: int
    api_version: int
    response: list[WireBytes] = field(default_factory=list)  # frame pieces, once known
    ready: bool = False
    # Post-processing of the upstream's response (authorization merges and filters).
    hook: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    arrived: float = 0.0  # monotonic time the request was queued (for the latency histogram)
    # Its request was handled in the worker thread (transport/worker_thread.py): so is its response,
    # however small the upstream's part (a hook may add an entry per item of the request).
    large: bool = False
    throttle_ms: int = 0  # the client quota throttle its request earned (gateway/quotas), 0 for none


# Upstream correlation ids: answered requests cycle through [0, 2^30), requests the client
# expects no answer to through [2^30, 2^31).  Either range outlasts any number of requests
# in flight (queued.max.requests), so an id is never reused while it may still be answered.
_ANSWERED_IDS = 0x4000_0000
_UNANSWERED_BASE = 0x4000_0000


# The queue keeps the objects that observe it, shared by every connection, and calls their methods:
# a bound method made per connection and stored is 64 bytes each (three per idle connection).
class LatencyObserver(Protocol):
    def observe_latency(self, api_key: int, seconds: float) -> None:
        """Seconds from the request's arrival to its response being written (or starting to stream)."""


class SentCounter(Protocol):
    def response(self, api_key: int, nbytes: int) -> None:
        """Bytes of a response written."""


class MonotonicClock(Protocol):
    def monotonic(self) -> float: ...


class ResponseQueue:
    __slots__ = ("_awaiting", "_clock", "_next_id", "_next_unanswered", "_observe", "_sent", "_slots")

    def __init__(self, observe: LatencyObserver | None = None, sent: SentCounter | None = None,
                 clock: MonotonicClock = SYSTEM_CLOCK) -> None:
        """``clock``: the session's clock (latencies are measured with its ``monotonic()`` seconds)."""
        self._clock = clock
        self._observe = observe
        self._sent = sent
        # A list, not a deque: an empty deque keeps a 0.7 KiB block, an empty list none, and an idle
        # connection holds an empty queue (the queue is at most queued.max.requests long).
        self._slots: list[ResponseSlot] = []
        self._awaiting: dict[int, ResponseSlot] = {}
        self._next_id = 0
        self._next_unanswered = 0

    def __len__(self) -> int:
        return len(self._slots)

    def newest(self) -> ResponseSlot:
        """The slot of the latest request (there is one)."""
        return self._slots[-1]

    def expect_upstream(self, correlation_id: int, api_key: int, api_version: int,
                        hook: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
        """Open a slot for a relayed request; returns the correlation id to send upstream."""
        self._next_id = (self._next_id + 1) % _ANSWERED_IDS
        slot = ResponseSlot(correlation_id, api_key, api_version, hook=hook, arrived=self._clock.monotonic())
        self._slots.append(slot)
        self._awaiting[self._next_id] = slot
        return self._next_id

    def expect_nothing(self) -> int:
        """An id for a request the client expects no response to (Produce with acks=0).

        Kafka never answers those, but some Kafka-compatible brokers (Tansu) do; the id's
        range is what marks such an answer for dropping, so nothing is remembered here."""
        self._next_unanswered = (self._next_unanswered + 1) % _ANSWERED_IDS
        return _UNANSWERED_BASE + self._next_unanswered

    def add_local(self, correlation_id: int, api_key: int, api_version: int, response: WireBytes) -> None:
        self._slots.append(ResponseSlot(correlation_id, api_key, api_version, [response], True,
                                        arrived=self._clock.monotonic()))

    def add_deferred(self, correlation_id: int, api_key: int, api_version: int) -> ResponseSlot:
        """A slot the gateway fills itself later (set ``response`` and ``ready``); it keeps its place in order."""
        slot = ResponseSlot(correlation_id, api_key, api_version, arrived=self._clock.monotonic())
        self._slots.append(slot)
        return slot

    def reserve_upstream_id(self) -> int:
        """An upstream id for a deferred slot registered later with ``await_upstream`` (transport/worker_thread.py)."""
        self._next_id = (self._next_id + 1) % _ANSWERED_IDS  # the answered range, as expect_upstream's
        return self._next_id

    def await_upstream(self, upstream_id: int, slot: ResponseSlot) -> None:
        """The deferred ``slot`` is now filled by the upstream's answer to ``upstream_id``."""
        self._awaiting[upstream_id] = slot

    def match_upstream(self, upstream_id: int) -> ResponseSlot | None:
        """The slot an upstream response fills; None for a response to drop (acks=0)."""
        awaiting = self._awaiting
        slot = awaiting.pop(upstream_id, None)
        if slot is not None:
            if not awaiting:  # a dict keeps its table when emptied (160 bytes on an idle client's connection)
                awaiting.clear()
            return slot
        if _UNANSWERED_BASE <= upstream_id <= 0x7FFF_FFFF:
            return None
        raise DecodeError(f"upstream sent a response nobody asked for (correlation id {upstream_id})")

    def streamable(self, upstream_id: int) -> ResponseSlot | None:
        """The slot for ``upstream_id`` if its response may be written out right now: it is the
        oldest slot (everything before it has been sent) and nothing was asked to rewrite it."""
        slot = self._awaiting.get(upstream_id)
        if slot is None or slot.hook is not None or not self._slots or self._slots[0] is not slot:
            return None
        return slot

    def start_streaming(self, upstream_id: int) -> ResponseSlot:
        """Take the head slot out: its response is being written to the client as it arrives."""
        slot = self._awaiting.pop(upstream_id)
        if not self._awaiting:
            self._awaiting.clear()
        assert self._slots[0] is slot
        del self._slots[0]
        if self._observe is not None:  # latency to the response's first byte
            self._observe.observe_latency(slot.api_key, self._clock.monotonic() - slot.arrived)
        return slot

    def pop_ready(self) -> list[WireBytes]:
        """The responses that may be written now (the ready head of the queue), in order."""
        slots = self._slots
        if not slots or not (head := slots[0]).ready:
            return []
        now = self._clock.monotonic()
        observe, sent = self._observe, self._sent
        if len(slots) == 1 or not slots[1].ready:  # the usual: one answer ready, its own list handed on (no copy)
            del slots[0]
            if observe is not None:
                observe.observe_latency(head.api_key, now - head.arrived)
            if sent is not None:
                sent.response(head.api_key, sum(map(len, head.response)))
            return head.response
        ready: list[WireBytes] = []
        done = 0
        for slot in slots:
            if not slot.ready:
                break
            done += 1
            ready += slot.response
            if observe is not None:
                observe.observe_latency(slot.api_key, now - slot.arrived)
            if sent is not None:
                sent.response(slot.api_key, sum(map(len, slot.response)))
        del slots[:done]  # one move for the whole ready head; emptied, the list frees its storage
        return ready


def with_correlation_id(wire: memoryview, offset: int, correlation_id: int) -> list[WireBytes]:
    """The frame as pieces with the 4 bytes at offset replaced (no copy of the payload)."""
    return [wire[:offset], _I32.pack(correlation_id), wire[offset + 4 :]]
