"""Request memory: half-sent large requests on many connections, against queued.max.request.bytes.

A benchmark, not a test.  It starts an embedded Tansu broker and one gateway process (PLAINTEXT,
no authorization: receiving a frame costs the same whoever sends it), then:

* baseline: a small client (its own process) sends ApiVersions, one at a time, paced;
  the gateway's RSS (/proc/<pid>/status VmRSS) is read;
* flood: --connections connections each announce a --size request and send half of it,
  then stall (the bytes they could not send stay in their socket buffers); meanwhile the
  small client keeps measuring, and the gateway's RSS is sampled every 50 ms;
* after: the flood's connections close; RSS is sampled until it stops falling (at most --settle s).

Printed: RSS before / peak during / after, the growth against queued.max.request.bytes, and the
small client's p50/p99/max round trip alone and during the flood.  ``--set K=V`` passes gateway
keys (e.g. ``--set queued.max.request.bytes=-1`` for Kafka's unbounded default).

    PYTHONPATH=. .venv/bin/python bench/availability/request_memory.py [--connections 20] [--size 100000000]
        [--send N] [--set K=V]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import select
import socket
import struct
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from throughput import GatewayProcess, machine, parse_settings, percentile  # noqa: E402

from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from protocol.api_keys import ApiKey  # noqa: E402
from protocol.messages import request_frame  # noqa: E402
from tests.wire_client import read_frame  # noqa: E402

MiB = 1024 * 1024
PACE_S = 0.005
API_VERSIONS = {"client_software_name": "bench", "client_software_version": "1"}


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def small_client(port: int, control: Connection) -> None:
    """Round trips of ApiVersions until told to stop; each "phase" message returns the times so far."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times: list[float] = []
    correlation = 0
    while True:
        if control.poll():
            if control.recv() == "stop":
                control.send(times)
                return
            control.send(times)
            times = []
        correlation += 1
        start = time.perf_counter()
        sock.sendall(request_frame(ApiKey.API_VERSIONS, 3, correlation, API_VERSIONS))
        read_frame(sock)
        times.append(time.perf_counter() - start)
        time.sleep(PACE_S)


def half_send(port: int, connections: int, size: int, send: int, rss: list[int], pid: int) -> list[socket.socket]:
    """Open the connections and push ``send`` bytes of a ``size`` request on each until none accepts more."""
    socks, left = [], {}
    chunk = memoryview(bytes(4 * MiB))
    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(struct.pack(">i", size))
        sock.setblocking(False)
        socks.append(sock)
        left[sock] = send
    stalled_since = time.monotonic()
    while left and time.monotonic() - stalled_since < 2.0:  # two seconds without progress: all stalled
        _, writable, _ = select.select([], list(left), [], 0.05)
        rss.append(rss_bytes(pid))
        for sock in writable:
            try:
                sent = sock.send(chunk[: min(len(chunk), left[sock])])
            except BlockingIOError:
                continue
            stalled_since = time.monotonic()
            left[sock] -= sent
            if not left[sock]:
                del left[sock]
    return socks


def settle(pid: int, seconds: float) -> int:
    """RSS once it has not fallen for a second (or after ``seconds``)."""
    deadline, low, low_at = time.monotonic() + seconds, rss_bytes(pid), time.monotonic()
    while time.monotonic() < deadline and time.monotonic() - low_at < 1.0:
        time.sleep(0.05)
        now = rss_bytes(pid)
        if now < low - MiB:
            low, low_at = now, time.monotonic()
    return rss_bytes(pid)


def figures(times: list[float]) -> dict[str, float]:
    ms = [t * 1000 for t in times] or [float("nan")]
    return {"n": len(times), "p50_ms": round(percentile(ms, 50), 2), "p99_ms": round(percentile(ms, 99), 2),
            "max_ms": round(max(ms), 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ksgate-memory-") as tmp, \
            EmbeddedBroker(log_path=Path(tmp) / "tansu.log") as broker:
        gateway = GatewayProcess(broker.bootstrap, Path(tmp), {"authorizer.class.name": "", **args.settings})
        gateway.start()
        try:
            return measure(gateway, args)
        finally:
            gateway.stop()


def measure(gateway: GatewayProcess, args: argparse.Namespace) -> dict[str, Any]:
    ours, theirs = multiprocessing.Pipe()
    client = multiprocessing.Process(target=small_client, args=(gateway.port, theirs), daemon=True)
    client.start()
    time.sleep(args.phase)
    ours.send("phase")
    alone = ours.recv()
    before = rss_bytes(gateway.pid)
    samples: list[int] = []
    send = args.size // 2 if args.send is None else args.send
    socks = half_send(gateway.port, args.connections, args.size, send, samples, gateway.pid)
    end = time.monotonic() + args.phase
    while time.monotonic() < end:
        samples.append(rss_bytes(gateway.pid))
        time.sleep(0.05)
    ours.send("phase")
    flooded = ours.recv()
    for sock in socks:
        sock.close()
    after = settle(gateway.pid, args.settle)
    ours.send("stop")
    ours.recv()
    client.join(5)
    budget = args.settings.get("queued.max.request.bytes", 256 * MiB)
    peak = max(samples)
    return {
        "connections": args.connections, "size": args.size, "sent": send, "queued.max.request.bytes": budget,
        "rss_before_mib": round(before / MiB, 1), "rss_peak_mib": round(peak / MiB, 1),
        "rss_growth_mib": round((peak - before) / MiB, 1), "rss_after_mib": round(after / MiB, 1),
        "rss_after_vs_before_pct": round(100 * (after - before) / before, 1),
        "small_alone": figures(alone), "small_during": figures(flooded), "machine": machine(),
        "loadavg": os.getloadavg(),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--size", type=int, default=100_000_000, help="announced request size, bytes")
    parser.add_argument("--send", type=int, default=None, help="bytes of it each sends (default: half)")
    parser.add_argument("--phase", type=float, default=5.0, help="seconds of each measured phase")
    parser.add_argument("--settle", type=float, default=15.0, help="at most this long for RSS to fall after")
    parser.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    args.settings = parse_settings(args.settings)
    return args


def main(argv: list[str] | None = None) -> int:
    result = run(parse_args(argv))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
