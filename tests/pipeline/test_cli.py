"""``ksgate audit``: argument parsing and run_audit's exit codes and messages."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pipeline.cli import add_audit_parser, run_audit
from pipeline.errors import INSTALL_HINT, PipelineError
from pipeline.inputs import inspect_local
from tests.pipeline.events import authentication, failure, mixed_log, ts, write_events

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


# --- unusable, empty and partial inputs (issue 14, item 8) ----------------------------------------------------

# What Spark and the JVM print on their own when nobody keeps them quiet.
SPARK_NOISE = ("WARN", "log4j", "NativeCodeLoader", "incubator", "Traceback", "Exception")
ANALYSES = ("report", "recommend", "alerts")


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", "audit", *argv], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def _quiet(stderr: str) -> None:
    noisy = [line for line in stderr.splitlines() if any(word in line for word in SPARK_NOISE)]
    assert noisy == []


def _auth_only(directory: Path) -> str:
    return write_events(directory, [authentication(decision="SUCCEEDED", host="10.0.0.1", principal="User:alice",
                                                   attempted_user="alice"),
                                    failure("10.0.0.2", "mallory", 1)])


@pytest.mark.parametrize("command", ANALYSES)
def test_an_empty_file_is_an_empty_result_not_a_crash(command: str, tmp_path: Path) -> None:
    (tmp_path / "audit.log").write_text("")
    done = _cli(command, "--input", str(tmp_path / "audit.log"), "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert f"ksgate audit {command}: no audit events in {tmp_path / 'audit.log'}: the input is empty" in done.stdout
    _quiet(done.stderr)


@pytest.mark.parametrize("command", ANALYSES)
def test_a_file_that_is_not_json_is_refused_clearly(command: str, tmp_path: Path) -> None:
    (tmp_path / "gateway.log").write_text("2026-11-22 10:00:00 INFO ksgate started\nnot json {\n")
    done = _cli(command, "--input", str(tmp_path / "gateway.log"), "--output", str(tmp_path / "out"))
    assert done.returncode == 1
    assert done.stderr.strip() == (f"ksgate audit {command}: {tmp_path / 'gateway.log'} is not an audit log: "
                                   f"{tmp_path / 'gateway.log'} line 1 is not JSON (expected JSON lines as "
                                   "docs/audit-log.md describes)")
    assert done.stdout == ""


@pytest.mark.spark  # `ksgate audit report` in a subprocess starts its own Spark
def test_report_of_an_authentication_only_log_says_what_is_missing(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    log = _auth_only(tmp_path / "in")
    done = _cli("report", "--input", log, "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"ksgate audit report: 2 events; see {tmp_path / 'out' / 'summary.md'}\n"
    assert (f"no authorization events in {log}: the gateway ran without an authorizer?" in done.stderr)
    # one progress line per stage, with counts and the elapsed time
    assert re.search(r"read 2 lines: 0 authorization and 2 authentication events \[\d+\.\d+s\]", done.stderr)
    assert re.search(r"charts and summary.md written \[\d+\.\d+s\]", done.stderr)
    _quiet(done.stderr)
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "**No authorization events**" in summary and "| authentication failed | 1 |" in summary


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run_audit(_parser().parse_args(["audit", *argv]))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_recommend_of_an_authentication_only_log_has_nothing_to_learn(spark: SparkSession, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    log = _auth_only(tmp_path / "in")
    code, out, _ = _run(capsys, "recommend", "--input", log, "--output", str(tmp_path / "out"))
    assert (code, out) == (0, f"ksgate audit recommend: no authorization events in {log}: the gateway ran "
                              "without an authorizer? Nothing to recommend\n")


def test_alerts_of_an_authentication_only_log_still_look_for_brute_force(
        spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_events(tmp_path / "in", [failure("10.9.9.9", "admin", i / 10) for i in range(25)])
    code, out, err = _run(capsys, "alerts", "--input", log, "--output", str(tmp_path / "out"),
                          "--brute-force-failures", "25")
    assert (code, out) == (0, f"ksgate audit alerts: 2 alerts; see {tmp_path / 'out'}/alerts.md\n")
    assert "no authorization events in" in err and "2 alerts found" in err


def test_lines_that_are_not_events_are_skipped_and_counted(spark: SparkSession, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    log = Path(_auth_only(tmp_path / "in"))
    log.write_text(log.read_text() + "garbage\n" + json.dumps({"schema": 2, "event": "authorization"}) + "\n")
    code, _, err = _run(capsys, "alerts", "--input", str(log), "--output", str(tmp_path / "out"))
    assert code == 0
    assert "2 of 4 lines skipped: not schema-1 audit events" in err


def test_json_lines_that_are_no_audit_events_are_refused(spark: SparkSession, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "other.jsonl"
    log.write_text('{"level":"info","msg":"started"}\n{"level":"info","msg":"stopped"}\n')
    code, out, err = _run(capsys, "report", "--input", str(log), "--output", str(tmp_path / "out"))
    assert (code, out) == (1, "")
    assert err.endswith(f"ksgate audit report: no audit events in {log}: none of its 2 lines is a schema-1 audit "
                        "event (JSON lines as docs/audit-log.md describes)\n")


def test_a_window_without_events_is_an_empty_result(spark: SparkSession, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log = _auth_only(tmp_path / "in")
    code, out, _ = _run(capsys, "report", "--input", log, "--output", str(tmp_path / "out"),
                        "--since", "2030-01-01")
    assert code == 0
    assert "no events between 2030-01-01T00:00:00+00:00 and the end (2 outside it); nothing to report" in out


def test_local_inputs_are_inspected_like_spark_reads_them(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write_events(logs / "date=2026-11-01", [failure("10.0.0.1", "a", 0)])
    (logs / "_SUCCESS").write_text("")
    (logs / ".audit.log.crc").write_text("not json")  # hidden: Spark skips it, so must we
    found = inspect_local([str(logs)])
    assert (found.complete, found.files, found.readable, found.not_json) == (True, 1, 1, [])
    assert not inspect_local([str(logs), "s3a://bucket/audit/"]).complete  # remote: Spark's to read
    assert inspect_local([str(tmp_path / "logs" / "date=*")]).files == 1
    with pytest.raises(PipelineError, match="no such file or directory"):
        inspect_local([str(tmp_path / "nothing-*.log")])


def test_without_the_pipeline_extra_the_readme_install_command_is_named(tmp_path: Path) -> None:
    (tmp_path / "shadow").mkdir()
    (tmp_path / "shadow" / "pyspark.py").write_text("raise ImportError('No module named pyspark')\n")
    (tmp_path / "audit.log").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "gateway", "audit", "report", "--input",
                           str(tmp_path / "audit.log"), "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1
    assert done.stderr == ("ksgate audit report: needs the pipeline extra (pyspark, matplotlib; Java 17+): "
                           f"{INSTALL_HINT}\n")
    assert f"`{INSTALL_HINT}`" in (Path(__file__).parents[2] / "README.md").read_text()


# --- one read of the log per command (its survey and its analysis read the same persisted lines) -------------

READERS = {"report": ("pipeline.report", "read_report_lines"),
           "recommend": ("pipeline.least_privilege.recommend", "read_recommend_lines"),
           "alerts": ("pipeline.alerts", "read_alert_lines"),
           "replay": ("pipeline.replay.job", "read_decision_lines")}


@pytest.mark.parametrize("command", sorted(READERS))
def test_each_command_s_one_read_surveys_what_the_survey_alone_counts(command: str, spark: SparkSession,
                                                                      tmp_path: Path) -> None:
    import importlib

    from pipeline.schema import survey

    module, name = READERS[command]
    log, until = mixed_log(tmp_path / "in"), datetime.fromisoformat(ts(60))
    lines = getattr(importlib.import_module(module), name)(spark, [log], None, until)
    try:
        assert lines.survey() == survey(spark, [log], None, until)
        assert (lines.survey().lines, lines.survey().authorizations, lines.survey().authentications) == (7, 3, 1)
    finally:
        lines.release()


# What each command says of mixed_log before ts(60): 3 authorization events standing for 7 decisions (the
# aggregated one counts 5) and the authentication; READ allowed on topics audit and audit-2 (the unsampled rest
# names no topic), two names: below the prefix group of 3, so two LITERAL bindings; no alert.
READ_ONCE = {
    "report": "8 events; see {out}/summary.md",
    "recommend": "2 bindings; see {out}/recommendations.md",
    "alerts": "0 alerts; see {out}/alerts.md",
}


@pytest.mark.parametrize("command", sorted(READ_ONCE))
def test_each_command_reads_the_log_once(command: str, spark: SparkSession, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str], log_gone_once_surveyed: Path) -> None:
    """The log is gone as soon as the survey has been said: an analysis that read it again would fail."""
    out = tmp_path / "out"
    code, stdout, err = _run(capsys, command, "--input", str(log_gone_once_surveyed), "--output", str(out),
                             "--until", ts(60))
    assert not log_gone_once_surveyed.exists()
    assert (code, stdout) == (0, f"ksgate audit {command}: {READ_ONCE[command].format(out=out)}\n"), err
    assert "read 7 lines: 3 authorization and 1 authentication events" in err and "2 of 7 lines skipped" in err
