"""``ksgate audit recommend``: least-privilege ALLOW bindings learned from ALLOWED decisions.

Spark aggregates and compacts; only the (small) recommended bindings and summaries reach the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from authz.acl_json import AclStoreError, decode_acl_file
from authz.model import (
    CLUSTER_RESOURCE_NAME,
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclValidationError,
    ResourcePattern,
    ResourceType,
    parse_operation,
    parse_pattern_type,
    parse_resource_type,
    validate_binding,
)
from pipeline.errors import PipelineError
from pipeline.least_privilege.acl_diff import diff_acls, used_bindings
from pipeline.least_privilege.acl_match import pattern_matches
from pipeline.least_privilege.compaction import GRANT_KEYS, compact
from pipeline.least_privilege.output import write_recommendation
from pipeline.least_privilege.recommendation import (
    Grant,
    Recommendation,
    RefusedRequest,
    SuperUserTraffic,
    TypeWideCheck,
)
from pipeline.progress import QUIET, Progress
from pipeline.schema import (
    AGGREGATE_FIELDS,
    AUTHORIZATION,
    DECISIONS,
    KEPT,
    UNSAMPLED,
    LinesRead,
    decisions,
    flagged_lines,
    iso_text,
    kept_only,
    one_row_per_name,
)

SUPER_USER_RULE = "SuperUser"
DEFAULT_MIN_PREFIX_GROUP = 3
DESCRIBE = AclOperation.DESCRIBE.name
DESCRIBE_CONFIGS = AclOperation.DESCRIBE_CONFIGS.name
ANALYSED_COLUMNS = ("ts", "principal", "client_host", "operation", "resource_type", "resource_name", "decision", "rule",
                    DECISIONS)


def _is_super_user(rule: Column) -> Column:
    return rule.isNotNull() & (rule == SUPER_USER_RULE)


def _decided(authz: DataFrame, decision: str) -> DataFrame:
    """Non-super-user decisions of one kind, the cluster's name normalised to ``kafka-cluster``."""
    cluster = F.col("resource_type") == ResourceType.CLUSTER.name
    return (authz.filter(~_is_super_user(F.col("rule")) & (F.col("decision") == decision))
            .withColumn("resource_name", F.when(cluster, F.lit(CLUSTER_RESOURCE_NAME))
                        .otherwise(F.col("resource_name"))))


def observed_resources(allowed: DataFrame) -> DataFrame:
    """One row per (principal, resource_type, operation, resource_name) allowed, ``*`` checks excluded."""
    return (allowed.filter(~F.col("resource_name").isin(WILDCARD_RESOURCE, UNSAMPLED))
            .groupBy(*GRANT_KEYS, "resource_name")
            .agg(decisions().alias("events"), F.min("ts").alias("first_seen"), F.max("ts").alias("last_seen")))


def _uncovered(observed: DataFrame, grants: DataFrame, implied: str, implying: frozenset[AclOperation]) -> DataFrame:
    """Observed ``implied`` actions (DESCRIBE, DESCRIBE_CONFIGS) that no implying grant already allows."""
    wanted = observed.filter(F.col("operation") == implied)
    cover = grants.filter(F.col("operation").isin(sorted(op.name for op in implying if op.name != implied)))
    cover = cover.select("principal", "resource_type", F.col("pattern_type").alias("cover_type"),
                         F.col("pattern_name").alias("cover_name"))
    covered = (wanted.join(cover, ["principal", "resource_type"])
               .filter(pattern_matches(F.col("cover_type"), F.col("cover_name"), F.col("resource_name")))
               .select(*GRANT_KEYS, "resource_name").distinct())
    return wanted.join(covered, [*GRANT_KEYS, "resource_name"], "left_anti")


def recommended_grants(observed: DataFrame, refused: DataFrame, min_group: int) -> DataFrame:
    """Compacted grants for every observed action; DESCRIBE(_CONFIGS) only where nothing implies it.

    ``observed`` is observed_resources(allowed); ``refused`` the (keys, resource_name) denied.
    """
    implied = [DESCRIBE, DESCRIBE_CONFIGS]
    primary = compact(observed.filter(~F.col("operation").isin(implied)), refused, min_group).localCheckpoint()
    rest = _uncovered(observed, primary, DESCRIBE, IMPLIES_DESCRIBE).unionByName(
        _uncovered(observed, primary, DESCRIBE_CONFIGS, IMPLIES_DESCRIBE_CONFIGS))
    return primary.unionByName(compact(rest, refused, min_group))


def type_wide_checks(allowed: DataFrame, grants: DataFrame) -> DataFrame:
    """Allowed ``*`` checks per (principal, type, operation); covered when a grant has that type and operation.

    Kafka's authorizeByResourceType is satisfied by any ALLOW of the exact operation on any
    pattern of the type, so no ``*`` binding is ever recommended for them.
    """
    granted = grants.select(*GRANT_KEYS).distinct().withColumn("covered", F.lit(True))
    return (allowed.filter(F.col("resource_name") == WILDCARD_RESOURCE)
            .groupBy(*GRANT_KEYS)
            .agg(decisions().alias("events"), F.array_sort(F.collect_set("rule")).alias("rules"))
            .join(granted, GRANT_KEYS, "left")
            .withColumn("covered", F.coalesce(F.col("covered"), F.lit(False))))


def requested_not_granted(denied: DataFrame) -> DataFrame:
    """Denied actions per (principal, resource_type, resource_name, operation)."""
    return (denied.groupBy("principal", "resource_type", "resource_name", "operation")
            .agg(decisions().alias("events"), F.min("ts").alias("first_seen"), F.max("ts").alias("last_seen"),
                 F.array_sort(F.collect_set("rule")).alias("rules"),
                 F.array_sort(F.collect_set("client_host")).alias("client_hosts")))


def super_user_traffic(authz: DataFrame) -> DataFrame:
    """Per super user: events, operations, resource types, distinct resources, first/last seen."""
    return (authz.filter(_is_super_user(F.col("rule")))
            .groupBy("principal")
            .agg(decisions().alias("events"), F.array_sort(F.collect_set("operation")).alias("operations"),
                 F.array_sort(F.collect_set("resource_type")).alias("resource_types"),
                 F.countDistinct("resource_type", "resource_name").alias("resources"),
                 F.min("ts").alias("first_seen"), F.max("ts").alias("last_seen")))


def _with_iso_times(frame: DataFrame) -> DataFrame:
    return frame.withColumn("first_seen", iso_text(F.col("first_seen"))) \
        .withColumn("last_seen", iso_text(F.col("last_seen")))


def grant_binding(row: Row) -> AclBinding:
    """The ALLOW binding (any host) of one grant row; AclValidationError if Kafka would refuse it."""
    binding = AclBinding(
        ResourcePattern(parse_resource_type(row["resource_type"]), row["pattern_name"],
                        parse_pattern_type(row["pattern_type"])),
        AccessControlEntry(row["principal"], WILDCARD_HOST, parse_operation(row["operation"]),
                           AclPermissionType.ALLOW))
    validate_binding(binding)
    return binding


def _binding_order(grant: Grant) -> tuple[str, int, int, str, int]:
    pattern, entry = grant.binding.pattern, grant.binding.entry
    return (entry.principal, pattern.resource_type, pattern.pattern_type, pattern.name, entry.operation)


def collect_grants(grants: DataFrame) -> tuple[list[Grant], list[str]]:
    """The grants as bindings (sorted), and a note for every row that is not a valid binding."""
    out: list[Grant] = []
    invalid: list[str] = []
    for row in _with_iso_times(grants).collect():
        try:
            binding = grant_binding(row)
        except (AclValidationError, TypeError) as exc:
            invalid.append(f"{row['principal']} {row['operation']} {row['resource_type']} "
                           f"{row['pattern_name']!r}: {exc}")
            continue
        out.append(Grant(binding, row["resources"], row["events"], row["first_seen"], row["last_seen"]))
    return sorted(out, key=_binding_order), invalid


def _totals(authz: DataFrame) -> tuple[dict[str, int], tuple[str | None, str | None]]:
    super_user = _is_super_user(F.col("rule"))
    row = authz.agg(
        decisions().alias("authorizations"),
        decisions(~super_user & (F.col("decision") == "ALLOWED")).alias("allowed"),
        decisions(~super_user & (F.col("decision") == "DENIED")).alias("denied"),
        decisions(super_user).alias("super_user"),
        iso_text(F.min("ts")).alias("first"), iso_text(F.max("ts")).alias("last"),
    ).collect()[0]
    totals = {key: int(row[key]) for key in ("authorizations", "allowed", "denied", "super_user")}
    return totals, (row["first"], row["last"])


def learn(authz: DataFrame, min_group: int = DEFAULT_MIN_PREFIX_GROUP) -> Recommendation:
    """Analyse authorization events (schema.authorizations) into a Recommendation."""
    if min_group < 2:
        raise PipelineError(f"--min-prefix-group must be at least 2, got {min_group}")
    allowed, denied = _decided(authz, "ALLOWED"), _decided(authz, "DENIED")
    # Small aggregates are checkpointed: the compaction's self-joins then plan over tiny leaves,
    # not over copies of the whole read-and-filter lineage.
    observed = observed_resources(allowed).localCheckpoint()
    refused = denied.filter(F.col("resource_name") != UNSAMPLED).select(*GRANT_KEYS, "resource_name").distinct() \
        .localCheckpoint()
    grants = recommended_grants(observed, refused, min_group).localCheckpoint()
    collected, invalid = collect_grants(grants)
    refused_requests = [
        RefusedRequest(r["principal"], r["resource_type"], r["resource_name"], r["operation"], r["events"],
                       r["first_seen"], r["last_seen"], tuple(r["rules"]), tuple(r["client_hosts"]))
        for r in _with_iso_times(requested_not_granted(denied))
        .orderBy("principal", "resource_type", "resource_name", "operation").collect()]
    type_wide = [TypeWideCheck(r["principal"], r["resource_type"], r["operation"], r["events"], r["covered"],
                               tuple(r["rules"]))
                 for r in type_wide_checks(allowed, grants).orderBy(*GRANT_KEYS).collect()]
    super_users = [SuperUserTraffic(r["principal"], r["events"], tuple(r["operations"]), tuple(r["resource_types"]),
                                    r["resources"], r["first_seen"], r["last_seen"])
                   for r in _with_iso_times(super_user_traffic(authz)).orderBy("principal").collect()]
    totals, window = _totals(authz)
    return Recommendation(collected, refused_requests, type_wide, super_users, totals, window, invalid)


def read_acl_file(path: str) -> list[AclBinding]:
    """The bindings of an ACL store file (authz.acl_json format)."""
    try:
        return decode_acl_file(Path(path).read_bytes())
    except (OSError, AclStoreError) as exc:
        raise PipelineError(f"cannot read ACL file {path}: {exc}") from None


def read_recommend_lines(spark: SparkSession, inputs: Sequence[str], since: datetime | None = None,
                         until: datetime | None = None) -> LinesRead:
    """The one pass over the log: each line (schema.flagged_lines), with what the recommendation reads of an
    authorization in the window, persisted (the caller releases it); any other line keeps what the survey counts."""
    flagged = flagged_lines(spark, inputs, since, until)
    read = [c for c in ANALYSED_COLUMNS if c != DECISIONS]
    authorization = F.col(KEPT) & (F.col("event") == AUTHORIZATION)
    return LinesRead(flagged.select(*kept_only(flagged, [*read, *AGGREGATE_FIELDS], authorization)).persist())


def recommend(spark: SparkSession, inputs: Sequence[str], output: str, acl_file: str | None = None,
              min_group: int = DEFAULT_MIN_PREFIX_GROUP, since: datetime | None = None,
              until: datetime | None = None, *, progress: Progress = QUIET,
              lines: LinesRead | None = None) -> Recommendation:
    """Run the whole job: read, learn, diff against ``acl_file`` if given, write ``output``. ``lines``: the
    inputs' ``read_recommend_lines`` if the caller read them already (it releases them)."""
    current = read_acl_file(acl_file) if acl_file is not None else None
    read = lines if lines is not None else read_recommend_lines(spark, inputs, since, until)
    authz = one_row_per_name(read.kept().filter(F.col("event") == AUTHORIZATION)).select(*ANALYSED_COLUMNS)
    try:
        result = learn(authz, min_group)
        progress.stage(f"{len(result.grants):,} bindings learned from {result.totals['allowed']:,} allowed "
                       f"decisions; {len(result.refused):,} refused requests")
        if current is not None:
            used = used_bindings(_decided(authz, "ALLOWED"), current)
            result.diff = diff_acls(current, [g.binding for g in result.grants], used)
            progress.stage(f"compared with the {len(current):,} bindings of {acl_file}")
    finally:
        if lines is None:
            read.release()
    write_recommendation(result, Path(output), inputs, acl_file, min_group)
    progress.stage(f"written to {output}")
    return result
