"""Scale: a small client's latency, and the gateway's memory and CPU, while many idle connections are open.

A benchmark, not a test.  It starts an embedded Tansu broker and one gateway (``ksgate run``,
SASL_PLAINTEXT or, with ``--tls``, SASL_SSL; PLAIN; optionally ``--workers N``), then, for each
count in ``--connections`` (ascending), a holder process opens idle connections up to that
count (each logged in, so each has its upstream link) and keeps them open, and a small client
(logged in before the ramp) sends one request at a time, ``--rate`` a second, for ``--seconds``.

Per step it prints the small client's p50/p99/p99.9/max and the count of requests over 20 ms,
the gateway's RSS (all workers) and its increase per connection over the first step, the
gateway's CPU per new connection during the ramp, and the gateway's CPU while idle.
The holder raises its descriptor limit to the hard limit (and the gateway inherits it).

    .venv/bin/python bench/availability/idle_connections.py [--connections 0,2000,5000,9500] [--seconds 10]
        [--tls] [--workers 1] [--small api-versions|metadata] [--repeat 1] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import re
import resource
import socket
import ssl
import statistics
import struct
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from auth.cert_tools import TlsFiles, write_tls_material  # noqa: E402
from bench.availability.fairness import PASSWORDS, SMALL_REQUESTS, SMALL_TOPIC, gateway_settings  # noqa: E402
from bench.throughput import cpu_seconds, loadavg, machine, percentile, rss_mb  # noqa: E402
from bench.workers import WorkersGateway  # noqa: E402
from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from protocol.api_keys import ApiKey  # noqa: E402
from protocol.messages import decode_response, request_frame  # noqa: E402

_SIZE = struct.Struct(">i")
LOGINS_AT_ONCE = 32  # the holder's concurrent logins while ramping


def raise_descriptor_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class SaslGateway(WorkersGateway):
    """bench/workers.py's gateway with a SASL_PLAINTEXT or SASL_SSL listener."""

    def __init__(self, tls: TlsFiles | None, *args: Any, **kwargs: Any) -> None:
        self.tls = tls
        super().__init__(*args, **kwargs)

    @property
    def listener(self) -> str:
        return "SASL_SSL" if self.tls is not None else "SASL_PLAINTEXT"

    @property
    def settings(self) -> dict[str, Any]:
        tls = {} if self.tls is None else {"ssl.keystore.location": str(self.tls.server_cert),
                                           "ssl.key.location": str(self.tls.server_key)}
        return {"listeners": f"{self.listener}://127.0.0.1:{self.port}",
                "upstream.bootstrap.servers": self.upstream,
                f"listener.name.{self.listener.lower()}.node.port.base": self.node_port_base,
                "log.level": "WARNING", **tls, **self.extra}


def client_tls(tls: TlsFiles | None) -> ssl.SSLContext | None:
    if tls is None:
        return None
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.check_hostname = False
    return context


# --- the small client -------------------------------------------------------------------------------

class SmallClient:
    """One blocking connection, PLAIN-authenticated, one request at a time."""

    def __init__(self, address: str, tls: TlsFiles | None, kind: str) -> None:
        host, port = address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        context = client_tls(tls)
        self.sock = context.wrap_socket(sock) if context is not None else sock
        self.correlation = 0
        self.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        _, body = self.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0small\0{PASSWORDS['small']}".encode()})
        if body["error_code"]:
            raise ConnectionError(f"the small client's login failed: {body}")
        self.key, self.version, self.body = SMALL_REQUESTS[kind]

    def call(self, key: int, version: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.correlation += 1
        self.sock.sendall(request_frame(key, version, self.correlation, body))
        size = _SIZE.unpack(self._exactly(4))[0]
        return decode_response(self._exactly(size), key, version)

    def _exactly(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise ConnectionError("the gateway closed the small client's connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def timed(self) -> float:
        start = time.perf_counter()
        _, answer = self.call(self.key, self.version, self.body)
        elapsed = time.perf_counter() - start
        if (answer.get("topics") or [{"error_code": answer.get("error_code", 0)}])[0]["error_code"]:
            raise RuntimeError(f"the small client's request failed: {answer}")
        return elapsed


# --- the holder of idle connections (a process of its own) ------------------------------------------

async def _login(address: str, context: ssl.SSLContext | None) -> asyncio.StreamWriter:
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port), ssl=context,
                                                   server_hostname="" if context else None)
    plain = f"\0small\0{PASSWORDS['small']}".encode()
    for key, version, body in ((ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
                               (ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": plain})):
        writer.write(request_frame(key, version, 1, body))
        size = _SIZE.unpack(await reader.readexactly(4))[0]
        _, answer = decode_response(await reader.readexactly(size), key, version)
        if answer["error_code"]:
            writer.close()
            raise ConnectionError(f"login refused: {answer}")
    return writer


async def _hold(address: str, tls: TlsFiles | None, control: Connection) -> None:
    context, failures = client_tls(tls), 0
    held: list[asyncio.StreamWriter] = []
    loop, gate = asyncio.get_running_loop(), asyncio.Semaphore(LOGINS_AT_ONCE)

    async def one() -> asyncio.StreamWriter | None:
        async with gate:
            try:
                return await _login(address, context)
            except (OSError, ConnectionError, asyncio.IncompleteReadError):
                return None

    while (target := await loop.run_in_executor(None, control.recv)) is not None:
        opened = await asyncio.gather(*(one() for _ in range(max(0, target - len(held)))))
        held += [w for w in opened if w is not None]
        failures += sum(w is None for w in opened)
        control.send((len(held), failures))
    for writer in held:
        writer.close()


def holder_main(address: str, tls: TlsFiles | None, control: Connection) -> None:
    raise_descriptor_limit()
    asyncio.run(_hold(address, tls, control))


# --- the measurement -------------------------------------------------------------------------------

@dataclass(slots=True)
class Step:
    connections: int
    failures: int
    samples: int
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    over_20ms: int
    rss_mb: float
    kib_per_connection: float
    ramp_cpu_ms_per_connection: float
    idle_cpu_pct: float
    full_gcs: int  # generation-2 collections during the step (not the ramp)
    full_gc_ms: float
    longest_full_gc: str
    ramp_full_gcs: int
    ramp_full_gc_ms: float
    ramp_longest_full_gc: str
    per_worker: list[int]


_GC_SAMPLE = re.compile(r'^ksgate_gc_pause_seconds_(bucket|sum|count)\{generation="(\d)"(?:,le="([^"]+)")?\} (\S+)$')


def collector_pauses(gateway: SaslGateway) -> dict[str, float]:
    """Every worker's garbage-collector pauses so far: per generation the count and the sum, and per
    generation-2 bucket its cumulative count (summed over workers)."""
    totals: dict[str, float] = {}
    for worker in range(gateway.workers):
        url = f"http://127.0.0.1:{gateway.metrics_base + worker}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            for line in response.read().decode().splitlines():
                if (match := _GC_SAMPLE.match(line)) is not None:
                    kind, generation, le, value = match.groups()
                    key = f"{kind}{generation}" + (f"<={le}" if le else "")
                    totals[key] = totals.get(key, 0.0) + float(value)
    return totals


_CONNECTIONS = re.compile(r'^ksgate_connections\{listener="[^"]+"\} (\S+)$')


def connections_per_worker(gateway: SaslGateway) -> list[int]:
    """Open client connections by worker (the kernel spreads them over SO_REUSEPORT listeners)."""
    counts = []
    for worker in range(gateway.workers):
        url = f"http://127.0.0.1:{gateway.metrics_base + worker}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            counts.append(sum(int(float(m.group(1))) for line in response.read().decode().splitlines()
                              if (m := _CONNECTIONS.match(line)) is not None))
    return counts


def full_collections(before: dict[str, float], after: dict[str, float]) -> tuple[int, float, str]:
    """Generation-2 collections between two scrapes: how many, their total ms, and the bucket of the longest."""
    count = int(after.get("count2", 0) - before.get("count2", 0))
    total_ms = 1000 * (after.get("sum2", 0.0) - before.get("sum2", 0.0))
    longest = "-"
    buckets = sorted((float(k.split("<=")[1]), k) for k in after if k.startswith("bucket2<="))
    for bound, key in buckets:
        if count and after[key] - before.get(key, 0.0) >= count:
            longest = f"<={1000 * bound:g}ms" if bound != float("inf") else ">250ms"
            break
    return count, round(total_ms, 1), longest


def tree_cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def tree_rss(pids: list[int]) -> float:
    return sum(rss_mb(pid) for pid in pids)


def run_steps(gateway: SaslGateway, tls: TlsFiles | None, args: argparse.Namespace) -> list[Step]:
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    holder = context.Process(target=holder_main, args=(gateway.bootstrap, tls, theirs), daemon=True)
    holder.start()
    pids = gateway.worker_pids()
    small = SmallClient(gateway.bootstrap, tls, args.small)
    for _ in range(200):  # warm up: the small client's upstream link, the code paths
        small.timed()
    steps: list[Step] = []
    base_rss: float | None = None
    try:
        for count in args.connections:
            cpu_before, gc_before = tree_cpu(pids), collector_pauses(gateway)
            ours.send(count)
            if not ours.poll(1800):
                raise RuntimeError(f"the holder did not reach {count} connections in 30 minutes")
            held, failures = ours.recv()
            ramp_cpu = tree_cpu(pids) - cpu_before
            opened = held - (steps[-1].connections if steps else 0)
            time.sleep(1.0)  # let the ramp's last answers and frees settle
            rss = tree_rss(pids)
            base_rss = rss if base_rss is None else base_rss
            ramp_gcs = full_collections(gc_before, gc_step := collector_pauses(gateway))
            cpu_before, wall_before = tree_cpu(pids), time.perf_counter()
            latencies: list[float] = []
            start = time.monotonic()
            for tick in range(int(args.seconds * args.rate)):
                # Paced, as a real small client: a stall of the loop shows in as many samples as
                # the share of time it takes (back-to-back requests would mostly miss it).
                time.sleep(max(0.0, start + tick / args.rate - time.monotonic()))
                latencies.append(1000 * small.timed())
            idle_cpu = 100 * (tree_cpu(pids) - cpu_before) / (time.perf_counter() - wall_before)
            gcs = full_collections(gc_step, collector_pauses(gateway))
            first = args.connections[0]
            per_conn = (rss - base_rss) * 1024 / (held - first) if held > first else float("nan")
            steps.append(Step(held, failures, len(latencies), round(percentile(latencies, 50), 2),
                              round(percentile(latencies, 99), 2), round(percentile(latencies, 99.9), 2),
                              round(max(latencies), 2), sum(v > 20 for v in latencies), round(rss, 1),
                              round(per_conn, 1), round(1000 * ramp_cpu / opened, 2) if opened > 0 else float("nan"),
                              round(idle_cpu, 1), *gcs, *ramp_gcs,
                              connections_per_worker(gateway)))
            print(table(steps[-1:]).splitlines()[-1], flush=True)
    finally:
        small.sock.close()
        ours.send(None)
        holder.join(timeout=60)
        if holder.is_alive():
            holder.terminate()
    return steps


HEADER = (f"{'connections':>11}{'fail':>6}{'samples':>8}{'p50 ms':>8}{'p99 ms':>8}{'p99.9 ms':>9}{'max ms':>8}"
          f"{'>20ms':>6}{'RSS MB':>8}{'KiB/conn':>9}{'ramp CPU ms/conn':>17}{'CPU % in step':>14}"
          f"{'full GCs':>9}{'GC ms':>7}{'longest':>11}{'ramp GCs':>9}{'ms':>7}{'longest':>11}")


def table(steps: list[Step]) -> str:
    lines = [HEADER]
    for s in steps:
        lines.append(f"{s.connections:>11}{s.failures:>6}{s.samples:>8}{s.p50_ms:>8.2f}{s.p99_ms:>8.2f}"
                     f"{s.p999_ms:>9.2f}{s.max_ms:>8.2f}{s.over_20ms:>6}{s.rss_mb:>8.1f}{s.kib_per_connection:>9.1f}"
                     f"{s.ramp_cpu_ms_per_connection:>17.2f}{s.idle_cpu_pct:>14.1f}"
                     f"{s.full_gcs:>9}{s.full_gc_ms:>7.1f}{s.longest_full_gc:>11}{s.ramp_full_gcs:>9}"
                     f"{s.ramp_full_gc_ms:>7.1f}{s.ramp_longest_full_gc:>11}  {'/'.join(map(str, s.per_worker))}")
    return "\n".join(lines)


def summary(runs: list[list[Step]]) -> str:
    """Median and range over repeats, per step."""
    lines = [f"{'connections':>11}  {'p99 ms median [min-max]':<26}{'max ms median [min-max]':<26}"
             f"{'KiB/conn median [min-max]':<26}"]
    for index, step in enumerate(runs[0]):
        cells = []
        for key in ("p99_ms", "max_ms", "kib_per_connection"):
            values = [getattr(run[index], key) for run in runs if index < len(run)]
            cells.append(f"{statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]")
        lines.append(f"{step.connections:>11}  " + "".join(f"{c:<26}" for c in cells))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", default="0,2000,5000,9500",
                        help="ascending idle-connection counts to measure at (default 0,2000,5000,9500)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per step (default 10)")
    parser.add_argument("--rate", type=float, default=200.0, help="the small client's requests per second")
    parser.add_argument("--tls", action="store_true", help="SASL_SSL instead of SASL_PLAINTEXT")
    parser.add_argument("--workers", type=int, default=1, help="ksgate run --workers N")
    parser.add_argument("--small", choices=sorted(SMALL_REQUESTS), default="api-versions",
                        help="the small client's request: ApiVersions (the gateway alone, default) or Metadata "
                             "for one topic (relayed to the broker)")
    parser.add_argument("--repeat", type=int, default=1, help="fresh gateway per repeat; medians are printed")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra gateway configuration key (value read as YAML), repeatable")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    args.connections = [int(c) for c in args.connections.split(",") if c]
    if args.connections != sorted(args.connections):
        parser.error("--connections must be ascending")
    return args


def extra_settings(pairs: list[str]) -> dict[str, Any]:
    import yaml

    return {key: yaml.safe_load(value) for key, _, value in (p.partition("=") for p in pairs)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    hard = raise_descriptor_limit()  # the gateway and the broker inherit it
    print(f"machine: {machine()}  descriptors: {hard}  load average before: {loadavg()}", flush=True)
    runs: list[list[Step]] = []
    with tempfile.TemporaryDirectory(prefix="ksgate-idle-") as tmp, EmbeddedBroker() as broker:
        workdir = Path(tmp)
        tls = write_tls_material(workdir / "tls") if args.tls else None
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(SMALL_TOPIC, 1, 1)]).values():
            future.result(timeout=30)
        node_ids = sorted(admin.list_topics(timeout=10).brokers)
        settings = {**gateway_settings(workdir), "connections.max.idle.ms": 3_600_000,
                    **extra_settings(args.set)}
        for repeat in range(args.repeat):
            print(f"-- repeat {repeat + 1}/{args.repeat}: {'SASL_SSL' if tls else 'SASL_PLAINTEXT'}, "
                  f"--workers {args.workers}, small client: {args.small}", flush=True)
            print(HEADER, flush=True)
            with SaslGateway(tls, broker.bootstrap, workdir / f"gw-{repeat}", args.workers, node_ids,
                             settings) as gateway:
                runs.append(run_steps(gateway, tls, args))
    print()
    print(summary(runs))
    print(f"load average after: {loadavg()}")
    if args.json:
        print(json.dumps({"runs": [[asdict(s) for s in run] for run in runs], "load": loadavg(),
                          "tls": args.tls, "workers": args.workers, "small": args.small}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
