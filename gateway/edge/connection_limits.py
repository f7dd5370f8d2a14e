"""Kafka's connection limits (max.connections, max.connections.per.ip and its overrides,
max.connection.creation.rate, per listener and process-wide) as sans-IO accounting with a clock passed in.

Kafka's semantics (KIP-402, KIP-612): ``max.connections`` and ``max.connection.creation.rate``
are broker-wide and may also be set per listener (``listener.name.<l>.``); a new connection
must fit under both.  ``max.connections.per.ip`` (with ``max.connections.per.ip.overrides``)
is broker-wide only.  Where a Kafka broker blocks or delays its acceptor at the
connection-count and creation-rate limits, the gateway refuses (closes) the connection at
once: the client retries with its reconnect backoff, and nothing queues in the gateway.
A refused connection is not counted against any limit, the creation rate included.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from auth.client_address import canonical_host
from gateway.config import GatewayConfig, parse_ip_overrides

UNLIMITED = 2_147_483_647  # Kafka's default for every limit here (Int.MaxValue): no limit

Clock = Callable[[], float]  # seconds, monotonic


@dataclass(slots=True, frozen=True)
class LimitSettings:
    """The configured limits; UNLIMITED where unset (overrides map canonical hosts, auth/client_address.py)."""

    max_connections: int = UNLIMITED
    max_connections_per_ip: int = UNLIMITED
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    max_connection_creation_rate: int = UNLIMITED
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    listener_max_connection_creation_rate: Mapping[str, int] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Refusal:
    """Why a connection was refused: the configuration key whose limit it hit, and the limit."""

    key: str
    limit: int
    metric_reason: str  # a bounded label value for the refusal counter


@dataclass(slots=True)
class Admission:
    """One admitted connection's hold on the counts; released exactly once."""

    listener: str
    address: str
    released: bool = False


def resolve_overrides(overrides: Mapping[str, int], resolve: Callable[[str], list[str]]) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by address: host names resolved once, at start-up,
    as Kafka does (every address a name resolves to gets its limit)."""
    resolved: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            addresses = resolve(host)
        for address in addresses:
            resolved[canonical_host(address)] = limit  # as the acceptor spells a client's host
    return resolved


class _TokenBucket:
    """At most ``rate`` connections in any one second, and ``rate`` per second sustained."""

    __slots__ = ("_at", "_rate", "_tokens")

    def __init__(self, rate: int, now: float) -> None:
        self._rate = float(rate)
        self._tokens = float(rate)
        self._at = now

    def has_token(self, now: float) -> bool:
        self._tokens = min(self._rate, self._tokens + (now - self._at) * self._rate)
        self._at = now
        return self._tokens >= 1.0

    def take(self) -> None:
        self._tokens -= 1.0


class ConnectionLimits:
    """Counts open connections per listener, per address and in total; admits or refuses new ones."""

    def __init__(self, settings: LimitSettings, clock: Clock) -> None:
        self.settings = settings
        self._clock = clock
        self._total = 0
        self._by_listener: dict[str, int] = {}
        self._by_address: dict[str, int] = {}
        now = clock()
        self._rate = _bucket(settings.max_connection_creation_rate, now)
        self._listener_rate = {name: bucket for name, rate in settings.listener_max_connection_creation_rate.items()
                               if (bucket := _bucket(rate, now)) is not None}

    @property
    def total(self) -> int:
        return self._total

    def open_from(self, host: str) -> int:
        return self._by_address.get(host, 0)

    def admit(self, listener: str, address: str) -> Admission | Refusal:
        """Count a new connection from ``address`` (a ClientAddress's canonical host) on ``listener``,
        or say which limit refuses it."""
        refusal = self._check(listener, address)
        if refusal is not None:
            return refusal
        self._total += 1
        self._by_listener[listener] = self._by_listener.get(listener, 0) + 1
        self._by_address[address] = self._by_address.get(address, 0) + 1
        for bucket in (self._rate, self._listener_rate.get(listener)):
            if bucket is not None:
                bucket.take()
        return Admission(listener, address)

    def release(self, admission: Admission) -> None:
        """The connection closed (or never completed its TLS handshake); idempotent."""
        if admission.released:
            return
        admission.released = True
        self._total -= 1
        self._by_listener[admission.listener] -= 1
        left = self._by_address[admission.address] - 1
        if left:
            self._by_address[admission.address] = left
        else:  # the map holds only addresses with open connections
            del self._by_address[admission.address]

    def _check(self, listener: str, address: str) -> Refusal | None:
        s = self.settings
        listener_max = s.listener_max_connections.get(listener, UNLIMITED)
        if self._by_listener.get(listener, 0) >= listener_max:
            return Refusal(f"listener.name.{listener.lower()}.max.connections", listener_max,
                           "listener_max_connections")
        if self._total >= s.max_connections:
            return Refusal("max.connections", s.max_connections, "max_connections")
        now = self._clock()
        bucket = self._listener_rate.get(listener)
        if bucket is not None and not bucket.has_token(now):
            return Refusal(f"listener.name.{listener.lower()}.max.connection.creation.rate",
                           s.listener_max_connection_creation_rate[listener], "listener_max_connection_creation_rate")
        if self._rate is not None and not self._rate.has_token(now):
            return Refusal("max.connection.creation.rate", s.max_connection_creation_rate,
                           "max_connection_creation_rate")
        override = s.per_ip_overrides.get(address)
        per_ip = s.max_connections_per_ip if override is None else override
        if self._by_address.get(address, 0) >= per_ip:
            key = "max.connections.per.ip" if override is None else "max.connections.per.ip.overrides"
            return Refusal(key, per_ip, "max_connections_per_ip")
        return None


def _bucket(rate: int, now: float) -> _TokenBucket | None:
    return None if rate >= UNLIMITED else _TokenBucket(rate, now)


class RefusalSampler:
    """Bounds the audit events refusals write: at most ``per_second`` a second; the rest are
    counted and reported (``suppressed``) by the next event written, so totals stay exact."""

    __slots__ = ("_clock", "_per_second", "_suppressed", "_window", "_written")

    def __init__(self, clock: Clock, per_second: int = 100) -> None:
        self._clock = clock
        self._per_second = per_second
        self._window = clock()
        self._written = 0
        self._suppressed = 0

    def sample(self) -> int | None:
        """None: do not write this refusal; else write it, with this many earlier ones unwritten."""
        now = self._clock()
        if now - self._window >= 1.0:
            self._window, self._written = now, 0
        if self._written >= self._per_second:
            self._suppressed += 1
            return None
        self._written += 1
        suppressed, self._suppressed = self._suppressed, 0
        return suppressed


def limit_settings(config: GatewayConfig, resolve: Callable[[str], list[str]]) -> LimitSettings:
    """The limits a gateway process enforces, from its configuration (host names resolved)."""
    s = config.settings
    return LimitSettings(
        max_connections=s["max.connections"],
        max_connections_per_ip=s["max.connections.per.ip"],
        per_ip_overrides=resolve_overrides(parse_ip_overrides(s["max.connections.per.ip.overrides"]), resolve),
        max_connection_creation_rate=s["max.connection.creation.rate"],
        listener_max_connections={lst.name: lst.connection_limits["max.connections"]
                                  for lst in config.listeners if "max.connections" in lst.connection_limits},
        listener_max_connection_creation_rate={
            lst.name: lst.connection_limits["max.connection.creation.rate"]
            for lst in config.listeners if "max.connection.creation.rate" in lst.connection_limits})
