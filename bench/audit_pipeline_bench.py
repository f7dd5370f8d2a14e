"""Wall time and events/s of the audit pipeline: generate N synthetic events, then report, replay, recommend.

A benchmark, not a test.  Everything runs in one local Spark session (local[2] by default);
the JVM start is timed separately, so each stage's figure is its own work.  Besides wall time, each
stage reports the CPU seconds the JVM and this Python process spent, which a shared machine inflates
far less than wall time.  ``--repeat`` runs each analysis stage N times and prints the median.

    .venv/bin/python bench/audit_pipeline_bench.py                      # 10M events, 7 days, local[2]
    .venv/bin/python bench/audit_pipeline_bench.py --events 1000000 --alerts --json
    .venv/bin/python bench/audit_pipeline_bench.py --keep --workdir /tmp/w     # keep the log, then reuse it:
    .venv/bin/python bench/audit_pipeline_bench.py --log /tmp/w/logs --acls /tmp/w/acls.json \
        --stages report,replay --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pipeline.alerts import run_alerts  # noqa: E402
from pipeline.generate import GenerateOptions, generate  # noqa: E402
from pipeline.least_privilege.recommend import recommend  # noqa: E402
from pipeline.replay.command import replay  # noqa: E402
from pipeline.replay.settings import GivenSettings  # noqa: E402
from pipeline.report import build_report  # noqa: E402
from pipeline.session import build_session  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ANALYSES = ("report", "replay", "recommend", "alerts")


@dataclass(slots=True)
class Stage:
    name: str
    seconds: float
    events: int
    note: str = ""
    cpu_seconds: float = 0.0  # JVM + this process
    runs: list[float] | None = None  # wall seconds of every run, when repeated

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def _cpu(jvm_pid: int | None) -> float:
    """CPU seconds used so far by the JVM (user + system, from /proc) and by this process."""
    own = time.process_time()
    if jvm_pid is None:
        return own
    try:
        fields = Path(f"/proc/{jvm_pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return own
    return own + (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def _timed(name: str, events: int, job: Callable[[], str], jvm_pid: int | None = None, repeat: int = 1) -> Stage:
    walls: list[float] = []
    cpus: list[float] = []
    note = ""
    for run in range(repeat):
        print(f"[bench] {name} (run {run + 1}/{repeat}) …", file=sys.stderr, flush=True)
        cpu, start = _cpu(jvm_pid), time.perf_counter()
        note = job()
        walls.append(time.perf_counter() - start)
        cpus.append(_cpu(jvm_pid) - cpu)
        print(f"[bench] {name}: {walls[-1]:.1f} s wall, {cpus[-1]:.1f} s CPU ({note})", file=sys.stderr, flush=True)
    return Stage(name, statistics.median(walls), events, note, statistics.median(cpus),
                 walls if repeat > 1 else None)


def _jvm_pid(spark: object) -> int | None:
    """The pid of the JVM this process launched (None under spark-submit or where it cannot be told)."""
    gateway = getattr(getattr(spark, "sparkContext", None), "_gateway", None)
    proc = getattr(gateway, "proc", None)
    return getattr(proc, "pid", None)


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--workdir", default="/tmp/ksgate-audit-bench")
    parser.add_argument("--log", help="reuse this generated log (a --keep run's WORKDIR/logs) instead of generating")
    parser.add_argument("--acls", help="with --log: the candidate ACL file for replay (a --keep run's acls.json)")
    parser.add_argument("--stages", default="report,replay,recommend",
                        help=f"analysis stages to time, comma-separated, of {','.join(ANALYSES)}")
    parser.add_argument("--repeat", type=int, default=1, help="runs per analysis stage; the median is printed")
    parser.add_argument("--alerts", action="store_true", help="also time `audit alerts`")
    parser.add_argument("--keep", action="store_true", help="keep the generated log and outputs")
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON object")
    args = parser.parse_args()
    args.stages = [s for s in args.stages.split(",") if s] + (["alerts"] if args.alerts else [])
    unknown = set(args.stages) - set(ANALYSES)
    if unknown or (args.log is None) != (args.acls is None):
        parser.error(f"unknown stages {sorted(unknown)}" if unknown else "--log and --acls go together")
    return args


def main() -> int:
    args = _options()
    work = Path(args.workdir)
    if args.log is None:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    logs, acls = (Path(args.log), Path(args.acls)) if args.log else (work / "logs", work / "acls.json")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    started = time.perf_counter()
    spark = build_session(args.master, {"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "false"})
    stages = [Stage("start Spark", time.perf_counter() - started, 0, f"Spark {spark.version}")]
    jvm = _jvm_pid(spark)
    if args.log is None:
        options = GenerateOptions(str(logs), args.events, seed=1, days=args.days, start=date(2026, 11, 1),
                                  engine="spark", acls_out=str(acls))
        stages.append(_timed("generate", args.events, lambda: f"{generate(spark, options)} engine", jvm))
    else:
        args.events = spark.read.text(str(logs)).count()
    stages[-1].note += f", {_du(logs) / 1e9:.2f} GB of JSON lines"
    replayed: list[int] = []

    def report() -> str:
        summary = build_report(spark, [str(logs)], str(work / "report"))
        return f"{summary.totals['authorizations']:,} authorizations"

    def replay_stage() -> str:
        summary = replay(spark, [str(logs)], str(work / "replay"), str(acls), GivenSettings())
        replayed.append(summary["decisions"])
        return (f"{summary['decisions']:,} decisions, {summary['distinct_decisions']:,} distinct, "
                f"{summary['would_deny']:,} would deny")

    def recommend_stage() -> str:
        result = recommend(spark, [str(logs)], str(work / "recommend"), str(acls))
        return f"{len(result.grants)} bindings"

    def alerts_stage() -> str:
        return f"{len(run_alerts(spark, [str(logs)], str(work / 'alerts')))} alerts"

    jobs = {"report": report, "replay": replay_stage, "recommend": recommend_stage, "alerts": alerts_stage}
    for name in args.stages:
        stages.append(_timed(name, args.events, jobs[name], jvm, args.repeat))
        if name == "replay":  # its rate is in authorization decisions, not lines
            stages[-1].events = replayed[-1]
    spark.stop()

    cpu = f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}"
    load = ", load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\naudit pipeline, {args.events:,} events over {args.days} days, {args.master}, {cpu}{load}")
    print(f"{'stage':<12} {'wall s':>9} {'per s':>12} {'CPU s':>8}  note")
    for stage in stages:
        rate = f"{stage.rate:,.0f}" if stage.events else "–"
        runs = f" (runs: {', '.join(f'{r:.1f}' for r in stage.runs)} s)" if stage.runs else ""
        cpu_s = f"{stage.cpu_seconds:.1f}" if stage.cpu_seconds else "–"
        print(f"{stage.name:<12} {stage.seconds:>9.1f} {rate:>12} {cpu_s:>8}  {stage.note}{runs}")
    if args.json:
        print(json.dumps({"events": args.events, "days": args.days, "master": args.master,
                          "stages": [{**asdict(s), "events_per_second": s.rate} for s in stages]}))
    if not args.keep and args.log is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
