"""The authorization decisions of one request, folded into one audit event per decision kind.

A request naming 100,000 topics must not write 100,000 audit lines: decisions with the same
operation, resource type, pattern type, outcome and rule become one event with an exact
``count`` and the first few resource names as ``sample`` (docs/audit-log.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.ops.audit import NAME_CHARS, bounded_name

# Names kept per aggregated event, and the length each is cut to: with MAX_KINDS this bounds
# the audit bytes of one request whatever its item count.
SAMPLE_SIZE = 20
SAMPLE_NAME_CHARS = NAME_CHARS
# Distinct decision kinds (mostly: distinct matching rules) recorded per request; the rest are
# folded into one event per operation/resource type/outcome with the rule OTHER_RULES.
MAX_KINDS = 32
OTHER_RULES = "(other rules)"

# operation, resource type, pattern type, allowed, rule
Kind = tuple[str, str, str | None, bool, str]


@dataclass(slots=True)
class Aggregate:
    """Every decision of one kind in one request."""

    kind: Kind
    count: int = 0
    sample: list[str] = field(default_factory=list)

    @property
    def operation(self) -> str:
        return self.kind[0]

    @property
    def resource_type(self) -> str:
        return self.kind[1]

    @property
    def pattern_type(self) -> str | None:
        return self.kind[2]

    @property
    def allowed(self) -> bool:
        return self.kind[3]

    @property
    def rule(self) -> str:
        return self.kind[4]


@dataclass(slots=True)
class DecisionBatch:
    """Collects one request's decisions until ``drain``; bounded in memory and in output."""

    _kinds: dict[Kind, Aggregate] = field(default_factory=dict)

    def add(self, operation: str, resource_type: str, pattern_type: str | None, allowed: bool, rule: str,
            resource_name: str) -> None:
        kind: Kind = (operation, resource_type, pattern_type, allowed, rule)
        aggregate = self._kinds.get(kind)
        if aggregate is None:
            if len(self._kinds) >= MAX_KINDS:
                kind = (operation, resource_type, None, allowed, OTHER_RULES)
                aggregate = self._kinds.get(kind)
            if aggregate is None:
                aggregate = self._kinds[kind] = Aggregate(kind)
        aggregate.count += 1
        if len(aggregate.sample) < SAMPLE_SIZE:
            aggregate.sample.append(resource_name)

    def __len__(self) -> int:
        return len(self._kinds)

    def drain(self) -> list[Aggregate]:
        """The aggregates in first-seen order; the batch is empty afterwards."""
        aggregates = list(self._kinds.values())
        self._kinds.clear()
        return aggregates


def bounded_sample(aggregate: Aggregate) -> list[str]:
    return [bounded_name(name) for name in aggregate.sample]
