"""What relaying costs the gateway itself, in figures a busy machine hardly moves: CPU, system calls, bytecodes.

A benchmark, not a test.  Three modes:

* ``fetch``: Tansu and one ``ksgate run`` (bare relay); ``--records`` x 1 KiB produced once, then read
  ``--passes`` times through the gateway with bench/throughput.py's consumer settings.  Prints the
  gateway's CPU per MB fetched (ns-resolution, /proc/<pid>/task/*/schedstat) and its user/system split.
* ``produce``: single-record produce + flush, ``--requests`` times (bench/throughput.py's latency
  producer), direct and through the gateway; the gateway's CPU per request.
* ``opcodes``: no sockets: a relayed Produce round trip (one 100-byte record) through the proxy session
  (tests/gateway/session/session_driver.py), counted in Python bytecodes per stage with sys.settrace
  (deterministic: the figure to compare before and after a change to the per-request path).

``--strace FILE`` (fetch, produce) also writes ``strace -c -f`` of the gateway over the measured part.

    .venv/bin/python bench/anchors/relay_cost.py fetch [--records 200000] [--passes 5] [--strace /tmp/s.txt]
    .venv/bin/python bench/anchors/relay_cost.py produce [--requests 5000]
    .venv/bin/python bench/anchors/relay_cost.py opcodes [--authorizer]
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from bench.throughput import (  # noqa: E402
    CONSUMER_SETTINGS,
    LATENCY_SETTINGS,
    PRODUCER_SETTINGS,
    GatewayProcess,
    create_topic,
    only_node,
    percentile,
    plain_client,
)
from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402

SIZE = 1024
TOPIC = "bench-relay-cost"


def cpu_s(pid: int) -> float:
    """CPU time of every thread of ``pid`` (ns resolution, where /proc/<pid>/stat counts 10 ms ticks)."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        with suppress(OSError, ValueError, IndexError):  # a thread that ended meanwhile
            total += int(Path(path).read_text().split()[0])
    return total / 1e9


def user_system_ticks(pid: int) -> tuple[int, int]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


@contextmanager
def straced(pid: int, out: Path | None) -> Iterator[None]:
    if out is None:
        yield
        return
    tracer = subprocess.Popen(["strace", "-c", "-f", "-p", str(pid), "-o", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached to every thread before the measured part
    try:
        yield
    finally:
        tracer.terminate()
        tracer.wait(timeout=10)


@contextmanager
def broker_and_gateway(workdir: Path) -> Iterator[tuple[EmbeddedBroker, GatewayProcess]]:
    with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
        create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), TOPIC, 1)
        extra = {"authorizer.class.name": "", **only_node(plain_client(broker.bootstrap))}
        with GatewayProcess(broker.bootstrap, workdir, extra) as gateway:
            yield broker, gateway


def read_all(bootstrap: str, records: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER_SETTINGS})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got, deadline = 0, time.monotonic() + 300
    try:
        while got < records:
            got += sum(1 for m in consumer.consume(min(10_000, records - got), 1.0) if m.error() is None)
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {got}/{records} records within 300 s")
    finally:
        consumer.close()


def fetch_mode(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="ksgate-cost-") as tmp, broker_and_gateway(Path(tmp)) as (broker, gateway):
        producer = Producer({"bootstrap.servers": broker.bootstrap, **PRODUCER_SETTINGS})
        value = os.urandom(SIZE)
        for i in range(args.records):
            producer.produce(TOPIC, value=value)
            if i % 10_000 == 0:
                producer.poll(0)
        producer.flush(120)
        read_all(gateway.bootstrap, args.records)  # warm: connections, metadata
        mb = args.records * SIZE / 1e6
        per_mb: list[float] = []
        ticks_before = user_system_ticks(gateway.pid)
        with straced(gateway.pid, args.strace):
            for n in range(args.passes):
                cpu, wall = cpu_s(gateway.pid), time.perf_counter()
                read_all(gateway.bootstrap, args.records)
                used, wall = cpu_s(gateway.pid) - cpu, time.perf_counter() - wall
                per_mb.append(1000 * used / mb)
                print(f"pass {n + 1}: {mb / wall:7.1f} MB/s, gateway {per_mb[-1]:.3f} ms CPU per MB",
                      flush=True)
        ticks_after = user_system_ticks(gateway.pid)
        user, system = ticks_after[0] - ticks_before[0], ticks_after[1] - ticks_before[1]
    print(f"gateway CPU per MB fetched: median {statistics.median(per_mb):.3f} ms "
          f"(spread {min(per_mb):.3f}-{max(per_mb):.3f}, {args.passes} passes of {mb:.0f} MB); "
          f"user/system ticks {user}/{system}")


def produce_mode(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="ksgate-cost-") as tmp, broker_and_gateway(Path(tmp)) as (broker, gateway):
        for bootstrap, path in ((broker.bootstrap, "direct"), (gateway.bootstrap, "gateway")):
            producer = Producer({"bootstrap.servers": bootstrap, **LATENCY_SETTINGS})
            for _ in range(300):  # warm
                producer.produce(TOPIC, value=b"x" * 100)
                producer.flush(10)
            times: list[float] = []
            with straced(gateway.pid, args.strace if path == "gateway" else None):
                cpu = cpu_s(gateway.pid)
                for _ in range(args.requests):
                    start = time.perf_counter()
                    producer.produce(TOPIC, value=b"x" * 100)
                    if producer.flush(10):
                        raise RuntimeError("a record was not delivered")
                    times.append((time.perf_counter() - start) * 1000)
                used = cpu_s(gateway.pid) - cpu
            cost = f"; gateway CPU {1e6 * used / args.requests:.1f} us per request" if path == "gateway" else ""
            print(f"{path}: p50 {percentile(times, 50):.3f} ms, p99 {percentile(times, 99):.3f} ms{cost}", flush=True)


# --- bytecodes per relayed Produce (no sockets) ---------------------------------------------------

STAGES = ("ProxySession.received", "decide", "read_request_header", "prepass", "allowed_walked",
          "MessageCodec.decode_prefix", "authorize",
          "ConnectionAuthzView.allowed", "check_topics",
          "TopicGuard.inspect", "ProxySession.upstream_frames", "response_pieces", "body_names_endpoints",
          "ResponseQueue.pop_ready", "ListenerTraffic.request_frame", "ListenerTraffic.response")


def allow_write(workdir: Path, topic: str) -> dict[str, Any]:
    """Gateway settings for StandardAuthorizer with one ACL file holding one ACL, ANONYMOUS may WRITE ``topic``
    (which implies DESCRIBE); the audit log stays as the caller sets it (Kafka's default: allowed not recorded)."""
    from authz.model import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )
    from gateway.stores.file_acls import FileAclStore

    workdir.mkdir(parents=True, exist_ok=True)
    FileAclStore(workdir / "acls.json").add([AclBinding(
        ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
        AccessControlEntry("User:ANONYMOUS", "*", AclOperation.WRITE, AclPermissionType.ALLOW))])
    return {"authorizer.class.name": "StandardAuthorizer", "ksgate.acl.file": str(workdir / "acls.json")}


def produce_round_trip(workdir: Path, authorizer: bool = False) -> Callable[[], None]:
    """One relayed Produce: the client's request into the session, the upstream's answer back.

    ``authorizer``: StandardAuthorizer with one ACL allowing ANONYMOUS to write the topic, and the
    audit log on with Kafka's defaults (allowed decisions not recorded), as a production gateway runs.
    """
    import struct

    from gateway.session import actions as act
    from protocol.api_keys import ApiKey
    from protocol.messages import request_frame, response_frame
    from protocol.record_batch import encode_batch
    from tests.gateway.session.session_driver import Driver, gateway_for

    extra = allow_write(workdir, "lat") if authorizer else {}
    session = Driver.connect(gateway_for(workdir, **extra)).session
    version = 11
    request = request_frame(ApiKey.PRODUCE, version, 7, {
        "transactional_id": None, "acks": -1, "timeout_ms": 30_000, "topic_data": [{"name": "lat", "partition_data": [
            {"index": 0, "records": encode_batch([(None, b"x" * 100)], timestamp_ms=0)}]}]}, "rdkafka")
    answer: dict[str, Any] = {"throttle_time_ms": 0, "responses": [{"name": "lat", "partition_responses": [{
        "index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0,
        "record_errors": [], "error_message": None}]}]}
    template = response_frame(ApiKey.PRODUCE, version, 0, answer)

    def round_trip() -> None:
        buffer = session.receive_buffer()
        buffer[: len(request)] = request
        sent = next(a for a in session.received(len(request)) if isinstance(a, act.SendToUpstream))
        upstream_id = struct.unpack_from(">i", b"".join(bytes(p) for p in sent.pieces), 8)[0]
        wire = bytearray(template)
        struct.pack_into(">i", wire, 4, upstream_id)  # the answer to the id the gateway chose
        replies = session.upstream_frames([memoryview(wire)])
        if not any(isinstance(a, act.SendToClient) for a in replies):
            raise RuntimeError(f"no answer to the client: {replies}")

    return round_trip


def opcodes_mode(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="ksgate-cost-") as tmp:
        round_trip = produce_round_trip(Path(tmp), args.authorizer)
        for _ in range(300):  # warm: caches, lazily compiled codecs
            round_trip()
        own: Counter[str] = Counter()
        inclusive: Counter[str] = Counter()

        def trace(frame: FrameType, event: str, _arg: object) -> Any:
            frame.f_trace_opcodes = True
            if event == "opcode":
                own[frame.f_code.co_qualname] += 1
                names, caller = set(), frame  # type: set[str], FrameType | None
                while caller is not None:
                    names.add(caller.f_code.co_qualname)
                    caller = caller.f_back
                for name in names:
                    inclusive[name] += 1
            return trace

        sys.settrace(trace)
        try:
            round_trip()
        finally:
            sys.settrace(None)
        start = time.process_time()
        for _ in range(5000):
            round_trip()
        us = (time.process_time() - start) / 5000 * 1e6
    total = inclusive["ProxySession.received"] + inclusive["ProxySession.upstream_frames"]
    setup = "StandardAuthorizer, one allow ACL, audit on" if args.authorizer else "no authorizer"
    print(f"one relayed Produce round trip ({setup}): {total} bytecodes in the session "
          f"({us:.1f} us of process CPU each, over 5,000)")
    for stage in STAGES:
        print(f"  {inclusive[stage]:6d}  {stage}")
    print("most bytecodes of their own:")
    for name, count in own.most_common(15):
        print(f"  {count:6d}  {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("fetch", "produce", "opcodes"))
    parser.add_argument("--records", type=int, default=200_000, help="fetch: records of 1 KiB")
    parser.add_argument("--passes", type=int, default=5, help="fetch: measured reads of them all")
    parser.add_argument("--requests", type=int, default=5000, help="produce: single-record requests per path")
    parser.add_argument("--strace", type=Path, default=None, help="fetch, produce: strace -c output file")
    parser.add_argument("--authorizer", action="store_true",
                        help="opcodes: with StandardAuthorizer, an ACL allowing the write, and the audit log on")
    args = parser.parse_args(argv)
    {"fetch": fetch_mode, "produce": produce_mode, "opcodes": opcodes_mode}[args.mode](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
