"""Where an idle connection's Python memory goes: tracemalloc in an in-process gateway, by source line.

A measurement, not a test. It starts an embedded Tansu broker and a gateway on a thread of this
process (tests/harness.py; SASL_PLAINTEXT, or SASL_SSL with ``--tls``; PLAIN), lets the holder of
bench/availability/idle_connections.py (another process, so that no client object is counted)
open ``--warm`` connections, takes a snapshot, opens ``--connections`` more, takes another, and
prints the heap growth per connection grouped by the innermost line of the repository that made
it (what the loop allocates from C shows under tests/harness.py). Counts are deterministic, unlike RSS;
with ``--tls``, uvloop's 256 KiB SSL receive buffer shows in full although only its touched pages
are resident (bench/availability/idle_connections.py measures RSS).

    .venv/bin/python bench/availability/connection_heap.py [--connections 200] [--tls] [--top 30]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import sys
import tempfile
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from auth.cert_tools import write_tls_material  # noqa: E402
from bench.availability.fairness import gateway_settings  # noqa: E402
from bench.availability.idle_connections import holder_main  # noqa: E402
from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from tests.harness import GatewayThread  # noqa: E402

FRAMES = 16


def settled(gateway: GatewayThread) -> tracemalloc.Snapshot:
    gateway.call(lambda: None)  # what the last answers scheduled on the loop has run
    gc.collect()
    return tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])


def by_repo_line(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot) -> dict[str, tuple[int, int]]:
    """Bytes and blocks grown, keyed by the innermost frame in the repository (else the innermost)."""
    grown: dict[str, tuple[int, int]] = {}
    for stat in after.compare_to(before, "traceback"):
        frames = list(stat.traceback)[::-1]  # innermost first
        frame = next((f for f in frames if f.filename.startswith(str(REPO)) and "tests/" not in f.filename),
                     frames[0])
        key = f"{Path(frame.filename).relative_to(REPO) if frame.filename.startswith(str(REPO)) else frame.filename}" \
              f":{frame.lineno}"
        size, count = grown.get(key, (0, 0))
        grown[key] = (size + stat.size_diff, count + stat.count_diff)
    return grown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=200)
    parser.add_argument("--warm", type=int, default=20, help="connections opened before the first snapshot")
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ksgate-heap-"))
    tls = write_tls_material(work / "tls") if args.tls else None
    settings = gateway_settings(work)
    if tls is not None:
        settings |= {"ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key)}
    with EmbeddedBroker() as broker:
        gateway = GatewayThread(broker.bootstrap, settings, protocol="SASL_SSL" if tls else "SASL_PLAINTEXT").start()
        spawn = multiprocessing.get_context("spawn")
        mine, theirs = spawn.Pipe()
        holder = spawn.Process(target=holder_main, args=(gateway.bootstrap, tls, theirs), daemon=True)
        holder.start()
        try:
            mine.send(args.warm)
            mine.recv()
            tracemalloc.start(FRAMES)
            before = settled(gateway)
            mine.send(args.warm + args.connections)
            held, failures = mine.recv()
            after = settled(gateway)
            n = args.connections
            grown = by_repo_line(before, after)
            total = sum(size for size, _ in grown.values())
            print(f"{'SASL_SSL' if tls else 'SASL_PLAINTEXT'}: {held} held ({failures} failed); "
                  f"{total / n / 1024:.2f} KiB of Python heap per idle connection over {n}")
            for key, (size, count) in sorted(grown.items(), key=lambda kv: -kv[1][0])[:args.top]:
                print(f"{size / n:9.0f} B {count / n:6.2f} blocks  {key}")
        finally:
            tracemalloc.stop()
            mine.send(None)
            holder.join(15)
            gateway.stop()


if __name__ == "__main__":
    main()
