"""``ksgate audit report|recommend|replay|alerts|generate``: the command line of the audit-log pipeline.

pyspark is imported only when a command runs, so ``ksgate --help`` works without the ``pipeline`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.errors import PipelineError, missing_pyspark
from pipeline.inputs import inspect_local
from pipeline.instants import parse_instant
from pipeline.progress import Progress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from authz.model import AclBinding
    from pipeline.replay.settings import GivenSettings
    from pipeline.schema import LinesRead

DEFAULT_MIN_PREFIX_GROUP = 3  # as pipeline.least_privilege.recommend, without importing pyspark here
PIPELINE_MODULES = frozenset({"pyspark", "py4j", "matplotlib"})  # the pipeline extra


def _instant(text: str) -> datetime:
    try:
        return parse_instant(text)
    except PipelineError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _day(text: str) -> date:
    return _instant(text).date()


def _conf_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def _spark_options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--master", help="Spark master (default: the configured one under spark-submit, else local[*])")
    parser.add_argument("--conf", dest="spark_conf", action="append", type=_conf_pair, default=[],
                        metavar="KEY=VALUE", help="extra Spark configuration, repeatable")
    parser.add_argument("--log-level", default="ERROR", help="Spark log level (default ERROR)")
    return parser


def _input_options() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--input", dest="inputs", action="extend", nargs="+", required=True, metavar="PATH",
                        help="audit log files, directories or globs (local, hdfs://, s3a://), repeatable")
    parser.add_argument("--output", required=True, metavar="DIR", help="output directory")
    parser.add_argument("--since", type=_instant, metavar="T", help="only events at or after T (ISO 8601, UTC)")
    parser.add_argument("--until", type=_instant, metavar="T", help="only events before T (ISO 8601, UTC)")
    return parser


def add_audit_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``audit`` command (``report``, ``recommend``, ``replay``, ``alerts``, ``generate``) to ``subparsers``."""
    spark, inputs = _spark_options(), _input_options()
    audit = subparsers.add_parser("audit", help="analyse the audit log with Spark")
    audit.set_defaults(func=run_audit)
    commands = audit.add_subparsers(dest="audit_command", required=True,
                                    metavar="{report,recommend,replay,alerts,generate}")
    commands.add_parser("report", parents=[inputs, spark],
                        help="access matrix, top denials and charts (Parquet, summary.md, PNG)")
    recommend = commands.add_parser("recommend", parents=[inputs, spark],
                                    help="least-privilege ALLOW bindings learned from allowed decisions")
    recommend.add_argument("--acls", metavar="ACL_FILE", help="the ACL file in force: diff against it")
    recommend.add_argument("--min-prefix-group", type=_positive, default=DEFAULT_MIN_PREFIX_GROUP, metavar="K",
                           help="resources that must share a prefix for a PREFIXED binding "
                           f"(default {DEFAULT_MIN_PREFIX_GROUP})")
    replay = commands.add_parser("replay", parents=[inputs, spark],
                                 help="what a candidate ACL set would have answered to every logged decision")
    replay.add_argument("--acls", required=True, metavar="CANDIDATE.json", help="the candidate ACL file")
    replay.add_argument("--super-users", metavar="'User:a;User:b'",
                        help="the gateway's super.users (default: the principals the log shows decided as SuperUser)")
    replay.add_argument("--allow-everyone-if-no-acl-found", choices=("true", "false"), metavar="true|false",
                        help="the gateway's setting (default: what the log's NoAclDefault decisions show, else false)")
    alerts = commands.add_parser("alerts", parents=[inputs, spark],
                                 help="brute force, credential stuffing, new access, denial spikes")
    alerts.add_argument("--window-minutes", type=_positive, default=5, help="sliding window (default 5)")
    alerts.add_argument("--brute-force-failures", type=_positive, default=20, metavar="N",
                        help="failures from one host (or for one user) in the window (default 20)")
    alerts.add_argument("--stuffing-users", type=_positive, default=5, metavar="M",
                        help="distinct user names from one host in the window (default 5)")
    alerts.add_argument("--new-access-days", type=_positive, default=1,
                        help="pairs first seen this many days before the last event are new (default 1)")
    alerts.add_argument("--spike-factor", type=float, default=5.0, help="× the hourly median (default 5)")
    alerts.add_argument("--spike-min-denials", type=_positive, default=20, help="denials in the hour (default 20)")
    generate = commands.add_parser("generate", parents=[spark], help="write a synthetic audit log")
    generate.add_argument("--output", required=True, metavar="PATH", help="directory (date=YYYY-MM-DD/ inside)")
    generate.add_argument("--events", type=_positive, required=True, metavar="N")
    generate.add_argument("--seed", type=int, default=1, metavar="S")
    generate.add_argument("--days", type=_positive, default=7, metavar="D")
    generate.add_argument("--start", type=_day, help="first day (default: D days before today, UTC)")
    generate.add_argument("--engine", choices=("auto", "python", "spark"), default="auto",
                          help="auto: plain Python up to 200,000 events, Spark above")
    generate.add_argument("--acls-out", metavar="FILE", help="also write the ACLs the synthetic events assume")
    return audit


@dataclass(slots=True, frozen=True)
class _Run:
    """One command's progress lines and the file that receives the JVM's own output."""

    progress: Progress
    spark_log: Path


def _read_report(spark: SparkSession, args: argparse.Namespace) -> LinesRead:
    from pipeline.report import read_report_lines

    return read_report_lines(spark, args.inputs, args.since, args.until)


def _report(spark: SparkSession, args: argparse.Namespace, progress: Progress, lines: LinesRead) -> str:
    from pipeline.report import build_report

    summary = build_report(spark, args.inputs, args.output, args.since, args.until, progress=progress, lines=lines)
    return f"{summary.totals['events']:,} events; see {summary.output / 'summary.md'}"


def _read_recommend(spark: SparkSession, args: argparse.Namespace) -> LinesRead:
    from pipeline.least_privilege.recommend import read_recommend_lines

    return read_recommend_lines(spark, args.inputs, args.since, args.until)


def _recommend(spark: SparkSession, args: argparse.Namespace, progress: Progress, lines: LinesRead) -> str:
    from pipeline.least_privilege.recommend import recommend

    result = recommend(spark, args.inputs, args.output, args.acls, args.min_prefix_group, args.since, args.until,
                       progress=progress, lines=lines)
    diff = result.diff
    extra = (f", {len(diff.to_add)} to add, {len(diff.covered)} narrower than existing ones, "
             f"{len(diff.unused)} existing unused" if diff else "")
    return f"{len(result.grants)} bindings{extra}; see {args.output}/recommendations.md"


def _read_alerts(spark: SparkSession, args: argparse.Namespace) -> LinesRead:
    from pipeline.alerts import read_alert_lines

    return read_alert_lines(spark, args.inputs, args.since, args.until)


def _alerts(spark: SparkSession, args: argparse.Namespace, progress: Progress, lines: LinesRead) -> str:
    from pipeline.alerts import AlertThresholds, run_alerts

    limits = AlertThresholds(window=timedelta(minutes=args.window_minutes),
                             brute_force_failures=args.brute_force_failures, stuffing_users=args.stuffing_users,
                             new_pair_period=timedelta(days=args.new_access_days), spike_factor=args.spike_factor,
                             spike_min_denials=args.spike_min_denials)
    found = run_alerts(spark, args.inputs, args.output, limits, args.since, args.until, progress=progress,
                       lines=lines)
    return f"{len(found)} alerts; see {args.output}/alerts.md"


def _replay_settings(args: argparse.Namespace) -> GivenSettings:
    from pipeline.replay.settings import GivenSettings, parse_super_users

    everyone = args.allow_everyone_if_no_acl_found
    return GivenSettings(None if args.super_users is None else parse_super_users(args.super_users),
                         None if everyone is None else everyone == "true")


def _read_replay(spark: SparkSession, args: argparse.Namespace) -> LinesRead:
    from pipeline.replay.job import read_decision_lines

    return read_decision_lines(spark, args.inputs, args.since, args.until)


def _replay(spark: SparkSession, args: argparse.Namespace, progress: Progress, lines: LinesRead, *,
            candidate: Sequence[AclBinding], settings: GivenSettings) -> str:
    """Replay ``lines`` against ``candidate`` (the bindings of ``args.acls``) answered with ``settings``."""
    from pipeline.replay.command import replay

    summary = replay(spark, args.inputs, args.output, args.acls, settings, args.since, args.until,
                     progress=progress, candidate=candidate, lines=lines)
    return (f"{summary['replayed']:,} decisions replayed: {summary['unchanged']:,} unchanged, "
            f"{summary['would_deny']:,} would be denied, {summary['would_allow']:,} would be allowed; "
            f"see {args.output}/report.md")


# Each command reads the log once, in its own form (LinesRead): its survey and its analysis both read that.
_READS: dict[str, Callable[[SparkSession, argparse.Namespace], LinesRead]] = {
    "report": _read_report, "recommend": _read_recommend, "replay": _read_replay, "alerts": _read_alerts,
}
_Analysis = Callable[["SparkSession", argparse.Namespace, Progress, "LinesRead"], str]
# replay's takes its candidate and settings too: _analysis binds them.
_ANALYSES: dict[str, _Analysis] = {"report": _report, "recommend": _recommend, "alerts": _alerts}
_NOTHING_TO = {"report": "nothing to report", "recommend": "nothing to recommend", "replay": "nothing to replay",
               "alerts": "nothing to check"}
_NEEDS_AUTHORIZATIONS = frozenset({"recommend", "replay"})


def _window(args: argparse.Namespace) -> str:
    since = args.since.isoformat() if args.since else "the beginning"
    until = args.until.isoformat() if args.until else "the end"
    return f"between {since} and {until}"


def _analysis(args: argparse.Namespace) -> _Analysis:
    """The command's analysis; replay's with its candidate and settings read now, before any JVM starts (an
    unreadable ACL file or a malformed --super-users is an error without Spark)."""
    if args.audit_command != "replay":
        return _ANALYSES[args.audit_command]
    from pipeline.replay.command import read_candidate

    return partial(_replay, candidate=read_candidate(args.acls), settings=_replay_settings(args))


def _analyse(args: argparse.Namespace, run: _Run) -> str:
    """Check the inputs (locally first: no JVM for a missing, empty or non-JSON file), then analyse."""
    where, nothing = ", ".join(args.inputs), _NOTHING_TO[args.audit_command]
    analysis = _analysis(args)
    local = inspect_local(args.inputs)
    if local.empty:
        return f"no audit events in {where}: the input is empty; {nothing}"
    if local.all_not_json:
        raise PipelineError(f"{where} is not an audit log: {local.not_json[0]} is not JSON "
                            "(expected JSON lines as docs/audit-log.md describes)")
    return _with_session(args, run, lambda spark: _surveyed(spark, args, run.progress, analysis))


def _surveyed(spark: SparkSession, args: argparse.Namespace, progress: Progress, analysis: _Analysis) -> str:
    lines = _READS[args.audit_command](spark, args)
    try:
        return _checked(spark, args, progress, lines, analysis)
    finally:
        lines.release()


def _checked(spark: SparkSession, args: argparse.Namespace, progress: Progress, lines: LinesRead,
             analysis: _Analysis) -> str:
    """Say what the survey of ``lines`` found; ``analysis`` of them unless there is nothing to."""
    from pipeline.schema import SCHEMA_VERSION

    where, nothing = ", ".join(args.inputs), _NOTHING_TO[args.audit_command]
    found = lines.survey()
    windowed = f" {_window(args)}" if args.since or args.until else ""
    progress.stage(f"read {found.lines:,} lines: {found.authorizations:,} authorization and "
                   f"{found.authentications:,} authentication events{windowed}")
    if found.lines == 0:
        return f"no audit events in {where}: the input is empty; {nothing}"
    if found.events == 0:
        raise PipelineError(f"no audit events in {where}: none of its {found.lines:,} lines is a "
                            f"schema-{SCHEMA_VERSION} audit event (JSON lines as docs/audit-log.md describes)")
    if found.skipped:
        progress.note(f"{found.skipped:,} of {found.lines:,} lines skipped: not schema-{SCHEMA_VERSION} audit events")
    if found.in_window == 0:
        return f"no events {_window(args)} ({found.events:,} outside it); {nothing}"
    if found.authorizations == 0:
        missing = f"no authorization events in {where}: the gateway ran without an authorizer?"
        if args.audit_command in _NEEDS_AUTHORIZATIONS:
            return f"{missing} {nothing.capitalize()}"
        progress.note(missing)
    return analysis(spark, args, progress, lines)


def _generate(args: argparse.Namespace, run: _Run) -> str:
    from pipeline.generate import GenerateOptions, generate

    options = GenerateOptions(args.output, args.events, args.seed, args.days, args.start, args.engine, args.acls_out)
    if not options.use_spark():
        return f"{args.events:,} events ({generate(None, options)}) in {args.output}"
    return _with_session(args, run,
                         lambda spark: f"{args.events:,} events ({generate(spark, options)}) in {args.output}")


def _with_session(args: argparse.Namespace, run: _Run, job: Callable[[SparkSession], str]) -> str:
    """Run ``job`` in the session; stop it afterwards only if this call created it."""
    from pyspark.sql import SparkSession

    from pipeline.session import build_session, jvm_output_to

    owned = SparkSession.getActiveSession() is None
    with jvm_output_to(run.spark_log):
        spark = build_session(args.master, dict(args.spark_conf), args.log_level)
    run.progress.stage(f"Spark {spark.version} started ({spark.sparkContext.master})")
    try:
        return job(spark)
    finally:
        if owned:
            spark.stop()


def _first_line(exc: BaseException) -> str:
    # Py4J errors carry the whole Java stack trace: the user gets its first line, the log the rest.
    return next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def run_audit(args: argparse.Namespace) -> int:
    """Run a parsed ``audit`` command; 0 on success (also when there is nothing to analyse, said on stdout),
    1 on failure (explained on stderr, without a traceback)."""
    command: str = args.audit_command
    prefix = f"ksgate audit {command}"
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError:
        print(missing_pyspark(prefix), file=sys.stderr)
        return 1
    run = _Run(Progress.to_stderr(prefix), Path(tempfile.gettempdir()) / f"ksgate-audit-spark-{os.getpid()}.log")
    try:
        message = _generate(args, run) if command == "generate" else _analyse(args, run)
    except (PySparkException, Py4JError) as exc:
        # Spark's own log is kept only to explain a failure of Spark's.
        java = " Is Java 17+ installed (java on PATH or JAVA_HOME)?" if "JAVA_GATEWAY_EXITED" in str(exc) else ""
        log = f" (Spark's own log: {run.spark_log})" if run.spark_log.exists() else ""
        print(f"{prefix}: {_first_line(exc)}{log}{java}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in PIPELINE_MODULES:
            raise
        message, failed = missing_pyspark(prefix), True
    except (PipelineError, OSError) as exc:
        message, failed = f"{prefix}: {exc}", True
    else:
        message, failed = f"{prefix}: {message}", False
    run.spark_log.unlink(missing_ok=True)
    print(message, file=sys.stderr if failed else sys.stdout)
    return 1 if failed else 0
