"""Writes the conformance report: ``python -m tests.conformance --output DIR`` (conformance.md and .json).

Starts both sides itself (two Kafkas and a gateway, on loopback); needs the jars scripts/kafka/fetch.sh
resolves (REFERENCE_KAFKA_LIB, or the fetch script's cache).  Exit status 1 when an undocumented difference
remains.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tests.apache_kafka import kafka_lib
from tests.conformance.cases import all_cases
from tests.conformance.report import as_json, markdown, summarize
from tests.conformance.runner import run
from tests.conformance.stage import stage


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__)
    parser.add_argument("--output", type=Path, default=Path("conformance-report"))
    args = parser.parse_args(argv)
    lib = kafka_lib()
    if lib is None:
        print("no Apache Kafka jars: run scripts/kafka/fetch.sh or set REFERENCE_KAFKA_LIB", file=sys.stderr)
        return 2
    args.output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ksgate-conformance-") as scratch, stage(lib, Path(scratch)) as sides:
        summary = summarize(run(sides.kafka, sides.ksgate, all_cases()))
    (args.output / "conformance.md").write_text(markdown(summary))
    (args.output / "conformance.json").write_text(json.dumps(as_json(summary), indent=2, default=str) + "\n")
    print(f"{summary.comparisons} comparisons over {summary.apis} APIs, {len(summary.groups)} kinds of "
          f"difference, {len(summary.undocumented)} undocumented: {args.output / 'conformance.md'}")
    return 1 if summary.undocumented else 0


if __name__ == "__main__":
    sys.exit(main())
