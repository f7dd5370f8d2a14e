"""The quotas in force, indexed for enforcement: which bound applies to a (user, client id) and why.

Kafka's precedence, per quota kind (the first configured entity that sets that kind wins):
user+client-id → user+default client → user → default user+client-id → default user+default
client → default user → client-id → default client-id; for connections, the ip, then the
default ip (KIP-612).  A lookup is at most eight dict probes, however many entities exist.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from auth.client_address import canonical_host
from gateway.quotas.model import CLIENT_ID, CONNECTION_CREATION_RATE, IP, USER
from gateway.quotas.state import QuotaState


class _Default:
    __slots__ = ()


class _Absent:
    __slots__ = ()


DEFAULT: object = _Default()  # the entity names the type's <default>
ABSENT: object = _Absent()  # the entity does not name the type at all
_Key = tuple[object, object]  # (user part, client-id part): a name, DEFAULT or ABSENT


@dataclass(slots=True, frozen=True)
class _Index:
    by_kind: Mapping[str, Mapping[_Key, tuple[float, str]]]
    ips: Mapping[str | None, float]  # canonical address (None: the default ip) → connection_creation_rate
    by_label: Mapping[tuple[str, str], float]  # (kind, entity label) → bound: what /metrics may call in force


def _part(name: str | None) -> object:
    return DEFAULT if name is None else name


def _index(state: QuotaState) -> _Index:
    by_kind: dict[str, dict[_Key, tuple[float, str]]] = {}
    ips: dict[str | None, float] = {}
    by_label: dict[tuple[str, str], float] = {}
    for entity, values in state.items():
        by_type = entity.by_type
        if IP in by_type:
            if CONNECTION_CREATION_RATE in values:
                name = by_type[IP]
                # The spelling client addresses have (auth/client_address.py): ::1 = 0:0:0:0:0:0:0:1,
                # ::ffff:10.1.2.3 = 10.1.2.3.
                ips[None if name is None else canonical_host(name)] = values[CONNECTION_CREATION_RATE]
            continue
        key = (_part(by_type[USER]) if USER in by_type else ABSENT,
               _part(by_type[CLIENT_ID]) if CLIENT_ID in by_type else ABSENT)
        label = entity.label()
        for kind, bound in values.items():
            table = by_kind.get(kind)
            if table is None:
                table = by_kind[kind] = {}
            table[key] = (bound, label)
            by_label[(kind, label)] = bound
    return _Index(by_kind, ips, by_label)


_EMPTY = _Index({}, {}, {})


class QuotaBook:
    """The quotas of every entity, swapped whole on each change; ``version`` counts the changes."""

    __slots__ = ("_index", "_lock", "version")

    def __init__(self, state: QuotaState | None = None) -> None:
        self._index = _EMPTY if not state else _index(state)
        self._lock = threading.Lock()
        self.version = 0

    def replace(self, state: QuotaState) -> None:
        """Adopt the store's new state (from any thread): readers see the old index or the new, whole."""
        index = _index(state)
        with self._lock:
            self._index = index
            self.version += 1

    def lookup(self, user: str, client_id: str, kind: str) -> tuple[float, str] | None:
        """(bound, entity label) of the most specific entity with a ``kind`` quota; None when none applies."""
        table = self._index.by_kind.get(kind)
        if not table:
            return None
        get = table.get
        found = (get((user, client_id)) or get((user, DEFAULT)) or get((user, ABSENT))
                 or get((DEFAULT, client_id)) or get((DEFAULT, DEFAULT)) or get((DEFAULT, ABSENT))
                 or get((ABSENT, client_id)) or get((ABSENT, DEFAULT)))
        return found

    def configured(self, kind: str, label: str) -> float | None:
        """The ``kind`` bound of the entity labelled ``label`` (``user=alice``), None when it has none now."""
        return self._index.by_label.get((kind, label))

    def connection_creation_rate(self, ip: str) -> float | None:
        """KIP-612: the rate of new connections ``ip`` may open per second, or None when unlimited."""
        ips = self._index.ips
        if not ips:
            return None
        rate = ips.get(ip)  # a ClientAddress host is canonical already
        if rate is None:
            rate = ips.get(canonical_host(ip))
        return ips.get(None) if rate is None else rate

