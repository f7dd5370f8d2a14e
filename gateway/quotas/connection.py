"""The quotas of one client connection: which bounds apply to it, what it records, when it is muted.

The session asks ``applies(wire)`` for every request: with no quota set anywhere this is two
comparisons (the book's version and the client id's bytes, cached per connection), and the
request goes on as if quotas did not exist. When a bound applies, the session records what Kafka
counts (KIP-219, KIP-124):

- Produce: the request's size, against producer_byte_rate (acks=0 requests too: they are muted only);
- Fetch: the response's size, against consumer_byte_rate;
- every request: the gateway CPU time spent on it (its decision on the event loop, and its
  response), against request_percentage, as a percentage of one core per second;
- CreateTopics, CreatePartitions, DeleteTopics: the partitions they mutate, against
  controller_mutation_rate's token bucket (gateway/quotas/mutation.py): over it, the gateway answers
  THROTTLING_QUOTA_EXCEEDED itself (``mutation``).

The throttle time earned goes into the response's throttle_time_ms (the larger of the upstream's
and ours), and the connection stops reading for that long: the offender's socket only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.quotas.lookup import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaLookup,
)
from gateway.quotas.mutation_request import (
    NO_COUNTS,
    STRICT_SINCE,
    MutationVerdict,
    PartitionCounts,
    Settlement,
    judge,
)
from gateway.quotas.sensors import QuotaSensors
from gateway.quotas.throttle_field import with_throttle
from gateway.session.response_queue import ResponseSlot, WireBytes
from protocol.api_keys import ApiKey

_DEFAULT = "<default>"
_NANOS_TO_PERCENT = 100 / 1e9  # CPU nanoseconds → percent of one core during one second


@dataclass(slots=True, frozen=True)
class Bound:
    """One quota that applies to this connection: its bound, the configured entity, and the sensor."""

    bound: float
    label: str  # the configured entity, e.g. user=<default> (the metrics' series)
    sensor: str  # the entity the rate is kept for, e.g. user=alice (defaults resolved to this client)


@dataclass(slots=True, frozen=True)
class AppliedQuotas:
    produce: Bound | None
    fetch: Bound | None
    request: Bound | None
    mutation: Bound | None = None


class ConnectionQuotas:
    __slots__ = ("_book", "_client_raw", "_unsettled", "_user", "_version", "active", "muted_until_ms", "sensors")

    def __init__(self, book: QuotaLookup, sensors: QuotaSensors) -> None:
        self._book = book
        self.sensors = sensors
        self._user: str | None = None
        self._version = -1
        self._client_raw = b""
        # The quotas resolved for the latest request (None: none applies). Set by applies() only; an attribute, not a
        # property: the session reads it on every request and answer, and a property is a call each time.
        self.active: AppliedQuotas | None = None
        self.muted_until_ms = 0.0
        # Relayed mutations awaiting their answer (≤ the in-flight requests): replaced, never edited, so that a
        # connection with none keeps the shared empty tuple rather than a list of its own.
        self._unsettled: tuple[Settlement, ...] = ()

    def bind(self, user: str) -> None:
        """The connection (re-)authenticated as ``user``: resolve again on the next request."""
        self._user = user
        self._version = -1

    def applies(self, wire: memoryview) -> AppliedQuotas | None:
        """The quotas of the request frame ``wire`` (size prefix + payload; its header's client id), None for none."""
        key = self._client_raw  # the client id as the header has it: its 2-byte length, then its bytes
        if self._version == self._book.version and wire[12 : 12 + len(key)] == key:
            return self.active
        self._version = self._book.version
        self._client_raw = key = _client_id_field(wire)
        self.active = self._resolve(key[2:].decode("utf-8", "replace"))
        return self.active

    def _resolve(self, client_id: str) -> AppliedQuotas | None:
        user = self._user
        if user is None:
            return None
        found = AppliedQuotas(*(self._bound(user, client_id, kind)
                                for kind in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
                                             CONTROLLER_MUTATION_RATE)))
        return found if (found.produce or found.fetch or found.request or found.mutation) else None

    def _bound(self, user: str, client_id: str, kind: str) -> Bound | None:
        hit = self._book.lookup(user, client_id, kind)
        if hit is None:
            return None
        bound, label = hit
        return Bound(bound, label, sensor_entity(label, user, client_id))

    # --- recording (only called when ``applies`` found quotas) ------------------------------

    def request_recorded(self, applied: AppliedQuotas, api_key: int, size: int, cpu_ns: int) -> int:
        """A request was handled: its throttle time in ms (0: within every quota)."""
        throttle = 0
        sensors = self.sensors
        if api_key == ApiKey.PRODUCE and (b := applied.produce) is not None:
            throttle = sensors.record(PRODUCER_BYTE_RATE, b.sensor, b.label, b.bound, size)
        if (b := applied.request) is not None:
            throttle = max(throttle, sensors.record(REQUEST_PERCENTAGE, b.sensor, b.label, b.bound,
                                                    cpu_ns * _NANOS_TO_PERCENT))
        return throttle

    def response_recorded(self, applied: AppliedQuotas, api_key: int, size: int, cpu_ns: int) -> int:
        """An upstream response was made ready: the throttle time it earns (Fetch bytes, CPU)."""
        throttle = 0
        sensors = self.sensors
        if api_key == ApiKey.FETCH and (b := applied.fetch) is not None:
            throttle = sensors.record(CONSUMER_BYTE_RATE, b.sensor, b.label, b.bound, size)
        if (b := applied.request) is not None and cpu_ns:
            throttle = max(throttle, sensors.record(REQUEST_PERCENTAGE, b.sensor, b.label, b.bound,
                                                    cpu_ns * _NANOS_TO_PERCENT))
        return throttle

    def mutation(self, key: int, version: int, wire: WireBytes,
                 known: Callable[[], PartitionCounts] = lambda: NO_COUNTS) -> MutationVerdict | None:
        """controller_mutation_rate's verdict on a request about to be relayed (None: not counted);
        ``known``: the partition counts the cluster view has, asked only for a request that mutates."""
        applied = self.active
        if applied is None or (b := applied.mutation) is None or key not in STRICT_SINCE:
            return None
        self._settle()
        verdict = judge(self.sensors.mutations, b.sensor, b.bound, key, version, wire, known())
        if verdict is not None:
            self.sensors.mutated(b.sensor, b.label, b.bound, verdict)
            if verdict.settlement is not None:
                self._unsettled += (verdict.settlement,)
        return verdict

    def _settle(self) -> None:
        """Give back what earlier requests counted for topics their answers refused."""
        if not self._unsettled:
            return
        waiting = []
        for settlement in self._unsettled:
            if settlement.refused is None:
                waiting.append(settlement)
            elif refund := settlement.refunded():
                self.sensors.mutations.refund(settlement.sensor, settlement.rate, refund)
        self._unsettled = tuple(waiting)

    def request_done(self, applied: AppliedQuotas, api_key: int, size: int, cpu_ns: int,
                     slot: ResponseSlot | None) -> int:
        """A request under quota was handled (its answer, if any, in ``slot``): the throttle it earned,
        set in the slot (at once if the gateway answered it itself)."""
        throttle = self.request_recorded(applied, api_key, size, cpu_ns)
        if throttle > 0 and slot is not None:
            slot.throttle_ms = max(slot.throttle_ms, throttle)
            if slot.ready:
                slot.response = with_throttle(slot.api_key, slot.api_version, slot.response, slot.throttle_ms)
        return throttle

    def response_ready(self, slot: ResponseSlot, size: int, cpu_ns: int) -> int:
        """An upstream response of ``size`` bytes was made ready in ``slot``: record it (Fetch bytes,
        CPU), and set the larger of its request's throttle and its own in it; returns its own."""
        earned = 0
        if (applied := self.active) is not None:
            earned = self.response_recorded(applied, slot.api_key, size, cpu_ns)
            slot.throttle_ms = max(slot.throttle_ms, earned)
        if slot.throttle_ms:
            slot.response = with_throttle(slot.api_key, slot.api_version, slot.response, slot.throttle_ms)
        return earned

    def mute_for(self, throttle_ms: int) -> float | None:
        """Extend the mute to ``throttle_ms`` from now; the new delay (s) if it got later, else None."""
        now = self.sensors.now_ms()
        until = now + throttle_ms
        if until <= self.muted_until_ms:
            return None
        self.muted_until_ms = until
        return throttle_ms / 1000.0

    def unmuted(self) -> float | None:
        """The mute timer fired: None if the mute is over, else the seconds still to wait."""
        left = self.muted_until_ms - self.sensors.now_ms()
        return left / 1000.0 if left > 0.5 else None


def cpu_clock_ns() -> int:
    """This thread's CPU time: the event loop's own work, not time it waited (another process ran)."""
    return time.thread_time_ns()


def sensor_entity(label: str, user: str, client_id: str) -> str:
    """The entity a rate is kept for: the configured one, with each ``<default>`` made this client's
    own (Kafka gives every user under a default user quota a quota of its own)."""
    if _DEFAULT not in label:
        return label
    parts = []
    for part in label.split(","):
        name, _, value = part.partition("=")
        if value == _DEFAULT:
            value = user if name == "user" else client_id
        parts.append(f"{name}={value}")
    return ",".join(parts)


def _client_id_field(wire: memoryview) -> bytes:
    """The request header's client id field, raw: its length (-1 for null) and its bytes."""
    if len(wire) < 14:  # size(4) api_key(2) api_version(2) correlation_id(4), then the field
        return b"\xff\xff"
    n = int.from_bytes(wire[12:14], "big", signed=True)
    return bytes(wire[12 : 14 + max(n, 0)])
