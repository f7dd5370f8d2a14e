"""Least-privilege compaction: one LITERAL grant per resource used, merged into PREFIXED grants.

K resources sharing a prefix that ends at '.', '-' or '_' merge; CLUSTER grants stay LITERAL kafka-cluster.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from authz.model import ResourceType
from pipeline.least_privilege.acl_match import LITERAL, PREFIXED

BOUNDARY_CHARS = (".", "-", "_")
GRANT_KEYS = ["principal", "resource_type", "operation"]
GRANT_COLUMNS = [*GRANT_KEYS, "pattern_type", "pattern_name", "resources", "events", "first_seen", "last_seen"]


def boundary_prefixes(name: Column) -> Column:
    """Every prefix of ``name`` that ends at a name boundary, shortest first (an array of strings)."""
    positions = F.sequence(F.lit(1), F.greatest(F.length(name), F.lit(1)))
    ends = F.filter(positions, lambda i: name.substr(i, F.lit(1)).isin(*BOUNDARY_CHARS))
    return F.transform(ends, lambda i: name.substr(F.lit(1), i))


def _prefix_rows(resources: DataFrame) -> DataFrame:
    """(keys, resource_name, prefix) for every boundary prefix of every non-cluster resource."""
    named = resources.filter(F.col("resource_type") != ResourceType.CLUSTER.name)
    return named.select(*GRANT_KEYS, "resource_name",
                        F.explode(boundary_prefixes(F.col("resource_name"))).alias("prefix"))


def chosen_prefixes(observed: DataFrame, refused: DataFrame, min_group: int) -> DataFrame:
    """Per (principal, resource_type, operation): the array ``prefixes`` of PREFIXED grants to make.

    Each resource takes its longest qualifying prefix (≥ ``min_group`` resources, no resource the
    principal was denied the same operation on under it); a chosen prefix inside another chosen
    prefix is dropped, so the survivors never nest. CLUSTER resources never take a prefix.
    """
    blocked = _prefix_rows(refused).select(*GRANT_KEYS, "prefix").distinct()
    qualifying = (_prefix_rows(observed)
                  .withColumn("covers", F.count("*").over(Window.partitionBy(*GRANT_KEYS, "prefix")))
                  .filter(F.col("covers") >= min_group)
                  .join(blocked, [*GRANT_KEYS, "prefix"], "left_anti"))
    longest = (qualifying.groupBy(*GRANT_KEYS, "resource_name")
               .agg(F.max_by("prefix", F.length("prefix")).alias("prefix")))
    chosen = longest.groupBy(*GRANT_KEYS).agg(F.collect_set("prefix").alias("chosen"))
    outermost = F.filter(F.col("chosen"), lambda p: ~F.exists(
        F.col("chosen"), lambda q: p.startswith(q) & (p != q)))
    return chosen.select(*GRANT_KEYS, F.array_sort(outermost).alias("prefixes"))


def compact(observed: DataFrame, refused: DataFrame, min_group: int) -> DataFrame:
    """Grants (GRANT_COLUMNS) covering every row of ``observed``.

    ``observed``: one row per (principal, resource_type, operation, resource_name) used, with
    ``events``, ``first_seen``, ``last_seen``; ``refused``: the same keys for denied requests.
    """
    prefixes = chosen_prefixes(observed, refused, min_group)
    name = F.col("resource_name")
    covering = F.try_element_at(F.filter(F.col("prefixes"), lambda p: name.startswith(p)), F.lit(1))
    patterned = (observed.join(prefixes, GRANT_KEYS, "left")
                 .withColumn("prefix", covering)
                 .withColumn("pattern_type", F.when(F.col("prefix").isNull(), LITERAL).otherwise(PREFIXED))
                 .withColumn("pattern_name", F.coalesce(F.col("prefix"), name)))
    return (patterned.groupBy(*GRANT_KEYS, "pattern_type", "pattern_name")
            .agg(F.count("*").alias("resources"), F.sum("events").alias("events"),
                 F.min("first_seen").alias("first_seen"), F.max("last_seen").alias("last_seen"))
            .select(*GRANT_COLUMNS))
