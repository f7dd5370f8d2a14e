"""Recommended bindings against the ACLs in force: what to add, what is already there, what went unused.

Used = the deciding rule of an ALLOWED event or, for events logged without a rule, matching one (in Spark).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from authz.model import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    operation_matches,
)
from pipeline.least_privilege.acl_match import allow_operation_matches, host_matches, pattern_matches, principal_matches

_BINDING_SCHEMA = T.StructType([
    T.StructField(name, T.IntegerType() if name == "binding_id" else T.StringType())
    for name in ("binding_id", "acl_principal", "acl_host", "acl_operation", "acl_resource_type",
                 "acl_pattern_type", "acl_name")
])


@dataclass(slots=True, frozen=True)
class AclDiff:
    to_add: list[AclBinding]
    already_present: list[AclBinding]
    covered: list[tuple[AclBinding, AclBinding]]  # (recommended, the broader existing binding that covers it)
    unused: list[AclBinding]  # existing ALLOW bindings no allowed event used: candidates to remove
    used: list[AclBinding]


def rule_text(binding: AclBinding) -> str:
    """The ``rule`` field the gateway logs for a decision made by ``binding``."""
    return f"AclBinding({binding})"


def _bindings_frame(allowed: DataFrame, bindings: Sequence[AclBinding]) -> DataFrame:
    rows = [(i, b.entry.principal, b.entry.host, b.entry.operation.name, b.pattern.resource_type.name,
             b.pattern.pattern_type.name, b.pattern.name) for i, b in enumerate(bindings)]
    return allowed.sparkSession.createDataFrame(rows, _BINDING_SCHEMA)


def _matched_without_rule(allowed: DataFrame, bindings: Sequence[AclBinding]) -> set[int]:
    """Indexes of ``bindings`` matching some allowed event that carries no rule."""
    unruled = (allowed.filter(F.col("rule").isNull() | (F.col("rule") == ""))
               .select("principal", "client_host", "operation", "resource_type", "resource_name").distinct())
    acls = F.broadcast(_bindings_frame(allowed, bindings))
    matched = unruled.join(acls, F.col("resource_type") == F.col("acl_resource_type")).filter(
        principal_matches(F.col("acl_principal"), F.col("principal"))
        & host_matches(F.col("acl_host"), F.col("client_host"))
        & allow_operation_matches(F.col("acl_operation"), F.col("operation"))
        & pattern_matches(F.col("acl_pattern_type"), F.col("acl_name"), F.col("resource_name")))
    return {row["binding_id"] for row in matched.select("binding_id").distinct().collect()}


def used_bindings(allowed: DataFrame, current: Iterable[AclBinding]) -> set[AclBinding]:
    """The ALLOW bindings of ``current`` that decided (or, without rules, match) an ALLOWED event."""
    candidates = [b for b in dict.fromkeys(current) if b.entry.permission_type == AclPermissionType.ALLOW]
    if not candidates:
        return set()
    by_text = {rule_text(b): b for b in candidates}
    rules = (allowed.filter(F.col("rule").isin(list(by_text)))
             .select("rule").distinct().collect())
    used = {by_text[row["rule"]] for row in rules}
    used.update(candidates[i] for i in _matched_without_rule(allowed, candidates))
    return used


def _pattern_covers(outer: ResourcePattern, inner: ResourcePattern) -> bool:
    if outer.resource_type != inner.resource_type:
        return False
    if outer.pattern_type == PatternType.LITERAL:
        return outer.name == "*" or (inner.pattern_type == PatternType.LITERAL and outer.name == inner.name)
    return outer.pattern_type == PatternType.PREFIXED and inner.name.startswith(outer.name)


def covers(existing: AclBinding, wanted: AclBinding) -> bool:
    """Does the ALLOW binding ``existing`` grant everything the ALLOW binding ``wanted`` grants?"""
    entry, want = existing.entry, wanted.entry
    return (entry.permission_type == AclPermissionType.ALLOW
            and entry.principal in (want.principal, WILDCARD_PRINCIPAL)
            and entry.host in (want.host, WILDCARD_HOST)
            and operation_matches(entry.operation, AclPermissionType.ALLOW, want.operation)
            and _pattern_covers(existing.pattern, wanted.pattern))


def diff_acls(current: Sequence[AclBinding], recommended: Sequence[AclBinding], used: set[AclBinding]) -> AclDiff:
    """Classify each recommended binding, and each existing ALLOW binding as used or unused."""
    existing = set(current)
    to_add: list[AclBinding] = []
    present: list[AclBinding] = []
    covered: list[tuple[AclBinding, AclBinding]] = []
    for binding in recommended:
        if binding in existing:
            present.append(binding)
            continue
        broader = next((b for b in current if covers(b, binding)), None)
        if broader is None:
            to_add.append(binding)
        else:
            covered.append((binding, broader))
    allows = [b for b in dict.fromkeys(current) if b.entry.permission_type == AclPermissionType.ALLOW]
    return AclDiff(to_add, present, covered, [b for b in allows if b not in used], [b for b in allows if b in used])
