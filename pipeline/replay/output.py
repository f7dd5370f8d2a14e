"""Writes a replay: replay.json (sums), changes.csv (every changed decision) and report.md with its chart.

Only collected sums are rendered, except changes.csv, which is streamed from Spark a partition at a time.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline import charts
from pipeline.markdown import code, document, table
from pipeline.replay.job import CHANGE_COLUMNS, NOT_REPLAYED, OUTCOMES, UNCHANGED, WOULD_ALLOW, WOULD_DENY, ReplayResult

REPLAY_JSON, CHANGES_CSV, REPORT_MD, CHART_PNG = "replay.json", "changes.csv", "report.md", "replay_changes.png"
CHART_PRINCIPALS = 15


def replay_json(result: ReplayResult, inputs: Sequence[str], acl_file: str, bindings: int) -> dict[str, Any]:
    settings = result.settings
    totals = result.totals
    return {
        "input": list(inputs), "acls": acl_file, "bindings": bindings,
        "super_users": sorted(settings.super_users), "super_users_from": settings.super_users_from,
        "allow_everyone_if_no_acl_found": settings.allow_everyone_if_no_acl_found,
        "allow_everyone_if_no_acl_found_from": settings.allow_everyone_from,
        "window": {"first": result.window[0], "last": result.window[1]},
        "decisions": totals["decisions"],
        "replayed": totals["decisions"] - totals[NOT_REPLAYED],
        **{outcome: totals[outcome] for outcome in OUTCOMES},
        "not_replayed_by_reason": dict(sorted(result.not_replayed.items())),
        "distinct_decisions": result.distinct_keys,
        "principals": {p: {"replayed": sum(c.values()) - c[NOT_REPLAYED], **c} for p, c in result.principals.items()},
    }


def write_changes(result: ReplayResult, path: Path) -> int:
    """changes.csv, one row per changed (principal, operation, resource, direction); returns the rows."""
    rows = 0
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(CHANGE_COLUMNS)
        for row in result.changes.toLocalIterator():
            writer.writerow([row[c] for c in CHANGE_COLUMNS])
            rows += 1
    return rows


def _chart_rows(result: ReplayResult) -> list[tuple[str, int, int]]:
    changed = [(p, c[WOULD_DENY], c[WOULD_ALLOW]) for p, c in result.principals.items()
               if c[WOULD_DENY] or c[WOULD_ALLOW]]
    return sorted(changed, key=lambda r: (-(r[1] + r[2]), r[0]))[:CHART_PRINCIPALS]


def report_markdown(summary: dict[str, Any], result: ReplayResult, changed_rows: int) -> str:
    verdict = ("**No decision changes**: the candidate set answers every replayed decision as the live one did."
               if not summary[WOULD_DENY] and not summary[WOULD_ALLOW] else
               f"**{summary[WOULD_DENY]:,} decisions would be denied** and **{summary[WOULD_ALLOW]:,} would be "
               "allowed** that were not: see `changes.csv`.")
    sections = [
        ("Outcome", verdict + "\n\n" + table(["", "decisions"], [
            ("read", summary["decisions"]), ("replayed", summary["replayed"]), ("unchanged", summary[UNCHANGED]),
            ("would deny (live ALLOWED, candidate DENIED)", summary[WOULD_DENY]),
            ("would allow (live DENIED, candidate ALLOWED)", summary[WOULD_ALLOW]),
            *((f"not replayed: {reason}", n) for reason, n in summary["not_replayed_by_reason"].items())])),
        ("Changes by principal", f"![would deny and would allow per principal]({CHART_PNG})\n\n" + table(
            ["principal", "replayed", "unchanged", "would deny", "would allow"],
            [(code(p), c["replayed"], c[UNCHANGED], c[WOULD_DENY], c[WOULD_ALLOW])
             for p, c in summary["principals"].items() if c[WOULD_DENY] or c[WOULD_ALLOW]],
            empty="_no principal's decisions change_")),
        (f"Busiest changes (of {changed_rows:,} in changes.csv)", table(
            ["principal", "operation", "resource type", "resource", "live", "candidate", "decisions"],
            [(code(p), op, rt, code(name), live, cand, n) for p, op, rt, name, live, cand, n in result.top_changes])),
        ("How it was replayed", "\n".join([
            f"- Candidate: {code(summary['acls'])}, {summary['bindings']:,} bindings, evaluated by ksgate's "
            "StandardAuthorizer (the gateway's own), one evaluation per distinct decision "
            f"({summary['distinct_decisions']:,}).",
            f"- super.users: {', '.join(code(u) for u in summary['super_users']) or '_none_'} "
            f"(from the {summary['super_users_from']}); allow.everyone.if.no.acl.found: "
            f"{str(summary['allow_everyone_if_no_acl_found']).lower()} "
            f"(from the {summary['allow_everyone_if_no_acl_found_from']}).",
            "- Aggregated events count every decision; those beyond an event's sample have no logged name and "
            "are *not replayed (unsampled)*.",
            "- Implicit checks whose denial the gateway does not log (Metadata's all-topics filtering, …) are "
            "absent from the log, so a candidate that would allow them cannot be seen here.",
            "- Gateway guards (`GatewayReserved`, `IllegalTopicName`) deny whatever the ACLs say.",
        ])),
    ]
    intro = (f"Input: {', '.join(code(p) for p in summary['input'])}  \n"
             f"Window: {summary['window']['first'] or '–'} … {summary['window']['last'] or '–'} (UTC)")
    return document("ksgate audit replay", sections, intro)


def write_replay(result: ReplayResult, out: Path, inputs: Sequence[str], acl_file: str,
                 bindings: int) -> dict[str, Any]:
    """Write every output file of ``ksgate audit replay`` into ``out``; returns replay.json's content."""
    out.mkdir(parents=True, exist_ok=True)
    summary = replay_json(result, inputs, acl_file, bindings)
    (out / REPLAY_JSON).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    changed_rows = write_changes(result, out / CHANGES_CSV)
    charts.replay_changes(_chart_rows(result), out / CHART_PNG)
    (out / REPORT_MD).write_text(report_markdown(summary, result, changed_rows), encoding="utf-8")
    return summary
