"""Aggregated authorization events (``count`` + ``sample``): counts weigh by ``count``, names come from the sample."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from pipeline.alerts import denial_spikes
from pipeline.least_privilege.recommend import learn
from pipeline.report import build_report
from pipeline.schema import DECISIONS, UNSAMPLED, authorizations, read_events
from tests.pipeline.events import authorization, write_events

SAMPLE = 20


def aggregated(principal: str, operation: str, names: list[str], count: int, **kw: Any) -> dict[str, Any]:
    """What the gateway writes for ``count`` decisions of one kind in one request."""
    return {**authorization(principal, operation, "TOPIC", names[0], **kw), "count": count, "sample": names[:SAMPLE]}


def _events() -> list[dict[str, Any]]:
    denied = [f"probe-{i}" for i in range(SAMPLE)]
    orders = [f"orders-{i}" for i in range(SAMPLE)]
    return [
        aggregated("User:mallory", "DESCRIBE", denied, 10_000, decision="DENIED", rule="NoMatchingAcl", at=1),
        aggregated("User:alice", "DESCRIBE", orders, 30, rule="NoAclDefault", at=2),
        authorization("User:alice", "READ", "TOPIC", "payments", rule="NoAclDefault", at=3),
        authorization("User:bob", "DESCRIBE", "TOPIC", "secret", decision="DENIED", rule="NoMatchingAcl", at=4),
    ]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_events(tmp_path_factory.mktemp("aggregated"), _events())


def test_an_aggregated_event_is_read_as_its_sampled_names_and_an_exact_remainder(spark: SparkSession,
                                                                                 log: str) -> None:
    rows = authorizations(read_events(spark, [log])).filter("principal = 'User:mallory'").collect()
    weights = {r["resource_name"]: r[DECISIONS] for r in rows}
    assert weights == {**{f"probe-{i}": 1 for i in range(SAMPLE)}, UNSAMPLED: 10_000 - SAMPLE}
    single = authorizations(read_events(spark, [log])).filter("principal = 'User:bob'").collect()
    assert [(r["resource_name"], r[DECISIONS]) for r in single] == [("secret", 1)]


def test_report_totals_weigh_by_count(spark: SparkSession, log: str, tmp_path: Path) -> None:
    summary = build_report(spark, [log], str(tmp_path / "out"))
    assert summary.totals["authorizations"] == 10_000 + 30 + 1 + 1
    assert summary.totals["denied"] == 10_001 and summary.totals["allowed"] == 31
    assert summary.totals["events"] == 10_032


def test_recommendations_use_the_sampled_names_and_exact_counts(spark: SparkSession, log: str) -> None:
    result = learn(authorizations(read_events(spark, [log])))
    assert result.totals["denied"] == 10_001 and result.totals["allowed"] == 31
    names = {g.binding.pattern.name for g in result.grants}
    assert UNSAMPLED not in names
    describe = [g for g in result.grants if g.binding.entry.operation.name == "DESCRIBE"]
    assert [g.binding.pattern.name for g in describe] == ["orders-"] and describe[0].resources == SAMPLE
    refused = {(r.principal, r.resource_name): r.events for r in result.refused}
    assert refused[("User:mallory", "probe-0")] == 1 and refused[("User:mallory", UNSAMPLED)] == 10_000 - SAMPLE


def test_a_denial_spike_counts_the_decisions_of_an_aggregated_event(spark: SparkSession, tmp_path: Path) -> None:
    quiet = [authorization("User:bob", "DESCRIBE", "TOPIC", f"t{h}", decision="DENIED", rule="NoMatchingAcl",
                           at=60 * h) for h in range(6)]
    burst = aggregated("User:bob", "DESCRIBE", [f"x{i}" for i in range(SAMPLE)], 500, decision="DENIED",
                       rule="NoMatchingAcl", at=60 * 6)
    authz = authorizations(read_events(spark, [write_events(tmp_path, [*quiet, burst])]))
    spikes = denial_spikes(authz, factor=5.0, minimum=20).collect()
    assert [(r["principal"], r["denied"]) for r in spikes] == [("User:bob", 500)]
