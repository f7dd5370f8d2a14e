"""Produce and fetch throughput through ``ksgate run --workers 2`` vs ``--workers 1`` (and direct).

A benchmark, not a test.  It starts an embedded Tansu broker and, for each measured run, a
fresh gateway process tree (``ksgate run --config … --workers N``).  ``--workers N`` forks N
processes that share the listening ports with SO_REUSEPORT, and the kernel hands each new
*connection* to one of them, so one client cannot spread load over workers: the benchmark
runs C client **processes** at once (multiprocessing, each with its own librdkafka client,
so its own connections), each producing R records to its own topic and then reading them
back.  Each client has its own single-partition topic rather than one partition of a shared
topic so that nothing couples the clients except the path under test (no shared topic
metadata or per-topic state in the broker), and each client's stream matches the
single-partition workload of bench/throughput.py.

Every phase starts for all clients at once (a multiprocessing.Barrier, after each client has
connected and warmed up) and aggregate MB/s = all clients' record bytes / (last client's end
- first client's start).  CPU of the gateway process tree (supervisor + workers), the broker,
the clients and everything else on the machine is sampled from /proc for each phase, and
each worker's /metrics endpoint (``ksgate.metrics.listener`` base port + worker index) shows
how many requests and connections each worker served.

    .venv/bin/python bench/workers.py [--clients 4] [--records 50000] [--size 1024] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.queues import SimpleQueue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from threading import BrokenBarrierError
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.throughput import (  # noqa: E402
    CLK_TCK,
    CONSUMER_SETTINGS,
    MB,
    PRODUCER_SETTINGS,
    GatewayProcess,
    authorization_settings,
    cpu_seconds,
    create_topic,
    delete_topic,
    free_port_base,
    loadavg,
    machine,
    machine_busy_seconds,
    parse_settings,
    require_at_least_one,
    send_all,
)
from gateway.commands.embedded_broker import EmbeddedBroker, EmbeddedBrokerError  # noqa: E402

CONFIGS = ("direct", "workers=1", "workers=2")
CPU_GROUPS = ("gateway", "broker", "clients", "other", "total")


def monotonic() -> float:
    """CLOCK_MONOTONIC is system-wide on Linux, so client processes' timestamps compare."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


# --- the client processes ------------------------------------------------------------------

@dataclass(slots=True, frozen=True)
class ClientSpec:
    index: int
    bootstrap: str
    topic: str
    warm_topic: str
    records: int
    size: int
    timeout_s: float


@dataclass(slots=True, frozen=True)
class ClientResult:
    index: int
    produce_start: float
    produce_end: float
    fetch_start: float
    fetch_end: float
    fetched_bytes: int


@dataclass(slots=True, frozen=True)
class ClientFailure:
    index: int
    error: str


# The parent and every client meet at these points, in this order (one reusable barrier):
# 1 all producers warmed up → produce starts   2 all produced → parent samples
# 3 parent done → producers close, consumers warm up   4 all consumers ready → fetch starts
# 5 all fetched → parent samples   6 parent done → consumers close
# A client sends its result between 5 and 6, so the parent has every result once past 6.
# The queue is a SimpleQueue: its put() has written the bytes when it returns (Queue's
# feeder thread could lose them if librdkafka aborts the process while closing).
SYNC_POINTS = 6


def client_main(spec: ClientSpec, barrier: Barrier, results: SimpleQueue[ClientResult | ClientFailure]) -> None:
    """One client process: produce its records, then fetch them back, in step with the others."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the clients (Ctrl-C reaches all)
    try:
        run_client(spec, barrier, results)
    except BrokenBarrierError:  # another client or the parent gave up: it reports why
        pass
    except Exception as exc:  # reported to the parent, which prints it and stops the run
        results.put(ClientFailure(spec.index, f"{type(exc).__name__}: {exc}"))
        barrier.abort()


def run_client(spec: ClientSpec, barrier: Barrier, results: SimpleQueue[ClientResult | ClientFailure]) -> None:
    def sync() -> None:
        barrier.wait(spec.timeout_s)

    producer = Producer({"bootstrap.servers": spec.bootstrap, **PRODUCER_SETTINGS})
    try:
        warm_up_producer(producer, spec)
        sync()  # 1
        produce_start = monotonic()
        produce_records(producer, spec)
        produce_end = monotonic()
        sync()  # 2
        sync()  # 3
    finally:
        producer.purge()
        producer.close()
    consumer = Consumer({"bootstrap.servers": spec.bootstrap, **CONSUMER_SETTINGS})
    try:
        warm_up_consumer(consumer, spec)
        sync()  # 4
        fetch_start = monotonic()
        fetched = fetch_records(consumer, spec)
        fetch_end = monotonic()
        sync()  # 5
        results.put(ClientResult(spec.index, produce_start, produce_end, fetch_start, fetch_end, fetched))
        sync()  # 6
    finally:
        consumer.close()


def warm_up_producer(producer: Producer, spec: ClientSpec) -> None:
    # Metadata and the leader connection are set up before the clock starts, as in throughput.py.
    failures: list[KafkaError] = []
    producer.produce(spec.warm_topic, value=b"warm-up",
                     on_delivery=lambda err, _msg: failures.append(err) if err is not None else None)
    if producer.flush(spec.timeout_s) != 0 or failures:
        raise RuntimeError(f"client {spec.index}: warm-up produce failed: {failures[:1]}")
    producer.list_topics(spec.topic, timeout=10)


def produce_records(producer: Producer, spec: ClientSpec) -> None:
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    value = os.urandom(spec.size)
    send_all(producer, spec.topic, value, spec.records, report)
    left = producer.flush(spec.timeout_s)
    if left or failures:
        raise RuntimeError(f"client {spec.index}: {left} records undelivered, {len(failures)} failed: "
                           f"{failures[:3]}")


def warm_up_consumer(consumer: Consumer, spec: ClientSpec) -> None:
    consumer.assign([TopicPartition(spec.warm_topic, 0, 0)])
    deadline = time.monotonic() + spec.timeout_s
    while not any(m.error() is None for m in consumer.consume(1, 0.5)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"client {spec.index}: fetch warm-up got no record")
    consumer.unassign()
    # Otherwise librdkafka learns the topic's leader only at its next metadata scan (~0.5 s).
    consumer.list_topics(spec.topic, timeout=10)
    consumer.assign([TopicPartition(spec.topic, 0, 0)])


def fetch_records(consumer: Consumer, spec: ClientSpec) -> int:
    got = nbytes = 0
    deadline = time.monotonic() + spec.timeout_s
    while got < spec.records:
        # Never ask for more than are left, or the last call sits out its timeout.
        for msg in consumer.consume(min(10_000, spec.records - got), 1.0):
            error = msg.error()
            if error is None:
                got += 1
                nbytes += len(msg.value() or b"")
            elif error.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(f"client {spec.index}: fetch: {error}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"client {spec.index}: only {got}/{spec.records} records within {spec.timeout_s} s")
    return nbytes


# --- the gateway process tree and its workers -----------------------------------------------

def children(pid: int) -> list[int]:
    """Direct children of pid: /proc/<pid>/task/*/children, else a scan of /proc/*/stat."""
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(c) for c in (task / "children").read_text().split()]
        return sorted(found)
    except OSError:  # kernel without CONFIG_PROC_CHILDREN, or pid gone
        pass
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return sorted(found)


def listening_sockets(port: int) -> int:
    """How many sockets listen on port (/proc/net/tcp*): one per worker once all have bound it."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state = fields[1], fields[3]
            count += state == "0A" and int(local.rsplit(":", 1)[1], 16) == port  # 0A: LISTEN
    return count


@dataclass(slots=True, frozen=True)
class WorkerCounters:
    """One worker's counters from its /metrics."""

    connections_open: int
    connections_total: int
    produce_requests: int
    fetch_requests: int


_SAMPLE = re.compile(r'^(?P<name>\w+)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def parse_counters(exposition: str) -> WorkerCounters:
    values = {"open": 0.0, "total": 0.0, "Produce": 0.0, "Fetch": 0.0}
    for line in exposition.splitlines():
        match = _SAMPLE.match(line)
        if match is None:  # comments, blank lines
            continue
        name, labels = match["name"], dict(_LABEL.findall(match["labels"] or ""))
        if name == "ksgate_connections":
            values["open"] += float(match["value"])
        elif name == "ksgate_connections_total":
            values["total"] += float(match["value"])
        elif name == "ksgate_relayed_requests_total" and labels.get("api") in ("Produce", "Fetch"):
            values[labels["api"]] += float(match["value"])
    return WorkerCounters(int(values["open"]), int(values["total"]), int(values["Produce"]), int(values["Fetch"]))


class WorkersGateway(GatewayProcess):
    """``ksgate run --config … --workers N`` with each worker's /metrics on metrics_base + i."""

    def __init__(self, upstream: str, workdir: Path, workers: int, node_ids: list[int],
                 extra: dict[str, Any], startup_timeout_s: float = 60.0) -> None:
        self.workers = workers
        self.metrics_base = free_port_base(list(range(workers)))
        # 60 s, not 30: on a 2-core machine someone else is loading, start-up can be slow.
        super().__init__(upstream, workdir, {**extra, "ksgate.metrics.listener": f"127.0.0.1:{self.metrics_base}"},
                         startup_timeout_s, node_ids=node_ids)
        self.tree: list[int] = []  # supervisor first, then workers; fixed once started

    @property
    def ports(self) -> list[int]:
        """Every client-facing port: bootstrap and one per upstream node."""
        return [self.port, *(self.node_port_base + offset for offset in self.node_port_offsets)]

    def command(self) -> list[str]:
        return [*super().command(), "--workers", str(self.workers)]

    def _wait_until_ready(self) -> None:
        self._wait_until_listening()
        self._wait_until_workers_ready()

    def worker_pids(self) -> list[int]:
        """The processes that serve connections: the forked workers, or the only process."""
        return self.tree[1:] if self.workers > 1 else self.tree[:1]

    def _wait_until_workers_ready(self) -> None:
        # The bootstrap port answers once *one* worker listens: wait for every worker's /readyz
        # and for every worker's socket on the bootstrap and node ports.
        deadline = time.monotonic() + self.startup_timeout_s
        pending = set(range(self.workers))
        short: dict[int, int] = {}
        while time.monotonic() < deadline:
            self._check_still_starting()
            pending = {i for i in pending if not self._ready(i)}
            short = {port: n for port in self.ports if (n := listening_sockets(port)) != self.workers}
            if not pending and not short:
                break
            time.sleep(0.05)
        kids = children(self.pid) if self.workers > 1 else []
        if pending or short or len(kids) != (self.workers if self.workers > 1 else 0):
            raise RuntimeError(f"ksgate --workers {self.workers} not ready after {self.startup_timeout_s}s: "
                               f"workers not ready {sorted(pending)}, listening sockets per port {short} "
                               f"(want {self.workers}), {len(kids)} worker processes:\n" + self.log_tail())
        self.tree = [self.pid, *kids]

    def _ready(self, worker: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_base + worker}/readyz", timeout=2):
                return True  # urlopen raises for the 503 of "starting"
        except (OSError, urllib.error.URLError):
            return False

    def counters(self) -> list[WorkerCounters]:
        """Each worker's counters, by worker index."""
        result = []
        for worker in range(self.workers):
            url = f"http://127.0.0.1:{self.metrics_base + worker}/metrics"
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    result.append(parse_counters(response.read().decode()))
            except (OSError, urllib.error.URLError) as exc:
                raise RuntimeError(f"cannot scrape worker {worker}'s metrics at {url}: {exc}") from None
        return result

    def check_tree(self) -> None:
        """Fail if a worker died or was restarted: its CPU and counters would be lost."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"the gateway exited with {self.process.returncode}:\n" + self.log_tail())
        if self.workers > 1 and children(self.pid) != self.tree[1:]:
            raise RuntimeError(f"gateway workers changed from {self.tree[1:]} to {children(self.pid)} "
                               "(a worker died and was restarted):\n" + self.log_tail())

    def stop(self) -> None:
        super().stop()
        # If the supervisor had to be killed, its workers stop by themselves within ~1 s
        # (they watch their parent); make sure, so no worker keeps the ports.
        for pid in self.tree[1:]:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


# --- CPU per phase --------------------------------------------------------------------------

@dataclass(slots=True)
class PhaseCpu:
    """% of one core used during a phase, by group and by gateway worker process."""

    groups: dict[str, float]
    per_worker: list[float]


class PhaseMeter:
    def __init__(self, groups: dict[str, list[int]], workers: list[int]) -> None:
        self.groups = groups  # "clients" excludes this (the driving) process, added separately
        self.workers = workers
        self.start = time.perf_counter()
        self.before = self._sample()

    def _pids(self) -> list[int]:
        return sorted({pid for pids in self.groups.values() for pid in pids} | set(self.workers))

    def _sample(self) -> tuple[dict[int, float], float, float]:
        return ({pid: cpu_seconds(pid) for pid in self._pids()}, cpu_seconds(None), machine_busy_seconds())

    def stop(self) -> PhaseCpu:
        wall = time.perf_counter() - self.start
        (after, own_after, busy_after), (before, own_before, busy_before) = self._sample(), self.before

        def pct(seconds: float) -> float:
            return round(100 * seconds / wall, 1)

        used = {pid: after[pid] - before[pid] for pid in after}
        groups = {name: pct(sum(used[pid] for pid in pids)) for name, pids in self.groups.items()}
        groups["clients"] = round(groups.get("clients", 0.0) + pct(own_after - own_before), 1)
        total = pct(busy_after - busy_before)
        groups["other"] = round(max(0.0, total - sum(groups.values())), 1)
        groups["total"] = total
        for name in CPU_GROUPS:
            groups.setdefault(name, 0.0)
        return PhaseCpu(groups, [pct(used[pid]) for pid in self.workers])


# --- one measured run of one configuration --------------------------------------------------

@dataclass(slots=True)
class Phase:
    mb_s: float = 0.0
    seconds: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    worker_cpu: list[float] = field(default_factory=list)  # by worker process
    worker_requests: list[int] = field(default_factory=list)  # relayed Produce/Fetch, by worker index
    worker_connections: list[int] = field(default_factory=list)  # open at the phase's end, by worker index
    worker_new_connections: list[int] = field(default_factory=list)  # accepted since the previous sample

    def workers_serving(self) -> int:
        return sum(1 for n in self.worker_requests if n > 0)


@dataclass(slots=True)
class ConfigRun:
    config: str
    repeat: int
    produce: Phase = field(default_factory=Phase)
    fetch: Phase = field(default_factory=Phase)

    def disturbance(self) -> float:
        return max(self.produce.cpu.get("other", 0.0), self.fetch.cpu.get("other", 0.0))


@contextmanager
def client_processes(specs: list[ClientSpec], barrier: Barrier,
                     results: SimpleQueue[ClientResult | ClientFailure]) -> Iterator[list[BaseProcess]]:
    """Started client processes; on the way out (also on error) any still running is stopped."""
    ctx = multiprocessing.get_context("spawn")  # no fork: this process runs librdkafka threads
    processes: list[BaseProcess] = [
        ctx.Process(target=client_main, args=(spec, barrier, results), name=f"bench-client-{spec.index}")
        for spec in specs]
    try:
        for process in processes:
            process.start()
        yield processes
    finally:
        barrier.abort()  # unblocks any client still waiting
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()


def client_failures(results: SimpleQueue[ClientResult | ClientFailure]) -> list[str]:
    """The reasons failed clients sent (each sends its reason just before breaking the barrier)."""
    failures: list[str] = []
    deadline = time.monotonic() + 2  # others may still be failing: wait a little for them
    while time.monotonic() < deadline:
        if results.empty():
            if failures:
                break
            time.sleep(0.1)
            continue
        item = results.get()
        if isinstance(item, ClientFailure):
            failures.append(f"client {item.index}: {item.error}")
    return failures


class Run:
    """Drives one configuration run from the parent: the barrier, the samples, the results."""

    def __init__(self, config: str, repeat: int, bootstrap: str, gateway: WorkersGateway | None,
                 broker: subprocess.Popen[bytes], args: argparse.Namespace) -> None:
        self.result = ConfigRun(config, repeat)
        self.bootstrap = bootstrap
        self.gateway = gateway
        self.broker = broker
        self.args = args
        ctx = multiprocessing.get_context("spawn")
        self.barrier = ctx.Barrier(args.clients + 1)
        self.results: SimpleQueue[ClientResult | ClientFailure] = ctx.SimpleQueue()
        self.counters = gateway.counters() if gateway is not None else []
        self.died: str | None = None  # set by the watchdog
        self.done = threading.Event()

    def watchdog(self) -> None:
        """Break the barrier at once if the broker or the gateway dies, rather than at --timeout."""
        while not self.done.wait(0.5):
            try:
                if self.broker.poll() is not None:
                    raise RuntimeError(f"the broker exited with {self.broker.returncode}")
                if self.gateway is not None:
                    self.gateway.check_tree()
            except RuntimeError as exc:
                self.died = str(exc)
                self.barrier.abort()
                return

    def sync(self, point: int) -> None:
        try:
            self.barrier.wait(self.args.timeout)
        except BrokenBarrierError:
            failures = client_failures(self.results)
            if self.died is not None:  # its message has the gateway's log tail where it applies
                raise RuntimeError(f"{self.result.config}: {self.died}") from None
            problems = failures or [f"clients did not all reach sync point {point}/{SYNC_POINTS} within "
                                    f"{self.args.timeout:g} s"]
            if self.gateway is not None:
                problems.append("gateway log tail:\n" + self.gateway.log_tail())
            raise RuntimeError(f"{self.result.config}: " + "\n".join(problems)) from None

    def meter(self, clients: list[BaseProcess]) -> PhaseMeter:
        groups = {"clients": [p.pid for p in clients if p.pid is not None], "broker": [self.broker.pid]}
        if self.gateway is None:
            return PhaseMeter(groups, [])
        return PhaseMeter({**groups, "gateway": self.gateway.tree}, self.gateway.worker_pids())

    def close_phase(self, phase: Phase, meter: PhaseMeter) -> None:
        cpu = meter.stop()
        phase.cpu, phase.worker_cpu = cpu.groups, cpu.per_worker
        if self.gateway is None:
            return
        self.gateway.check_tree()
        now = self.gateway.counters()
        pairs = list(zip(now, self.counters, strict=True))
        if phase is self.result.produce:
            phase.worker_requests = [n.produce_requests - b.produce_requests for n, b in pairs]
        else:
            phase.worker_requests = [n.fetch_requests - b.fetch_requests for n, b in pairs]
        phase.worker_connections = [n.connections_open for n, _ in pairs]
        phase.worker_new_connections = [n.connections_total - b.connections_total for n, b in pairs]
        self.counters = now

    def measure(self, specs: list[ClientSpec]) -> ConfigRun:
        watchdog = threading.Thread(target=self.watchdog, name="bench-watchdog", daemon=True)
        watchdog.start()
        try:
            self._measure(specs)
        finally:
            self.done.set()
            watchdog.join(timeout=5)
        return self.result

    def _measure(self, specs: list[ClientSpec]) -> None:
        with client_processes(specs, self.barrier, self.results) as clients:
            self.sync(1)
            meter = self.meter(clients)
            self.sync(2)
            self.close_phase(self.result.produce, meter)
            self.sync(3)
            self.sync(4)
            meter = self.meter(clients)
            self.sync(5)
            self.close_phase(self.result.fetch, meter)
            self.sync(6)
            outcomes = [self.results.get() for _ in specs]  # all sent before 6: no wait
        for process in clients:  # closing happens after the measurement; a crash there is noted only
            if process.exitcode:
                print(f"  note: {process.name} exited with {process.exitcode} after its measurement "
                      "(while closing its consumer)", file=sys.stderr)
        self.aggregate(outcomes)

    def aggregate(self, outcomes: list[ClientResult | ClientFailure]) -> None:
        failures = [o for o in outcomes if isinstance(o, ClientFailure)]
        done = [o for o in outcomes if isinstance(o, ClientResult)]
        if failures:
            raise RuntimeError("; ".join(f"client {f.index}: {f.error}" for f in failures))
        expected = self.args.records * self.args.size
        short = [r.index for r in done if r.fetched_bytes != expected]
        if short:
            raise RuntimeError(f"clients {short} read back the wrong number of bytes")
        total = expected * len(done)
        for phase, start, end in (
                (self.result.produce, min(r.produce_start for r in done), max(r.produce_end for r in done)),
                (self.result.fetch, min(r.fetch_start for r in done), max(r.fetch_end for r in done))):
            phase.seconds = end - start
            phase.mb_s = total / MB / phase.seconds


def run_config(config: str, repeat: int, broker: EmbeddedBroker, admin: AdminClient, workdir: Path,
               extra: dict[str, Any], args: argparse.Namespace) -> ConfigRun:
    tag = uuid.uuid4().hex[:8]
    topics = [f"bench-workers-{tag}-{i}" for i in range(args.clients)]
    warm = f"bench-workers-warm-{tag}"
    for name in (*topics, warm):
        create_topic(admin, name, 1)
    try:
        if config == "direct":
            return measure(config, repeat, broker.bootstrap, None, broker.process, topics, warm, args)
        workers = int(config.partition("=")[2])
        node_ids = sorted(admin.list_topics(timeout=10).brokers)
        with WorkersGateway(broker.bootstrap, workdir / f"{config}-{repeat}-{tag}", workers, node_ids,
                            extra) as gateway:
            # Readiness of the whole path: metadata through the gateway.
            AdminClient({"bootstrap.servers": gateway.bootstrap}).list_topics(timeout=20)
            return measure(config, repeat, gateway.bootstrap, gateway, broker.process, topics, warm, args)
    finally:
        if broker.process.poll() is None:
            for name in (*topics, warm):  # Tansu keeps everything in memory
                delete_topic(admin, name)


def measure(config: str, repeat: int, bootstrap: str, gateway: WorkersGateway | None,
            broker: subprocess.Popen[bytes], topics: list[str], warm: str, args: argparse.Namespace) -> ConfigRun:
    specs = [ClientSpec(i, bootstrap, topic, warm, args.records, args.size, args.timeout)
             for i, topic in enumerate(topics)]
    return Run(config, repeat, bootstrap, gateway, broker, args).measure(specs)


def code_version() -> str:
    """Which gateway code runs: the checkout's commit, "+dirty" if it has uncommitted changes."""
    try:
        described = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty=+dirty"],
                                   capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        described = "no git"
    return f"{REPO} ({described})"


def schedule(repeat: int) -> list[str]:
    """The configurations in repeat's order: rotated, so each takes each position in turn."""
    shift = repeat % len(CONFIGS)
    return [*CONFIGS[shift:], *CONFIGS[:shift]]


# --- reporting ------------------------------------------------------------------------------

ROWS: list[tuple[str, str, str]] = [  # (label, phase, figure: "mb_s" or a CPU group)
    ("produce MB/s", "produce", "mb_s"),
    ("fetch MB/s", "fetch", "mb_s"),
    *[(f"{group} CPU % ({phase})", phase, group) for group in CPU_GROUPS for phase in ("produce", "fetch")],
]


def figure(run: ConfigRun, phase: str, key: str) -> float:
    p: Phase = getattr(run, phase)
    return p.mb_s if key == "mb_s" else p.cpu[key]


def medians(runs: list[ConfigRun]) -> dict[str, dict[str, float]]:
    return {config: {label: statistics.median(figure(r, phase, key) for r in runs if r.config == config)
                     for label, phase, key in ROWS}
            for config in CONFIGS}


def sharing_lines(runs: list[ConfigRun]) -> tuple[list[str], int, int]:
    """Per workers=2 phase: requests, connections and CPU per worker; (lines, shared, phases)."""
    lines, shared, phases = [], 0, 0
    for run in (r for r in runs if r.config == "workers=2"):
        for name in ("produce", "fetch"):
            p: Phase = getattr(run, name)
            phases += 1
            shared += p.workers_serving() > 1
            per = "   ".join(f"w{i}: {req:,} {name} req, {conn} conn open ({new} new)"
                             for i, (req, conn, new) in enumerate(zip(p.worker_requests, p.worker_connections,
                                                                       p.worker_new_connections, strict=True)))
            cpu = "/".join(f"{c:.0f}" for c in p.worker_cpu)
            lines.append(f"  repeat {run.repeat + 1} {name:<8} {per}   CPU by worker (pid order) {cpu} %"
                         f"  -> {p.workers_serving()} of {len(p.worker_requests)} workers served")
    return lines, shared, phases


def table(report: dict[str, Any]) -> str:
    m, cfg, med = report["machine"], report["config"], report["median"]
    runs = [run_from_dict(r) for r in report["runs"]]
    width = 28
    lines = [
        f"machine: {m['nproc']} CPUs, {m['cpu_model']}, {m['mem_total_mb']} MB RAM, Linux {m['kernel']}",
        f"         Python {m['python']}, confluent-kafka {m['confluent_kafka']}, librdkafka {m['librdkafka']}",
        f"workload: {cfg['clients']} client processes in parallel, each {cfg['records']:,} records x "
        f"{cfg['size']} B into its own 1-partition topic (acks={PRODUCER_SETTINGS['acks']}, "
        f"linger.ms={PRODUCER_SETTINGS['linger.ms']}, batch.size={PRODUCER_SETTINGS['batch.size']}), "
        "then read back by assign()",
        "          MB/s = all clients' record bytes / (last client end - first client start); median of "
        f"{cfg['repeat']} repeats, order rotated per repeat; a fresh gateway per run",
        f"gateway code: {report['code']}",
        "gateway config (besides listener/upstream/node/metrics ports): "
        + ", ".join(f"{k}={v}" for k, v in cfg["gateway"].items()),
        "CPU: % of one core during the timed phase; gateway = supervisor + workers, clients = the client "
        "processes + this one, other = the rest of the machine, total = all of it",
        "",
        f"{'figure':<{width}}" + "".join(f"{c:>11}" for c in CONFIGS) + f"{'w2/w1':>9}   per repeat "
        + "/".join(CONFIGS),
        "-" * 110,
    ]
    for label, phase, key in ROWS:
        fmt = "{:.1f}" if key == "mb_s" else "{:.0f}"
        cells = "".join(f"{'-' if c == 'direct' and key == 'gateway' else fmt.format(med[c][label]):>11}"
                        for c in CONFIGS)
        ratio = (f"{med['workers=2'][label] / med['workers=1'][label]:.2f}x"
                 if key == "mb_s" and med["workers=1"][label] else "")
        per = " ".join("/".join(fmt.format(figure(r, phase, key)) for r in sorted(
            (r for r in runs if r.repeat == rep), key=lambda r: CONFIGS.index(r.config)))
            for rep in range(cfg["repeat"]))
        lines.append(f"{label:<{width}}{cells}{ratio:>9}   {per}")
    lines.append("-" * 110)
    share, shared, phases = sharing_lines(runs)
    lines += ["workers=2 load sharing (from each worker's /metrics; connections include bootstrap ones):", *share,
              f"  more than one worker served the clients in {shared} of {phases} workers=2 phases"
              + ("" if shared == phases else " (the kernel hashes each connection to a worker; with few "
                                             "connections all can land on one)"),
              "",
              f"this machine has {m['nproc']} cores, shared by the {cfg['clients']} clients, the broker and the "
              "gateway: extra workers cannot add cores here, they only let the gateway use more of "
              "what the others leave (see the total CPU rows)."]
    other = max(r.disturbance() for r in runs)
    if report["discarded_runs"]:
        lines.append(f"{len(report['discarded_runs'])} run(s) discarded and re-run because other processes "
                     f"used > {cfg['max_other']:g}% of a core meanwhile")
    if other > cfg["max_other"]:
        lines.append(f"WARNING: other processes used up to {other:.0f}% of a core during kept runs; the machine "
                     "was busy, rerun on a quiet machine")
    lines.append(f"load average before/after: {report['loadavg']['before']} / {report['loadavg']['after']}")
    lines.append(f"total wall time: {report['wall_s']:.0f} s")
    return "\n".join(lines)


def run_from_dict(data: dict[str, Any]) -> ConfigRun:
    return ConfigRun(data["config"], data["repeat"], Phase(**data["produce"]), Phase(**data["fetch"]))


# --- main -----------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=4, help="client processes running in parallel")
    parser.add_argument("--records", type=int, default=50_000, help="records per client")
    parser.add_argument("--size", type=int, default=1024, help="record value size in bytes")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of direct, workers=1, workers=2")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="S",
                        help="bound on each wait: a client's phase, start-up, a sync point")
    parser.add_argument("--max-other", type=float, default=20.0, metavar="PCT",
                        help="a run during which other processes used more than PCT%% of a core is discarded "
                             "and run again (see --retries)")
    parser.add_argument("--retries", type=int, default=3, help="disturbed runs that may be re-run in all")
    parser.add_argument("--authz", choices=("off", "allow-all"), default="off",
                        help="gateway authorization, as in bench/throughput.py (default: off, the bare relay)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra gateway configuration key (repeatable)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object on stdout (the table then goes to stderr)")
    args = parser.parse_args(argv)
    require_at_least_one(parser, args, "clients", "records", "size", "repeat")
    if args.retries < 0 or args.timeout <= 0:
        parser.error("--retries must not be negative and --timeout must be positive")
    return args


def progress(run: ConfigRun, total: int) -> None:
    p, f = run.produce, run.fetch
    served = f"  workers serving {p.workers_serving()}/{f.workers_serving()}" if p.worker_requests else ""
    print(f"  [{run.repeat + 1}/{total}] {run.config:<10} produce {p.mb_s:7.1f} MB/s  fetch {f.mb_s:7.1f} MB/s  "
          f"gateway CPU {p.cpu['gateway']:.0f}/{f.cpu['gateway']:.0f}%  other {run.disturbance():.0f}%{served}",
          file=sys.stderr)


def measure_all(args: argparse.Namespace, workdir: Path) -> tuple[list[ConfigRun], list[ConfigRun], dict[str, Any]]:
    runs: list[ConfigRun] = []
    discarded: list[ConfigRun] = []
    extra = {**authorization_settings(args.authz, workdir), **parse_settings(args.set)}
    retries = args.retries
    with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        print(f"broker {broker.bootstrap}", file=sys.stderr)
        for rep in range(args.repeat):
            for config in schedule(rep):
                while True:
                    run = run_config(config, rep, broker, admin, workdir, extra, args)
                    progress(run, args.repeat)
                    if run.disturbance() <= args.max_other or retries == 0:
                        break
                    retries -= 1
                    discarded.append(run)
                    print(f"  discarded: other processes used {run.disturbance():.0f}% of a core "
                          f"(> --max-other {args.max_other:g}); again ({retries} retries left)", file=sys.stderr)
                runs.append(run)
        del admin  # before the broker goes: its threads would log the disconnection
    return runs, discarded, extra


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the context managers stop clients, gateway and broker.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began, load_before, info = time.perf_counter(), loadavg(), machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; load average {load_before}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="ksgate-bench-workers-") as tmp:
        try:
            runs, discarded, extra = measure_all(args, Path(tmp))
        except (RuntimeError, EmbeddedBrokerError) as exc:  # what failed, with the gateway's log tail
            print(f"bench/workers.py: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:  # the context managers have stopped clients, gateway and broker
            print("bench/workers.py: interrupted", file=sys.stderr)
            return 130
    report: dict[str, Any] = {
        "machine": info,
        "code": code_version(),
        "config": {"clients": args.clients, "records": args.records, "size": args.size, "repeat": args.repeat,
                   "max_other": args.max_other, "retries": args.retries, "timeout_s": args.timeout,
                   "gateway": {"log.level": "WARNING", **{k: v for k, v in extra.items() if k != "ksgate.acl.file"}},
                   "producer": PRODUCER_SETTINGS, "consumer": CONSUMER_SETTINGS, "clk_tck": CLK_TCK,
                   "mb": "10^6 bytes of record values"},
        "median": medians(runs),
        "runs": [asdict(r) for r in runs],
        "discarded_runs": [asdict(r) for r in discarded],
        "loadavg": {"before": load_before, "after": loadavg()},
        "wall_s": time.perf_counter() - began,
    }
    if args.json:
        print(table(report), file=sys.stderr)
        print(json.dumps(report, indent=2))
    else:
        print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
