"""``ksgate audit alerts``: brute force, credential stuffing, new principal→resource pairs, denial spikes.

Sliding windows are Spark window functions over per-step buckets (default: 5 minutes in 1-minute steps).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from pipeline.errors import PipelineError
from pipeline.markdown import code, document, table
from pipeline.progress import QUIET, Progress
from pipeline.schema import (
    AGGREGATE_FIELDS,
    AUTHENTICATION,
    AUTHORIZATION,
    DECISIONS,
    UNSAMPLED,
    LinesRead,
    decisions,
    flagged_lines,
    iso_text,
    kept_only,
    one_row_per_name,
)

ALERT_COLUMNS = ("event", "ts", "principal", "attempted_user", "client_host", "operation", "resource_type",
                 "resource_name", "decision", DECISIONS)


@dataclass(slots=True, frozen=True)
class AlertThresholds:
    window: timedelta = timedelta(minutes=5)
    step: timedelta = timedelta(minutes=1)
    brute_force_failures: int = 20  # failures from one host (or against one user) within `window`
    stuffing_users: int = 5  # distinct user names tried from one host within `window`
    new_pair_period: timedelta = timedelta(days=1)  # "new" = first seen this close to the end of the log
    spike_factor: float = 5.0  # an hour's denials vs the principal's median per active hour
    spike_min_denials: int = 20

    def window_steps(self) -> int:
        steps = self.window / self.step
        if steps < 1 or steps != int(steps):
            raise PipelineError(f"the window ({self.window}) must be a whole number of steps ({self.step})")
        return int(steps)


@dataclass(slots=True, frozen=True)
class Alert:
    type: str
    severity: str
    subject: str
    first_seen: str
    last_seen: str
    count: int
    details: dict[str, Any] = field(default_factory=dict)


def failure_buckets(authn: DataFrame, key: str, other: str, step: timedelta) -> DataFrame:
    """Failed authentications per (``key``, step bucket): count and the set of ``other`` values seen."""
    seconds = int(step.total_seconds())
    return (authn.filter((F.col("decision") == "FAILED") & F.col(key).isNotNull())
            .withColumn("bucket", F.floor(F.unix_timestamp("ts") / seconds))
            .groupBy(key, "bucket")
            .agg(F.count("*").alias("failures"), F.collect_set(other).alias("others")))


def sliding_windows(buckets: DataFrame, key: str, steps: int) -> DataFrame:
    """Each bucket with the failures and distinct ``others`` in the ``steps`` buckets ending at it."""
    frame = Window.partitionBy(key).orderBy("bucket").rangeBetween(-(steps - 1), 0)
    return (buckets.withColumn("in_window", F.sum("failures").over(frame))
            .withColumn("window_others", F.array_distinct(F.flatten(F.collect_list("others").over(frame)))))


def episodes(triggered: DataFrame, key: str, metric: str, steps: int) -> DataFrame:
    """Triggered buckets of a key merged into episodes (a gap longer than the window starts a new one)."""
    order = Window.partitionBy(key).orderBy("bucket")
    previous = F.lag("bucket").over(order)
    starts = F.when(previous.isNull() | (F.col("bucket") - previous > steps), 1).otherwise(0)
    tagged = triggered.withColumn("starts", starts).withColumn(
        "episode", F.sum("starts").over(order.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    return (tagged.groupBy(key, "episode")
            .agg(F.min("bucket").alias("first_bucket"), F.max("bucket").alias("last_bucket"),
                 F.max(metric).alias("peak"), F.array_sort(F.array_distinct(F.flatten(F.collect_list("window_others"))))
                 .alias("others")))


def _bucket_time(bucket: Column, step: timedelta) -> Column:
    return iso_text(F.timestamp_seconds(bucket * int(step.total_seconds())))


def windowed_alerts(authn: DataFrame, key: str, other: str, metric: Column, threshold: int,
                    limits: AlertThresholds) -> DataFrame:
    """Episodes where ``metric`` (over the sliding window) reached ``threshold`` for some ``key``."""
    steps = limits.window_steps()
    windows = sliding_windows(failure_buckets(authn, key, other, limits.step), key, steps)
    triggered = windows.withColumn("metric", metric).filter(F.col("metric") >= threshold)
    return (episodes(triggered, key, "metric", steps)
            .withColumn("first_seen", _bucket_time(F.col("first_bucket") - (steps - 1), limits.step))
            .withColumn("last_seen", _bucket_time(F.col("last_bucket") + 1, limits.step))
            .orderBy("first_seen", key))


def new_pairs(authz: DataFrame, period: timedelta) -> DataFrame:
    """(principal, resource) pairs first seen within ``period`` of the last event, if the log is longer."""
    seconds = int(period.total_seconds())
    bounds = authz.agg(F.unix_timestamp(F.min("ts")).alias("log_start"),
                       F.unix_timestamp(F.max("ts")).alias("log_end"))
    pairs = (authz.filter(~F.col("resource_name").isin("*", UNSAMPLED))
             .groupBy("principal", "resource_type", "resource_name")
             .agg(F.min("ts").alias("first"), F.max("ts").alias("last"), decisions().alias("events"),
                  decisions(F.col("decision") == "DENIED").alias("denied"),
                  F.array_sort(F.collect_set("operation")).alias("operations")))
    cutoff = F.col("log_end") - seconds
    return (pairs.crossJoin(bounds)
            .filter((F.col("log_start") < cutoff) & (F.unix_timestamp("first") >= cutoff))
            .withColumn("first_seen", iso_text(F.col("first"))).withColumn("last_seen", iso_text(F.col("last")))
            .orderBy("first_seen", "principal", "resource_type", "resource_name"))


def denial_spikes(authz: DataFrame, factor: float, minimum: int) -> DataFrame:
    """Hours in which a principal's denials reached ``minimum`` and exceeded ``factor`` × its hourly median."""
    hourly = (authz.groupBy("principal", F.date_trunc("hour", "ts").alias("hour"))
              .agg(decisions(F.col("decision") == "DENIED").alias("denied"), decisions().alias("events")))
    medians = hourly.groupBy("principal").agg(F.median("denied").alias("median"), F.count("*").alias("hours"))
    return (hourly.join(medians, "principal")
            .filter((F.col("denied") >= minimum) & (F.col("denied") > F.col("median") * factor))
            .withColumn("first_seen", iso_text(F.col("hour")))
            .withColumn("last_seen", iso_text(F.col("hour") + F.expr("INTERVAL 1 HOUR")))
            .orderBy("first_seen", "principal"))


def _episode_alert(kind: str, subject: str, row: Row, details: dict[str, Any]) -> Alert:
    return Alert(kind, "high", subject, row["first_seen"], row["last_seen"], int(row["peak"]), details)


def find_alerts(events: DataFrame, limits: AlertThresholds) -> list[Alert]:
    """Every alert in ``events`` (schema.read_events), in a stable order."""
    authn = events.filter(F.col("event") == AUTHENTICATION)
    authz = events.filter(F.col("event") == AUTHORIZATION)
    window = duration(limits.window)
    alerts: list[Alert] = []
    for row in windowed_alerts(authn, "client_host", "attempted_user", F.col("in_window"),
                               limits.brute_force_failures, limits).collect():
        alerts.append(_episode_alert("brute_force", f"host {row['client_host']}", row, {
            "client_host": row["client_host"], "peak_failures_in_window": row["peak"], "window": window,
            "attempted_users": row["others"]}))
    for row in windowed_alerts(authn, "attempted_user", "client_host", F.col("in_window"),
                               limits.brute_force_failures, limits).collect():
        alerts.append(_episode_alert("brute_force_user", f"user {row['attempted_user']}", row, {
            "attempted_user": row["attempted_user"], "peak_failures_in_window": row["peak"], "window": window,
            "client_hosts": row["others"]}))
    for row in windowed_alerts(authn, "client_host", "attempted_user", F.size("window_others"),
                               limits.stuffing_users, limits).collect():
        alerts.append(_episode_alert("credential_stuffing", f"host {row['client_host']}", row, {
            "client_host": row["client_host"], "peak_distinct_users_in_window": row["peak"], "window": window,
            "attempted_users": row["others"]}))
    for row in new_pairs(authz, limits.new_pair_period).collect():
        alerts.append(Alert("new_access", "medium" if row["denied"] else "low",
                            f"{row['principal']} → {row['resource_type']} {row['resource_name']}",
                            row["first_seen"], row["last_seen"], int(row["events"]), {
                                "principal": row["principal"], "resource_type": row["resource_type"],
                                "resource_name": row["resource_name"], "operations": row["operations"],
                                "denied": row["denied"]}))
    for row in denial_spikes(authz, limits.spike_factor, limits.spike_min_denials).collect():
        alerts.append(Alert("denial_spike", "medium", row["principal"], row["first_seen"], row["last_seen"],
                            int(row["denied"]), {"principal": row["principal"], "denied": row["denied"],
                                                 "events": row["events"], "hourly_median": float(row["median"]),
                                                 "active_hours": row["hours"]}))
    return alerts


_TITLES = {
    "brute_force": "Brute force (failed authentications from one host)",
    "brute_force_user": "Brute force against one user (failed authentications for one user name)",
    "credential_stuffing": "Credential stuffing (many user names from one host)",
    "new_access": "New principal → resource pairs",
    "denial_spike": "Denial spikes (per principal per hour vs its median)",
}


def duration(span: timedelta) -> str:
    """``5 min``, ``1 h``, ``1 day``, ``90 s``: the largest unit that divides the span."""
    seconds = int(span.total_seconds())
    for unit, size in (("day", 86_400), ("h", 3_600), ("min", 60)):
        if seconds and seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if unit == 'day' and count != 1 else ''}"
    return f"{seconds} s"


def alerts_markdown(alerts: Sequence[Alert], inputs: Sequence[str], limits: AlertThresholds) -> str:
    """alerts.md: one table per alert type."""
    intro = "\n".join([
        f"Input: {', '.join(code(p) for p in inputs)}  ",
        f"Thresholds: ≥ {limits.brute_force_failures} failures or ≥ {limits.stuffing_users} user names within "
        f"{duration(limits.window)} (sliding, {duration(limits.step)} steps); new = first seen in the last "
        f"{duration(limits.new_pair_period)}; "
        f"spike = ≥ {limits.spike_min_denials} denials in an hour and > {limits.spike_factor:g} × the "
        "principal's median per active hour.  ",
        f"**{len(alerts)}** alerts.",
    ])
    sections = []
    for kind, title in _TITLES.items():
        rows = [(a.severity, a.subject, a.first_seen, a.last_seen, a.count,
                 "; ".join(f"{k}: {_detail(v)}" for k, v in a.details.items()))
                for a in alerts if a.type == kind]
        sections.append((title, table(["severity", "subject", "from", "until", "count", "details"], rows)))
    return document("ksgate audit alerts", sections, intro)


def _detail(value: object) -> str:
    if isinstance(value, list):
        shown = ", ".join(str(v) for v in value[:10])
        return shown + (f" … (+{len(value) - 10})" if len(value) > 10 else "")
    return str(value)


def read_alert_lines(spark: SparkSession, inputs: Sequence[str], since: datetime | None = None,
                     until: datetime | None = None) -> LinesRead:
    """The one pass over the log: each line (schema.flagged_lines) with what the alerts read of it, persisted (the
    caller releases it); a line out of the window or no event keeps only what the survey counts."""
    flagged = flagged_lines(spark, inputs, since, until)
    read = [c for c in ALERT_COLUMNS if c != DECISIONS]
    return LinesRead(flagged.select(*kept_only(flagged, [*read, *AGGREGATE_FIELDS])).persist())


def run_alerts(spark: SparkSession, inputs: Sequence[str], output: str, limits: AlertThresholds | None = None,
               since: datetime | None = None, until: datetime | None = None, *,
               progress: Progress = QUIET, lines: LinesRead | None = None) -> list[Alert]:
    """Run the whole job: ``alerts.jsonl`` and ``alerts.md`` under ``output``. ``lines``: the inputs'
    ``read_alert_lines`` if the caller read them already (it releases them)."""
    limits = limits or AlertThresholds()
    limits.window_steps()
    read = lines if lines is not None else read_alert_lines(spark, inputs, since, until)
    try:
        alerts = find_alerts(one_row_per_name(read.kept()).select(*ALERT_COLUMNS), limits)
        progress.stage(f"{len(alerts):,} alerts found")
    finally:
        if lines is None:
            read.release()
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "alerts.jsonl").write_text("".join(json.dumps(asdict(a), separators=(",", ":")) + "\n" for a in alerts),
                                      encoding="utf-8")
    (out / "alerts.md").write_text(alerts_markdown(alerts, inputs, limits), encoding="utf-8")
    return alerts
