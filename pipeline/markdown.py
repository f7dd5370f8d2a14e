"""Small Markdown builders for the jobs' human-readable outputs (summary.md, recommendations.md, alerts.md).

Only aggregated, already-collected values are rendered here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(value: object) -> str:
    """One table cell: lists joined with commas, ``|`` escaped, None as an en dash."""
    if value is None:
        return "–"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(cell(v) for v in value) if value else "–"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def code(value: object) -> str:
    """Inline code (the value rendered as text, backticks removed)."""
    return f"`{str(value).replace('`', '')}`"


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], empty: str = "_none_") -> str:
    """A GitHub-flavoured Markdown table, or ``empty`` when there are no rows."""
    lines = [f"| {' | '.join(headers)} |", f"|{'|'.join('---' for _ in headers)}|"]
    count = 0
    for row in rows:
        lines.append(f"| {' | '.join(cell(v) for v in row)} |")
        count += 1
    return "\n".join(lines) if count else empty


def document(title: str, sections: Iterable[tuple[str, str]], intro: str = "") -> str:
    """``# title``, an optional intro paragraph, then ``## heading`` + body per section."""
    parts = [f"# {title}", ""]
    if intro:
        parts += [intro, ""]
    for heading, body in sections:
        parts += [f"## {heading}", "", body.rstrip(), ""]
    return "\n".join(parts)
