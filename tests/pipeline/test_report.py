"""ksgate audit report: the access matrix, top denials, Parquet layout, summary.md and charts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pipeline.report import ReportSummary, build_report
from tests.pipeline.events import authorization, failure, write_events

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _events() -> list[dict[str, Any]]:
    a = authorization
    return [
        a("User:alice", "READ", "TOPIC", "orders", rule="NoAclDefault", at=1, host="10.0.0.1"),
        a("User:alice", "READ", "TOPIC", "orders", rule="NoAclDefault", at=70, host="10.0.0.2",
          api=("ListOffsets", 2, 7)),
        a("User:alice", "READ", "TOPIC", "orders", decision="DENIED", rule="NoMatchingAcl", at=130),
        a("User:alice", "WRITE", "TOPIC", "orders", decision="DENIED", rule="NoMatchingAcl", at=131),
        a("User:bob", "DESCRIBE", "TOPIC", "secret", decision="DENIED", rule="NoMatchingAcl", at=2),
        a("User:bob", "DESCRIBE", "TOPIC", "secret", decision="DENIED", rule="NoMatchingAcl", at=3),
        a("User:bob", "DESCRIBE", "TOPIC", "secret", decision="DENIED", rule="NoMatchingAcl", at=4),
        a("User:admin", "CREATE", "CLUSTER", "kafka-cluster", rule="SuperUser", at=5),
        failure("10.6.6.6", "root", 6),
        failure("10.6.6.6", "admin", 7),
    ]


@pytest.fixture(scope="module")
def outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report")


@pytest.fixture(scope="module")
def summary(spark: SparkSession, outdir: Path) -> ReportSummary:
    return build_report(spark, [write_events(outdir / "in", _events())], str(outdir / "out"))


def test_totals_and_window(summary: ReportSummary) -> None:
    assert summary.totals == {"events": 10, "authorizations": 8, "allowed": 3, "denied": 5, "super_user": 1,
                              "authentications": 2, "authentication_succeeded": 0, "authentication_failed": 2,
                              "principals": 3, "client_hosts": 3}
    assert (summary.first, summary.last) == ("2026-11-20T00:01:00.000Z", "2026-11-20T02:11:00.000Z")


def test_access_matrix_per_principal_resource_and_operation(spark: SparkSession, summary: ReportSummary,
                                                            outdir: Path) -> None:
    assert sorted(p.name for p in (outdir / "out" / "access").iterdir() if p.is_dir()) == [
        "resource_type=CLUSTER", "resource_type=TOPIC"]
    rows = {(r["principal"], r["resource_type"], r["resource_name"], r["operation"]): r
            for r in spark.read.parquet(str(outdir / "out" / "access")).collect()}
    assert len(rows) == 4
    read = rows[("User:alice", "TOPIC", "orders", "READ")]
    assert (read["allowed"], read["denied"], read["client_hosts"], read["apis"]) == (
        2, 1, ["10.0.0.1", "10.0.0.2"], ["Fetch", "ListOffsets"])
    # Spark hands timestamps to Python as naive local times: astimezone() reads them as such.
    assert read["first_seen"].astimezone(UTC) == datetime(2026, 11, 20, 0, 1, tzinfo=UTC)
    assert read["last_seen"].astimezone(UTC) == datetime(2026, 11, 20, 2, 10, tzinfo=UTC)
    secret = rows[("User:bob", "TOPIC", "secret", "DESCRIBE")]
    assert (secret["allowed"], secret["denied"]) == (0, 3)


def test_top_denials_and_hourly_decisions(spark: SparkSession, summary: ReportSummary, outdir: Path) -> None:
    out = outdir / "out"
    principals = [(r["principal"], r["denied"]) for r in spark.read.parquet(str(out / "top_denied_principals"))
                  .orderBy("denied", ascending=False).collect()]
    assert principals == [("User:bob", 3), ("User:alice", 2)]
    resources = [(r["resource_name"], r["denied"], r["principals"])
                 for r in spark.read.parquet(str(out / "top_denied_resources")).orderBy("resource_name").collect()]
    assert resources == [("orders", 2, 1), ("secret", 3, 1)]
    hourly = sorted((r["hour"], r["allowed"], r["denied"])
                    for r in spark.read.parquet(str(out / "decisions_by_hour")).collect())
    assert hourly == [("2026-11-20T00:00:00.000Z", 2, 3), ("2026-11-20T01:00:00.000Z", 1, 0),
                      ("2026-11-20T02:00:00.000Z", 0, 2)]


def test_summary_markdown_and_charts(summary: ReportSummary, outdir: Path) -> None:
    out = outdir / "out"
    markdown = (out / "summary.md").read_text()
    for text in ("# ksgate audit report", "## Totals", "![allowed vs denied per hour](decisions_over_time.png)",
                 "| `User:bob` | 3 | 1 | 10.0.0.1 |", "| 10.6.6.6 | 2 | 0 | admin, root |",
                 "![top denials](top_denials.png)"):
        assert text in markdown
    for chart in ("decisions_over_time.png", "top_denials.png"):
        assert (out / chart).read_bytes().startswith(PNG_MAGIC)
