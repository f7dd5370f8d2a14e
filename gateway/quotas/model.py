"""Kafka's client-quota model: entities, quota keys, and Kafka's validation of both (sans-IO).

An entity is a set of (type, name) parts, a ``None`` name being the type's ``<default>``:
user, client-id, user + client-id, or ip alone (KIP-612).  The rules and the messages are
Kafka 4.4's controller's (ClientQuotaControlManager), measured against the real broker.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from protocol.kafka_errors import KafkaError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)
DEFAULT_NAME = "<default>"  # how tools (kafka-configs, ksgate quotas) print a None name

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"


@dataclass(slots=True, frozen=True)
class Whole:
    """A key Kafka types LONG or INT: an integer-valued double no larger than the type's maximum."""

    type_name: str  # as Kafka's message says it: "a LONG", "an INT"
    maximum: float  # as Java compares a double with Long.MAX_VALUE / Integer.MAX_VALUE


_LONG, _INT = Whole("a LONG", float(2**63 - 1)), Whole("an INT", float(2**31 - 1))
# Per entity kind, its keys and their Kafka types (None: DOUBLE, any finite value > 0).
CLIENT_KEYS: Mapping[str, Whole | None] = {PRODUCER_BYTE_RATE: _LONG, CONSUMER_BYTE_RATE: _LONG,
                                           REQUEST_PERCENTAGE: None, CONTROLLER_MUTATION_RATE: None}
IP_KEYS: Mapping[str, Whole | None] = {CONNECTION_CREATION_RATE: _INT}
ALL_KEYS = (*CLIENT_KEYS, *IP_KEYS)

Part = tuple[str, str | None]


class QuotaError(ValueError):
    """A request item Kafka refuses, with Kafka's error code and message."""

    def __init__(self, code: KafkaError, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(message: str) -> QuotaError:
    return QuotaError(KafkaError.INVALID_REQUEST, message)


def _java_order(types: list[str]) -> list[str]:
    """The order a java.util.HashMap built with one put per type iterates them in (Kafka answers an
    entity's parts in it): by bucket of String.hashCode in the table the puts grew, ties as put."""
    capacity = 1
    while capacity < len(types):
        capacity *= 2
    while len(types) > capacity * 0.75 and capacity < 1 << 30:
        capacity *= 2

    def bucket(name: str) -> int:
        h = 0
        for ch in name:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(types, key=bucket)


@dataclass(slots=True, frozen=True)
class QuotaEntity:
    """An entity: its parts in the order Kafka answers them (one part per type).  Its per-type map and
    label are computed once, here: the quota book indexes every entity on each change."""

    parts: tuple[Part, ...]
    by_type: Mapping[str, str | None] = field(init=False, compare=False, hash=False, repr=False)
    _label: str = field(init=False, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        by_type = dict(self.parts)
        object.__setattr__(self, "by_type", by_type)
        object.__setattr__(self, "_label", ",".join(
            f"{t}={DEFAULT_NAME if by_type[t] is None else by_type[t]}"
            for t in (*ENTITY_TYPES, *(t for t in by_type if t not in ENTITY_TYPES)) if t in by_type))

    @classmethod
    def of(cls, parts: Iterable[Part]) -> QuotaEntity:
        """Parts as a request lists them, a later part of one type replacing an earlier one (as Kafka's map)."""
        by_type = dict(parts)
        return cls(tuple((t, by_type[t]) for t in _java_order(list(by_type))))

    def name(self, entity_type: str) -> str | None:
        return self.by_type.get(entity_type)

    def has(self, entity_type: str) -> bool:
        return entity_type in self.by_type

    @property
    def is_ip(self) -> bool:
        return self.has(IP)

    def keys(self) -> Mapping[str, Whole | None]:
        return IP_KEYS if self.is_ip else CLIENT_KEYS

    def label(self) -> str:
        """A stable text: ``user=alice,client-id=<default>`` (user first, as kafka-configs prints)."""
        return self._label

    def java_text(self) -> str:
        """Kafka's ClientQuotaEntity.toString, which its duplicate-entity message quotes."""
        inner = ", ".join(f"{t}={'null' if n is None else n}" for t, n in self.parts)
        return f"ClientQuotaEntity(entries={{{inner}}})"


def validate_entity(parts: Iterable[Part]) -> QuotaEntity:
    """The entity a request names, or QuotaError (INVALID_REQUEST) with Kafka's message, checked in Kafka's order."""
    return check_entity(QuotaEntity.of(parts))


def check_entity(entity: QuotaEntity) -> QuotaEntity:
    if not entity.parts:
        raise _invalid("Invalid empty client quota entity")
    for entity_type, name in entity.parts:
        if entity_type not in ENTITY_TYPES:
            raise _invalid(f"Unhandled client quota entity type: {entity_type}")
        if name == "":
            raise _invalid(f"Empty {entity_type} not supported")
    if entity.is_ip and len(entity.parts) > 1:
        raise _invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
    name = entity.name(IP)
    if name is not None and not is_ip_literal(name):
        # Kafka also takes a host name it can resolve; ksgate takes addresses only (docs/kafka-differences.md).
        raise _invalid(f"{name} is not a valid IP or resolvable host.")
    return entity


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def validate_value(entity: QuotaEntity, key: str, value: float) -> None:
    """A value to set for ``key`` on ``entity``; QuotaError (INVALID_REQUEST) with Kafka's message."""
    keys = entity.keys()
    if key not in keys:
        raise _invalid(f"Invalid configuration key {key}")
    if not math.isfinite(value):
        raise _invalid(f"Quota {key} must be a finite number")
    if value <= 0:
        raise _invalid(f"Quota {key} must be greater than 0")
    whole = keys[key]
    if whole is not None:
        if value > whole.maximum:
            raise _invalid(f"Proposed value for {key} is too large for {whole.type_name}.")
        if value != math.floor(value):
            raise _invalid(f"{key} cannot be a fractional value.")
