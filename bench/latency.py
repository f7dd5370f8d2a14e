"""Latency at a fixed rate: what a hop through ksgate adds to publish and end-to-end latency.

A benchmark, not a test.  It starts an embedded Tansu broker and two gateway processes in front
of it (``ksgate run``: PLAINTEXT, and SASL_SSL with PLAIN), then, for each rate, runs a producer
at that fixed rate (records of ``--size`` bytes, ``acks=all``) and a consumer reading the same
topic, direct to the broker and through each gateway, in alternating order per repeat.

* publish latency: from ``produce()`` to the delivery report (the broker's acknowledgement);
* end-to-end latency: from ``produce()`` to the consumer (another process) receiving the record
  (each record carries its send time, ``time.time_ns()``, the same clock in both processes);
* CPU of the gateway process and of the broker during the measured window, as % of one core,
  and the gateway's per MB/s of records.

The first ``--warmup`` seconds of every run are not measured.  Added latency = gateway
percentile - direct percentile, from the medians over repeats.

    .venv/bin/python bench/latency.py [--rates 5000,50000] [--size 1024] [--seconds 10] [--repeat 3]
        [--paths direct,plaintext,sasl_ssl] [--linger-ms 5] [--json] [--tree-b /path/to/other/checkout]

``--tree-b``: each gateway path also runs a second gateway importing ksgate from that checkout (paths
``plaintext-b``, ``sasl_ssl-b``) in front of the same broker, in the same rotation: before and after a change,
in one run on the same minutes of the machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import struct
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from multiprocessing.queues import SimpleQueue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from auth.cert_tools import TlsFiles, write_tls_material  # noqa: E402
from bench.throughput import (  # noqa: E402
    GatewayProcess,
    authorization_settings,
    cpu_seconds,
    create_topic,
    delete_topic,
    loadavg,
    machine,
    percentile,
)
from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from gateway.stores.file_users import FileCredentialStore  # noqa: E402

STAMP = struct.Struct(">qq")  # send time (ns, wall clock) and record index, at the start of each value
USER, PASSWORD = "bench", "bench-secret"
PERCENTILES = (50, 99, 99.9)


class SaslSslGatewayProcess(GatewayProcess):
    """The bench gateway with one SASL_SSL listener (PLAIN)."""

    def __init__(self, upstream: str, workdir: Path, tls: TlsFiles, extra: dict[str, Any],
                 node_ids: list[int], tree: Path | None = None) -> None:
        users = workdir / "users.json"
        workdir.mkdir(parents=True, exist_ok=True)  # the credentials file goes there before start()
        FileCredentialStore(users).upsert_user(USER, PASSWORD)
        super().__init__(upstream, workdir, {
            "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
            "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(users), **extra},
            protocol="SASL_SSL", node_ids=node_ids, tree=tree)
        self.tls = tls

    def client_config(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": str(self.tls.ca),
                "ssl.endpoint.identification.algorithm": "none"}


# --- the consumer (a process of its own) -----------------------------------------------------------

@dataclass(slots=True)
class Spec:
    config: dict[str, Any]
    topic: str
    rate: int
    size: int
    warmup_s: float
    seconds: float
    linger_ms: float
    fetch_wait_ms: int

    @property
    def total(self) -> int:
        return int(self.rate * (self.warmup_s + self.seconds))

    @property
    def first_measured(self) -> int:
        return int(self.rate * self.warmup_s)


def consume(spec: Spec, ready: Event, out: SimpleQueue[dict[str, Any]]) -> None:
    consumer = Consumer({**spec.config, "group.id": f"latency-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                         "fetch.wait.max.ms": spec.fetch_wait_ms, "fetch.min.bytes": 1, "queued.min.messages": 1000000})
    consumer.assign([TopicPartition(spec.topic, 0, 0)])
    consumer.consume(1, 1.0)  # connected, the partition's leader known
    ready.set()
    latencies: list[float] = []
    seen, deadline = 0, time.monotonic() + spec.warmup_s + spec.seconds + 60
    while seen < spec.total and time.monotonic() < deadline:
        # poll() returns as soon as one record is there; consume(n, 0) then takes what else is queued without
        # waiting. (consume(n, timeout) alone waits for n records or the whole timeout, which would stamp each
        # record's arrival up to the timeout late.)
        first = consumer.poll(0.05)
        if first is None:
            continue
        for message in [first, *consumer.consume(10000, 0)]:
            now = time.time_ns()
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"consumer: {error}")
                continue
            sent, index = STAMP.unpack_from(message.value() or b"")
            if sent == 0:  # the producer's warm-up record
                continue
            seen += 1
            if index >= spec.first_measured:
                latencies.append((now - sent) / 1e6)
    consumer.close()
    out.put({"received": seen, **{f"p{q}": percentile(latencies, q) if latencies else float("nan")
                                  for q in PERCENTILES}})


# --- the producer (this process) ---------------------------------------------------------------------

def produce(spec: Spec) -> tuple[list[float], int, float]:
    """Produce spec.total records at spec.rate; (publish latencies in ms, errors, measured window start)."""
    producer = Producer({**spec.config, "acks": "all", "linger.ms": spec.linger_ms, "enable.idempotence": False,
                         "socket.nagle.disable": True, "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 4_000_000})
    latencies: list[float] = []
    errors = [0]
    padding = b"\0" * (spec.size - STAMP.size)

    def report(err: KafkaError | None, message: Any) -> None:
        if err is not None:
            errors[0] += 1
            return
        sent, index = STAMP.unpack_from(message.value())
        if index >= spec.first_measured:
            latencies.append((time.time_ns() - sent) / 1e6)

    producer.produce(spec.topic, b"\0" * spec.size, partition=0)  # warm: connected and the leader known
    producer.flush(30)
    start = time.monotonic()
    window_start = start + spec.warmup_s
    sent = 0
    while sent < spec.total:
        due = min(spec.total, int((time.monotonic() - start) * spec.rate) + 1)
        while sent < due:
            producer.produce(spec.topic, STAMP.pack(time.time_ns(), sent) + padding, partition=0, on_delivery=report)
            sent += 1
        # Serves delivery reports as they come (so publish latency is not rounded to a pacing tick),
        # waking at the latest when the next record is due.
        producer.poll(max(0.0, start + sent / spec.rate - time.monotonic()))
    producer.flush(60)
    return latencies, errors[0], window_start


@dataclass(slots=True)
class Run:
    path: str
    rate: int
    repeat: int
    achieved_rate: float = 0.0
    publish: dict[str, float] = field(default_factory=dict)
    end_to_end: dict[str, float] = field(default_factory=dict)
    errors: int = 0
    gateway_cpu_pct: float = 0.0
    broker_cpu_pct: float = 0.0
    gateway_cpu_pct_per_mb_s: float = 0.0


def run_once(path: str, config: dict[str, Any], rate: int, repeat: int, args: argparse.Namespace,
             admin: AdminClient, gateway_pid: int | None, broker_pid: int) -> Run:
    topic = f"latency-{path}-{rate}-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, 1)
    spec = Spec(config, topic, rate, args.size, args.warmup, args.seconds, args.linger_ms, args.fetch_wait_ms)
    context = multiprocessing.get_context("spawn")
    ready, out = context.Event(), context.SimpleQueue()
    consumer = context.Process(target=consume, args=(spec, ready, out), daemon=True)
    consumer.start()
    try:
        if not ready.wait(60):
            raise RuntimeError(f"{path}: the consumer did not start")
        cpu = {"gateway": cpu_seconds(gateway_pid) if gateway_pid else 0.0, "broker": cpu_seconds(broker_pid)}
        wall = time.monotonic()
        publish, errors, window_start = produce(spec)
        elapsed = time.monotonic() - wall
        used = {"gateway": (cpu_seconds(gateway_pid) - cpu["gateway"]) if gateway_pid else 0.0,
                "broker": cpu_seconds(broker_pid) - cpu["broker"]}
        consumer.join(timeout=120)
        received = out.get() if not out.empty() else {"received": 0}
    finally:
        if consumer.is_alive():
            consumer.terminate()
        delete_topic(admin, topic)
    del window_start
    mb_s = spec.total * args.size / 1e6 / elapsed
    run = Run(path, rate, repeat, round(spec.total / elapsed), errors=errors + spec.total - received["received"],
              publish={f"p{q}": round(percentile(publish, q), 2) for q in PERCENTILES},
              end_to_end={f"p{q}": round(received.get(f"p{q}", float("nan")), 2) for q in PERCENTILES},
              gateway_cpu_pct=round(100 * used["gateway"] / elapsed, 2),
              broker_cpu_pct=round(100 * used["broker"] / elapsed, 1))
    run.gateway_cpu_pct_per_mb_s = round(run.gateway_cpu_pct / mb_s, 3) if gateway_pid else 0.0
    return run


def order(paths: list[str], repeat: int) -> list[str]:
    """Rotate the order per repeat, so drift on the machine hits every path."""
    shift = repeat % len(paths)
    return paths[shift:] + paths[:shift]


def median_of(runs: list[Run], path: str, rate: int, part: str, key: str) -> float:
    values = [getattr(r, part)[key] if part in ("publish", "end_to_end") else getattr(r, part)
              for r in runs if r.path == path and r.rate == rate]
    return statistics.median(values) if values else float("nan")


def table(runs: list[Run], paths: list[str], rates: list[int]) -> str:
    lines = [f"{'rate/s':>7} {'path':<14}{'pub p50':>8}{'p99':>7}{'p99.9':>8}{'e2e p50':>9}{'p99':>7}{'p99.9':>8}"
             f"{'gw CPU%':>8}{'%/MB/s':>7}{'broker%':>8}   (ms, medians of repeats)"]
    for rate in rates:
        for path in paths:
            cells = [median_of(runs, path, rate, part, f"p{q}") for part in ("publish", "end_to_end")
                     for q in PERCENTILES]
            lines.append(f"{rate:>7} {path:<14}" + "".join(f"{c:>8.2f}" if i % 3 == 0 else f"{c:>7.2f}"
                                                          if i % 3 == 1 else f"{c:>8.2f}"
                                                          for i, c in enumerate(cells))
                         + f"{median_of(runs, path, rate, 'gateway_cpu_pct', ''):>8.2f}"
                         f"{median_of(runs, path, rate, 'gateway_cpu_pct_per_mb_s', ''):>7.3f}"
                         f"{median_of(runs, path, rate, 'broker_cpu_pct', ''):>8.1f}")
        for path in paths[1:]:
            if "direct" not in paths:
                break
            added = [median_of(runs, path, rate, part, f"p{q}") - median_of(runs, "direct", rate, part, f"p{q}")
                     for part in ("publish", "end_to_end") for q in PERCENTILES]
            lines.append(f"{rate:>7} {'+' + path:<14}" + "".join(f"{a:>8.2f}" if i % 3 == 0 else f"{a:>7.2f}"
                                                                 if i % 3 == 1 else f"{a:>8.2f}"
                                                                 for i, a in enumerate(added))
                         + "   added by the gateway")
        for path in (p for p in paths if p.endswith("-b")):
            a = path.removesuffix("-b")
            moved = [median_of(runs, path, rate, part, f"p{q}") - median_of(runs, a, rate, part, f"p{q}")
                     for part in ("publish", "end_to_end") for q in PERCENTILES]
            lines.append(f"{rate:>7} {path + '-a':<14}" + "".join(f"{m:>8.2f}" if i % 3 == 0 else f"{m:>7.2f}"
                                                                  if i % 3 == 1 else f"{m:>8.2f}"
                                                                  for i, m in enumerate(moved))
                         + "   --tree-b's gateway minus this one's")
    return "\n".join(lines)


def spread(runs: list[Run]) -> str:
    lines = ["per run (pub p99 / e2e p99 ms, achieved rate, errors):"]
    for r in runs:
        lines.append(f"  repeat {r.repeat} {r.rate:>6}/s {r.path:<10} {r.publish['p99']:>7.2f} / "
                     f"{r.end_to_end['p99']:>7.2f}   {r.achieved_rate:>7}/s  {r.errors}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="5000,50000", help="records per second, comma-separated")
    parser.add_argument("--size", type=int, default=1024, help="record value size in bytes (at least 16)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds at the start of a run")
    parser.add_argument("--repeat", type=int, default=3, help="repeats (the order of paths rotates)")
    parser.add_argument("--paths", default="direct,plaintext,sasl_ssl", help="subset of direct,plaintext,sasl_ssl")
    parser.add_argument("--linger-ms", type=float, default=5.0,
                        help="the producer's linger.ms (librdkafka's default, 5: with 0 every record is its own "
                             "batch, which Tansu cannot keep up with at 5,000/s on this machine)")
    parser.add_argument("--fetch-wait-ms", type=int, default=5,
                        help="the consumer's fetch.wait.max.ms (Tansu holds an empty fetch for about that long)")
    parser.add_argument("--authz", choices=("off", "allow-all"), default="off",
                        help="gateway authorization: off (the bare relay) or allow-all (StandardAuthorizer)")
    parser.add_argument("--json", action="store_true", help="print every run as JSON too")
    parser.add_argument("--tree-b", type=Path, help="a second checkout: each gateway path runs once more from it "
                                                     "(paths plaintext-b, sasl_ssl-b)")
    args = parser.parse_args(argv)
    args.rates = [int(r) for r in args.rates.split(",") if r]
    args.paths = [p for p in args.paths.split(",") if p]
    if set(args.paths) - {"direct", "plaintext", "sasl_ssl"} or args.size < STAMP.size:
        parser.error("--paths: direct, plaintext, sasl_ssl; --size at least 16")
    if args.tree_b is not None:
        args.paths += [f"{p}-b" for p in args.paths if p != "direct"]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"machine: {machine()}  load average before: {loadavg()}", flush=True)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="ksgate-latency-") as tmp, EmbeddedBroker() as broker:
        workdir = Path(tmp)
        broker_pid = broker.process.pid
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        authz = authorization_settings(args.authz, workdir)
        node_ids = sorted(admin.list_topics(timeout=10).brokers)
        tls = write_tls_material(workdir / "tls")
        with ExitStack() as stack:  # entering starts each gateway
            legs: dict[str, tuple[dict[str, Any], int | None]] = {
                "direct": ({"bootstrap.servers": broker.bootstrap}, None)}
            for suffix, tree in (("", None), ("-b", args.tree_b)):
                if suffix and tree is None:
                    continue
                plain = stack.enter_context(GatewayProcess(broker.bootstrap, workdir / f"plaintext{suffix}", authz,
                                                           node_ids=node_ids, tree=tree))
                secured = stack.enter_context(SaslSslGatewayProcess(broker.bootstrap, workdir / f"sasl_ssl{suffix}",
                                                                    tls, authz, node_ids, tree))
                legs[f"plaintext{suffix}"] = ({"bootstrap.servers": plain.bootstrap}, plain.pid)
                legs[f"sasl_ssl{suffix}"] = (secured.client_config(), secured.pid)
            for repeat in range(args.repeat):
                for rate in args.rates:
                    for path in order(args.paths, repeat):
                        config, pid = legs[path]
                        runs.append(run_once(path, config, rate, repeat, args, admin, pid, broker_pid))
                        r = runs[-1]
                        print(f"repeat {repeat} {rate}/s {path}: publish {r.publish} e2e {r.end_to_end} "
                              f"rate {r.achieved_rate}/s errors {r.errors} gateway CPU {r.gateway_cpu_pct}% "
                              f"broker CPU {r.broker_cpu_pct}%", file=sys.stderr, flush=True)
    print()
    print(table(runs, args.paths, args.rates))
    print(spread(runs))
    print(f"load average after: {loadavg()}")
    if args.json:
        print(json.dumps({"runs": [asdict(r) for r in runs], "args": vars(args)}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
