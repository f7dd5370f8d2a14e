"""bench/anchors/haproxy_tls.py runs end to end and reports every path, on Tansu and on Apache Kafka, and --plain.

A smoke run (2,000 records, one repeat), not a measurement: it asserts that records went both ways on each
path, never how fast.  The haproxy path can only work through HAProxy: its client speaks TLS, its broker not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.apache_kafka import kafka_lib
from tests.haproxy import HAProxy

REPO = Path(__file__).resolve().parents[2]
TLS_PATHS = ["haproxy", "ksgate", "ksgate-ssl", "pyrelay-tls-asyncio", "pyrelay-tls-uvloop"]


def run_bench(*extra: str, env: dict[str, str] | None = None) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "anchors" / "haproxy_tls.py"), "--records", "2000", "--repeat", "1",
         "--latency-samples", "20", "--latency-warmup", "5", "--json", *extra],
        capture_output=True, text=True, timeout=300, cwd=REPO, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout[done.stdout.index("\n{\n") + 1:]), done.stdout


def assert_every_path_measured(report: dict[str, object], stdout: str) -> None:
    runs = report["runs"]
    assert isinstance(runs, list)
    assert sorted(run["path"] for run in runs) == TLS_PATHS
    for run in runs:  # every record was produced and read back (the bench checks the bytes)
        assert run["produce_mb_s"] > 0 and run["fetch_mb_s"] > 0 and run["latency_p50_ms"] > 0
    tls = report["tls"]
    assert isinstance(tls, dict) and set(tls) == set(TLS_PATHS)
    assert all(version.startswith("TLS") for version in tls.values())
    assert "ksgate/haproxy" in stdout and "ksgate-ssl/pyrelay-tls-uvloop" in stdout
    assert "sasl.password" not in stdout


@pytest.mark.broker
@pytest.mark.skipif(not HAProxy.available(), reason="needs Debian's haproxy (scripts/test.sh installs it)")
def test_haproxy_tls_bench_reports_haproxy_and_ksgate_paths() -> None:
    assert_every_path_measured(*run_bench())


@pytest.mark.kafka
@pytest.mark.skipif(not HAProxy.available(), reason="needs Debian's haproxy (scripts/test.sh installs it)")
def test_haproxy_tls_bench_runs_against_apache_kafka() -> None:
    lib = kafka_lib()
    if lib is None:
        pytest.skip("no Apache Kafka jars (scripts/kafka/fetch.sh, REFERENCE_KAFKA_LIB)")
    report, stdout = run_bench("--upstream", "kafka", env={"REFERENCE_KAFKA_LIB": str(lib)})
    assert_every_path_measured(report, stdout)
    assert "Apache Kafka" in stdout


@pytest.mark.broker
@pytest.mark.skipif(not HAProxy.available(), reason="needs Debian's haproxy (scripts/test.sh installs it)")
def test_haproxy_plain_bench_reports_direct_ksgate_both_haproxy_and_both_pyrelay_paths() -> None:
    report, stdout = run_bench("--plain", "--rates", "200", "--seconds", "1", "--warmup", "0.5")
    paths = ["direct", "haproxy", "haproxy-splice", "ksgate", "pyrelay-asyncio", "pyrelay-uvloop"]
    runs = report["runs"]
    assert isinstance(runs, list) and sorted(run["path"] for run in runs) == paths
    for run in runs:
        assert run["produce_mb_s"] > 0 and run["fetch_mb_s"] > 0 and run["latency_p50_ms"] > 0
    fixed = report["latency"]
    assert isinstance(fixed, list) and sorted(run["path"] for run in fixed) == paths
    assert all(run["rate"] == 200 and run["errors"] == 0 and run["publish"]["p50"] > 0 for run in fixed)
    pipes = report["pipes"]
    assert isinstance(pipes, dict)
    assert pipes["haproxy"] == "PipesUsed=0 PipesFree=0"  # no splice, no pipe ever taken
    assert pipes["haproxy-splice"] != pipes["haproxy"]
    assert "haproxy-splice vs direct" in stdout and "ksgate vs haproxy" in stdout
    assert "pyrelay-uvloop vs direct" in stdout and "ksgate vs pyrelay-uvloop" in stdout


@pytest.mark.broker
@pytest.mark.skipif(not HAProxy.available(), reason="needs Debian's haproxy (scripts/test.sh installs it)")
def test_haproxy_tls_bench_sets_the_tls_paths_fixed_rates_against_plaintext_direct() -> None:
    paths = ["direct", "haproxy", "ksgate", "pyrelay-tls-uvloop"]  # ksgate: SASL_SSL and the authorizer
    report, stdout = run_bench("--paths", ",".join(paths), "--rates", "200", "--seconds", "1", "--warmup", "0.5")
    runs = report["runs"]
    assert isinstance(runs, list) and sorted(run["path"] for run in runs) == paths
    assert all(run["produce_mb_s"] > 0 and run["fetch_mb_s"] > 0 for run in runs)
    tls = report["tls"]
    assert isinstance(tls, dict) and set(tls) == {"haproxy", "ksgate", "pyrelay-tls-uvloop"}  # direct: PLAINTEXT
    assert "haproxy vs direct" in stdout and "pyrelay-tls-uvloop vs direct" in stdout and "ksgate vs direct" in stdout
    added = next(line for line in stdout.splitlines() if line.startswith("200/s pub p50 ms"))
    assert "nan" not in added and added.count("[") == 4  # each proxy against direct, ksgate against haproxy


@pytest.mark.kafka
@pytest.mark.skipif(not HAProxy.available(), reason="needs Debian's haproxy (scripts/test.sh installs it)")
def test_haproxy_tls_bench_sets_the_tls_paths_against_a_direct_tls_connection_to_kafka() -> None:
    lib = kafka_lib()
    if lib is None:
        pytest.skip("no Apache Kafka jars (scripts/kafka/fetch.sh, REFERENCE_KAFKA_LIB)")
    paths = ["direct", "direct-tls", "haproxy"]
    report, stdout = run_bench("--upstream", "kafka", "--paths", ",".join(paths), "--rates", "200", "--seconds", "1",
                               "--warmup", "0.5", env={"REFERENCE_KAFKA_LIB": str(lib)})
    runs = report["runs"]
    assert isinstance(runs, list) and sorted(run["path"] for run in runs) == paths
    assert all(run["produce_mb_s"] > 0 and run["fetch_mb_s"] > 0 for run in runs)
    tls = report["tls"]  # the handshake with Kafka's own listener, as each proxy's: the same version and suite
    assert isinstance(tls, dict) and set(tls) == {"direct-tls", "haproxy"}
    assert tls["direct-tls"] == tls["haproxy"] == "TLSv1.3 TLS_AES_256_GCM_SHA384"
    assert "WARNING" not in stdout
    assert "direct-tls vs direct" in stdout and "haproxy vs direct-tls" in stdout
    added = [line for line in stdout.splitlines() if line.startswith("200/s pub p50 ms")]
    assert len(added) == 2 and "nan" not in added[1] and added[1].count("[") == 1  # haproxy against direct-tls
