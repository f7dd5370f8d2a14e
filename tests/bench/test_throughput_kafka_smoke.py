"""bench/throughput.py --upstream kafka runs end to end on both security modes and reports both paths.

A smoke run (2,000 records, one pair), not a measurement: it asserts that records went both ways on
both paths, never how fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.apache_kafka import kafka_lib

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.kafka
@pytest.mark.parametrize("security", ["plaintext", "sasl_ssl"])
def test_throughput_bench_against_kafka_reports_direct_and_gateway(security: str) -> None:
    lib = kafka_lib()
    if lib is None:
        pytest.skip("no Apache Kafka jars (scripts/kafka/fetch.sh, REFERENCE_KAFKA_LIB)")
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "throughput.py"), "--upstream", "kafka", "--security", security,
         "--records", "2000", "--repeat", "1", "--latency-samples", "20", "--latency-warmup", "5",
         "--retries", "0", "--json"],
        capture_output=True, text=True, timeout=240, cwd=REPO, check=False,
        env={**os.environ, "REFERENCE_KAFKA_LIB": str(lib), "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("\n{\n") + 1:])
    assert report["config"]["upstream"].startswith("Apache Kafka")
    assert report["config"]["gateway_listener"] == ("SASL_SSL" if security == "sasl_ssl" else "PLAINTEXT")
    assert sorted(run["path"] for run in report["runs"]) == ["direct", "gateway"]
    for run in report["runs"]:  # every record was produced and read back (the bench checks the bytes)
        assert run["produce_rec_s"] > 0 and run["fetch_rec_s"] > 0 and run["latency_p50_ms"] > 0
    assert "password" not in done.stdout
