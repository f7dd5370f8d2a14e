"""bench/anchors/haproxy_tls.py runs end to end and reports every path.

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

from tests.haproxy import HAProxy

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.broker
@pytest.mark.skipif(not HAProxy.available(), reason="needs Debian's haproxy (scripts/test.sh installs it)")
def test_haproxy_tls_bench_reports_haproxy_and_ksgate_paths() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "anchors" / "haproxy_tls.py"), "--records", "2000", "--repeat", "1",
         "--latency-samples", "20", "--latency-warmup", "5", "--json"],
        capture_output=True, text=True, timeout=240, cwd=REPO, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout[done.stdout.index("\n{\n") + 1:])
    assert sorted(run["path"] for run in report["runs"]) == ["haproxy", "ksgate", "ksgate-ssl"]
    for run in report["runs"]:  # every record was produced and read back (the bench checks the bytes)
        assert run["produce_mb_s"] > 0 and run["fetch_mb_s"] > 0 and run["latency_p50_ms"] > 0
    assert set(report["tls"]) == {"haproxy", "ksgate", "ksgate-ssl"}
    assert all(tls.startswith("TLS") for tls in report["tls"].values())
    assert "ksgate/haproxy" in done.stdout
    assert "sasl.password" not in done.stdout
