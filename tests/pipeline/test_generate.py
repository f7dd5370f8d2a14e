"""ksgate audit generate: synthetic events in exactly the documented schema, with Python and with Spark."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from authz.acl_json import decode_acl_file
from pipeline.errors import PipelineError
from pipeline.generate import GenerateOptions, generate
from pipeline.scenario import BRUTE_FORCE_HOST, STUFFING_HOST, SUPER_USER
from pipeline.schema import AUTHENTICATION_FIELDS, AUTHORIZATION_FIELDS, read_events

START = date(2026, 11, 1)


def _lines(root: Path) -> list[str]:
    return [line for path in sorted(root.glob("date=*/part-*")) for line in path.read_text().splitlines()]


def _assert_documented_shape(lines: list[str]) -> None:
    kinds = set()
    for line in lines[:2000]:
        record: dict[str, Any] = json.loads(line)
        kinds.add(record["event"])
        expected = AUTHORIZATION_FIELDS if record["event"] == "authorization" else AUTHENTICATION_FIELDS
        assert tuple(record) == expected, line  # every field, nulls included, in document order
        assert record["schema"] == 1 and record["ts"].endswith("Z") and len(record["ts"]) == 24
    assert kinds == {"authorization", "authentication"}


def _spot_check(events: DataFrame, total: int) -> None:
    assert events.count() == total
    days = {r["date"] for r in events.select("date").distinct().collect()}
    assert days == {date(2026, 11, d) for d in (1, 2, 3)}
    admin = events.filter(F.col("principal") == SUPER_USER).filter(F.col("event") == "authorization")
    assert {r["rule"] for r in admin.select("rule").distinct().collect()} == {"SuperUser"}
    scanner = events.filter(F.col("principal") == "User:scanner").filter(F.col("event") == "authorization")
    assert {r["decision"] for r in scanner.select("decision").distinct().collect()} == {"DENIED"}
    failures = events.filter((F.col("decision") == "FAILED") & F.col("client_host").isin(STUFFING_HOST,
                                                                                         BRUTE_FORCE_HOST))
    assert failures.filter(F.col("principal").isNotNull() | (F.col("failure") != "bad_credentials")).count() == 0
    assert failures.count() > 0
    allowed = events.filter((F.col("decision") == "ALLOWED") & (F.col("rule") != "SuperUser"))
    assert allowed.filter(~F.col("rule").startswith("AclBinding(") | F.col("pattern_type").isNull()).count() == 0


def test_python_engine_writes_documented_events_by_date(spark: SparkSession, tmp_path: Path) -> None:
    options = GenerateOptions(str(tmp_path / "logs"), 4000, seed=7, days=3, start=START,
                              acls_out=str(tmp_path / "acls.json"))
    assert generate(None, options) == "python"
    lines = _lines(tmp_path / "logs")
    _assert_documented_shape(lines)
    assert [json.loads(line)["ts"] for line in lines] == sorted(json.loads(line)["ts"] for line in lines)
    _spot_check(read_events(spark, [str(tmp_path / "logs")]), 4000)
    assert any(b.pattern.name == "legacy-events" for b in decode_acl_file((tmp_path / "acls.json").read_bytes()))
    again = GenerateOptions(str(tmp_path / "again"), 4000, seed=7, days=3, start=START)
    generate(None, again)
    assert _lines(tmp_path / "again") == lines  # deterministic for a seed


def test_spark_engine_writes_the_same_shape(spark: SparkSession, tmp_path: Path) -> None:
    options = GenerateOptions(str(tmp_path / "logs"), 6000, seed=3, days=3, start=START, engine="spark")
    assert generate(spark, options) == "spark"
    lines = _lines(tmp_path / "logs")
    assert len(lines) == 6000
    _assert_documented_shape(lines)
    assert '"pattern_type":null' in "".join(lines) and '"principal":null' in "".join(lines)
    _spot_check(read_events(spark, [str(tmp_path / "logs")]), 6000)


def test_the_python_engine_refuses_logs_it_cannot_hold(tmp_path: Path) -> None:
    with pytest.raises(PipelineError, match="--engine spark"):
        generate(None, GenerateOptions(str(tmp_path), 3_000_000, engine="python"))
    assert GenerateOptions(str(tmp_path), 300_000).use_spark()
    assert not GenerateOptions(str(tmp_path), 300_000, engine="python").use_spark()
