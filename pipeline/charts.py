"""PNG charts for ``ksgate audit report``, drawn with matplotlib's object API (no pyplot, no display).

Inputs are small aggregates already collected from Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from matplotlib.figure import Figure

ALLOWED_COLOUR = "#2e7d32"
DENIED_COLOUR = "#c62828"


def _ticks(times: Sequence[datetime], unit: str, count: int = 8) -> tuple[list[int], list[str]]:
    """About ``count`` evenly spaced tick positions and their labels."""
    if not times:
        return [], []
    step = max(1, len(times) // count)
    positions = list(range(0, len(times), step))
    fmt = "%m-%d %H:%M" if unit == "hour" else "%Y-%m-%d"
    return positions, [times[i].strftime(fmt) for i in positions]


def decisions_over_time(buckets: Sequence[tuple[datetime, int, int]], unit: str, path: Path) -> None:
    """Allowed and denied decisions per ``unit`` (hour or day, consecutive buckets) as two lines."""
    figure = Figure(figsize=(10, 4), layout="constrained")
    axes = figure.add_subplot()
    x = list(range(len(buckets)))
    axes.plot(x, [b[1] for b in buckets], color=ALLOWED_COLOUR, label="allowed", marker=".")
    axes.plot(x, [b[2] for b in buckets], color=DENIED_COLOUR, label="denied", marker=".")
    positions, labels = _ticks([b[0] for b in buckets], unit)
    axes.set_xticks(positions, labels, rotation=30, ha="right")
    axes.set_ylabel(f"decisions per {unit}")
    axes.set_title(f"Authorization decisions per {unit} (UTC)")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.savefig(path, dpi=100)


def _bars(figure: Figure, position: int, title: str, items: Sequence[tuple[str, int]]) -> None:
    axes = figure.add_subplot(1, 2, position)
    labels = [label if len(label) <= 40 else label[:39] + "…" for label, _ in items][::-1]
    axes.barh(labels, [count for _, count in items][::-1], color=DENIED_COLOUR, height=0.6)
    axes.set_ylim(-0.5, max(len(items), 5) - 0.5)  # a single bar stays a bar, not a block
    axes.set_title(title)
    axes.set_xlabel("denied decisions")
    axes.tick_params(axis="y", labelsize=8)
    if not items:
        axes.text(0.5, 0.5, "no denials", ha="center", va="center", transform=axes.transAxes)


def top_denials(principals: Sequence[tuple[str, int]], resources: Sequence[tuple[str, int]], path: Path) -> None:
    """Side-by-side bar charts: most denied principals and most denied resources."""
    figure = Figure(figsize=(12, 5), layout="constrained")
    _bars(figure, 1, "Top denied principals", principals)
    _bars(figure, 2, "Top denied resources", resources)
    figure.savefig(path, dpi=100)


def replay_changes(principals: Sequence[tuple[str, int, int]], path: Path) -> None:
    """Per principal (busiest first): decisions a candidate ACL set would deny and would allow, as bars."""
    figure = Figure(figsize=(10, 5), layout="constrained")
    axes = figure.add_subplot()
    labels = [label if len(label) <= 40 else label[:39] + "…" for label, _, _ in principals][::-1]
    y = list(range(len(labels)))
    axes.barh([i + 0.2 for i in y], [d for _, d, _ in principals][::-1], height=0.4, color=DENIED_COLOUR,
              label="would deny")
    axes.barh([i - 0.2 for i in y], [a for _, _, a in principals][::-1], height=0.4, color=ALLOWED_COLOUR,
              label="would allow")
    axes.set_yticks(y, labels)
    axes.set_ylim(-0.5, max(len(labels), 5) - 0.5)
    axes.set_title("Decisions the candidate ACLs would change, per principal")
    axes.set_xlabel("decisions")
    axes.tick_params(axis="y", labelsize=8)
    if principals:
        axes.legend()
    else:
        axes.text(0.5, 0.5, "no changes", ha="center", va="center", transform=axes.transAxes)
    figure.savefig(path, dpi=100)
