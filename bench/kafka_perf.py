"""Kafka's own load generators, direct to Apache Kafka vs through ksgate: a second opinion beside throughput.py.

Runs org.apache.kafka.tools.ProducerPerformance and then ConsumerPerformance (the classes behind
kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh), each in its own JVM, against one Kafka broker
directly and through a ksgate process in front of it, alternating direct/gateway for --repeat pairs, and
prints the median of each figure the tools report.  Security as in throughput.py --upstream kafka
(bench/kafka_upstream.py): plaintext or sasl_ssl on both paths.

    .venv/bin/python bench/kafka_perf.py [--security plaintext|sasl_ssl] [--records N] [--size B] [--repeat K]
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.kafka_upstream import Endpoint, KafkaUpstream, start_kafka  # noqa: E402
from bench.throughput import (  # noqa: E402
    GatewayProcess,
    create_topic,
    delete_topic,
    loadavg,
    machine,
    require_at_least_one,
)

PRODUCER_CLASS = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_CLASS = "org.apache.kafka.tools.ConsumerPerformance"
# Like throughput.py's producer: acks=all, 10 ms linger, ~1 MB batches, no compression.  The Java producer's
# own default of enable.idempotence=true stays (the bench user has IDEMPOTENT_WRITE on both paths).
PRODUCER_PROPERTIES = {"acks": "all", "linger.ms": 10, "batch.size": 1_000_000, "compression.type": "none"}
TOOL_JVM = ["java", "-Xmx512m", "-Djava.awt.headless=true"]  # full JIT: the generator must not be the bottleneck
TOOL_TIMEOUT_S = 600

# "N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P50 ms 50th, P95 ms 95th,
# P99 ms 99th, P999 ms 99.9th." -- ProducerPerformance's last line.
PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<records_s>[\d.]+) records/sec \((?P<mib_s>[\d.]+) MB/sec\), "
    r"(?P<avg_ms>[\d.]+) ms avg latency, (?P<max_ms>[\d.]+) ms max latency, (?P<p50_ms>\d+) ms 50th, "
    r"(?P<p95_ms>\d+) ms 95th, (?P<p99_ms>\d+) ms 99th, (?P<p999_ms>\d+) ms 99.9th")
# ConsumerPerformance's header; its summary is one comma-separated line under it.
CONSUMER_HEADER = ("start.time", "end.time", "data.consumed.in.MB", "MB.sec", "data.consumed.in.nMsg",
                   "nMsg.sec", "rebalance.time.ms", "fetch.time.ms", "fetch.MB.sec", "fetch.nMsg.sec")


class ToolOutputError(RuntimeError):
    """A perf tool's output had no summary line (it failed, or its format changed)."""


@dataclass(slots=True, frozen=True)
class ProducerFigures:
    records: int
    records_s: float
    mib_s: float  # the tool's "MB/sec": 2^20 bytes of record values
    avg_ms: float
    max_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float


@dataclass(slots=True, frozen=True)
class ConsumerFigures:
    records: int
    mib_s: float  # from the first poll, group join (rebalance) included; 2^20 bytes
    records_s: float
    rebalance_ms: float
    fetch_mib_s: float  # rebalance excluded
    fetch_records_s: float


def parse_producer_summary(output: str) -> ProducerFigures:
    """The figures of ProducerPerformance's final line (the last matching line: progress lines look alike)."""
    matches = list(PRODUCER_SUMMARY.finditer(output))
    if not matches:
        raise ToolOutputError(f"no ProducerPerformance summary in:\n{output[-2000:]}")
    found = matches[-1]
    return ProducerFigures(int(found["records"]), *(float(found[name]) for name in (
        "records_s", "mib_s", "avg_ms", "max_ms", "p50_ms", "p95_ms", "p99_ms", "p999_ms")))


def parse_consumer_summary(output: str) -> ConsumerFigures:
    """The figures of ConsumerPerformance's summary line (the first data line after the header)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if [field.strip() for field in line.split(",")][:len(CONSUMER_HEADER)] == list(CONSUMER_HEADER):
            for data in lines[i + 1:]:
                values = [field.strip() for field in data.split(",")]
                if len(values) == len(CONSUMER_HEADER):
                    row = dict(zip(CONSUMER_HEADER, values, strict=True))
                    return ConsumerFigures(int(row["data.consumed.in.nMsg"]), float(row["MB.sec"]),
                                           float(row["nMsg.sec"]), float(row["rebalance.time.ms"]),
                                           float(row["fetch.MB.sec"]), float(row["fetch.nMsg.sec"]))
    raise ToolOutputError(f"no ConsumerPerformance summary in:\n{output[-2000:]}")


@dataclass(slots=True)
class PerfRun:
    path: str
    repeat: int
    producer: ProducerFigures
    consumer: ConsumerFigures


@dataclass(slots=True)
class Tools:
    """Runs the perf tool classes in fresh JVMs with Kafka's jars and the broker's quiet log4j2 settings."""

    upstream: KafkaUpstream
    workdir: Path

    def _properties(self, endpoint: Endpoint, extra: Mapping[str, object]) -> Path:
        path = self.workdir / f"tool-{uuid.uuid4().hex[:8]}.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in {**endpoint.java, **extra}.items()))
        return path

    def run(self, main_class: str, args: list[str]) -> str:
        broker = self.upstream.broker
        command = [*TOOL_JVM, f"-Dlog4j2.configurationFile={broker.layout.log4j2}", "-cp", f"{broker.lib}/*",
                   main_class, *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False,
                              cwd=self.workdir)
        if done.returncode != 0:
            raise ToolOutputError(f"{main_class} exited with {done.returncode}:\n{done.stdout[-2000:]}\n"
                                  f"{done.stderr[-2000:]}")
        return done.stdout

    def produce(self, endpoint: Endpoint, topic: str, records: int, size: int) -> ProducerFigures:
        config = self._properties(endpoint, PRODUCER_PROPERTIES)
        return parse_producer_summary(self.run(PRODUCER_CLASS, [
            "--bootstrap-server", endpoint.bootstrap, "--topic", topic, "--num-records", str(records),
            "--record-size", str(size), "--throughput", "-1", "--command-config", str(config)]))

    def consume(self, endpoint: Endpoint, topic: str, records: int, group: str) -> ConsumerFigures:
        config = self._properties(endpoint, {"auto.offset.reset": "earliest"})
        return parse_consumer_summary(self.run(CONSUMER_CLASS, [
            "--bootstrap-server", endpoint.bootstrap, "--topic", topic, "--num-records", str(records),
            "--group", group, "--timeout", "60000", "--command-config", str(config)]))


def run_path(path: str, endpoint: Endpoint, tools: Tools, admin: AdminClient, args: argparse.Namespace,
             repeat: int, progress: Callable[[str], None]) -> PerfRun:
    tag = uuid.uuid4().hex[:8]
    topic = f"bench-perf-{path}-{tag}"
    create_topic(admin, topic, args.partitions)
    try:
        produced = tools.produce(endpoint, topic, args.records, args.size)
        progress(f"ProducerPerformance {produced.mib_s:7.1f} MiB/s, p99 {produced.p99_ms:.0f} ms")
        consumed = tools.consume(endpoint, topic, args.records, f"perf-{path}-{tag}")
        progress(f"ConsumerPerformance {consumed.fetch_mib_s:7.1f} MiB/s (fetch)")
    finally:
        delete_topic(admin, topic)
    if produced.records != args.records or consumed.records != args.records:
        raise RuntimeError(f"{path}: sent {produced.records}, consumed {consumed.records}, expected {args.records}")
    return PerfRun(path, repeat, produced, consumed)


# (group, field, label, format); higher is better except for the latencies
FIGURES = [
    ("producer", "mib_s", "producer MiB/s", "{:.1f}"),
    ("producer", "records_s", "producer records/s", "{:,.0f}"),
    ("producer", "avg_ms", "producer latency avg ms", "{:.1f}"),
    ("producer", "p50_ms", "producer latency p50 ms", "{:.0f}"),
    ("producer", "p95_ms", "producer latency p95 ms", "{:.0f}"),
    ("producer", "p99_ms", "producer latency p99 ms", "{:.0f}"),
    ("producer", "p999_ms", "producer latency p99.9 ms", "{:.0f}"),
    ("producer", "max_ms", "producer latency max ms", "{:.0f}"),
    ("consumer", "fetch_mib_s", "consumer fetch MiB/s", "{:.1f}"),
    ("consumer", "fetch_records_s", "consumer fetch records/s", "{:,.0f}"),
    ("consumer", "mib_s", "consumer MiB/s incl. join", "{:.1f}"),
    ("consumer", "rebalance_ms", "consumer group join ms", "{:.0f}"),
]


def figure(run: PerfRun, group: str, name: str) -> float:
    return float(getattr(getattr(run, group), name))


def table(runs: list[PerfRun], args: argparse.Namespace, info: dict[str, Any], loads: tuple[str, str],
          wall_s: float) -> str:
    direct = [r for r in runs if r.path == "direct"]
    gateway = [r for r in runs if r.path == "gateway"]
    lines = [
        f"machine: {info['nproc']} CPUs, {info['cpu_model']}, {info['mem_total_mb']} MB RAM, Linux {info['kernel']}",
        f"workload: Kafka's ProducerPerformance then ConsumerPerformance, {args.records:,} records x {args.size} B, "
        f"{args.partitions} partition(s), producer {', '.join(f'{k}={v}' for k, v in PRODUCER_PROPERTIES.items())}",
        f"          median of {args.repeat} alternating direct/gateway pairs; Apache Kafka, {args.security.upper()} "
        "on both sides; MiB = 2^20 bytes (the tools' \"MB\")",
        "",
        f"{'figure':<30}{'direct':>12}{'gateway':>12}{'gw/direct':>11}   per-repeat gateway/direct",
        "-" * 100,
    ]
    for group, name, label, fmt in FIGURES:
        d = statistics.median(figure(r, group, name) for r in direct)
        g = statistics.median(figure(r, group, name) for r in gateway)
        ratio = g / d if d else float("nan")
        per = " ".join(f"{fmt.format(figure(gr, group, name))}/{fmt.format(figure(dr, group, name))}"
                       for gr, dr in zip(gateway, direct, strict=True))
        lines.append(f"{label:<30}{fmt.format(d):>12}{fmt.format(g):>12}{ratio:>10.2f}x   {per}")
    lines += ["-" * 100, f"load average before/after: {loads[0]} / {loads[1]}", f"total wall time: {wall_s:.0f} s"]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--security", choices=("plaintext", "sasl_ssl"), default="plaintext")
    parser.add_argument("--records", type=int, default=500_000, help="records per producer and consumer run")
    parser.add_argument("--size", type=int, default=1024, help="record size in bytes")
    parser.add_argument("--repeat", type=int, default=5, help="alternating direct/gateway pairs")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="also print every run as JSON")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "records", "size", "repeat", "partitions")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop the broker and the gateway
    began, load_before, info = time.perf_counter(), loadavg(), machine()
    runs: list[PerfRun] = []
    with tempfile.TemporaryDirectory(prefix="ksgate-kafka-perf-") as tmp:
        workdir = Path(tmp)
        upstream = start_kafka(workdir, args.security)
        try:
            extra = upstream.gateway_settings()
            bootstrap = extra.pop("upstream.bootstrap.servers")
            with GatewayProcess(bootstrap, workdir, extra, 90.0, protocol=upstream.gateway_protocol) as gateway:
                endpoints = {"direct": upstream.direct(), "gateway": upstream.through(gateway.bootstrap)}
                AdminClient(endpoints["gateway"].librdkafka).list_topics(timeout=20)  # the whole path answers
                admin = AdminClient(upstream.admin_settings)
                tools = Tools(upstream, workdir)
                try:
                    # The broker is a JVM: one unmeasured pass JIT-compiles its paths before measuring.
                    run_path("direct", endpoints["direct"], tools, admin, args, -1,
                             lambda text: print(f"  [warm-up, not measured] direct   {text}", file=sys.stderr))
                    for rep in range(args.repeat):
                        for path in (["direct", "gateway"] if rep % 2 == 0 else ["gateway", "direct"]):
                            def progress(text: str, rep: int = rep, path: str = path) -> None:
                                print(f"  [{rep + 1}/{args.repeat}] {path:<8} {text}", file=sys.stderr)
                            runs.append(run_path(path, endpoints[path], tools, admin, args, rep, progress))
                except BaseException:
                    print("gateway log tail:\n" + gateway.log_tail(), file=sys.stderr)
                    raise
        finally:
            upstream.broker.stop()
    print(table(runs, args, info, (load_before, loadavg()), time.perf_counter() - began))
    if args.json:
        print(json.dumps({"machine": info, "config": vars(args), "producer_properties": PRODUCER_PROPERTIES,
                          "runs": [asdict(r) for r in runs]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
