"""``ksgate audit report``: who did what to which resource, allowed or denied, and when.

Writes Parquet (the access matrix partitioned by resource_type, plus small aggregates), summary.md and PNG charts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from pipeline import charts
from pipeline.instants import parse_instant
from pipeline.markdown import code, document, table
from pipeline.progress import QUIET, Progress
from pipeline.schema import (
    AGGREGATE_FIELDS,
    AUTHENTICATION,
    AUTHORIZATION,
    DECISIONS,
    KEPT,
    VALID,
    LinesRead,
    decisions,
    flagged_lines,
    iso_text,
    kept_only,
    one_row_per_name,
)

LINES = "_lines"  # identical lines a group stands for
REPORT_COLUMNS = ("event", "ts", "principal", "attempted_user", "client_host", "api_name", "operation",
                  "resource_type", "resource_name", "decision", "rule", *AGGREGATE_FIELDS)
# Everything the report groups by: decisions repeat massively, so one pass sums the log into a row per
# distinct combination and hour (the cube), and every table is computed from that small frame.
CUBE_KEYS = ("event", "principal", "attempted_user", "client_host", "api_name", "operation", "resource_type",
             "resource_name", "decision", "super_user", "hour")
TOP_N = 10
PRINCIPALS_IN_SUMMARY = 50
HOURLY_CHART_MAX = timedelta(days=7)


@dataclass(slots=True, frozen=True)
class ReportSummary:
    totals: dict[str, int]
    first: str | None
    last: str | None
    output: Path


def _count_if(condition: Column) -> Column:
    return decisions(condition)


def _allowed() -> Column:
    return F.col("decision") == "ALLOWED"


def _denied() -> Column:
    return F.col("decision") == "DENIED"


def _line_groups(lines: DataFrame, *flags: str) -> DataFrame:
    """Identical lines counted (LINES each), per CUBE_KEYS and sample, and per ``flags`` (schema.flagged_lines')."""
    super_user = F.coalesce(F.col("rule") == "SuperUser", F.lit(False))
    keys = [k for k in CUBE_KEYS if k != "resource_name"]
    return (lines.withColumn("super_user", super_user).withColumn("hour", F.date_trunc("hour", "ts"))
            .groupBy(*flags, *keys, "resource_name", *AGGREGATE_FIELDS)
            .agg(F.count(F.lit(1)).alias(LINES), F.min("ts").alias("first_seen"), F.max("ts").alias("last_seen")))


def _cube_of(groups: DataFrame) -> DataFrame:
    return (one_row_per_name(groups, times=LINES).groupBy(*CUBE_KEYS)
            .agg(F.sum(DECISIONS).alias(DECISIONS), F.min("first_seen").alias("first_seen"),
                 F.max("last_seen").alias("last_seen")))


def decision_cube(logged: DataFrame) -> DataFrame:
    """One row per distinct CUBE_KEYS: ``decisions`` summed, ``first_seen`` and ``last_seen``.

    ``logged`` is schema.read_logged: identical lines are counted first, and only those groups are
    expanded by name (one_row_per_name), not every line.  The tables below take this cube (or its
    authorization/authentication part), never raw events.
    """
    return _cube_of(_line_groups(logged))


def read_report_lines(spark: SparkSession, inputs: Sequence[str], since: datetime | None = None,
                      until: datetime | None = None) -> LinesRead:
    """The one pass over the log: its lines (schema.flagged_lines) counted into the groups ``decision_cube``
    starts from, persisted (the caller releases them); a line out of the window or no event only by its flags,
    so the survey reads the same groups."""
    flagged = flagged_lines(spark, inputs, since, until)
    return LinesRead(_line_groups(flagged.select(*kept_only(flagged, REPORT_COLUMNS)), VALID, KEPT).persist(),
                     times=LINES)


def access_matrix(authz: DataFrame) -> DataFrame:
    """Per principal × resource type × resource name × operation: counts, first/last seen, hosts, APIs."""
    return (authz.groupBy("principal", "resource_type", "resource_name", "operation")
            .agg(_count_if(_allowed()).alias("allowed"), _count_if(_denied()).alias("denied"),
                 F.min("first_seen").alias("first_seen"), F.max("last_seen").alias("last_seen"),
                 F.array_sort(F.collect_set("client_host")).alias("client_hosts"),
                 F.array_sort(F.collect_set("api_name")).alias("apis")))


def decisions_by_hour(authz: DataFrame) -> DataFrame:
    """Allowed and denied decisions per UTC hour."""
    return (authz.groupBy("hour")
            .agg(_count_if(_allowed()).alias("allowed"), _count_if(_denied()).alias("denied"))
            .orderBy("hour"))


def top_denied_principals(authz: DataFrame, n: int = TOP_N) -> DataFrame:
    """The ``n`` principals with most denials, with how many resources and hosts were involved."""
    return (authz.filter(_denied()).groupBy("principal")
            .agg(decisions().alias("denied"), F.countDistinct("resource_type", "resource_name").alias("resources"),
                 F.array_sort(F.collect_set("client_host")).alias("client_hosts"))
            .orderBy(F.desc("denied"), "principal").limit(n))


def top_denied_resources(authz: DataFrame, n: int = TOP_N) -> DataFrame:
    """The ``n`` resources with most denials, with how many principals were denied."""
    return (authz.filter(_denied()).groupBy("resource_type", "resource_name")
            .agg(decisions().alias("denied"), F.countDistinct("principal").alias("principals"))
            .orderBy(F.desc("denied"), "resource_type", "resource_name").limit(n))


def authentication_by_host(authn: DataFrame) -> DataFrame:
    """Per client host: successes, failures, users tried, principals authenticated, first/last attempt."""
    return (authn.groupBy("client_host")
            .agg(_count_if(F.col("decision") == "SUCCEEDED").alias("succeeded"),
                 _count_if(F.col("decision") == "FAILED").alias("failed"),
                 F.array_sort(F.collect_set("attempted_user")).alias("attempted_users"),
                 F.array_sort(F.collect_set("principal")).alias("principals"),
                 F.min("first_seen").alias("first_seen"), F.max("last_seen").alias("last_seen")))


def principal_rollup(matrix: DataFrame, n: int = PRINCIPALS_IN_SUMMARY) -> DataFrame:
    """Per principal (busiest ``n``): allowed, denied, distinct resources and operations."""
    return (matrix.groupBy("principal")
            .agg(F.sum("allowed").alias("allowed"), F.sum("denied").alias("denied"),
                 F.countDistinct("resource_type", "resource_name").alias("resources"),
                 F.array_sort(F.collect_set("operation")).alias("operations"))
            .orderBy(F.desc(F.col("allowed") + F.col("denied")), "principal").limit(n))


def totals(cube: DataFrame) -> tuple[dict[str, int], str | None, str | None]:
    """Event counts by kind and outcome, distinct principals and hosts, and the first/last event time."""
    authz, authn = F.col("event") == AUTHORIZATION, F.col("event") == AUTHENTICATION
    row = cube.agg(
        decisions().alias("events"), _count_if(authz).alias("authorizations"),
        _count_if(authz & _allowed()).alias("allowed"), _count_if(authz & _denied()).alias("denied"),
        _count_if(authz & F.col("super_user")).alias("super_user"),
        _count_if(authn).alias("authentications"),
        _count_if(authn & (F.col("decision") == "SUCCEEDED")).alias("authentication_succeeded"),
        _count_if(authn & (F.col("decision") == "FAILED")).alias("authentication_failed"),
        F.countDistinct(F.when(authz, F.col("principal"))).alias("principals"),
        F.countDistinct("client_host").alias("client_hosts"),
        iso_text(F.min("first_seen")).alias("first"), iso_text(F.max("last_seen")).alias("last"),
    ).collect()[0]
    counts = {k: int(v) for k, v in row.asDict().items() if k not in ("first", "last")}
    return counts, row["first"], row["last"]


def _write_parquet(frame: DataFrame, path: Path, partition_by: str | None = None) -> None:
    if partition_by is None:
        frame.coalesce(1).write.mode("overwrite").parquet(str(path))
    else:
        (frame.repartition(partition_by).sortWithinPartitions(partition_by, "principal")
         .write.mode("overwrite").partitionBy(partition_by).parquet(str(path)))


Buckets = list[tuple[datetime, int, int]]


def _chart_buckets(hourly: Sequence[tuple[str, int, int]], span: timedelta) -> tuple[str, Buckets]:
    """Consecutive buckets (gaps filled with zeros): hours for up to a week, else days."""
    unit, size = ("hour", timedelta(hours=1)) if span <= HOURLY_CHART_MAX else ("day", timedelta(days=1))
    counts: dict[datetime, list[int]] = {}
    for text, allowed, denied in hourly:
        hour = parse_instant(text)
        key = hour if unit == "hour" else hour.replace(hour=0)
        bucket = counts.setdefault(key, [0, 0])
        bucket[0] += allowed
        bucket[1] += denied
    if not counts:
        return unit, []
    out: Buckets = []
    moment, last = min(counts), max(counts)
    while moment <= last:
        allowed, denied = counts.get(moment, [0, 0])
        out.append((moment, allowed, denied))
        moment += size
    return unit, out


def _span(first: str | None, last: str | None) -> timedelta:
    return parse_instant(last) - parse_instant(first) if first and last else timedelta(0)


def build_report(spark: SparkSession, inputs: Sequence[str], output: str, since: datetime | None = None,
                 until: datetime | None = None, *, progress: Progress = QUIET,
                 lines: LinesRead | None = None) -> ReportSummary:
    """Run the whole job and write everything under ``output`` (empty tables when there is nothing to show).
    ``lines``: the inputs' ``read_report_lines`` if the caller read them already (it releases them)."""
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    read = lines if lines is not None else read_report_lines(spark, inputs, since, until)
    try:
        return _write_report(spark, inputs, out, _cube_of(read.kept()).persist(), progress)
    finally:
        if lines is None:
            read.release()


def _write_report(spark: SparkSession, inputs: Sequence[str], out: Path, cube: DataFrame,
                  progress: Progress) -> ReportSummary:
    """Every table, chart and summary.md from the ``cube``: small (distinct combinations per hour), so persisted
    by the caller, and released here once the tables are written."""
    try:
        counts, first, last = totals(cube)
        authz = cube.filter(F.col("event") == AUTHORIZATION)
        authn = cube.filter(F.col("event") == AUTHENTICATION)
        matrix = access_matrix(authz)
        _write_parquet(matrix, out / "access", partition_by="resource_type")
        progress.stage(f"access matrix of {counts['authorizations']:,} decisions written to {out / 'access'}")
        small = {
            "decisions_by_hour": decisions_by_hour(authz).withColumn("hour", iso_text(F.col("hour"))),
            "top_denied_principals": top_denied_principals(authz),
            "top_denied_resources": top_denied_resources(authz),
            "authentication_by_host": authentication_by_host(authn),
        }
        collected: dict[str, list[Row]] = {}
        for name, frame in small.items():
            frame = frame.cache()
            _write_parquet(frame, out / name)
            collected[name] = frame.collect()
            frame.unpersist()
        # With the schema given, an empty matrix (no authorization events) reads back as no rows.
        rollup = principal_rollup(spark.read.schema(matrix.schema).parquet(str(out / "access"))).collect()
        progress.stage(f"{len(small)} aggregates written")
    finally:
        cube.unpersist()
    unit, buckets = _chart_buckets([(r["hour"], r["allowed"], r["denied"]) for r in collected["decisions_by_hour"]],
                                   _span(first, last))
    charts.decisions_over_time(buckets, unit, out / "decisions_over_time.png")
    denied_principals = [(r["principal"], r["denied"]) for r in collected["top_denied_principals"]]
    denied_resources = [(f"{r['resource_type']} {r['resource_name']}", r["denied"])
                        for r in collected["top_denied_resources"]]
    charts.top_denials(denied_principals, denied_resources, out / "top_denials.png")
    failing = sorted((r for r in collected["authentication_by_host"] if r["failed"]),
                     key=lambda r: (-r["failed"], r["client_host"]))[:TOP_N]
    markdown = summary_markdown(inputs, counts, first, last, unit, buckets, collected, failing, rollup)
    (out / "summary.md").write_text(markdown, encoding="utf-8")
    progress.stage("charts and summary.md written")
    return ReportSummary(counts, first, last, out)


def summary_markdown(inputs: Sequence[str], counts: dict[str, int], first: str | None, last: str | None,
                     unit: str, buckets: Sequence[tuple[datetime, int, int]], collected: dict[str, list[Row]],
                     failing: Sequence[Row], rollup: Sequence[Row]) -> str:
    """summary.md: totals, the charts, top denials, failing hosts and the busiest principals."""
    peak = max(buckets, key=lambda b: b[2], default=None)
    peak_text = (f"Most denials in one {unit}: **{peak[2]:,}** at {peak[0]:%Y-%m-%d %H:%M} UTC."
                 if peak is not None and peak[2] else "No denials in the window.")
    sections = [
        ("Totals", table(["metric", "value"], [(k.replace("_", " "), v) for k, v in counts.items()])),
        ("Decisions over time", f"![allowed vs denied per {unit}](decisions_over_time.png)\n\n{peak_text}"),
        ("Top denied principals", table(
            ["principal", "denied", "resources", "client hosts"],
            [(code(r["principal"]), r["denied"], r["resources"], r["client_hosts"])
             for r in collected["top_denied_principals"]])),
        ("Top denied resources", table(
            ["resource type", "resource", "denied", "principals"],
            [(r["resource_type"], code(r["resource_name"]), r["denied"], r["principals"])
             for r in collected["top_denied_resources"]]) + "\n\n![top denials](top_denials.png)"),
        ("Authentication failures by client host", table(
            ["client host", "failed", "succeeded", "users tried"],
            [(r["client_host"], r["failed"], r["succeeded"], r["attempted_users"]) for r in failing])),
        (f"Principals (busiest {PRINCIPALS_IN_SUMMARY})", table(
            ["principal", "allowed", "denied", "resources", "operations"],
            [(code(r["principal"]), r["allowed"], r["denied"], r["resources"], r["operations"]) for r in rollup])),
        ("Files", "\n".join([
            "- `access/` — Parquet, partitioned by `resource_type`: one row per principal × resource × operation "
            "with `allowed`, `denied`, `first_seen`, `last_seen`, `client_hosts`, `apis`",
            "- `decisions_by_hour/`, `top_denied_principals/`, `top_denied_resources/`, "
            "`authentication_by_host/` — Parquet",
            "- `decisions_over_time.png`, `top_denials.png`",
        ])),
    ]
    intro = (f"Input: {', '.join(code(p) for p in inputs)}  \n"
             f"Window: {first or '–'} … {last or '–'} (UTC, first and last event read)")
    if not counts["authorizations"]:
        intro += ("\n\n**No authorization events**: the gateway ran without an authorizer? "
                  "Only authentication is reported.")
    return document("ksgate audit report", sections, intro)
