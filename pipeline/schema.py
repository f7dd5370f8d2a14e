"""The audit log's schema (docs/audit-log.md) as an explicit Spark schema, and the reader.

Both event kinds share one row type (fields of the other kind are null); nothing is inferred.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline.errors import PipelineError

SCHEMA_VERSION = 1
TS_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"  # 2026-11-22T23:59:01.123Z
AUTHORIZATION = "authorization"
AUTHENTICATION = "authentication"

AUTHORIZATION_FIELDS = (
    "schema", "ts", "event", "principal", "client_host", "client_port", "listener", "api_key", "api_name",
    "api_version", "operation", "resource_type", "resource_name", "pattern_type", "decision", "rule",
)
AUTHENTICATION_FIELDS = (
    "schema", "ts", "event", "principal", "attempted_user", "client_host", "client_port", "listener",
    "mechanism", "decision", "failure",
)

# An authorization event standing for several decisions of one kind in one request carries
# how many (``count``) and the first names (``sample``); read_events expands it (one_row_per_name).
AGGREGATE_FIELDS = ("count", "sample")
UNSAMPLED = "(unsampled)"  # the resource name of the decisions beyond an aggregated event's sample
DECISIONS = "decisions"  # per row read: how many decisions it stands for (1 unless aggregated)

_INT_FIELDS = frozenset({"schema", "client_port", "api_key", "api_version", "count"})

# The raw JSON as written: every documented field of either kind, in document order.
AUDIT_SCHEMA = T.StructType([
    T.StructField(name, T.IntegerType() if name in _INT_FIELDS else T.StringType(), nullable=True)
    for name in dict.fromkeys(AUTHORIZATION_FIELDS + AUTHENTICATION_FIELDS + AGGREGATE_FIELDS[:1])
] + [T.StructField("sample", T.ArrayType(T.StringType()), nullable=True)])


def event_time(ts: Column) -> Column:
    """The documented ``ts`` string (TS_FORMAT) as a timestamp (null if malformed).

    Spark's own ISO 8601 cast (``try_to_timestamp`` without a pattern) is several times cheaper per row
    than a pattern, which goes through java.time's formatter; it is also more lenient (a bare date, a
    space for ``T``), so the documented shape is checked first: 24 characters with ``Z`` or 29 with an
    offset, ``T`` and a millisecond point where TS_FORMAT puts them.
    """
    shaped = F.length(ts).isin(24, 29) & (F.substring(ts, 11, 1) == "T") & (F.substring(ts, 20, 1) == ".")
    return F.when(shaped, F.try_to_timestamp(ts))


def iso_text(ts: Column) -> Column:
    """A timestamp as the log writes it (UTC, milliseconds, ``Z``); the session time zone is UTC."""
    return F.date_format(ts, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


def read_raw(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The JSON lines under ``paths`` (files, directories or globs; local, hdfs://, s3a://) as written."""
    if not paths:
        raise PipelineError("no input paths")
    return spark.read.schema(AUDIT_SCHEMA).option("mode", "PERMISSIVE").json(list(paths))


def _in_window(ts: Column, since: datetime | None, until: datetime | None) -> Column:
    condition = F.lit(True)
    if since is not None:
        condition = condition & (ts >= F.lit(since))
    if until is not None:
        condition = condition & (ts < F.lit(until))
    return condition


def _days_in_window(day: Column, since: datetime | None, until: datetime | None) -> Column:
    condition = F.lit(True)
    if since is not None:
        condition = condition & (day >= F.lit(since.date()))
    if until is not None:
        condition = condition & (day <= F.lit(until.date()))
    return condition


def _pruned_raw(spark: SparkSession, paths: Sequence[str], since: datetime | None,
                until: datetime | None) -> DataFrame:
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # `date` and iso_text are UTC, whatever the host says
    raw = read_raw(spark, paths)
    if "date" in raw.columns:  # discovered from date=… directories: prune, then derive it again
        raw = raw.filter(_days_in_window(F.col("date"), since, until)).drop("date")
    return raw.withColumn("ts", event_time(F.col("ts")))


def _valid() -> Column:
    return (F.col("ts").isNotNull() & (F.col("schema") == SCHEMA_VERSION)
            & F.col("event").isin(AUTHORIZATION, AUTHENTICATION))


def read_logged(spark: SparkSession, paths: Sequence[str], since: datetime | None = None,
                until: datetime | None = None) -> DataFrame:
    """Valid schema-1 events in ``[since, until)`` as logged: one row per line, ``count``/``sample`` kept.

    A ``date=YYYY-MM-DD`` directory layout (what ``ksgate audit generate`` writes) is used for
    partition pruning; lines that are not valid events (bad JSON, bad ``ts``) are dropped.
    Jobs that sum the log group these rows first and weigh the (far fewer) groups with
    ``one_row_per_name(groups, times=…)``: cheaper than expanding every line.
    """
    events = _pruned_raw(spark, paths, since, until).filter(_valid())
    return events.filter(_in_window(F.col("ts"), since, until))


def read_events(spark: SparkSession, paths: Sequence[str], since: datetime | None = None,
                until: datetime | None = None) -> DataFrame:
    """``read_logged`` with a row per name (``one_row_per_name``) and a UTC ``date`` column."""
    return one_row_per_name(read_logged(spark, paths, since, until).withColumn("date", F.to_date("ts")))


def one_row_per_name(events: DataFrame, times: str | None = None) -> DataFrame:
    """Rows with a ``decisions`` weight instead of ``count``/``sample``.

    A single event is one row of weight 1.  An aggregated one becomes a row per sampled name
    (weight 1) and, when ``count`` exceeds the sample, one UNSAMPLED row with the rest, so sums of
    ``decisions`` are exact while per-resource views only ever see names that were logged.
    With ``times``, each row stands for that column's number of identical lines: weights are multiplied.
    """
    sample = F.coalesce(F.col("sample"), F.array().cast("array<string>"))
    named = F.transform(sample, lambda name: F.struct(name.alias("name"), F.lit(1).alias("weight")))
    rest = F.col("count") - F.size(sample)
    aggregated = F.when(rest > 0, F.concat(named, F.array(F.struct(F.lit(UNSAMPLED).alias("name"),
                                                                   rest.alias("weight"))))).otherwise(named)
    single = F.array(F.struct(F.col("resource_name").alias("name"), F.lit(1).alias("weight")))
    rows = F.when((F.col("event") == AUTHORIZATION) & F.col("count").isNotNull(), aggregated).otherwise(single)
    weight = F.col("_row.weight") if times is None else F.col("_row.weight") * F.col(times)
    return (events.withColumn("_row", F.explode(rows))
            .withColumn("resource_name", F.col("_row.name")).withColumn(DECISIONS, weight)
            .drop("_row", *AGGREGATE_FIELDS, *([times] if times else [])))


def decisions(condition: Column | None = None) -> Column:
    """How many decisions (or attempts) the rows matching ``condition`` stand for: 0, not null, if none."""
    weight = F.col(DECISIONS) if condition is None else F.when(condition, F.col(DECISIONS))
    return F.coalesce(F.sum(weight), F.lit(0))


@dataclass(slots=True, frozen=True)
class InputSurvey:
    """What the inputs hold (within the date pruning): lines read, valid events, and those in the window."""

    lines: int
    events: int
    authorizations: int
    authentications: int

    @property
    def skipped(self) -> int:
        """Lines that are not schema-1 audit events (not JSON, bad ``ts``, other schema or event)."""
        return self.lines - self.events

    @property
    def in_window(self) -> int:
        return self.authorizations + self.authentications


VALID, KEPT = "_valid", "_kept"  # flagged_lines: a schema-1 event; one in the window (what read_logged keeps)


def flagged_lines(spark: SparkSession, paths: Sequence[str], since: datetime | None = None,
                  until: datetime | None = None) -> DataFrame:
    """Every line read (within the date pruning), none dropped, flagged VALID and KEPT: what ``survey_of`` counts."""
    valid = _valid()
    return (_pruned_raw(spark, paths, since, until).withColumn(VALID, valid)
            .withColumn(KEPT, valid & _in_window(F.col("ts"), since, until)))


def survey_of(lines: DataFrame, times: str | None = None) -> InputSurvey:
    """Count what ``read_logged`` keeps and what it drops, so the CLI can say so: ``lines`` has the flags of
    ``flagged_lines`` and ``event``; with ``times``, each row stands for that column's number of lines."""
    weight = F.lit(1) if times is None else F.col(times)
    kept, event = F.col(KEPT), F.col("event")

    def total(condition: Column | None = None) -> Column:
        return F.coalesce(F.sum(weight if condition is None else F.when(condition, weight)), F.lit(0))

    row = lines.agg(total().alias("lines"), total(F.col(VALID)).alias("events"),
                    total(kept & (event == AUTHORIZATION)).alias("authorizations"),
                    total(kept & (event == AUTHENTICATION)).alias("authentications")).collect()[0]
    return InputSurvey(int(row["lines"]), int(row["events"]), int(row["authorizations"]),
                       int(row["authentications"]))


def survey(spark: SparkSession, paths: Sequence[str], since: datetime | None = None,
           until: datetime | None = None) -> InputSurvey:
    """``survey_of`` the inputs, in a pass of its own."""
    return survey_of(flagged_lines(spark, paths, since, until))


@dataclass(slots=True, frozen=True)
class LinesRead:
    """A command's one read of the inputs: every line of ``flagged_lines`` (its flags and ``event`` kept) in the
    form the command analyses, persisted, so that the survey and the analysis both read it instead of the log.
    ``times``: the column saying how many identical lines a row stands for (None: one each)."""

    frame: DataFrame
    times: str | None = None

    def survey(self) -> InputSurvey:
        return survey_of(self.frame, times=self.times)

    def kept(self) -> DataFrame:
        """The rows ``read_logged`` keeps (schema-1 events in the window)."""
        return self.frame.filter(F.col(KEPT))

    def release(self) -> None:
        self.frame.unpersist()


def kept_only(flagged: DataFrame, columns: Sequence[str], kept: Column | None = None) -> list[Column]:
    """The flags, ``event`` (in the window) and ``columns`` (null outside ``kept``, by default the window) of
    ``flagged``: a line the analysis does not read keeps only what ``survey_of`` counts."""
    kept = F.col(KEPT) if kept is None else kept
    return [F.col(VALID), F.col(KEPT), F.when(F.col(KEPT), F.col("event")).alias("event"),
            *(F.when(kept, F.col(c)).alias(c) for c in columns if c != "event")]


def authorizations(events: DataFrame) -> DataFrame:
    """Authorization decisions only, with the fields that kind defines (plus ``date``)."""
    return events.filter(F.col("event") == AUTHORIZATION).select(*AUTHORIZATION_FIELDS, DECISIONS, "date")


def authentications(events: DataFrame) -> DataFrame:
    """Authentication attempts only, with the fields that kind defines (plus ``date``)."""
    return events.filter(F.col("event") == AUTHENTICATION).select(*AUTHENTICATION_FIELDS, DECISIONS, "date")
