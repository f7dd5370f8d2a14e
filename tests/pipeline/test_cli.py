"""``ksgate audit``: argument parsing and run_audit's exit codes and messages."""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pipeline.cli import add_audit_parser, run_audit
from tests.pipeline.events import failure, write_events

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ksgate")
    add_audit_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_recommend_options() -> None:
    args = _parser().parse_args(["audit", "recommend", "--input", "a", "b", "--input", "s3a://bucket/audit/",
                                 "--output", "out", "--acls", "acls.json", "--min-prefix-group", "4",
                                 "--since", "2026-11-01", "--conf", "spark.driver.memory=4g"])
    assert (args.func, args.audit_command, args.inputs, args.output, args.acls, args.min_prefix_group) == (
        run_audit, "recommend", ["a", "b", "s3a://bucket/audit/"], "out", "acls.json", 4)
    assert args.since == datetime(2026, 11, 1, tzinfo=UTC) and args.until is None
    assert (args.master, args.spark_conf) == (None, [("spark.driver.memory", "4g")])


def test_defaults() -> None:
    parser = _parser()
    recommend = parser.parse_args(["audit", "recommend", "--input", "x", "--output", "o"])
    assert (recommend.min_prefix_group, recommend.acls) == (3, None)
    alerts = parser.parse_args(["audit", "alerts", "--input", "x", "--output", "o"])
    assert (alerts.window_minutes, alerts.brute_force_failures, alerts.stuffing_users, alerts.spike_factor) == (
        5, 20, 5, 5.0)
    generate = parser.parse_args(["audit", "generate", "--output", "o", "--events", "10", "--start", "2026-11-01"])
    assert (generate.events, generate.seed, generate.days, generate.start, generate.engine) == (
        10, 1, 7, date(2026, 11, 1), "auto")


@pytest.mark.parametrize("argv", [
    ["audit", "report", "--output", "o"],  # no --input
    ["audit", "report", "--input", "x", "--output", "o", "--since", "last week"],
    ["audit", "recommend", "--input", "x", "--output", "o", "--min-prefix-group", "0"],
    ["audit", "generate", "--output", "o", "--events", "10", "--engine", "rust"],
])
def test_bad_options_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(argv)


def test_generate_small_logs_without_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["audit", "generate", "--output", str(tmp_path / "logs"), "--events", "500",
                                 "--days", "2", "--start", "2026-11-01"])
    assert run_audit(args) == 0
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["date=2026-11-01", "date=2026-11-02"]
    assert "500 events (python)" in capsys.readouterr().out


def test_a_missing_input_is_an_error_not_a_traceback(spark: SparkSession, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(["audit", "report", "--input", str(tmp_path / "nowhere"), "--output",
                                 str(tmp_path / "out")])
    assert run_audit(args) == 1
    assert "ksgate audit report:" in capsys.readouterr().err


def test_alerts_end_to_end(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_events(tmp_path / "in", [failure("10.9.9.9", "admin", i / 10) for i in range(25)])
    args = _parser().parse_args(["audit", "alerts", "--input", log, "--output", str(tmp_path / "out"),
                                 "--brute-force-failures", "25"])
    assert run_audit(args) == 0
    assert "ksgate audit alerts: 2 alerts" in capsys.readouterr().out  # per host and per user
    assert (tmp_path / "out" / "alerts.md").exists()
