"""The authorization decisions of one request, folded into one audit event per decision kind.

A request naming 100,000 topics must not write 100,000 audit lines: decisions with the same
operation, resource type, pattern type, outcome and rule become one event with an exact
``count`` and the first few resource names as ``sample`` (docs/audit-log.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from authz.kind_fold import MAX_KINDS as MAX_KINDS  # re-exported: the audit bounds are known from here
from authz.kind_fold import OTHER_RULES, KindAggregate, fold
from authz.kind_fold import SAMPLE_SIZE as SAMPLE_SIZE
from gateway.ops.audit import NAME_CHARS, bounded_name

# The length each sampled name is cut to: with MAX_KINDS and SAMPLE_SIZE (authz/kind_fold.py) this bounds
# the audit bytes of one request whatever its item count; the kinds beyond MAX_KINDS are folded into one
# event per operation/resource type/outcome with the rule OTHER_RULES.
SAMPLE_NAME_CHARS = NAME_CHARS

# operation, resource type, pattern type, allowed, rule
Kind = tuple[str, str, str | None, bool, str]


@dataclass(slots=True)
class Aggregate(KindAggregate[Kind]):
    """Every decision of one kind in one request."""

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


def _coarser(kind: Kind) -> Kind:
    return (kind[0], kind[1], None, kind[3], OTHER_RULES)


@dataclass(slots=True)
class DecisionBatch:
    """Collects one request's decisions until ``drain``; bounded in memory and in output."""

    _kinds: dict[Kind, Aggregate] = field(default_factory=dict)

    def add(self, operation: str, resource_type: str, pattern_type: str | None, allowed: bool, rule: str,
            resource_name: str) -> None:
        fold(self._kinds, (operation, resource_type, pattern_type, allowed, rule), resource_name, _coarser, Aggregate)

    def __len__(self) -> int:
        return len(self._kinds)

    def drain(self) -> list[Aggregate]:
        """The aggregates in first-seen order; the batch is empty afterwards."""
        aggregates = list(self._kinds.values())
        self._kinds.clear()
        return aggregates


def bounded_sample(aggregate: Aggregate) -> list[str]:
    return [bounded_name(name) for name in aggregate.sample]
