"""What enforcement reads of the quota book: the bound of the most specific configured entity.

The quota model and its stores (gateway/quotas/book.py) implement this; enforcement depends
on nothing more, so it is tested with the small in-memory books below.
"""

from __future__ import annotations

from typing import Protocol

# Kafka's quota types that bound a client's requests (connection_creation_rate bounds an IP).
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"


class QuotaLookup(Protocol):
    """The quotas in force; ``version`` changes whenever any of them does (callers cache on it)."""

    version: int

    def lookup(self, user: str, client_id: str, kind: str) -> tuple[float, str] | None:
        """(bound, entity label) of the most specific entity configured for ``kind`` (Kafka's
        precedence), e.g. ``(1000000.0, "user=alice")``; None when nothing bounds this client."""
        ...

    def configured(self, kind: str, label: str) -> float | None:
        """The ``kind`` bound the entity labelled ``label`` has now (None: none, or it was removed)."""
        ...

    def connection_creation_rate(self, ip: str) -> float | None: ...


class NoQuotas:
    """No quota configured anywhere: the default, and the path that must cost nothing."""

    __slots__ = ("version",)

    def __init__(self) -> None:
        self.version = 0

    def lookup(self, user: str, client_id: str, kind: str) -> tuple[float, str] | None:
        return None

    def configured(self, kind: str, label: str) -> float | None:
        return None

    def connection_creation_rate(self, ip: str) -> float | None:
        return None


class DictQuotas:
    """Quotas from a dict, for tests and benches: ``{(entity label, kind): bound}``.

    Entity labels are ``user=U,client-id=C``, ``user=U`` or ``client-id=C`` (U or C may be
    ``<default>``); the precedence is Kafka's, from user + client-id down to default client-id.
    """

    __slots__ = ("_bounds", "_ips", "version")

    def __init__(self, bounds: dict[tuple[str, str], float] | None = None,
                 ips: dict[str, float] | None = None) -> None:
        self._bounds = dict(bounds or {})
        self._ips = dict(ips or {})
        self.version = 1

    def set(self, entity: str, kind: str, bound: float | None) -> None:
        if bound is None:
            self._bounds.pop((entity, kind), None)
        else:
            self._bounds[(entity, kind)] = bound
        self.version += 1

    def lookup(self, user: str, client_id: str, kind: str) -> tuple[float, str] | None:
        for entity in _precedence(user, client_id):
            bound = self._bounds.get((entity, kind))
            if bound is not None:
                return bound, entity
        return None

    def configured(self, kind: str, label: str) -> float | None:
        return self._bounds.get((label, kind))

    def connection_creation_rate(self, ip: str) -> float | None:
        found = self._ips.get(ip)
        return found if found is not None else self._ips.get("<default>")


def _precedence(user: str, client_id: str) -> tuple[str, ...]:
    d = "<default>"
    return (f"user={user},client-id={client_id}", f"user={user},client-id={d}", f"user={user}",
            f"user={d},client-id={client_id}", f"user={d},client-id={d}", f"user={d}",
            f"client-id={client_id}", f"client-id={d}")
