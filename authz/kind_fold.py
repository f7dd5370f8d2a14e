"""One request's decisions folded by kind: exact counts and a few names each, in bounded memory.

Shared by the audit log's decision events (gateway/ops/audit_batch.py) and the shadow ACL set's
divergences (authz/shadow.py): a request naming 100,000 topics yields at most MAX_KINDS aggregates.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

# Names kept per aggregate: with MAX_KINDS this bounds what one request can record.
SAMPLE_SIZE = 20
# Distinct kinds (mostly: distinct matching rules) kept per request; the rest are folded into a coarser
# kind whose rule is OTHER_RULES.
MAX_KINDS = 32
OTHER_RULES = "(other rules)"

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class KindAggregate(Generic[K]):
    """Every decision of one kind in one request."""

    kind: K
    count: int = 0
    sample: list[str] = field(default_factory=list)


A = TypeVar("A", bound=KindAggregate)  # type: ignore[type-arg]


def fold(kinds: dict[K, A], kind: K, name: str, coarser: Callable[[K], K], make: Callable[[K], A]) -> None:
    """Count ``name`` under ``kind`` in ``kinds``; once MAX_KINDS are held, a new kind counts under
    ``coarser(kind)``."""
    aggregate = kinds.get(kind)
    if aggregate is None:
        if len(kinds) >= MAX_KINDS:
            kind = coarser(kind)
            aggregate = kinds.get(kind)
        if aggregate is None:
            aggregate = kinds[kind] = make(kind)
    aggregate.count += 1
    if len(aggregate.sample) < SAMPLE_SIZE:
        aggregate.sample.append(name)
