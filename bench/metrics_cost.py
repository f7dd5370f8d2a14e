"""What the metrics cost per request: ksgate's own hooks against prometheus_client's.

Times the metric updates the request path makes per relayed request (an authorization
decision, a relayed count, a latency observation; plus ksgate's bytes in/out) with
``timeit``, best of 5.  prometheus_client is optional (``pip install prometheus_client``);
its multiprocess mode (what ``--workers`` would need to aggregate) runs in a child process
because it is chosen by PROMETHEUS_MULTIPROC_DIR at import.

    python bench/metrics_cost.py [--number 200000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.ops.metrics import LATENCY_BUCKETS, Metrics
from protocol.api_keys import ApiKey

MODES = ("ksgate", "ksgate+bytes", "prometheus_client", "prometheus_client labels()",
         "prometheus_client multiprocess", "prometheus_client multiprocess labels()")


def _ksgate(with_bytes: bool) -> Callable[[], None]:
    metrics = Metrics(["PLAINTEXT"])
    traffic = metrics.traffic("PLAINTEXT")
    frame = memoryview(bytes(4) + ApiKey.PRODUCE.to_bytes(2, "big") + bytes(1018))

    def per_request() -> None:
        metrics.authorization_decision(ApiKey.PRODUCE, "allowed")
        metrics.relayed(ApiKey.PRODUCE)
        metrics.observe_latency(ApiKey.PRODUCE, 0.003)

    def per_request_with_bytes() -> None:
        traffic.request_frame(frame)
        per_request()
        traffic.response(ApiKey.PRODUCE, 64)

    return per_request_with_bytes if with_bytes else per_request


def _prometheus_client(bound: bool) -> Callable[[], None]:
    import prometheus_client as pc

    registry = pc.CollectorRegistry()
    authz = pc.Counter("authz_total", "x", ("api", "outcome"), registry=registry)
    relayed = pc.Counter("relayed_total", "x", ("api",), registry=registry)
    latency = pc.Histogram("latency_seconds", "x", ("api",), registry=registry, buckets=LATENCY_BUCKETS)
    if bound:  # children looked up once, as ksgate pre-binds its label tuples
        a, r, h = authz.labels("Produce", "allowed"), relayed.labels("Produce"), latency.labels("Produce")

        def per_request() -> None:
            a.inc()
            r.inc()
            h.observe(0.003)
        return per_request

    def per_request_labels() -> None:
        authz.labels("Produce", "allowed").inc()
        relayed.labels("Produce").inc()
        latency.labels("Produce").observe(0.003)
    return per_request_labels


def measure(mode: str, number: int) -> float:
    """Seconds per request for ``mode`` (in this process)."""
    if mode.startswith("ksgate"):
        fn = _ksgate(with_bytes=mode.endswith("+bytes"))
    else:
        fn = _prometheus_client(bound=not mode.endswith("labels()"))
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # one mode, in a child
    args = parser.parse_args()
    if args.mode:
        print(measure(args.mode, args.number))
        return 0
    baseline = None
    for mode in MODES:
        env = dict(os.environ)
        with tempfile.TemporaryDirectory() as directory:
            if "multiprocess" in mode:
                env["PROMETHEUS_MULTIPROC_DIR"] = directory
            child = subprocess.run([sys.executable, __file__, "--mode", mode, "--number", str(args.number)],
                                   env=env, capture_output=True, text=True)
        if child.returncode:
            print(f"{mode:42s} skipped: {child.stderr.strip().splitlines()[-1]}")
            continue
        seconds = float(child.stdout)
        baseline = baseline or seconds
        print(f"{mode:42s} {seconds * 1e9:7.0f} ns per request  ({seconds / baseline:.1f}× ksgate)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
