"""The conformance report: what was compared, and every difference, deliberate or not, grouped.

``summarize`` turns a run into counts and groups; ``markdown`` writes them for people.  The command
(``python -m tests.conformance``) writes both the Markdown and a JSON copy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from protocol.api_keys import ApiKey
from tests.conformance.known import VERSION_GAPS, deliberate
from tests.conformance.runner import Run

_INDEX = re.compile(r"\[\d+\]")


@dataclass(slots=True)
class Group:
    """One kind of difference: a case and a field path, with where it occurred."""

    case: str
    path: str
    documented: str | None  # the id in docs/kafka-differences.md, or None
    versions: set[int] = field(default_factory=set)
    principals: set[str] = field(default_factory=set)
    example: str = ""


@dataclass(slots=True)
class Summary:
    apis: int
    comparisons: int
    identical: int
    groups: list[Group]
    version_gaps: dict[str, Any]
    cases: set[str]  # the cases compared at one version at least

    @property
    def undocumented(self) -> list[Group]:
        return [g for g in self.groups if g.documented is None]


def summarize(run: Run) -> Summary:
    groups: dict[tuple[str, str, str | None], Group] = {}
    identical = 0
    for comparison in run.comparisons:
        if not comparison.differences:
            identical += 1
        for difference in comparison.differences:
            known = deliberate(comparison.case, comparison.version, comparison.principal, difference)
            path = _INDEX.sub("", difference.path)
            key = (comparison.case, path, known.id if known else None)
            group = groups.setdefault(key, Group(comparison.case, path, key[2], example=str(difference)))
            group.versions.add(comparison.version)
            group.principals.add(comparison.principal)
    gaps = {_api_name(key): {"kafka": kafka, "ksgate": ksgate, "documented": VERSION_GAPS.get(key)}
            for key, (kafka, ksgate) in run.version_gaps.items()}
    return Summary(len({c.api_key for c in run.comparisons}), len(run.comparisons), identical,
                   sorted(groups.values(), key=lambda g: (g.documented is not None, g.case, g.path)), gaps,
                   {c.case for c in run.comparisons})


def markdown(summary: Summary) -> str:
    lines = ["# Conformance: ksgate against Apache Kafka", "",
             f"- APIs compared: {summary.apis}",
             f"- request comparisons (API × version × principal × case): {summary.comparisons}",
             f"- identical after normalisation: {summary.identical}",
             f"- kinds of difference: {len(summary.groups)} ({len(summary.undocumented)} undocumented)", "",
             "## Version ranges offered differently", ""]
    for name, gap in sorted(summary.version_gaps.items()):
        lines.append(f"- {name}: Kafka {gap['kafka']}, ksgate {gap['ksgate']} — "
                     f"{gap['documented'] or 'UNDOCUMENTED'}")
    lines += ["", "## Differences", ""]
    for group in summary.groups:
        lines.append(f"- **{group.case}** `{group.path}` — {group.documented or 'UNDOCUMENTED'}; "
                     f"versions {_span(group.versions)}; principals {', '.join(sorted(group.principals))}; "
                     f"e.g. {group.example}")
    return "\n".join(lines) + "\n"


def as_json(summary: Summary) -> dict[str, Any]:
    return {"apis": summary.apis, "comparisons": summary.comparisons, "identical": summary.identical,
            "version_gaps": summary.version_gaps,
            "differences": [{"case": g.case, "path": g.path, "documented": g.documented,
                             "versions": sorted(g.versions), "principals": sorted(g.principals),
                             "example": g.example} for g in summary.groups]}


def _api_name(key: int) -> str:
    try:
        return f"{ApiKey(key).name} ({key})"
    except ValueError:
        return f"api {key}"


def _span(versions: set[int]) -> str:
    ordered = sorted(versions)
    return f"{ordered[0]}-{ordered[-1]}" if len(ordered) > 1 else str(ordered[0])
