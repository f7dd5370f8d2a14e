"""Client quotas: the rate a client over its quota achieves through ksgate, and admin beside it.

A benchmark, not a test (tests/gateway/clients/test_quota_e2e.py asserts the behaviour). It starts
an embedded Tansu broker and one gateway in a process of its own (SASL_PLAINTEXT with PLAIN; the
quotas come from an in-memory book injected into the gateway's context), with
producer_byte_rate and consumer_byte_rate = --quota for alice, none for bob. Then, one phase
after another, alice runs flat out for --warmup + --seconds:

* confluent-kafka producer / consumer, kafka-python producer / consumer;

and meanwhile bob's admin client (confluent-kafka, its own process) asks for Metadata every 100 ms. Printed
per phase: alice's achieved rate as the gateway counted it (whole Produce request / Fetch response
frames, as ``ksgate_quota_bytes_total``, asked of the gateway's process once a second) against the
quota: over the first 20 s, over --seconds after the warm-up, and the least and most over any 20 s
after it; the client's own payload rate; and bob's Metadata round trips (p50/p99/max), with an
idle baseline first. Kafka's rate lets a new client send (quota.window.num - 1) windows' worth at
once, and a burst leaves the rate when its sample expires, 11 s later: over 20 s the rate swings.

    .venv/bin/python bench/availability/quotas.py [--seconds 44] [--warmup 22] [--quota 1000000] [--phases ...]

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from gateway.quotas.lookup import DictQuotas  # noqa: E402
from gateway.stores.file_users import FileCredentialStore  # noqa: E402
from tests.harness import GatewayThread  # noqa: E402

VALUE = b"q" * 10_000
PHASES = ("confluent-producer", "confluent-consumer", "kafka-python-producer", "kafka-python-consumer")


def _serve(upstream: str, users: str, quota: float, ready: Any, asks: Any, answers: Any) -> None:
    """The gateway's process: serves clients, and answers ``asks`` (a quota type; None to stop) with
    the bytes the gateway counted for alice against it."""
    gateway = GatewayThread(upstream, {
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": users, "ksgate.sasl.plain.allow.insecure": True},
        protocol="SASL_PLAINTEXT")
    gateway.gateway.ctx.quotas = DictQuotas({("user=alice", "producer_byte_rate"): quota,
                                             ("user=alice", "consumer_byte_rate"): quota})
    gateway.start()
    ready.put(gateway.bootstrap)
    totals = gateway.gateway.ctx.quota_sensors.totals
    while (kind := asks.get()) is not None:
        found = totals.get((kind, "user=alice"))
        answers.put(found.recorded if found is not None else 0.0)
    gateway.stop()


class Counted:
    """What the gateway counted for alice (asked of its process)."""

    def __init__(self, asks: Any, answers: Any) -> None:
        self.asks, self.answers = asks, answers

    def __call__(self, kind: str) -> float:
        self.asks.put(kind)
        return float(self.answers.get(timeout=30))


def _client(bootstrap: str, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


def _kafka_python(bootstrap: str, user: str) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": user, "sasl_plain_password": f"{user}-secret"}


def _probe(bootstrap: str, stop: Any, out: Any) -> None:
    """bob's Metadata round trips (ms), one every 100 ms until ``stop``: in a process of its own, so
    that a Python client under test (kafka-python) cannot hold the probe back by the GIL."""
    admin = AdminClient(_client(bootstrap, "bob"))
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

    def __init__(self, bootstrap: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._stop, self._out = ctx.Event(), ctx.Queue()
        self._process = ctx.Process(target=_probe, args=(bootstrap, self._stop, self._out), daemon=True)
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


def _confluent_producer(bootstrap: str, topic: str, stop: threading.Event) -> int:
    sent = 0
    producer = Producer({**_client(bootstrap, "alice"), "linger.ms": 5, "queue.buffering.max.kbytes": 4096})

    def delivered(err: Any, msg: Any) -> None:
        nonlocal sent
        if err is None:
            sent += len(msg.value())

    while not stop.is_set():
        try:
            producer.produce(topic, VALUE, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.purge()
    producer.flush(10)
    return sent


def _confluent_consumer(bootstrap: str, topic: str, stop: threading.Event) -> int:
    got = 0
    consumer = Consumer({**_client(bootstrap, "alice"), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])  # no group join: reading starts at once
    while not stop.is_set():
        got += sum(len(m.value() or b"") for m in consumer.consume(100, 0.2) if m.error() is None)
    consumer.close()
    return got


def _kafka_python_producer(bootstrap: str, topic: str, stop: threading.Event) -> int:
    from kafka import KafkaProducer

    sent = 0
    producer = KafkaProducer(**_kafka_python(bootstrap, "alice"), linger_ms=5,
                             max_block_ms=1000)

    def delivered(_: Any) -> None:
        nonlocal sent
        sent += len(VALUE)

    while not stop.is_set():
        try:
            producer.send(topic, VALUE).add_callback(delivered)
        except Exception:  # KafkaTimeoutError: its buffer is full, the gateway holds it back
            continue
    with contextlib.suppress(Exception):  # KafkaTimeoutError: records still held back when the phase ended
        producer.close(timeout=5)
    return sent


def _kafka_python_consumer(bootstrap: str, topic: str, stop: threading.Event) -> int:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    got = 0
    consumer = KafkaConsumer(**_kafka_python(bootstrap, "alice"), auto_offset_reset="earliest",
                             enable_auto_commit=False)
    partition = KafkaTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    while not stop.is_set():
        for records in consumer.poll(200).values():
            got += sum(len(r.value or b"") for r in records)
    consumer.close()
    return got


RUNS: dict[str, Callable[[str, str, threading.Event], int]] = {
    "confluent-producer": _confluent_producer, "confluent-consumer": _confluent_consumer,
    "kafka-python-producer": _kafka_python_producer, "kafka-python-consumer": _kafka_python_consumer}


def _fill(bootstrap: str, topic: str, nbytes: int) -> None:
    """bob (no quota) writes the records a consumer phase reads."""
    producer = Producer({**_client(bootstrap, "bob"), "linger.ms": 5})
    for _ in range(nbytes // len(VALUE)):
        while True:
            try:
                producer.produce(topic, VALUE)
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def _phase(name: str, bootstrap: str, counted: Counted, seconds: float, warmup: float, quota: float) -> None:
    admin = AdminClient(_client(bootstrap, "bob"))
    topic = f"quota-bench-{uuid.uuid4().hex[:8]}"
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)
    kind = "producer_byte_rate" if name.endswith("producer") else "consumer_byte_rate"
    if kind == "consumer_byte_rate":
        _fill(bootstrap, topic, int(quota * (seconds + warmup) * 1.5 + 30e6))
    stop = threading.Event()
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(RUNS[name](bootstrap, topic, stop)), daemon=True)
    total = warmup + seconds
    with AdminProbe(bootstrap) as probe:
        points = [(time.monotonic(), counted(kind))]
        worker.start()
        while points[-1][0] - points[0][0] < total:
            time.sleep(1.0)  # a benchmark's sampling clock, not a test's synchronisation
            points.append((time.monotonic(), counted(kind)))
        stop.set()
        worker.join(60)

    def rate(t0: float, t1: float) -> float:
        a = min(points, key=lambda p: abs(p[0] - points[0][0] - t0))
        b = min(points, key=lambda p: abs(p[0] - points[0][0] - t1))
        return (b[1] - a[1]) / (b[0] - a[0]) / quota

    first = rate(0, 20)
    steady = rate(warmup, total)
    windows = [rate(t, t + 20) for t in range(int(warmup), int(total) - 19)]
    payload = (result[0] if result else 0) / (points[-1][0] - points[0][0]) / 1e6
    spread = f"any 20 s: {min(windows):.2f}–{max(windows):.2f}×" if windows else ""
    print(f"{name:22} first 20 s {first:4.2f}× quota | after {warmup:.0f} s warm-up, {seconds:.0f} s: "
          f"{steady:4.2f}× ({spread}) | client payload {payload:4.2f} MB/s | bob's Metadata {probe.summary()}",
          flush=True)


def _cost(requests: int, rounds: int) -> None:
    import timeit

    from gateway.quotas.lookup import NoQuotas
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=44.0, help="measured after the warm-up (4 quota windows)")
    parser.add_argument("--warmup", type=float, default=22.0,
                        help="before measuring: Kafka's rate lets a new client burst (quota.window.num - 1) windows")
    parser.add_argument("--quota", type=float, default=1_000_000.0, help="bytes/s for alice (both directions)")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--cost", action="store_true", help="the quota check's cost per request, socket-free")
    args = parser.parse_args()
    if args.cost:
        _cost(20_000, 7)
        return
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(log_path=Path(tmp) / "tansu.log") as broker:
        users = Path(tmp) / "users.json"
        store = FileCredentialStore(users)
        store.upsert_user("alice", "alice-secret")
        store.upsert_user("bob", "bob-secret")
        ctx = multiprocessing.get_context("spawn")
        ready, asks, answers = ctx.Queue(), ctx.Queue(), ctx.Queue()
        server = ctx.Process(target=_serve, args=(broker.bootstrap, str(users), args.quota, ready, asks, answers))
        server.start()
        bootstrap = ready.get(timeout=60)
        try:
            with open("/proc/loadavg") as f:
                print(f"quota {args.quota / 1e6:.2f} MB/s, {args.seconds:.0f} s per phase, load {f.read().split()[:3]}")
            with AdminProbe(bootstrap) as idle:
                time.sleep(10)
            print(f"{'idle':24} bob's Metadata {idle.summary()}", flush=True)
            for name in args.phases.split(","):
                _phase(name, bootstrap, Counted(asks, answers), args.seconds, args.warmup, args.quota)
        finally:
            asks.put(None)
            server.join(30)


if __name__ == "__main__":
    main()
