"""How long the first clients of a freshly started ``ksgate run`` wait for their first answer: start-up
work that holds the event loop after the ports accept (the start-up heap's collection and freeze, until
it moved before the listeners) shows here as a slow first answer.

A benchmark, not a test (tests/gateway/ops/test_collector.py pins the ordering). It starts an embedded
Tansu, then --runs times: ``ksgate run`` as a subprocess (whatever tree PYTHONPATH names), and a client
that tries to connect every --poll-ms from the moment the process is spawned; once in, it sends
ApiVersions (answered by the gateway itself) back to back for --window-ms. Printed per run: the first
answer's latency (from the connection to the answer), the slowest later answer in the window, spawn to
first answer, and the freeze as the gateway logged it (objects, and its duration where the log line
has one); then the medians.

    PYTHONPATH=. .venv/bin/python bench/availability/start_up_stall.py [--runs 7] [--window-ms 500]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from protocol.api_keys import ApiKey  # noqa: E402
from tests.harness import GatewayProcess  # noqa: E402
from tests.wire_client import read_frame, request_frame  # noqa: E402

SOFTWARE = {"client_software_name": "start-up-stall", "client_software_version": "1"}


@dataclass(slots=True, frozen=True)
class Run:
    first_ms: float  # connection to the first answer
    worst_later_ms: float  # the slowest of the answers after it, within the window
    spawn_to_answer_ms: float
    frozen_objects: int | None
    freeze_ms: float | None


def connect_when_listening(port: int, poll_s: float, deadline_s: float) -> socket.socket:
    deadline = time.monotonic() + deadline_s
    while True:
        sock = socket.socket()
        try:
            sock.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            sock.close()
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listened on {port} within {deadline_s} s") from None
            time.sleep(poll_s)
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(10)
        return sock


def answer_latencies(sock: socket.socket, window_s: float) -> tuple[list[float], float]:
    """ApiVersions back to back for ``window_s`` (at least two): each one's latency in ms, and when
    the first answer came (perf_counter)."""
    latencies: list[float] = []
    first_answered = 0.0
    end = time.perf_counter() + window_s
    correlation_id = 0
    while time.perf_counter() < end or len(latencies) < 2:
        correlation_id += 1
        sent = time.perf_counter()
        sock.sendall(request_frame(ApiKey.API_VERSIONS, 3, correlation_id, SOFTWARE))
        read_frame(sock)
        latencies.append((time.perf_counter() - sent) * 1000)
        first_answered = first_answered or time.perf_counter()
    return latencies, first_answered


def one_run(broker: EmbeddedBroker, directory: Path, poll_s: float, window_s: float) -> Run:
    gateway = GatewayProcess(broker.bootstrap, directory)
    spawned = time.perf_counter()
    with gateway:
        sock = connect_when_listening(gateway.port, poll_s, deadline_s=60)
        with sock:
            latencies, first_answered = answer_latencies(sock, window_s)
    frozen = gateway.events("start_up_heap_frozen")
    return Run(latencies[0], max(latencies[1:]), (first_answered - spawned) * 1000,
               frozen[0].get("objects") if frozen else None, frozen[0].get("took_ms") if frozen else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--poll-ms", type=float, default=1.0, help="the client's pause between refused connects")
    parser.add_argument("--window-ms", type=float, default=500.0, help="how long ApiVersions are sent after the first")
    args = parser.parse_args(argv)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="ksgate-start-up-") as tmp, \
            EmbeddedBroker(log_path=Path(tmp) / "tansu.log") as broker:
        for index in range(args.runs):
            directory = Path(tmp) / f"run-{index}"
            directory.mkdir()
            runs.append(one_run(broker, directory, args.poll_ms / 1000, args.window_ms / 1000))
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    print(f"{'run':>3} {'first answer':>13} {'slowest later':>14} {'spawn to answer':>16} {'frozen objects':>15} "
          f"{'freeze':>8}")
    for index, run in enumerate(runs):
        freeze = "-" if run.freeze_ms is None else f"{run.freeze_ms:.1f} ms"
        print(f"{index:>3} {run.first_ms:>10.2f} ms {run.worst_later_ms:>11.2f} ms {run.spawn_to_answer_ms:>13.0f} ms "
              f"{run.frozen_objects if run.frozen_objects is not None else '-':>15} {freeze:>8}")
    print(f"median {statistics.median(r.first_ms for r in runs):>7.2f} ms "
          f"{statistics.median(r.worst_later_ms for r in runs):>11.2f} ms "
          f"{statistics.median(r.spawn_to_answer_ms for r in runs):>13.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
