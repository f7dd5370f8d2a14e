"""Throughput and latency of confluent-kafka clients, direct to the broker vs. through ksgate.

A benchmark, not a test.  One run starts an embedded Tansu broker (or Apache Kafka with --upstream kafka,
PLAINTEXT or SASL_SSL on both paths: bench/kafka_upstream.py), starts the gateway in
front of it as a separate process (``ksgate run --config …``, so it has its own GIL), and
then, alternating direct / gateway and repeating, measures:

* produce throughput: N records of --size bytes, batched, acks=all, from the first
  produce() to flush() completion;
* fetch throughput: the same N records read back by assign() from offset 0, from the
  first poll to the last record;
* latency: single small produce requests, acks=all, linger.ms=0, one at a time
  (produce + flush per record), after a warm-up.

The median over the repeats is reported for each figure, with the gateway/direct ratio.
CPU time used by the client (this process), the broker and the gateway during each phase
is sampled from /proc so it is visible who saturated the machine's cores.

    .venv/bin/python bench/throughput.py [--records N] [--size 1024] [--repeat K] [--json]
    .venv/bin/python bench/throughput.py --profile /tmp/ksgate-prof   # + py-spy of the gateway
    .venv/bin/python bench/throughput.py --upstream kafka --security sasl_ssl --repeat 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

import confluent_kafka
import yaml
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # public, not in an __all__

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.commands.embedded_broker import EmbeddedBroker, free_port  # noqa: E402

MB = 1_000_000  # throughput figures are in MB/s of record values, 1 MB = 10^6 bytes
CLK_TCK = os.sysconf("SC_CLK_TCK")

PRODUCER_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 10,
    "batch.size": 1_000_000,
    "batch.num.messages": 1_000_000,
    "compression.type": "none",
    "enable.idempotence": False,
    # Room for the whole run in the client queue, so produce() never blocks the loop.
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_151,
}
CONSUMER_SETTINGS: dict[str, Any] = {
    "group.id": "ksgate-bench-unused",
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.min.bytes": 1,
    "fetch.wait.max.ms": 100,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 8_388_608,
    "queued.max.messages.kbytes": 262_144,
    "queued.min.messages": 1_000_000,
}
LATENCY_SETTINGS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 0,
    "enable.idempotence": False,
    "socket.nagle.disable": True,
    "message.timeout.ms": 10_000,
}
LATENCY_RECORD = b"x" * 100


# --- machine and process accounting ---------------------------------------------------

def machine() -> dict[str, Any]:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_mb = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_mb = int(line.split()[1]) // 1024
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "mem_total_mb": mem_mb,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
    }


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process (all threads), or of this process if pid is None."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


@dataclass(slots=True)
class Pids:
    """The broker and gateway processes; check() fails fast if either has gone."""

    broker: int
    gateway: int
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def alive(self) -> bool:
        return all(process.poll() is None for process in self.processes.values())

    def check(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(f"the {name} (pid {process.pid}) exited with {process.returncode} "
                                   "during the run")


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (/proc/stat), whoever used them."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    # user nice system idle iowait irq softirq steal guest guest_nice; guest is in user
    return (sum(values[:8]) - values[3] - values[4]) / CLK_TCK


class CpuMeter:
    """CPU used over a phase by client/broker/gateway, and by everything else on the
    machine ("other": e.g. a test-suite someone runs meanwhile), as % of one core."""

    def __init__(self, pids: Pids) -> None:
        self.pids = pids
        self.start = time.perf_counter()
        self.before = self._sample()

    def _sample(self) -> dict[str, float]:
        return {"client": cpu_seconds(None), "broker": cpu_seconds(self.pids.broker),
                "gateway": cpu_seconds(self.pids.gateway), "machine": machine_busy_seconds()}

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self.start
        after = self._sample()
        used = {k: 100 * (after[k] - self.before[k]) / wall for k in after}
        # A direct path has no gateway (pid -1, nan): what is not nan is still subtracted, so "other" stays known.
        ours = [used[k] for k in ("client", "broker", "gateway") if not math.isnan(used[k])]
        used["other"] = max(0.0, used.pop("machine") - sum(ours))
        return {k: round(v, 1) for k, v in used.items()}


# --- the gateway process ---------------------------------------------------------------

def authorization_settings(mode: str, workdir: Path) -> dict[str, Any]:
    """Gateway keys for --authz, if this gateway has authorization at all.

    allow-all: the StandardAuthorizer runs its policy on every request, with an empty ACL
    file and allow.everyone.if.no.acl.found (as the test harness does); off: no authorizer,
    the bare relay.
    """
    from gateway.config import KNOWN_KEYS

    if "authorizer.class.name" not in KNOWN_KEYS:
        return {}
    if mode == "off":
        return {"authorizer.class.name": ""}
    # authorizer.class.name must be named: its default is empty (no authorization, as in Kafka).
    return {"authorizer.class.name": "StandardAuthorizer", "ksgate.acl.file": str(workdir / "acls.json"),
            "allow.everyone.if.no.acl.found": True}


def parse_settings(pairs: list[str]) -> dict[str, Any]:
    """--set KEY=VALUE pairs; values are read as YAML scalars (true, 10, text)."""
    settings: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {pair!r}: expected KEY=VALUE")
        settings[key.strip()] = yaml.safe_load(value) if value else ""
    return settings


def port_free(port: int) -> bool:
    if not 0 < port <= 65535:
        return False
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_base(offsets: list[int], attempts: int = 100) -> int:
    """A port p with p + offset free now for every offset.

    Worker i serves /metrics on base + i, and upstream node N is served on node.port.base +
    N - node.id.min: a free base alone does not make those free (Tansu's node id is 111, and
    clients' ephemeral ports land anywhere), and a node port the gateway cannot bind only
    shows in its log.
    """
    for _ in range(attempts):
        base = free_port()
        if all(port_free(base + offset) for offset in offsets if offset):
            return base
    raise RuntimeError(f"no free port p with p + {offsets} all free")


class ListeningProcess:
    """A child process serving on 127.0.0.1:``port``, its output in ``log_path``; ``start()`` writes its config,
    launches it and returns once it is ready (the port accepts). A context manager. Subclasses give ``name``,
    ``config_text()`` and ``command()``."""

    name = "process"
    cwd: Path | None = None
    poll_interval_s = 0.05

    def __init__(self, workdir: Path, config_name: str, log_name: str, startup_timeout_s: float) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.startup_timeout_s = startup_timeout_s
        self.config_path = workdir / config_name
        self.log_path = workdir / log_name
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def config_text(self) -> str:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> Self:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text())
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(self.command(), cwd=self.cwd, stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_ready(self) -> None:
        self._wait_until_listening()

    def _wait_until_listening(self) -> None:
        # No readiness signal other than the port accepting connections: poll, bounded.
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            self._check_still_starting()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(self.poll_interval_s)
        raise RuntimeError(f"{self.name} did not listen on {self.bootstrap} within {self.startup_timeout_s}s:\n"
                           + self.log_tail())

    def _check_still_starting(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode} during start-up:\n"
                               + self.log_tail())

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class GatewayProcess(ListeningProcess):
    """``ksgate run --config <tmp yaml>`` in front of upstream; a context manager.

    ``node_ids``, the upstream's broker ids, when known: node N is served on node.port.base +
    N - node.id.min, so the base is chosen with every one of those ports free, not only itself."""

    name = "ksgate"
    cwd = REPO

    def __init__(self, upstream: str, workdir: Path, extra: dict[str, Any] | None = None,
                 startup_timeout_s: float = 30.0, *, protocol: str = "PLAINTEXT",
                 node_ids: list[int] | None = None, tree: Path | None = None) -> None:
        super().__init__(workdir, "gateway.yaml", "gateway.log", startup_timeout_s)
        self.tree = tree  # a checkout whose ksgate the process imports (PYTHONPATH), not this one
        self.protocol = protocol  # of the one client listener; its TLS/SASL keys come in extra
        self.upstream = upstream
        self.extra = dict(extra or {})
        node_id_min = int(self.extra.get("node.id.min", 0))
        self.node_port_offsets = [node - node_id_min for node in node_ids or []]
        self.node_port_base = free_port_base(self.node_port_offsets)

    @property
    def settings(self) -> dict[str, Any]:
        return {
            "listeners": f"{self.protocol}://127.0.0.1:{self.port}",
            "upstream.bootstrap.servers": self.upstream,
            f"listener.name.{self.protocol.lower()}.node.port.base": self.node_port_base,
            "log.level": "WARNING",
            **self.extra,
        }

    def config_text(self) -> str:
        return str(yaml.safe_dump(self.settings))

    def command(self) -> list[str]:
        ksgate = Path(sys.executable).with_name("ksgate")
        if not ksgate.exists():  # not run from the venv: same thing via the module
            command = [sys.executable, "-m", "gateway", "run", "--config", str(self.config_path)]
        else:
            command = [str(ksgate), "run", "--config", str(self.config_path)]
        # env execs the command: the process is still the one whose pid the benches read
        return command if self.tree is None else ["env", f"PYTHONPATH={self.tree}", *command]


class SaslGatewayProcess(GatewayProcess):
    """The bench gateway with one SASL_PLAINTEXT listener instead of PLAINTEXT (fairness, login floods)."""

    def __init__(self, upstream: str, workdir: Path, extra: dict[str, Any] | None = None,
                 startup_timeout_s: float = 30.0) -> None:
        super().__init__(upstream, workdir, extra, startup_timeout_s, protocol="SASL_PLAINTEXT")


# --- the upstream broker -----------------------------------------------------------------

UPSTREAMS = ("tansu", "kafka")


@dataclass(slots=True)
class Upstream:
    """The broker under test and how each path reaches it (librdkafka settings)."""

    description: str
    process: subprocess.Popen[bytes]
    admin: dict[str, Any]  # set-up only (topics): a client that may do anything
    direct: dict[str, Any]
    gateway_upstream: str  # upstream.bootstrap.servers
    gateway_protocol: str  # the gateway's client listener
    gateway_extra: dict[str, Any]  # the gateway's keys for this upstream and security mode
    through: Callable[[str], dict[str, Any]]  # the gateway path, given the gateway's bootstrap


def plain_client(bootstrap: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap}


def only_node(client: dict[str, Any]) -> dict[str, Any]:
    """node.id.min/max = the single broker's node id, so its gateway port is the node port base itself, a port
    found free; otherwise it is base + id - node.id.min (Tansu's id is 111), which another socket may hold."""
    nodes = sorted(AdminClient(client).list_topics(timeout=20).brokers)
    return {"node.id.min": nodes[0], "node.id.max": nodes[0]} if len(nodes) == 1 else {}


@contextmanager
def upstream_broker(kind: str, security: str, workdir: Path) -> Iterator[Upstream]:
    """Tansu (in-memory, PLAINTEXT only) or Apache Kafka (bench/kafka_upstream.py), stopped at the end."""
    if kind == "tansu":
        broker = EmbeddedBroker(log_path=workdir / "tansu.log")
        with broker:
            yield Upstream("Tansu (in-memory)", broker.process, plain_client(broker.bootstrap),
                           plain_client(broker.bootstrap), broker.bootstrap, "PLAINTEXT",
                           only_node(plain_client(broker.bootstrap)), plain_client)
        return
    from bench.kafka_upstream import start_kafka

    kafka = start_kafka(workdir, security)
    try:
        extra = kafka.gateway_settings()
        upstream = extra.pop("upstream.bootstrap.servers")
        yield Upstream(f"Apache Kafka (KRaft, one node, {kafka.broker.lib.parent.name}), {security.upper()} "
                       "on both sides", kafka.broker.process, kafka.admin_settings, kafka.direct().librdkafka,
                       upstream, kafka.gateway_protocol, extra, lambda bootstrap: kafka.through(bootstrap).librdkafka)
    finally:
        kafka.broker.stop()


def shown_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Gateway keys for the report: no secrets, no temporary paths, not what every run sets."""
    hidden = ("listeners", "upstream.bootstrap.servers")
    return {k: v for k, v in settings.items()
            if k not in hidden and not k.endswith((".password", ".location", ".file", ".node.port.base"))}


# --- the measurements --------------------------------------------------------------------

@dataclass(slots=True)
class PathRun:
    """One measured pass over one path (direct or gateway)."""

    path: str
    repeat: int
    produce_s: float = 0.0
    produce_mb_s: float = 0.0
    produce_rec_s: float = 0.0
    fetch_s: float = 0.0
    fetch_mb_s: float = 0.0
    fetch_rec_s: float = 0.0
    fetch_first_batch_ms: float = 0.0
    latency_p50_ms: float = 0.0
    latency_p99_ms: float = 0.0
    latency_mean_ms: float = 0.0
    latency_max_ms: float = 0.0
    cpu_produce: dict[str, float] = field(default_factory=dict)
    cpu_fetch: dict[str, float] = field(default_factory=dict)
    cpu_latency: dict[str, float] = field(default_factory=dict)


def create_topic(admin: AdminClient, name: str, partitions: int) -> None:
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=20)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until the topic's leader is known
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {name} did not appear in metadata")


def delete_topic(admin: AdminClient, name: str) -> None:
    try:
        for future in admin.delete_topics([name], operation_timeout=10).values():
            future.result(timeout=20)
    except Exception as exc:  # best effort: memory is the only thing lost; keep measuring
        print(f"  (could not delete {name}: {exc})", file=sys.stderr)


def send_all(producer: Producer, topic: str, value: bytes, records: int,
             report: Callable[[KafkaError | None, object], None]) -> None:
    """Queue ``records`` copies of ``value``, waiting for room when librdkafka's queue is full."""
    produce = producer.produce
    for i in range(records):
        try:
            produce(topic, value=value, on_delivery=report)
        except BufferError:
            producer.poll(0.01)
            produce(topic, value=value, on_delivery=report)
        if i & 0x3FFF == 0:
            producer.poll(0)  # serve delivery reports now and then


def produce_throughput(client: Mapping[str, Any], topic: str, warm_topic: str, records: int, size: int,
                       pids: Pids) -> tuple[float, dict[str, float]]:
    producer = Producer({**client, **PRODUCER_SETTINGS})
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    try:
        pids.check()
        # Warm-up: metadata and the leader connection, on another topic of the same broker.
        producer.produce(warm_topic, value=b"warm-up", on_delivery=report)
        if producer.flush(30) != 0 or failures:
            raise RuntimeError(f"warm-up produce failed: {failures[:3]}")
        producer.list_topics(topic, timeout=10)
        value = os.urandom(size)
        meter = CpuMeter(pids)
        start = time.perf_counter()
        send_all(producer, topic, value, records, report)
        left = producer.flush(120)
        elapsed = time.perf_counter() - start
        cpu = meter.stop()
    finally:
        producer.purge()
        producer.close()
    if left or failures:
        raise RuntimeError(f"produce: {left} records undelivered, {len(failures)} failed: {failures[:3]}")
    return elapsed, cpu


def fetch_throughput(client: Mapping[str, Any], topic: str, warm_topic: str, partitions: int, records: int,
                     pids: Pids) -> tuple[float, float, int, dict[str, float]]:
    consumer = Consumer({**client, **CONSUMER_SETTINGS})
    try:
        # Warm-up: read the warm-up record so the leader connection is up.
        consumer.assign([TopicPartition(warm_topic, 0, 0)])
        deadline = time.monotonic() + 30
        while not any(m.error() is None for m in consumer.consume(1, 0.5)):
            if time.monotonic() > deadline:
                raise RuntimeError("fetch warm-up: no record")
        consumer.unassign()
        # Without this, librdkafka learns the new topic's leader only at its next periodic
        # metadata scan, ~0.5 s after assign(); that is client start-up, not throughput.
        consumer.list_topics(topic, timeout=10)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        nbytes = 0
        first_batch = 0.0
        consume = consumer.consume
        meter = CpuMeter(pids)
        start = time.perf_counter()
        deadline = time.monotonic() + 300
        while got < records:
            # consume(n, timeout) returns once it has n messages (or at the timeout), so never
            # ask for more than are left, or the last call would sit out its timeout.
            for msg in consume(min(10_000, records - got), 1.0):
                error = msg.error()
                if error is None:
                    got += 1
                    nbytes += len(msg.value() or b"")
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"fetch: {error}")
            if got and not first_batch:
                first_batch = time.perf_counter() - start
            if time.monotonic() > deadline:
                raise RuntimeError(f"fetch: only {got}/{records} records within 300 s")
            pids.check()
        elapsed = time.perf_counter() - start
        cpu = meter.stop()
    finally:
        consumer.close()
    return elapsed, first_batch, nbytes, cpu


def produce_latency(client: Mapping[str, Any], topic: str, samples: int, warmup: int,
                    pids: Pids) -> tuple[list[float], dict[str, float]]:
    producer = Producer({**client, **LATENCY_SETTINGS})
    errors: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    produce, flush, clock = producer.produce, producer.flush, time.perf_counter
    try:
        pids.check()
        for _ in range(warmup):
            produce(topic, value=LATENCY_RECORD, on_delivery=report)
            if flush(10) != 0 or errors:
                raise RuntimeError(f"latency warm-up: a record was not delivered: {errors[:1]}")
        times: list[float] = []
        meter = CpuMeter(pids)
        for _ in range(samples):
            t0 = clock()
            produce(topic, value=LATENCY_RECORD, on_delivery=report)
            if flush(10) != 0 or errors:
                raise RuntimeError(f"latency: a record was not delivered: {errors[:1]}")
            times.append((clock() - t0) * 1000)
        cpu = meter.stop()
    finally:
        producer.purge()
        producer.close()
    return times, cpu


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def run_path(path: str, client: Mapping[str, Any], admin: AdminClient, args: argparse.Namespace, repeat: int,
             pids: Pids, progress: Callable[[str], None]) -> PathRun:
    run = PathRun(path, repeat)
    tag = uuid.uuid4().hex[:8]
    topic, warm, lat = f"bench-{path}-{tag}", f"bench-warm-{path}-{tag}", f"bench-lat-{path}-{tag}"
    for name, partitions in ((topic, args.partitions), (warm, 1), (lat, 1)):
        create_topic(admin, name, partitions)
    try:
        total = args.records * args.size
        run.produce_s, run.cpu_produce = produce_throughput(client, topic, warm, args.records,
                                                            args.size, pids)
        run.produce_mb_s = total / MB / run.produce_s
        run.produce_rec_s = args.records / run.produce_s
        progress(f"produce {run.produce_mb_s:7.1f} MB/s")
        run.fetch_s, first, nbytes, run.cpu_fetch = fetch_throughput(client, topic, warm, args.partitions,
                                                                      args.records, pids)
        if nbytes != total:
            raise RuntimeError(f"fetch: read {nbytes} value bytes, expected {total}")
        run.fetch_first_batch_ms = first * 1000
        run.fetch_mb_s = total / MB / run.fetch_s
        run.fetch_rec_s = args.records / run.fetch_s
        progress(f"fetch {run.fetch_mb_s:7.1f} MB/s")
        times, run.cpu_latency = produce_latency(client, lat, args.latency_samples,
                                                 args.latency_warmup, pids)
        run.latency_p50_ms = percentile(times, 50)
        run.latency_p99_ms = percentile(times, 99)
        run.latency_mean_ms = statistics.fmean(times)
        run.latency_max_ms = max(times)
        progress(f"latency p50 {run.latency_p50_ms:.3f} ms p99 {run.latency_p99_ms:.3f} ms")
    finally:
        if pids.alive():
            for name in (topic, warm, lat):  # Tansu keeps everything in memory
                delete_topic(admin, name)
    return run


# --- py-spy of the gateway -------------------------------------------------------------

@contextmanager
def py_spy(pid: int, out: Path, rate: int, native: bool) -> Iterator[None]:
    """py-spy record of pid while the block runs, as collapsed stacks (out.txt).

    One sampler only (a second, for an svg, would double the perturbation); the collapsed
    file renders with speedscope or inferno-flamegraph.
    """
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    command = [exe, "record", "--pid", str(pid), "--rate", str(rate),
               "--format", "raw", "-o", str(out.with_suffix(".txt"))]
    # --native needs to stop the process for each sample; otherwise do not pause it.
    command.append("--native" if native else "--nonblocking")
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # let py-spy attach
    if proc.poll() is not None:
        raise RuntimeError(f"py-spy failed: {proc.communicate()[1].decode(errors='replace')[-500:]}")
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if proc.returncode not in (0, -signal.SIGINT):
            print(f"  py-spy exited with {proc.returncode}: {err.decode(errors='replace')[-500:]}",
                  file=sys.stderr)


def summarize_stacks(path: Path, top: int = 25) -> str:
    """Self and inclusive sample counts per function from py-spy's raw (collapsed) output."""
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        return f"(no profile: {exc})"
    for line in lines:
        stack, _, count_text = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f and not f.startswith("process ")
                  and not f.startswith("thread ")]
        total += count
        if frames:
            own[frames[-1]] += count
        for f in set(frames):
            incl[f] += count
    if not total:
        return "(no samples: the gateway was idle or py-spy could not attach)"
    out = [f"{total} samples (idle ones excluded unless --native); top functions by own time, "
           "then by inclusive time (% of samples)"]
    out += [f"  self {100 * n / total:5.1f}%  {f}" for f, n in own.most_common(top)]
    out.append("")
    out += [f"  incl {100 * n / total:5.1f}%  {f}" for f, n in incl.most_common(top)]
    return "\n".join(out)


def profile_gateway(client: Mapping[str, Any], gateway: GatewayProcess, admin: AdminClient,
                    args: argparse.Namespace, pids: Pids, out_dir: Path) -> dict[str, Any]:
    """One extra, unmeasured gateway pass with py-spy attached to the gateway process."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    topic, warm, lat = f"bench-prof-{tag}", f"bench-prof-warm-{tag}", f"bench-prof-lat-{tag}"
    create_topic(admin, topic, args.partitions)
    create_topic(admin, warm, 1)
    create_topic(admin, lat, 1)
    result: dict[str, Any] = {}
    try:
        with py_spy(gateway.pid, out_dir / "produce", args.profile_rate, args.profile_native):
            t, cpu = produce_throughput(client, topic, warm, args.records, args.size, pids)
        result["produce"] = {"mb_s": args.records * args.size / MB / t, "cpu": cpu,
                             "summary": summarize_stacks(out_dir / "produce.txt")}
        with py_spy(gateway.pid, out_dir / "fetch", args.profile_rate, args.profile_native):
            t, _, _, cpu = fetch_throughput(client, topic, warm, args.partitions, args.records,
                                            pids)
        result["fetch"] = {"mb_s": args.records * args.size / MB / t, "cpu": cpu,
                           "summary": summarize_stacks(out_dir / "fetch.txt")}
        with py_spy(gateway.pid, out_dir / "latency", args.profile_rate, args.profile_native):
            times, cpu = produce_latency(client, lat, args.latency_samples, args.latency_warmup,
                                         pids)
        result["latency"] = {"p50_ms": percentile(times, 50), "cpu": cpu,
                             "summary": summarize_stacks(out_dir / "latency.txt")}
    finally:
        if pids.alive():
            for name in (topic, warm, lat):
                delete_topic(admin, name)
    return result


# --- reporting ---------------------------------------------------------------------------

CPU_COLUMNS = ("client", "broker", "gateway", "other")
FIGURES = [  # (key, label, format)
    ("produce_mb_s", "produce MB/s", "{:.1f}"),
    ("produce_rec_s", "produce records/s", "{:,.0f}"),
    ("fetch_mb_s", "fetch MB/s", "{:.1f}"),
    ("fetch_rec_s", "fetch records/s", "{:,.0f}"),
    ("fetch_first_batch_ms", "fetch time to 1st batch ms", "{:.1f}"),
    ("latency_p50_ms", "produce latency p50 ms", "{:.3f}"),
    ("latency_p99_ms", "produce latency p99 ms", "{:.3f}"),
    ("latency_mean_ms", "produce latency mean ms", "{:.3f}"),
    ("latency_max_ms", "produce latency max ms", "{:.3f}"),
]


def disturbance(run: PathRun) -> float:
    """The most CPU (% of a core) other processes used during any measured phase of run."""
    return max(cpu.get("other", 0.0) for cpu in (run.cpu_produce, run.cpu_fetch, run.cpu_latency))


def medians(runs: list[PathRun], path: str) -> dict[str, Any]:
    mine = [r for r in runs if r.path == path]
    result: dict[str, Any] = {key: statistics.median(getattr(r, key) for r in mine) for key, _, _ in FIGURES}
    for phase in ("cpu_produce", "cpu_fetch", "cpu_latency"):
        result[phase] = {who: statistics.median(getattr(r, phase)[who] for r in mine)
                         for who in CPU_COLUMNS}
    return result


def comparison(direct: dict[str, Any], gateway: dict[str, Any]) -> dict[str, float]:
    return {
        "produce_throughput_ratio": gateway["produce_mb_s"] / direct["produce_mb_s"],
        "fetch_throughput_ratio": gateway["fetch_mb_s"] / direct["fetch_mb_s"],
        "added_latency_p50_ms": gateway["latency_p50_ms"] - direct["latency_p50_ms"],
        "added_latency_p99_ms": gateway["latency_p99_ms"] - direct["latency_p99_ms"],
        "added_latency_mean_ms": gateway["latency_mean_ms"] - direct["latency_mean_ms"],
    }


def table(report: dict[str, Any]) -> str:
    m, cfg = report["machine"], report["config"]
    d, g, c = report["median"]["direct"], report["median"]["gateway"], report["comparison"]
    runs = [PathRun(**r) for r in report["runs"]]
    lines = [
        f"machine: {m['nproc']} CPUs, {m['cpu_model']}, {m['mem_total_mb']} MB RAM, Linux {m['kernel']}",
        f"         Python {m['python']}, confluent-kafka {m['confluent_kafka']}, "
        f"librdkafka {m['librdkafka']}",
        f"workload: {cfg['records']:,} records x {cfg['size']} B into a fresh topic with "
        f"{cfg['partitions']} partition(s); acks={PRODUCER_SETTINGS['acks']}, "
        f"linger.ms={PRODUCER_SETTINGS['linger.ms']}, batch.size={PRODUCER_SETTINGS['batch.size']}, "
        f"no compression",
        f"          latency: {cfg['latency_samples']} x {len(LATENCY_RECORD)} B single produce+flush, "
        f"acks=all, linger.ms=0, after {cfg['latency_warmup']} warm-up",
        f"          median of {cfg['repeat']} alternating direct/gateway repeats; broker: {cfg['upstream']}; "
        "gateway: separate process",
        f"gateway: {cfg['gateway_listener']} listener; config (besides listener/upstream/node ports, files, "
        "secrets): " + ", ".join(f"{k}={v}" for k, v in cfg["gateway"].items()),
        "",
        f"{'figure':<30}{'direct':>14}{'gateway':>14}{'gw/direct':>12}   per-repeat gateway/direct",
        "-" * 100,
    ]
    for key, label, fmt in FIGURES:
        ratio = g[key] / d[key] if d[key] else float("nan")
        per = " ".join(
            f"{fmt.format(getattr(gr, key))}/{fmt.format(getattr(dr, key))}"
            for gr, dr in zip([r for r in runs if r.path == "gateway"],
                              [r for r in runs if r.path == "direct"], strict=True))
        lines.append(f"{label:<30}{fmt.format(d[key]):>14}{fmt.format(g[key]):>14}{ratio:>11.2f}x   {per}")
    lines.append(f"{'other processes, max % core':<30}{'':>14}{'':>14}{'':>12}   " + " ".join(
        f"{disturbance(gr):.0f}/{disturbance(dr):.0f}"
        for gr, dr in zip([r for r in runs if r.path == "gateway"],
                          [r for r in runs if r.path == "direct"], strict=True)))
    lines += [
        "-" * 100,
        f"produce throughput gateway/direct: {c['produce_throughput_ratio']:.2f}",
        f"fetch throughput   gateway/direct: {c['fetch_throughput_ratio']:.2f}",
        f"added latency p99: {c['added_latency_p99_ms']:+.3f} ms   "
        f"(p50 {c['added_latency_p50_ms']:+.3f} ms, mean {c['added_latency_mean_ms']:+.3f} ms)",
        "",
        f"CPU during each phase, % of one core ({m['nproc']} cores = {100 * (m['nproc'] or 1)}%), median; "
        "client = this process",
        "incl. librdkafka threads; other = the rest of the machine (anything else running meanwhile):",
        f"{'phase':<12}{'path':<10}" + "".join(f"{c:>9}" for c in CPU_COLUMNS),
    ]
    for phase in ("cpu_produce", "cpu_fetch", "cpu_latency"):
        for path, med in (("direct", d), ("gateway", g)):
            cpu = med[phase]
            lines.append(f"{phase[4:]:<12}{path:<10}" + "".join(f"{cpu[c]:>9.0f}" for c in CPU_COLUMNS))
    rss = report["rss_mb"]
    lines.append(f"RSS MB at start/end: broker {rss['start']['broker']:.0f}/{rss['end']['broker']:.0f}, "
                 f"gateway {rss['start']['gateway']:.0f}/{rss['end']['gateway']:.0f}")
    other = max(disturbance(r) for r in runs)
    if report["discarded_runs"]:
        lines.append(f"{len(report['discarded_runs']) // 2} direct/gateway pair(s) discarded and re-run because "
                     f"other processes used > {cfg['max_other']:g}% of a core meanwhile")
    if other > cfg["max_other"]:
        lines.append(f"WARNING: other processes used up to {other:.0f}% of a core during kept runs; the "
                     "figures are disturbed by them, rerun on a quiet machine")
    lines.append(f"load average before/after: {report['loadavg']['before']} / {report['loadavg']['after']}")
    lines.append(f"total wall time: {report['wall_s']:.0f} s")
    prof = report.get("profile")
    if prof:
        lines += ["", f"py-spy profile of the gateway (extra unmeasured pass, files in {prof['dir']}):"]
        for phase in ("produce", "fetch", "latency"):
            if phase in prof:
                p = prof[phase]
                figure = f"p50 {p['p50_ms']:.3f} ms" if phase == "latency" else f"{p['mb_s']:.1f} MB/s"
                lines += ["", f"[{phase}] {figure} under py-spy, CPU % of a core {p['cpu']}", p["summary"]]
    return "\n".join(lines)


# --- main --------------------------------------------------------------------------------

def require_at_least_one(parser: argparse.ArgumentParser, args: argparse.Namespace, *names: str) -> None:
    """Refuse (as argparse does) any of these counts below 1: the benches' shared argument check."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per throughput run")
    parser.add_argument("--size", type=int, default=1024, help="record value size in bytes")
    parser.add_argument("--repeat", type=int, default=3, help="alternating direct/gateway repeats")
    parser.add_argument("--partitions", type=int, default=1, help="partitions of the throughput topic")
    parser.add_argument("--latency-samples", type=int, default=2000)
    parser.add_argument("--latency-warmup", type=int, default=200)
    parser.add_argument("--max-other", type=float, default=25.0, metavar="PCT",
                        help="a direct/gateway pair during which other processes used more than PCT%% of "
                             "a core is discarded and run again (see --retries)")
    parser.add_argument("--retries", type=int, default=4,
                        help="how many disturbed pairs may be re-run in all (0: keep everything)")
    parser.add_argument("--upstream", choices=UPSTREAMS, default="tansu",
                        help="the broker: tansu (embedded, in-memory; default) or kafka (Apache Kafka, "
                             "a JVM; jars from scripts/kafka/fetch.sh)")
    parser.add_argument("--security", choices=("plaintext", "sasl_ssl"), default="plaintext",
                        help="both paths' security (sasl_ssl needs --upstream kafka): the client to Kafka or "
                             "to ksgate, and ksgate to Kafka; sasl_ssl = SCRAM-SHA-512 as the bench user with "
                             "ACLs on both sides (bench/kafka_upstream.py)")
    parser.add_argument("--authz", choices=("off", "allow-all"), default=None,
                        help="gateway authorization with --security plaintext: off = authorizer.class.name "
                             "empty, the bare relay (default); allow-all = StandardAuthorizer checks every "
                             "request against an empty ACL file with allow.everyone.if.no.acl.found, as the "
                             "tests run it.  sasl_ssl always authorizes, with the bench user's ACLs")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra gateway configuration key (repeatable), e.g. --set queued.max.requests=1000")
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON object")
    parser.add_argument("--profile", metavar="DIR", type=Path, default=None,
                        help="after measuring, run py-spy on the gateway during one extra produce, fetch "
                             "and latency pass; writes DIR/{produce,fetch,latency}.txt (collapsed stacks)")
    parser.add_argument("--profile-rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--profile-native", action="store_true",
                        help="py-spy --native: include C frames (uvloop, syscalls); pauses the "
                             "gateway at each sample")
    args = parser.parse_args(argv)
    if args.security == "sasl_ssl" and args.upstream != "kafka":
        parser.error("--security sasl_ssl needs --upstream kafka")
    if args.security == "sasl_ssl" and args.authz is not None:
        parser.error("--authz is for --security plaintext; sasl_ssl authorizes with the bench user's ACLs")
    if args.retries < 0:
        parser.error("--retries must not be negative")
    require_at_least_one(parser, args, "records", "size", "repeat", "partitions", "latency_samples")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the finally blocks stop the broker and the gateway.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.perf_counter()
    load_before = loadavg()
    info = machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; Python {info['python']}; "
          f"librdkafka {info['librdkafka']}", file=sys.stderr)
    runs: list[PathRun] = []
    discarded: list[PathRun] = []
    profile: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory(prefix="ksgate-bench-") as tmp:
        workdir = Path(tmp)
        with upstream_broker(args.upstream, args.security, workdir) as broker:
            authz = authorization_settings(args.authz or "off", workdir) if args.security == "plaintext" else {}
            extra = {**authz, **broker.gateway_extra, **parse_settings(args.set)}
            with GatewayProcess(broker.gateway_upstream, workdir, extra, 90.0 if args.upstream == "kafka" else 30.0,
                                protocol=broker.gateway_protocol) as gateway:
                assert gateway.process is not None
                gateway_settings = shown_settings(gateway.settings)
                pids = Pids(broker=broker.process.pid, gateway=gateway.pid,
                            processes={"broker": broker.process, "gateway": gateway.process})
                print(f"broker {broker.direct['bootstrap.servers']} (pid {pids.broker}), gateway "
                      f"{gateway.bootstrap} (pid {pids.gateway})", file=sys.stderr)
                admin = AdminClient(broker.admin)
                paths = {"direct": broker.direct, "gateway": broker.through(gateway.bootstrap)}
                try:
                    # Readiness of the whole path: metadata through the gateway.
                    AdminClient(paths["gateway"]).list_topics(timeout=20)
                    if args.upstream == "kafka":  # a JVM: JIT-compile the broker's paths before measuring
                        run_path("direct", paths["direct"], admin, args, -1, pids,
                                 lambda text: print(f"  [warm-up, not measured] direct   {text}", file=sys.stderr))
                    rss_start = {"broker": rss_mb(pids.broker), "gateway": rss_mb(pids.gateway)}
                    retries = args.retries
                    rep = 0
                    while rep < args.repeat:
                        order = ["direct", "gateway"] if rep % 2 == 0 else ["gateway", "direct"]
                        pair = []
                        for path in order:
                            def progress(text: str, rep: int = rep, path: str = path) -> None:
                                print(f"  [{rep + 1}/{args.repeat}] {path:<8} {text}", file=sys.stderr)
                            pair.append(run_path(path, paths[path], admin, args, rep, pids, progress))
                        other = max(disturbance(r) for r in pair)
                        if other > args.max_other and retries > 0:
                            retries -= 1
                            discarded.extend(pair)
                            print(f"  [{rep + 1}/{args.repeat}] discarded: other processes used {other:.0f}% "
                                  f"of a core (> --max-other {args.max_other:g}); again "
                                  f"({retries} retries left)", file=sys.stderr)
                            continue
                        runs.extend(pair)
                        rep += 1
                    if args.profile is not None:
                        print("  profiling the gateway with py-spy …", file=sys.stderr)
                        profile = profile_gateway(paths["gateway"], gateway, admin, args, pids, args.profile)
                        profile["dir"] = str(args.profile)
                except BaseException:
                    print("gateway log tail:\n" + gateway.log_tail(), file=sys.stderr)
                    for name, process in pids.processes.items():
                        if process.poll() is not None:
                            print(f"the {name} (pid {process.pid}) exited with {process.returncode} during "
                                  "the run", file=sys.stderr)
                    raise
                finally:
                    del admin  # its broker threads would log the broker going away
                rss_end = {"broker": rss_mb(pids.broker), "gateway": rss_mb(pids.gateway)}
                if gateway.process is not None and gateway.process.poll() is not None:
                    raise RuntimeError(f"the gateway died during the run:\n{gateway.log_tail()}")
    direct, through = medians(runs, "direct"), medians(runs, "gateway")
    report: dict[str, Any] = {
        "machine": info,
        "config": {"records": args.records, "size": args.size, "repeat": args.repeat,
                   "partitions": args.partitions, "latency_samples": args.latency_samples,
                   "latency_warmup": args.latency_warmup, "max_other": args.max_other,
                   "retries": args.retries, "upstream": broker.description,
                   "gateway_listener": gateway.protocol, "gateway": gateway_settings, "producer": PRODUCER_SETTINGS,
                   "consumer": CONSUMER_SETTINGS, "latency_producer": LATENCY_SETTINGS,
                   "mb": "10^6 bytes of record values"},
        "median": {"direct": direct, "gateway": through},
        "comparison": comparison(direct, through),
        "runs": [asdict(r) for r in runs],
        "discarded_runs": [asdict(r) for r in discarded],
        "rss_mb": {"start": rss_start, "end": rss_end},
        "loadavg": {"before": load_before, "after": loadavg()},
        "wall_s": time.perf_counter() - began,
    }
    if profile is not None:
        report["profile"] = profile
    print(table(report))
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
