"""A budget of TLS handshakes per client address: over it, that address's new connections wait.

A full TLS handshake costs the event loop about a millisecond of CPU, so one address opening
connections as fast as it can takes the loop from every other client (bench/availability/
tls_flood.py).  Each address may start ``rate_per_s`` handshakes a second, ``burst`` at once;
beyond that its new connections are accepted and their handshake deferred to the address's next
slot (a virtual schedule, GCRA), so the offender is paused and other addresses keep the loop.
Nothing is refused for its rate: the budget refills.  What is bounded is the wait itself:
``queue_per_ip`` deferred connections per address, and at most queue_per_ip / rate_per_s seconds
of waiting; a connection beyond either is refused, as at max.connections.per.ip.  The second
bound matters because a deferred connection whose peer leaves stops waiting at once but keeps
the slot it was given: without it, an address connecting and leaving fast would push its
schedule, and its next honest connection's wait, ever further ahead.  Sans-IO: the clock is
passed in.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]  # seconds, monotonic

DEFAULT_RATE_PER_IP = 50.0  # a client's pool reconnecting, a group of 50 starting behind one NAT: within burst
DEFAULT_BURST_PER_IP = 200
DEFAULT_QUEUE_PER_IP = 256  # ~5 s of waiting at the default rate
DEFAULT_MAX_TRACKED_IPS = 10_000
_EPSILON_S = 1e-9


@dataclass(slots=True)
class _Address:
    next_slot: float  # when the address's next handshake may start with no burst left (GCRA's TAT)
    waiting: int = 0  # deferred connections not yet started


@dataclass(slots=True, frozen=True)
class Deferral:
    """Start this connection's handshake after ``delay_s`` (0: now); call ``started`` when it does."""

    delay_s: float


QUEUE_FULL = None  # offer()'s answer when the address already has queue_per_ip connections waiting


class HandshakeBudget:
    """Per-address token budget of TLS handshakes; ``rate_per_s <= 0`` disables it."""

    __slots__ = ("_addresses", "_clock", "burst", "max_tracked_ips", "queue_per_ip", "rate_per_s")

    def __init__(self, rate_per_s: float = DEFAULT_RATE_PER_IP, burst: int = DEFAULT_BURST_PER_IP,
                 queue_per_ip: int = DEFAULT_QUEUE_PER_IP, max_tracked_ips: int = DEFAULT_MAX_TRACKED_IPS,
                 clock: Clock = time.monotonic) -> None:
        self.rate_per_s = rate_per_s
        self.burst = max(1, burst)
        self.queue_per_ip = max(1, queue_per_ip)
        self.max_tracked_ips = max(1, max_tracked_ips)
        self._clock = clock
        self._addresses: OrderedDict[str, _Address] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._addresses)

    def waiting(self, address: str | None = None) -> int:
        """Deferred connections not yet started (from ``address``, or from every address)."""
        if address is not None:
            state = self._addresses.get(address)
            return state.waiting if state is not None else 0
        return sum(state.waiting for state in self._addresses.values())

    def offer(self, address: str) -> Deferral | None:
        """A new TLS connection from ``address`` (canonical host): when its handshake may start,
        or QUEUE_FULL (None) when the address already has its bound of connections waiting or
        its next slot is further than that bound's worth of waiting (queue_per_ip / rate_per_s)."""
        if self.rate_per_s <= 0:
            return Deferral(0.0)
        now = self._clock()
        interval = 1.0 / self.rate_per_s
        state = self._address(address, now)
        start = state.next_slot - (self.burst - 1) * interval
        if start - now < _EPSILON_S:  # within the burst (float sums of intervals drift by ~1e-13)
            start = now
        too_far = start - now > self.queue_per_ip * interval + _EPSILON_S  # slots kept by peers that left
        if start > now and (state.waiting >= self.queue_per_ip or too_far):
            return QUEUE_FULL
        state.next_slot = max(state.next_slot, now) + interval
        if start > now:
            state.waiting += 1
        return Deferral(start - now)

    def started(self, address: str) -> None:
        """A deferred connection's wait is over (its handshake starts, or it was closed meanwhile)."""
        state = self._addresses.get(address)
        if state is not None and state.waiting > 0:
            state.waiting -= 1

    def _address(self, address: str, now: float) -> _Address:
        state = self._addresses.get(address)
        if state is not None:
            self._addresses.move_to_end(address)
            return state
        self._forget_idle(now)
        state = self._addresses[address] = _Address(next_slot=now)
        return state

    def _forget_idle(self, now: float) -> None:
        """At the bound, forget the least recently seen addresses with nothing waiting; forgetting
        one whose burst has refilled loses nothing.  Addresses with connections waiting are kept:
        those are bounded by queue_per_ip and max.connections."""
        if len(self._addresses) < self.max_tracked_ips:
            return
        for address in [a for a, s in self._addresses.items() if s.waiting == 0 and s.next_slot <= now]:
            del self._addresses[address]
        while len(self._addresses) >= self.max_tracked_ips:
            idle = next((a for a, s in self._addresses.items() if s.waiting == 0), None)
            if idle is None:
                return
            del self._addresses[idle]
