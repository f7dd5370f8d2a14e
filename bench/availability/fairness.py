"""Fairness: a small client's latency through one gateway process while other clients flood it.

A benchmark, not a test.  It starts an embedded Tansu broker and one gateway process
(``ksgate run``, SASL_PLAINTEXT with PLAIN, the StandardAuthorizer on, no ACL but the small
client's), then measures a small client: Metadata v9 for one topic, one request at a time
over the raw wire, p50/p99/max of the round trip, while

* idle:              nothing else runs;
* metadata-100k:     another connection sends Metadata v9 naming 100,000 topics, one after another;
* delete-topics-100k: DeleteTopics v4 naming 100,000 topics;
* describe-configs-100k: DescribeConfigs v4 for 100,000 topic resources;
* produce-100mb:     a confluent-kafka producer sends ~100 MB records, one request each;
* failed-logins:     a process with many threads opens connections and fails PLAIN logins.

The flooding user may only write to one topic: its big requests are denied item by item
(the costly case, every name decided and audited); its Produce requests are relayed.
Every phase is bounded by --seconds; floods run in their own processes, so the measuring
client has its own GIL.  ``>50 ms`` counts the small client's requests slower than that.

    .venv/bin/python bench/availability/fairness.py [--seconds 8] [--phases idle,metadata-100k,...]
        [--small api-versions]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing.queues import SimpleQueue
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from authz.acl_json import encode_acl_file  # noqa: E402
from authz.model import (  # noqa: E402
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from bench.throughput import CLK_TCK, SaslGatewayProcess, cpu_seconds, loadavg, machine, percentile  # noqa: E402
from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from gateway.stores.file_users import FileCredentialStore  # noqa: E402
from protocol.api_keys import ApiKey  # noqa: E402
from protocol.messages import decode_response, request_frame  # noqa: E402
from tests.wire_client import read_frame  # noqa: E402

SMALL_TOPIC, BIG_TOPIC = "fair-small", "fair-big"
PASSWORDS = {"small": "small-secret", "flood": "flood-secret"}
NAMES = 100_000
PRODUCE_BYTES = 99_000_000  # one record; the request stays under socket.request.max.bytes (104857600)
LOGIN_THREADS = 32
PHASES = ("idle", "metadata-100k", "delete-topics-100k", "describe-configs-100k", "produce-100mb", "failed-logins")
_SIZE = struct.Struct(">i")


def gateway_settings(workdir: Path) -> dict[str, Any]:
    store = FileCredentialStore(workdir / "users.json")
    for user, password in PASSWORDS.items():
        store.upsert_user(user, password)
    acls = [AclBinding(ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL),
                       AccessControlEntry(f"User:{user}", "*", operation, AclPermissionType.ALLOW))
            for user, topic, operation in (("small", SMALL_TOPIC, AclOperation.DESCRIBE),
                                           ("flood", BIG_TOPIC, AclOperation.WRITE))]
    (workdir / "acls.json").write_bytes(encode_acl_file(acls))
    return {
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.sasl.plain.allow.insecure": True,
        "ksgate.credentials.file": str(workdir / "users.json"),
        "authorizer.class.name": "StandardAuthorizer", "ksgate.acl.file": str(workdir / "acls.json"),
        "allow.everyone.if.no.acl.found": False, "ksgate.audit.log.file": str(workdir / "audit.log"),
        "socket.request.max.bytes": 104_857_600,
    }


# --- raw wire ----------------------------------------------------------------------------------------

class Wire:
    """One blocking connection, PLAIN-authenticated; one request at a time."""

    def __init__(self, address: str, user: str, password: str, timeout_s: float = 120.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next = 0
        self.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        _, body = self.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
        if body["error_code"]:
            raise ConnectionError(f"PLAIN login as {user} failed: {body['error_code']}")

    def call(self, key: int, version: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._next += 1
        self.sock.sendall(request_frame(key, version, self._next, body))
        return decode_response(self.read_frame(), key, version)

    def round_trip(self, frame: bytes) -> int:
        """Send a prebuilt frame, read the answer without decoding it; its size."""
        self.sock.sendall(frame)
        return len(self.read_frame())

    def read_frame(self) -> bytes:
        return read_frame(self.sock)

    def close(self) -> None:
        self.sock.close()


def _metadata_body(names: list[str]) -> dict[str, Any]:
    return {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}


def big_frame(phase: str) -> bytes:
    names = [f"flood-{i:06d}" for i in range(NAMES)]
    if phase == "metadata-100k":
        return request_frame(ApiKey.METADATA, 9, 1, _metadata_body(names))
    if phase == "delete-topics-100k":
        return request_frame(ApiKey.DELETE_TOPICS, 4, 1, {"topic_names": names, "timeout_ms": 1000})
    if phase == "describe-configs-100k":
        return request_frame(ApiKey.DESCRIBE_CONFIGS, 4, 1, {
            "resources": [{"resource_type": 2, "resource_name": n, "configuration_keys": None} for n in names],
            "include_synonyms": False, "include_documentation": False})
    raise ValueError(phase)


# --- the floods (each in a process of its own) ----------------------------------------------------

@dataclass(slots=True)
class Flood:
    """Shared with a flood process: it sets ``going`` once its first big request is on the wire,
    floods until ``stop``, then puts its counts on ``out``."""

    going: Any  # multiprocessing Events
    stop: Any
    out: SimpleQueue[dict[str, Any]]


def flood_requests(address: str, phase: str, flood: Flood) -> None:
    frame, done, errors, largest = big_frame(phase), 0, 0, 0
    wire: Wire | None = None
    while not flood.stop.is_set():
        try:
            wire = wire or Wire(address, "flood", PASSWORDS["flood"])
            wire.sock.sendall(frame)
            flood.going.set()
            largest = max(largest, len(wire.read_frame()))
            done += 1
        except OSError:
            errors += 1
            if wire is not None:
                wire.close()
            wire = None
    flood.out.put({"requests": done, "errors": errors, "request_bytes": len(frame), "response_bytes": largest})


def flood_produce(address: str, flood: Flood) -> None:
    producer = Producer({"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "flood", "sasl.password": PASSWORDS["flood"],
                         "message.max.bytes": 100_000_000, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": False, "message.timeout.ms": 60_000})
    value, done, errors = b"\0" * PRODUCE_BYTES, 0, 0
    outcome: list[bool] = []
    while not flood.stop.is_set():
        outcome.clear()
        try:
            producer.produce(BIG_TOPIC, value, on_delivery=lambda err, _m: outcome.append(err is None))
        except KafkaException:
            errors += 1
            time.sleep(0.1)
            continue
        flood.going.set()
        producer.flush(60)
        done += sum(outcome)
        errors += outcome.count(False)
    flood.out.put({"requests": done, "errors": errors, "request_bytes": PRODUCE_BYTES, "response_bytes": 0})


def flood_logins(address: str, flood: Flood) -> None:
    attempts = [0] * LOGIN_THREADS

    def attempt_forever(index: int) -> None:
        host, port = address.rsplit(":", 1)
        while not flood.stop.is_set():
            flood.going.set()
            user = "small" if index % 2 else f"nobody-{index}"  # a real user and an unknown one
            try:
                with socket.create_connection((host, int(port)), timeout=10) as sock:
                    for key, version, body in ((ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}),
                                               (ApiKey.SASL_AUTHENTICATE, 2,
                                                {"auth_bytes": f"\0{user}\0wrong".encode()})):
                        sock.sendall(request_frame(key, version, 1, body))
                        header = sock.recv(4)
                        if len(header) < 4:
                            break
                        sock.recv(_SIZE.unpack(header)[0])
            except OSError:
                pass
            attempts[index] += 1

    threads = [threading.Thread(target=attempt_forever, args=(i,), daemon=True) for i in range(LOGIN_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=15)
    flood.out.put({"requests": sum(attempts), "errors": 0, "request_bytes": 0, "response_bytes": 0})


# --- the measurement ------------------------------------------------------------------------------

@dataclass(slots=True)
class Phase:
    name: str
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    over_50ms: int
    flood_requests: int
    flood_errors: int
    flood_request_bytes: int
    gateway_cpu_pct: float


SMALL_REQUESTS = {
    # Relayed to the broker (and authorized): the broker's own latency is part of the figure.
    "metadata": (ApiKey.METADATA, 9, _metadata_body([SMALL_TOPIC])),
    # Answered by the gateway itself: its event loop alone.
    "api-versions": (ApiKey.API_VERSIONS, 3, {"client_software_name": "fairness", "client_software_version": "1"}),
}


def small_client(address: str, kind: str) -> tuple[Wire, Callable[[], float]]:
    """The small client, logged in and warmed up (its link to the broker is up); a call to time it."""
    wire = Wire(address, "small", PASSWORDS["small"])
    key, version, body = SMALL_REQUESTS[kind]

    def timed() -> float:
        start = time.perf_counter()
        _, answer = wire.call(key, version, body)
        elapsed = time.perf_counter() - start
        if (answer.get("topics") or [{"error_code": answer.get("error_code", 0)}])[0]["error_code"]:
            raise RuntimeError(f"the small client's {kind} request failed: {answer}")
        return elapsed

    timed()
    return wire, timed


def flood_target(phase: str) -> Callable[..., None] | None:
    if phase == "idle":
        return None
    if phase == "produce-100mb":
        return flood_produce
    if phase == "failed-logins":
        return flood_logins
    return flood_requests


def run_phase(phase: str, address: str, gateway_pid: int, seconds: float, small: str) -> Phase:
    context = multiprocessing.get_context("fork")
    flood = Flood(context.Event(), context.Event(), context.SimpleQueue())
    wire, timed = small_client(address, small)  # before the flood: its login is not what is measured
    target = flood_target(phase)
    process = None
    if target is not None:
        args = (address, phase, flood) if target is flood_requests else (address, flood)
        process = context.Process(target=target, args=args, daemon=True)
        process.start()
        if not flood.going.wait(120):
            raise RuntimeError(f"{phase}: the flood did not start")
    cpu_before, wall_before = cpu_seconds(gateway_pid), time.perf_counter()
    latencies: list[float] = []
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            latencies.append(timed())
    finally:
        wire.close()
        flood.stop.set()
    cpu = 100 * (cpu_seconds(gateway_pid) - cpu_before) / (time.perf_counter() - wall_before)
    counts = {"requests": 0, "errors": 0, "request_bytes": 0}
    if process is not None:
        process.join(timeout=120)
        if process.is_alive():
            process.terminate()
            process.join(timeout=10)
        elif not flood.out.empty():
            counts = flood.out.get()
    ms = [1000 * v for v in latencies]
    return Phase(phase, len(ms), round(percentile(ms, 50), 2), round(percentile(ms, 99), 2), round(max(ms), 2),
                 sum(v > 50 for v in ms), counts["requests"], counts["errors"], counts["request_bytes"],
                 round(cpu, 1))


def table(phases: list[Phase]) -> str:
    lines = [f"{'phase':<24}{'samples':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'>50 ms':>7}{'flood reqs':>11}"
             f"{'errors':>8}{'req MB':>8}{'gw CPU %':>10}"]
    for p in phases:
        lines.append(f"{p.name:<24}{p.samples:>8}{p.p50_ms:>9.2f}{p.p99_ms:>9.2f}{p.max_ms:>9.2f}{p.over_50ms:>7}"
                     f"{p.flood_requests:>11}{p.flood_errors:>8}{p.flood_request_bytes / 1e6:>8.1f}"
                     f"{p.gateway_cpu_pct:>10.1f}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per phase (default 8)")
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}")
    parser.add_argument("--small", choices=sorted(SMALL_REQUESTS), default="metadata",
                        help="the small client's request: Metadata for one topic (relayed) or ApiVersions "
                             "(answered by the gateway)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = parser.parse_args(argv)
    args.phases = [p for p in args.phases.split(",") if p]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"machine: {machine()}  load average before: {loadavg()}  (CLK_TCK {CLK_TCK})", flush=True)
    with tempfile.TemporaryDirectory(prefix="ksgate-fairness-") as tmp, EmbeddedBroker() as broker:
        workdir = Path(tmp)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(SMALL_TOPIC, 1, 1), NewTopic(BIG_TOPIC, 1, 1)]).values():
            future.result(timeout=30)
        with SaslGatewayProcess(broker.bootstrap, workdir, gateway_settings(workdir)) as gateway:
            phases = []
            for name in args.phases:
                phases.append(run_phase(name, gateway.bootstrap, gateway.pid, args.seconds, args.small))
                print(table(phases[-1:]).splitlines()[-1], flush=True)
        audit = workdir / "audit.log"
        audit_mb = audit.stat().st_size / 1e6 if audit.exists() else 0.0
    print()
    print(table(phases))
    print(f"audit log: {audit_mb:.1f} MB; load average after: {loadavg()}")
    if args.json:
        print(json.dumps({"phases": [asdict(p) for p in phases], "audit_mb": audit_mb, "load": loadavg()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
