"""``ksgate audit replay`` on the command line: options, errors before any JVM, and the result line."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from authz.acl_json import encode_acl_file
from authz.model import AclOperation
from authz.model import ResourceType as RT
from pipeline.cli import add_audit_parser, run_audit
from tests.pipeline.events import authentication, authorization, binding, mixed_log, ts, write_events

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

READ_AUDIT = binding("User:app", RT.TOPIC, "audit", AclOperation.READ)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ksgate")
    add_audit_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = run_audit(_parser().parse_args(["audit", "replay", *argv]))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_replay_options() -> None:
    args = _parser().parse_args(["audit", "replay", "--input", "log", "--acls", "c.json", "--output", "out",
                                 "--master", "spark://h:7077"])
    assert (args.audit_command, args.inputs, args.acls, args.output, args.master) == (
        "replay", ["log"], "c.json", "out", "spark://h:7077")
    assert (args.super_users, args.allow_everyone_if_no_acl_found) == (None, None)


@pytest.mark.parametrize("argv", [
    ["--input", "x", "--output", "o"],  # no --acls
    ["--input", "x", "--output", "o", "--acls", "a.json", "--allow-everyone-if-no-acl-found", "maybe"],
])
def test_bad_replay_options_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parser().parse_args(["audit", "replay", *argv])
    assert exited.value.code == 2


def test_an_unreadable_candidate_is_an_error_before_spark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write_events(tmp_path, [authorization("User:app", "READ", "TOPIC", "audit")])
    code, out, err = _run(capsys, "--input", log, "--acls", str(tmp_path / "nowhere.json"), "--output",
                          str(tmp_path / "out"))
    assert (code, out) == (1, "")
    assert err.startswith(f"ksgate audit replay: cannot read ACL file {tmp_path / 'nowhere.json'}: ")
    assert "Spark" not in err  # refused before any JVM started
    (tmp_path / "acls.json").write_bytes(encode_acl_file([READ_AUDIT]))
    code, _, err = _run(capsys, "--input", log, "--acls", str(tmp_path / "acls.json"), "--output",
                        str(tmp_path / "out"), "--super-users", "admin")
    assert (code, err.strip()) == (1, "ksgate audit replay: super users: 'admin' is not Type:name "
                                      "(entries are separated by ';')")


def test_replay_prints_one_result_line_and_progress(spark: SparkSession, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    log = write_events(tmp_path / "in", [authorization("User:app", "READ", "TOPIC", "audit", rule=READ_AUDIT),
                                         authorization("User:app", "READ", "TOPIC", "other", decision="DENIED",
                                                       rule="NoMatchingAcl")])
    (tmp_path / "acls.json").write_bytes(encode_acl_file([]))
    code, out, err = _run(capsys, "--input", log, "--acls", str(tmp_path / "acls.json"), "--output",
                          str(tmp_path / "out"), "--allow-everyone-if-no-acl-found", "false")
    assert (code, out) == (0, "ksgate audit replay: 2 decisions replayed: 1 unchanged, 1 would be denied, "
                              f"0 would be allowed; see {tmp_path / 'out'}/report.md\n")
    assert "ksgate audit replay: 2 distinct decisions evaluated against 0 bindings [" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "changes.csv", "replay.json", "replay_changes.png", "report.md"]


def test_an_authentication_only_log_has_nothing_to_replay(spark: SparkSession, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    log = write_events(tmp_path / "in", [authentication(decision="SUCCEEDED", host="10.0.0.1",
                                                        principal="User:alice")])
    (tmp_path / "acls.json").write_bytes(encode_acl_file([READ_AUDIT]))
    code, out, _ = _run(capsys, "--input", log, "--acls", str(tmp_path / "acls.json"), "--output",
                        str(tmp_path / "out"))
    assert (code, out) == (0, f"ksgate audit replay: no authorization events in {log}: the gateway ran "
                              "without an authorizer? Nothing to replay\n")


def test_the_survey_read_with_the_replay_counts_what_the_survey_alone_counts(spark: SparkSession,
                                                                            tmp_path: Path) -> None:
    from pipeline.replay.job import read_decision_lines
    from pipeline.schema import survey

    log = mixed_log(tmp_path / "in")
    until = datetime.fromisoformat(ts(60))
    lines = read_decision_lines(spark, [log], None, until)
    try:
        assert lines.survey() == survey(spark, [log], None, until)
        assert lines.survey().authorizations == 3 and lines.survey().lines == 7
    finally:
        lines.release()


def test_replay_reads_the_log_once(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   log_gone_once_surveyed: Path) -> None:
    """The log is gone as soon as the survey has been said: a replay that read it again would fail."""
    (tmp_path / "acls.json").write_bytes(encode_acl_file([]))
    code, out, err = _run(capsys, "--input", str(log_gone_once_surveyed), "--acls", str(tmp_path / "acls.json"),
                          "--output", str(tmp_path / "out"), "--allow-everyone-if-no-acl-found", "false",
                          "--until", ts(60))
    assert not log_gone_once_surveyed.exists()
    assert (code, out) == (0, "ksgate audit replay: 4 decisions replayed: 1 unchanged, 3 would be denied, "
                              f"0 would be allowed; see {tmp_path / 'out'}/report.md\n"), err
    assert "read 7 lines: 3 authorization and 1 authentication events" in err
    assert "2 of 7 lines skipped" in err  # and 3 of the 7 decisions unsampled: counted apart, not replayed


def test_replay_takes_its_candidate_and_settings_as_parameters_not_from_the_namespace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As report/recommend/alerts take their LinesRead: the namespace carries the options, never what was read."""
    from pipeline import cli
    from pipeline.progress import QUIET
    from pipeline.replay import command
    from pipeline.replay.settings import GivenSettings

    (tmp_path / "acls.json").write_bytes(encode_acl_file([READ_AUDIT]))
    args = _parser().parse_args(["audit", "replay", "--input", "log", "--acls", str(tmp_path / "acls.json"),
                                 "--output", "out", "--super-users", "User:admin",
                                 "--allow-everyone-if-no-acl-found", "true"])
    options = dict(vars(args))
    calls: list[tuple[Any, ...]] = []

    def recorded(*call: Any, **keywords: Any) -> dict[str, int]:
        calls.append((*call, keywords["candidate"], keywords["lines"]))
        return {"replayed": 3, "unchanged": 1, "would_deny": 2, "would_allow": 0}

    monkeypatch.setattr(command, "replay", recorded)
    analysis = cli._analysis(args)  # reads the candidate and the settings, before any JVM
    assert vars(args) == options  # nothing stored in the namespace
    spark, lines = object(), object()
    said = analysis(spark, args, QUIET, lines)  # type: ignore[arg-type]
    given = GivenSettings(frozenset({"User:admin"}), True)
    assert calls == [(spark, ["log"], "out", str(tmp_path / "acls.json"), given, None, None, [READ_AUDIT], lines)]
    assert said == "3 decisions replayed: 1 unchanged, 2 would be denied, 0 would be allowed; see out/report.md"
    other = [binding("User:other", RT.TOPIC, "x", AclOperation.WRITE)]
    cli._replay(spark, args, QUIET, lines, candidate=other, settings=GivenSettings())  # type: ignore[arg-type]
    assert calls[-1][4:] == (GivenSettings(), None, None, other, lines)
