"""Client quotas: the rate a client over its quota achieves (through ksgate, or on Kafka itself) and admin beside it.

A benchmark, not a test (tests/gateway/clients/test_quota_e2e.py asserts the behaviour). Upstream: an
embedded Tansu broker (default) or, with ``--upstream kafka``, the reference Apache Kafka 4.4 broker
(REFERENCE_KAFKA_LIB, bench/kafka_upstream.py, PLAINTEXT). Two paths:

* ``--path gateway`` (default): one gateway in a process of its own (SASL_PLAINTEXT, PLAIN; quotas in its
  quota file, set through the gateway with AlterClientQuotas) in front of the broker, which sees only the
  gateway's principal and has no quota; alice has producer_byte_rate and consumer_byte_rate = --quota,
  bob none;
* ``--path direct`` (Kafka only): the clients on Kafka's PLAINTEXT listener, the same quotas set on Kafka
  with its own kafka-configs (ConfigCommand) for client-id ``alice`` (a client-id quota: Kafka's PLAINTEXT
  principal is ANONYMOUS for everyone, and the byte accounting is the same as for a user quota); bob's
  clients use client id ``bob``.

Then, one phase after another, alice runs flat out for --warmup + --seconds:

* confluent-kafka producer / consumer, kafka-python producer / consumer;

and meanwhile bob's admin client (confluent-kafka, its own process) asks for Metadata every 100 ms. Printed
per phase: alice's achieved rate against the quota, from the client's own payload (delivered / consumed
record values, sampled once a second; the same measure on both paths), over the first 20 s, over --seconds
after the warm-up, and the least and most over any 20 s after it; on the gateway path also what the
gateway counted (whole Produce request / Fetch response frames, as ``ksgate_quota_bytes_total``, asked of
its process); and bob's Metadata round trips (p50/p99/max), with an idle baseline first. Kafka's rate lets
a new client send (quota.window.num - 1) windows' worth at once, and a burst leaves the rate when its
sample expires, 11 s later: over 20 s the rate swings.

    .venv/bin/python bench/availability/quotas.py [--upstream tansu|kafka] [--path gateway|direct]
        [--seconds 44] [--warmup 22] [--quota 1000000] [--phases ...]

With ``--cost`` it measures instead, without sockets or a broker, what the quota check costs a
request when no quota applies: the session's CPU time per 1 KiB Produce request and its response
(driven as tests/gateway/session/session_driver.py does), against the check alone (timeit).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from gateway.stores.file_users import FileCredentialStore  # noqa: E402
from tests.harness import GatewayThread  # noqa: E402

VALUE = b"q" * 10_000
PHASES = ("confluent-producer", "confluent-consumer", "kafka-python-producer", "kafka-python-consumer")
KINDS = ("producer_byte_rate", "consumer_byte_rate")
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"  # kafka-configs.sh


def _serve(upstream: str, workdir: str, quota: float, ready: Any, asks: Any, answers: Any) -> None:
    """The gateway's process: sets alice's quotas through its own AlterClientQuotas, serves clients, and
    answers ``asks`` (a quota type; None to stop) with the bytes the gateway counted for alice against it."""
    from tests.gateway.clients.quota_chain import alter_quota, book_changed

    gateway = GatewayThread(upstream, {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "ksgate.credentials.file": f"{workdir}/users.json",
        "ksgate.sasl.plain.allow.insecure": True, "ksgate.quota.file": f"{workdir}/quotas.json"},
        protocol="SASL_PLAINTEXT")
    gateway.start()
    for kind in KINDS:
        with book_changed(gateway) as changed:
            alter_quota(gateway, {"user": "alice"}, kind, quota)
            if not changed.wait(30):
                raise SystemExit(f"the gateway's quota book never saw {kind}")
    ready.put(gateway.bootstrap)
    totals = gateway.gateway.ctx.quota_sensors.totals
    while (kind := asks.get()) is not None:
        found = totals.get((kind, "user=alice"))
        answers.put(found.recorded if found is not None else 0.0)
    gateway.stop()


class Counted:
    """What the gateway counted for alice (asked of its process); None on the direct path."""

    def __init__(self, asks: Any, answers: Any) -> None:
        self.asks, self.answers = asks, answers

    def __call__(self, kind: str) -> float:
        self.asks.put(kind)
        return float(self.answers.get(timeout=30))


@dataclass(slots=True, frozen=True)
class ClientPath:
    """How alice's and bob's clients reach one path: the gateway's SASL_PLAINTEXT listener (PLAIN, each
    user's own login), or Kafka's PLAINTEXT listener directly (the client id names the user)."""

    bootstrap: str
    sasl: bool

    def rdkafka(self, user: str) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "client.id": user}
        if self.sasl:
            config.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                           "sasl.username": user, "sasl.password": f"{user}-secret"})
        return config

    def kafka_python(self, user: str) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap_servers": self.bootstrap, "client_id": user}
        if self.sasl:
            config.update({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
                           "sasl_plain_username": user, "sasl_plain_password": f"{user}-secret"})
        return config


class Tally:
    """The payload bytes a client under test has delivered or consumed so far (read by the sampler), and
    the throttle times it was given: how long the broker (or ksgate) told it to wait, as the client saw it."""

    __slots__ = ("bytes", "throttle_ms", "throttles")

    def __init__(self) -> None:
        self.bytes = 0
        self.throttles = 0
        self.throttle_ms = 0

    def throttled(self, ms: int) -> None:
        if ms > 0:
            self.throttles += 1
            self.throttle_ms += ms

    def summary(self) -> str:
        return f"told to wait {self.throttles}× {self.throttle_ms / 1000:.1f} s"


def _probe(path: ClientPath, stop: Any, out: Any) -> None:
    """bob's Metadata round trips (ms), one every 100 ms until ``stop``: in a process of its own, so
    that a Python client under test (kafka-python) cannot hold the probe back by the GIL."""
    admin = AdminClient(path.rdkafka("bob"))
    samples: list[float] = []
    failures = 0
    while not stop.wait(0.1):
        start = time.perf_counter()
        try:
            admin.list_topics(timeout=10)
            samples.append((time.perf_counter() - start) * 1000)
        except Exception:  # a timeout: counted, the probe goes on
            failures += 1
    out.put((samples, failures))


class AdminProbe:
    """bob's Metadata round trips while a phase runs (see _probe)."""

    def __init__(self, path: ClientPath) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop, self._out = ctx.Event(), ctx.Queue()
        self._process = ctx.Process(target=_probe, args=(path, self._stop, self._out), daemon=True)
        self.samples: list[float] = []
        self.failures = 0

    def __enter__(self) -> AdminProbe:
        self._process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.samples, self.failures = self._out.get(timeout=60)
        self._process.join(30)

    def summary(self) -> str:
        s = sorted(self.samples)
        if not s:
            return f"no answers, {self.failures} failures"
        p99 = s[min(len(s) - 1, int(len(s) * 0.99))]
        return (f"p50 {statistics.median(s):.1f} ms  p99 {p99:.1f} ms  max {s[-1]:.1f} ms  "
                f"(n={len(s)}, failed {self.failures})")


def _confluent_producer(path: ClientPath, topic: str, stop: threading.Event, tally: Tally) -> None:
    producer = Producer({**path.rdkafka("alice"), "linger.ms": 5, "queue.buffering.max.kbytes": 4096,
                         "throttle_cb": lambda e: tally.throttled(round(e.throttle_time * 1000))})

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            tally.bytes += len(msg.value())

    while not stop.is_set():
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(10)


def _confluent_consumer(path: ClientPath, topic: str, stop: threading.Event, tally: Tally) -> None:
    consumer = Consumer({**path.rdkafka("alice"), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "throttle_cb": lambda e: tally.throttled(round(e.throttle_time * 1000))})
    consumer.assign([TopicPartition(topic, 0, 0)])  # no group join: reading starts at once
    while not stop.is_set():
        tally.bytes += sum(len(m.value() or b"") for m in consumer.consume(100, 0.2) if m.error() is None)
    consumer.close()


KAFKA_PYTHON_AHEAD = 256  # records of VALUE sent but not yet acknowledged (256 x 10 KB: 2.5 s of quota)


def _kafka_python_producer(path: ClientPath, topic: str, stop: threading.Event, tally: Tally) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(**path.kafka_python("alice"), linger_ms=5, max_block_ms=1000)
    # Flat out, but not spinning: kafka-python's sender is a thread of this process, and a send() loop
    # that spins on a full buffer (send() waits, raises, is called again) takes the GIL from it, so the
    # client measured its own starvation (0.02x of the quota on a quiet machine, on Kafka as through
    # ksgate). Records are always ready: up to KAFKA_PYTHON_AHEAD of them wait unacknowledged.
    ahead = threading.BoundedSemaphore(KAFKA_PYTHON_AHEAD)

    def delivered(_: Any) -> None:
        tally.bytes += len(VALUE)
        ahead.release()

    def failed(_: Any) -> None:
        ahead.release()

    while not stop.is_set():
        if not ahead.acquire(timeout=0.5):  # waits without the GIL until a record is acknowledged
            continue
        try:
            producer.send(topic, VALUE).add_callback(delivered).add_errback(failed)
        except Exception:  # KafkaTimeoutError: its buffer is full, the quota holds it back
            ahead.release()
    with contextlib.suppress(Exception):  # KafkaTimeoutError: records still held back when the phase ended
        producer.close(timeout=5)


def _kafka_python_consumer(path: ClientPath, topic: str, stop: threading.Event, tally: Tally) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    consumer = KafkaConsumer(**path.kafka_python("alice"), auto_offset_reset="earliest", enable_auto_commit=False)
    partition = KafkaTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    while not stop.is_set():
        for records in consumer.poll(200).values():
            tally.bytes += sum(len(r.value or b"") for r in records)
    consumer.close()


@contextlib.contextmanager
def _kafka_python_throttles(tally: Tally) -> Iterator[None]:
    """kafka-python has no throttle callback: watch the method that reads throttle_time_ms from each
    response (kafka-python 3.x) while alice's client runs; bob's clients here are librdkafka."""
    from kafka.net.connection import KafkaConnection

    seen = KafkaConnection._maybe_throttle

    def watched(self: Any, response: Any) -> None:
        tally.throttled(getattr(response, "throttle_time_ms", 0) or 0)
        seen(self, response)

    KafkaConnection._maybe_throttle = watched
    try:
        yield
    finally:
        KafkaConnection._maybe_throttle = seen


RUNS: dict[str, Callable[[ClientPath, str, threading.Event, Tally], None]] = {
    "confluent-producer": _confluent_producer, "confluent-consumer": _confluent_consumer,
    "kafka-python-producer": _kafka_python_producer, "kafka-python-consumer": _kafka_python_consumer}


def _fill(path: ClientPath, topic: str, nbytes: int) -> None:
    """bob (no quota) writes the records a consumer phase reads."""
    producer = Producer({**path.rdkafka("bob"), "linger.ms": 5})
    for _ in range(nbytes // len(VALUE)):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


@dataclass(slots=True, frozen=True)
class Sample:
    """One tick of the sampling clock: when, alice's client payload so far, the gateway's count so far."""

    at: float
    payload: float
    counted: float


def _ratios(points: list[Sample], field: str, warmup: float, total: float, quota: float) -> str:
    """The rate ÷ quota of one measure over the first 20 s, after the warm-up, and any 20 s after it."""
    def rate(t0: float, t1: float) -> float:
        a = min(points, key=lambda p: abs(p.at - points[0].at - t0))
        b = min(points, key=lambda p: abs(p.at - points[0].at - t1))
        return float(getattr(b, field) - getattr(a, field)) / (b.at - a.at) / quota

    windows = [rate(t, t + 20) for t in range(int(warmup), int(total) - 19)]
    spread = f" (any 20 s: {min(windows):.2f}–{max(windows):.2f}×)" if windows else ""
    return f"first 20 s {rate(0, 20):4.2f}× | after warm-up {rate(warmup, total):4.2f}×{spread}"


def _phase(name: str, path: ClientPath, counted: Counted | None, seconds: float, warmup: float,
           quota: float) -> None:
    admin = AdminClient(path.rdkafka("bob"))
    topic = f"quota-bench-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)
    kind = "producer_byte_rate" if name.endswith("producer") else "consumer_byte_rate"
    if kind == "consumer_byte_rate":
        _fill(path, topic, int(quota * (seconds + warmup) * 1.5 + 30e6))
    stop = threading.Event()
    tally = Tally()
    worker = threading.Thread(target=RUNS[name], args=(path, topic, stop, tally), daemon=True)
    total = warmup + seconds

    def sample() -> Sample:
        return Sample(time.monotonic(), tally.bytes, counted(kind) if counted is not None else 0.0)

    watch = _kafka_python_throttles(tally) if name.startswith("kafka-python") else contextlib.nullcontext()
    with AdminProbe(path) as probe, watch:
        points = [sample()]
        worker.start()
        while points[-1].at - points[0].at < total:
            time.sleep(1.0)  # a benchmark's sampling clock, not a test's synchronisation
            points.append(sample())
        stop.set()
        worker.join(60)
    gateway = f" | gateway counted: {_ratios(points, 'counted', warmup, total, quota)}" if counted else ""
    print(f"{name:22} client payload: {_ratios(points, 'payload', warmup, total, quota)}{gateway} | "
          f"alice {tally.summary()} | bob's Metadata {probe.summary()}", flush=True)


def _cost(requests: int, rounds: int) -> None:
    import timeit

    from gateway.quotas.lookup import DictQuotas, NoQuotas
    from protocol.api_keys import ApiKey
    from protocol.messages import request_frame
    from tests.authz.test_policies_data import request, response
    from tests.gateway.session.session_driver import Driver, gateway_for

    body = request(ApiKey.PRODUCE, 9, acks=1, timeout_ms=1000,
                   topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 1024}]}])
    frame = request_frame(ApiKey.PRODUCE, 9, 1, body, client_id="producer-1")
    answer = response(ApiKey.PRODUCE, 9, "responses", [])
    with tempfile.TemporaryDirectory() as tmp:
        for book_name, book in (("no quota anywhere", NoQuotas()),
                                ("another user's quota", DictQuotas({("user=bob", "producer_byte_rate"): 1e6}))):
            per_request = []
            for _ in range(rounds):
                gateway = gateway_for(Path(tmp))
                gateway.ctx.quotas = book
                driver = Driver.connect(gateway)
                start = time.process_time()
                for _ in range(requests // 100):
                    driver.send(frame * 100)
                    for relayed in driver.upstream_requests():
                        driver.answer(relayed, answer)
                    driver.client_bytes.clear()
                    driver.actions.clear()
                per_request.append((time.process_time() - start) / requests * 1e6)
            check = driver.session.quota
            view = memoryview(frame)[4:]
            calls = 200_000
            each = min(timeit.repeat(functools.partial(check.applies, view), number=calls, repeat=5)) / calls * 1e6
            median = statistics.median(per_request)
            print(f"{book_name:22} session µs/request (request + response, driver included): median {median:.1f} "
                  f"(min {min(per_request):.1f}, max {max(per_request):.1f}, {rounds} rounds × {requests}); "
                  f"quota check {each * 1000:.0f} ns = {each / median * 100:.2f} % of it")


def _quota_on_kafka(upstream: Any, quota: float) -> None:
    """alice's quotas set on Kafka with its own kafka-configs, as client-id quotas (PLAINTEXT: no user)."""
    from tests.apache_kafka.java_clients import JavaRunner

    java = JavaRunner(upstream.broker.lib, upstream.workdir / "java")
    properties = upstream.workdir / "plaintext.properties"
    properties.write_text("security.protocol=PLAINTEXT\n")
    added = ",".join(f"{kind}={quota:.0f}" for kind in KINDS)
    bootstrap = upstream.broker.bootstrap("PLAINTEXT")
    java.tool(CONFIG_COMMAND, bootstrap, properties, "--alter", "--add-config", added,
              "--entity-type", "clients", "--entity-name", "alice")
    described = java.tool(CONFIG_COMMAND, bootstrap, properties, "--describe", "--entity-type", "clients",
                          "--entity-name", "alice").stdout.strip()
    print(f"on Kafka: {described}", flush=True)


def _run(args: argparse.Namespace, path: ClientPath, counted: Counted | None) -> None:
    with open("/proc/loadavg") as f:
        print(f"{args.upstream} upstream, {args.path} path, quota {args.quota / 1e6:.2f} MB/s, "
              f"{args.warmup:.0f} s warm-up + {args.seconds:.0f} s per phase, load {f.read().split()[:3]}")
    with AdminProbe(path) as idle:
        time.sleep(10)
    print(f"{'idle':22} bob's Metadata {idle.summary()}", flush=True)
    for name in args.phases.split(","):
        _phase(name, path, counted, args.seconds, args.warmup, args.quota)


def _through_gateway(args: argparse.Namespace, upstream: str, workdir: Path) -> None:
    store = FileCredentialStore(workdir / "users.json")
    for user in ("admin", "alice", "bob"):
        store.upsert_user(user, f"{user}-secret")
    ctx = multiprocessing.get_context("spawn")
    ready, asks, answers = ctx.Queue(), ctx.Queue(), ctx.Queue()
    server = ctx.Process(target=_serve, args=(upstream, str(workdir), args.quota, ready, asks, answers))
    server.start()
    try:
        _run(args, ClientPath(ready.get(timeout=60), sasl=True), Counted(asks, answers))
    finally:
        asks.put(None)
        server.join(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=44.0, help="measured after the warm-up (4 quota windows)")
    parser.add_argument("--warmup", type=float, default=22.0,
                        help="before measuring: Kafka's rate lets a new client burst (quota.window.num - 1) windows")
    parser.add_argument("--quota", type=float, default=1_000_000.0, help="bytes/s for alice (both directions)")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--upstream", choices=("tansu", "kafka"), default="tansu")
    parser.add_argument("--path", choices=("gateway", "direct"), default="gateway",
                        help="direct: the clients on Kafka itself, the quota set on Kafka (--upstream kafka only)")
    parser.add_argument("--cost", action="store_true", help="the quota check's cost per request, socket-free")
    args = parser.parse_args()
    if args.cost:
        _cost(20_000, 7)
        return
    if args.path == "direct" and args.upstream != "kafka":
        parser.error("--path direct needs --upstream kafka (Tansu enforces no quotas)")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if args.upstream == "tansu":
            with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
                _through_gateway(args, broker.bootstrap, workdir)
            return
        from bench.kafka_upstream import start_kafka

        upstream = start_kafka(workdir, "plaintext")
        try:
            if args.path == "direct":
                _quota_on_kafka(upstream, args.quota)
                _run(args, ClientPath(upstream.broker.bootstrap("PLAINTEXT"), sasl=False), None)
            else:
                _through_gateway(args, upstream.broker.bootstrap("PLAINTEXT"), workdir)
        finally:
            upstream.broker.stop()


if __name__ == "__main__":
    main()
