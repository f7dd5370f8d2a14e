"""The replay job on Spark: group the log's decisions by what a verdict depends on, evaluate each distinct
key once with the real authorizer on the driver, join the verdicts back, and sum by outcome.

Raw events never reach the driver: only the distinct keys (far fewer than the decisions) and the sums.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from authz.authorizer import DecisionRule
from authz.model import AclBinding
from pipeline.progress import QUIET, Progress
from pipeline.replay.settings import GivenSettings, LogEvidence, ReplaySettings, resolve
from pipeline.replay.verdicts import (
    ALLOWED,
    DENIED,
    GUARD_RULES,
    CandidateAuthorizer,
    DecisionKey,
    names_hosts,
)
from pipeline.schema import (
    AGGREGATE_FIELDS,
    AUTHORIZATION,
    DECISIONS,
    KEPT,
    VALID,
    LinesRead,
    flagged_lines,
    iso_text,
    one_row_per_name,
)

UNCHANGED, WOULD_DENY, WOULD_ALLOW, NOT_REPLAYED = "unchanged", "would_deny", "would_allow", "not_replayed"
OUTCOMES = (UNCHANGED, WOULD_DENY, WOULD_ALLOW, NOT_REPLAYED)
KEY = ("principal", "client_host", "operation", "resource_type", "resource_name", "guarded")
CHANGE_COLUMNS = ("principal", "operation", "resource_type", "resource_name", "live", "candidate", "count",
                  "first_seen", "last_seen")
LINES, REPLAYABLE = "_lines", "_replayable"  # decision_lines: lines per group; an ALLOWED/DENIED decision in the window
TOP_CHANGES = 20  # the busiest changes, listed in report.md
SUPER_USER_RULE = DecisionRule.SUPER_USER.value
NO_ACL_DEFAULT_RULE = DecisionRule.NO_ACL_DEFAULT.value
_VERDICT_SCHEMA = T.StructType([T.StructField(name, T.StringType()) for name in
                                ("v_principal", "v_client_host", "v_operation", "v_resource_type",
                                 "v_resource_name")]
                               + [T.StructField("v_guarded", T.BooleanType()),
                                  T.StructField("candidate", T.StringType()),
                                  T.StructField("candidate_rule", T.StringType())])


@dataclass(slots=True)
class ReplayResult:
    """The sums the outputs are written from (all small)."""

    settings: ReplaySettings
    totals: dict[str, int]  # OUTCOMES plus "decisions"
    not_replayed: dict[str, int]  # reason -> decisions (unsampled, invalid)
    principals: dict[str, dict[str, int]]  # principal -> OUTCOMES
    distinct_keys: int
    window: tuple[str | None, str | None]
    changes: DataFrame  # CHANGE_COLUMNS, ordered; streamed to changes.csv
    top_changes: list[tuple[str, str, str, str, str, str, int]] = field(default_factory=list)
    persisted: tuple[DataFrame, ...] = ()

    def release(self) -> None:
        for frame in self.persisted:
            frame.unpersist()


def decision_lines(flagged: DataFrame) -> DataFrame:
    """The one pass over the log: its lines (schema.flagged_lines) counted into groups, ``_lines`` each.

    A replayable line (an ALLOWED or DENIED authorization in the window) is grouped by what its verdict and
    its sums need; any other line only by what ``schema.survey_of`` counts (its flags, and its event when in
    the window). So the groups are as few as the distinct decisions, whatever the log's size, and both the
    survey and the replay read them instead of the log.
    """
    replayable = F.coalesce(F.col(KEPT) & (F.col("event") == AUTHORIZATION) & F.col("decision").isin(ALLOWED, DENIED),
                            F.lit(False))
    rule = F.col("rule")

    def when_replayable(column: Column, name: str) -> Column:
        return F.when(replayable, column).alias(name)

    lines = flagged.select(
        F.col(VALID), F.col(KEPT), F.when(F.col(KEPT), F.col("event")).alias("event"), replayable.alias(REPLAYABLE),
        *(when_replayable(F.col(c), c) for c in (*KEY[:-1], "decision", *AGGREGATE_FIELDS, "ts")),
        when_replayable(F.coalesce(rule.isin(*sorted(GUARD_RULES)), F.lit(False)), "guarded"),
        when_replayable(F.coalesce(rule == SUPER_USER_RULE, F.lit(False)), "super_user"),
        when_replayable(F.coalesce(rule == NO_ACL_DEFAULT_RULE, F.lit(False)), "no_acl_default"))
    return (lines.groupBy(VALID, KEPT, REPLAYABLE, *KEY, "decision", "super_user", "no_acl_default", "event",
                          *AGGREGATE_FIELDS)
            .agg(F.count(F.lit(1)).alias(LINES), F.min("ts").alias("first_seen"), F.max("ts").alias("last_seen")))


def decision_groups(lines: DataFrame) -> DataFrame:
    """One row per (KEY, live decision): decisions, first and last seen, and what the live rules reveal.

    ``lines`` is ``decision_lines``: identical lines were counted first, and only those groups are
    expanded by name (one_row_per_name), not every line.
    """
    replayable = (lines.filter(F.col(REPLAYABLE))
                  .drop(VALID, KEPT, REPLAYABLE))
    allowed = F.col("decision") == ALLOWED
    return (one_row_per_name(replayable, times=LINES).groupBy(*KEY, "decision")
            .agg(F.sum(DECISIONS).alias("count"), F.min("first_seen").alias("first_seen"),
                 F.max("last_seen").alias("last_seen"), F.max("super_user").alias("super_user"),
                 F.max(F.col("no_acl_default") & allowed).alias("nad_allowed"),
                 F.max(F.col("no_acl_default") & ~allowed).alias("nad_denied")))


def log_evidence(groups: DataFrame) -> LogEvidence:
    row = groups.agg(F.array_sort(F.collect_set(F.when(F.col("super_user"), F.col("principal")))).alias("supers"),
                     F.max("nad_allowed").alias("allowed"), F.max("nad_denied").alias("denied")).collect()[0]
    return LogEvidence(frozenset(row["supers"] or ()), bool(row["allowed"]), bool(row["denied"]))


def _keys(groups: DataFrame, with_host: bool) -> Iterator[DecisionKey]:
    columns = [c if c != "client_host" or with_host else F.lit(None).cast("string").alias(c) for c in KEY]
    for row in groups.select(*columns).distinct().toLocalIterator():
        yield DecisionKey(row["principal"], row["client_host"], row["operation"], row["resource_type"],
                          row["resource_name"], bool(row["guarded"]))


def candidate_verdicts(spark: SparkSession, groups: DataFrame, authorizer: CandidateAuthorizer,
                       with_host: bool) -> tuple[DataFrame, int]:
    """The candidate's verdict on every distinct key (the client host only if some binding names one),
    and how many keys there were."""
    rows = []
    for key in _keys(groups, with_host):
        verdict = authorizer.verdict(key)
        rows.append((key.principal, key.host, key.operation, key.resource_type, key.resource_name, key.guarded,
                     verdict.decision, verdict.rule))
    return spark.createDataFrame(rows, _VERDICT_SCHEMA), len(rows)


def _outcome() -> Column:
    return (F.when(F.col("candidate").isNull(), F.lit(NOT_REPLAYED))
            .when(F.col("candidate") == F.col("decision"), F.lit(UNCHANGED))
            .when(F.col("decision") == ALLOWED, F.lit(WOULD_DENY)).otherwise(F.lit(WOULD_ALLOW)))


def replayed(groups: DataFrame, verdicts: DataFrame, with_host: bool) -> DataFrame:
    """The groups with their ``candidate`` verdict, ``candidate_rule`` and ``outcome``."""
    joined_on = [c for c in KEY if c != "client_host" or with_host]
    condition = reduce(lambda a, b: a & b, [groups[c].eqNullSafe(verdicts[f"v_{c}"]) for c in joined_on])
    return (groups.join(F.broadcast(verdicts), condition, "left")
            .select(*groups.columns, "candidate", "candidate_rule").withColumn("outcome", _outcome()))


def changes(outcomes: DataFrame) -> DataFrame:
    """Changed decisions per principal, operation, resource and direction (hosts summed), busiest first within."""
    return (outcomes.filter(F.col("outcome").isin(WOULD_DENY, WOULD_ALLOW))
            .groupBy("principal", "operation", "resource_type", "resource_name",
                     F.col("decision").alias("live"), "candidate")
            .agg(F.sum("count").alias("count"), iso_text(F.min("first_seen")).alias("first_seen"),
                 iso_text(F.max("last_seen")).alias("last_seen"))
            .select(*CHANGE_COLUMNS)
            .orderBy("principal", "resource_type", "resource_name", "operation", "live"))


def _sums(outcomes: DataFrame) -> tuple[dict[str, int], dict[str, dict[str, int]], dict[str, int]]:
    rows = outcomes.groupBy("principal", "outcome", "candidate_rule").agg(F.sum("count").alias("n")).collect()
    totals = dict.fromkeys(OUTCOMES, 0)
    principals: dict[str, dict[str, int]] = {}
    reasons: dict[str, int] = {}
    for row in rows:
        n = int(row["n"])
        totals[row["outcome"]] += n
        per = principals.setdefault(str(row["principal"]), dict.fromkeys(OUTCOMES, 0))
        per[row["outcome"]] += n
        if row["outcome"] == NOT_REPLAYED:
            reasons[row["candidate_rule"]] = reasons.get(row["candidate_rule"], 0) + n
    totals["decisions"] = sum(totals[o] for o in OUTCOMES)
    return totals, dict(sorted(principals.items())), reasons


def read_decision_lines(spark: SparkSession, inputs: Sequence[str], since: datetime | None = None,
                        until: datetime | None = None) -> LinesRead:
    """``decision_lines`` of ``inputs``, persisted (the caller releases them): the survey and the replay read them."""
    return LinesRead(decision_lines(flagged_lines(spark, inputs, since, until)).persist(), times=LINES)


def replay_decisions(spark: SparkSession, inputs: Sequence[str], candidate: Sequence[AclBinding],
                     given: GivenSettings, since: datetime | None = None, until: datetime | None = None,
                     *, progress: Progress = QUIET, lines: LinesRead | None = None) -> ReplayResult:
    """Replay every authorization decision of ``inputs`` against ``candidate``; ``lines``: their
    ``read_decision_lines``, when the caller has read them already (it releases them; else read here).

    The result's ``changes`` frame reads persisted data: call ``ReplayResult.release`` once it is written.
    """
    owned: tuple[DataFrame, ...] = ()
    if lines is None:
        lines = read_decision_lines(spark, inputs, since, until)
        owned = (lines.frame,)
    groups = decision_groups(lines.frame).persist()
    evidence = log_evidence(groups)  # the one pass over the log (unless done already): the rest reads the groups
    settings = resolve(given, evidence)
    with_host = names_hosts(candidate)
    authorizer = CandidateAuthorizer(candidate, settings.super_users, settings.allow_everyone_if_no_acl_found)
    verdicts, distinct = candidate_verdicts(spark, groups, authorizer, with_host)
    progress.stage(f"{distinct:,} distinct decisions evaluated against {len(candidate):,} bindings")
    outcomes = replayed(groups, verdicts, with_host).persist()
    totals, principals, reasons = _sums(outcomes)
    window = groups.agg(iso_text(F.min("first_seen")).alias("first"), iso_text(F.max("last_seen")).alias("last")) \
        .collect()[0]
    changed = changes(outcomes)
    top = [(r["principal"], r["operation"], r["resource_type"], r["resource_name"], r["live"], r["candidate"],
            int(r["count"])) for r in changed.orderBy(F.desc("count"), *CHANGE_COLUMNS[:5]).limit(TOP_CHANGES)
           .collect()]
    return ReplayResult(settings, totals, reasons, principals, distinct, (window["first"], window["last"]),
                        changed, top, (outcomes, groups, *owned))
