"""Wall time and events/s of the audit pipeline: generate N synthetic events, then report and recommend.

A benchmark, not a test.  Everything runs in one local Spark session (local[2] by default);
the JVM start is timed separately, so each stage's figure is its own work.

    .venv/bin/python bench/audit_pipeline_bench.py                      # 10M events, 7 days, local[2]
    .venv/bin/python bench/audit_pipeline_bench.py --events 1000000 --alerts --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
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
from pipeline.report import build_report  # noqa: E402
from pipeline.session import build_session  # noqa: E402


@dataclass(slots=True)
class Stage:
    name: str
    seconds: float
    events: int
    note: str = ""

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def _timed(name: str, events: int, job: Callable[[], str]) -> Stage:
    print(f"[bench] {name} …", file=sys.stderr, flush=True)
    start = time.perf_counter()
    note = job()
    stage = Stage(name, time.perf_counter() - start, events, note)
    print(f"[bench] {name}: {stage.seconds:.1f} s ({note})", file=sys.stderr, flush=True)
    return stage


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--workdir", default="/tmp/ksgate-audit-bench")
    parser.add_argument("--alerts", action="store_true", help="also time `audit alerts`")
    parser.add_argument("--keep", action="store_true", help="keep the generated log and outputs")
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON object")
    args = parser.parse_args()

    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    logs, acls = work / "logs", work / "acls.json"
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    started = time.perf_counter()
    spark = build_session(args.master, {"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "false"})
    stages = [Stage("start Spark", time.perf_counter() - started, 0, f"Spark {spark.version}")]
    options = GenerateOptions(str(logs), args.events, seed=1, days=args.days, start=date(2026, 11, 1),
                              engine="spark", acls_out=str(acls))
    stages.append(_timed("generate", args.events, lambda: f"{generate(spark, options)} engine"))
    size = _du(logs)
    stages[-1].note += f", {size / 1e9:.2f} GB of JSON lines"

    def report() -> str:
        summary = build_report(spark, [str(logs)], str(work / "report"))
        return f"{summary.totals['authorizations']:,} authorizations"

    def recommend_stage() -> str:
        result = recommend(spark, [str(logs)], str(work / "recommend"), str(acls))
        return f"{len(result.grants)} bindings"

    stages.append(_timed("report", args.events, report))
    stages.append(_timed("recommend", args.events, recommend_stage))
    if args.alerts:
        stages.append(_timed("alerts", args.events,
                             lambda: f"{len(run_alerts(spark, [str(logs)], str(work / 'alerts')))} alerts"))
    spark.stop()

    cpu = f"{os.cpu_count()} CPUs, {platform.machine()}, Python {platform.python_version()}"
    print(f"\naudit pipeline, {args.events:,} events over {args.days} days, {args.master}, {cpu}")
    print(f"{'stage':<12} {'wall s':>9} {'events/s':>12}  note")
    for stage in stages:
        rate = f"{stage.rate:,.0f}" if stage.events else "–"
        print(f"{stage.name:<12} {stage.seconds:>9.1f} {rate:>12}  {stage.note}")
    if args.json:
        print(json.dumps({"events": args.events, "days": args.days, "master": args.master,
                          "stages": [{**asdict(s), "events_per_second": s.rate} for s in stages]}))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
