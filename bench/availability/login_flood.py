"""What a failed-login flood costs the gateway, and what it does to other clients of the same address.

A benchmark, not a test.  It starts an embedded Tansu broker and, per scenario, a gateway
process (``ksgate run``, as bench/throughput.py does) with a SASL_PLAINTEXT listener offering
PLAIN.  A small client logs in as a real user first, then sends ApiVersions and Metadata
requests one at a time (paced) on that connection and records each round trip: for a few
seconds alone (baseline), then while a second process floods the gateway for --seconds with
failed PLAIN logins over the raw wire (many connections at once, each one SaslHandshake +
SaslAuthenticate, read until the gateway closes it).  Near the end of the flood, users who
have not logged in yet (so their first login needs a hash) log in from the same address, one
after the other: their login times show whether the flood locks or slows them out.

Printed per scenario: flood attempts/s, the gateway process's CPU per attempt over the flood
(all its threads, so PBKDF2 on the verification pool counts too; raw, and net of the CPU
rate the baseline phase used), the small client's p50/p99/max alone and under the flood,
and the fresh logins' outcome and max time.

Scenarios: ``default`` (unknown users, a new one each attempt), ``known`` (a known user, bob,
a new wrong password each attempt: a brute force), ``stale`` (bob's one stale password,
retried) and ``unbudgeted`` (unknown users with ``ksgate.authentication.hash.rate.per.ip: 0``:
every attempt is hashed, on the pool).

    .venv/bin/python bench/availability/login_flood.py [--seconds 10] [--concurrency 64] [--scenario default]
        [--set K=V]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from multiprocessing.queues import SimpleQueue
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from throughput import SaslGatewayProcess, cpu_seconds, loadavg, machine, parse_settings  # noqa: E402

from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from gateway.stores.file_users import FileCredentialStore  # noqa: E402
from protocol.api_keys import ApiKey  # noqa: E402
from protocol.messages import decode_response, request_frame  # noqa: E402
from tests.wire_client import read_frame  # noqa: E402

USER, PASSWORD = "alice", "alice-secret"
FRESH_USERS = 5  # users logging in for the first time during the flood
# scenario → (gateway settings, flood kind)
SCENARIOS: dict[str, tuple[dict[str, Any], str]] = {
    "default": ({}, "unknown"),
    "known": ({}, "known"),
    "stale": ({}, "stale"),
    "unbudgeted": ({"ksgate.authentication.hash.rate.per.ip": 0}, "unknown"),
}


# --- the small client: one authenticated connection, one request at a time ----------------

class SmallClient:
    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.cid += 1
        self.sock.sendall(request_frame(api_key, version, self.cid, body))
        cid, response = decode_response(read_frame(self.sock), api_key, version)
        assert cid == self.cid, (cid, self.cid)
        return response

    def login(self, user: str = USER, password: str = PASSWORD) -> bool:
        assert self.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        answer = self.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": f"\0{user}\0{password}".encode()})
        return bool(answer["error_code"] == 0)

    def round_trips(self, seconds: float, pace_s: float) -> list[float]:
        """Alternating ApiVersions (answered by the gateway) and Metadata (relayed): ms each."""
        requests: list[tuple[ApiKey, int, dict[str, Any]]] = [
            (ApiKey.API_VERSIONS, 3, {"client_software_name": "bench", "client_software_version": "1"}),
            (ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})]
        times: list[float] = []
        deadline = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < deadline:
            api_key, version, body = requests[i % 2]
            i += 1
            start = time.perf_counter()
            self.call(api_key, version, body)
            elapsed = time.perf_counter() - start
            times.append(elapsed * 1000)
            time.sleep(max(0.0, pace_s - elapsed))
        return times

    def close(self) -> None:
        self.sock.close()


# --- the flood: another process, many raw connections each failing one PLAIN login ---------

def _flood_frames(n: int, kind: str) -> bytes:
    user = "bob" if kind in ("known", "stale") else f"mallory-{n}"
    guess = "stale-password" if kind == "stale" else f"guess-{n}"
    token = f"\0{user}\0{guess}".encode()
    return (request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"})
            + request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": token}))


async def _flood(address: tuple[str, int], seconds: float, concurrency: int, kind: str) -> tuple[int, int]:
    done = errors = 0
    deadline = time.monotonic() + seconds
    counter = iter(range(1 << 62))

    async def worker() -> None:
        nonlocal done, errors
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection(*address)
                writer.write(_flood_frames(next(counter), kind))
                received = 0
                while chunk := await reader.read(65536):
                    received += len(chunk)
                writer.close()
                if received:
                    done += 1
                else:
                    errors += 1
            except OSError:
                errors += 1
                await asyncio.sleep(0.01)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, errors


FloodResult = tuple[int, int]  # done, errors


def flood_process(flood: Callable[..., Coroutine[Any, Any, FloodResult]], args: tuple[Any, ...],
                  ready: Any, go: Any, out: SimpleQueue[tuple[int, int, float]]) -> None:
    """A flood in a process of its own (on uvloop if it is there): ``flood(*args)`` once ``go`` is set,
    its (done, errors) and duration put on ``out``.  The login and TLS handshake floods share it."""
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    ready.set()
    go.wait()
    start = time.perf_counter()
    done, errors = asyncio.run(flood(*args))
    out.put((done, errors, time.perf_counter() - start))


@dataclass(slots=True)
class FloodRun:
    """A small client's round trips alone and under a flood from another process, and what the gateway spent."""

    baseline: list[float]  # ms
    baseline_cpu_rate: float  # gateway CPU seconds per second, alone
    during: list[float]  # ms, under the flood
    probe: tuple[int, float]  # what probe() returned (how many got in, the slowest in ms)
    done: int
    errors: int
    flood_s: float
    cpu_ms: float  # the gateway's CPU over the flood
    wall_s: float

    def per_item_ms(self) -> tuple[float, float]:
        """The gateway's CPU per flooded item: raw, and net of the baseline's CPU rate."""
        if not self.done:
            return float("nan"), float("nan")
        return self.cpu_ms / self.done, (self.cpu_ms - self.baseline_cpu_rate * self.wall_s * 1000) / self.done

    def cpu_pct(self) -> float:
        return 100 * self.cpu_ms / 1000 / self.wall_s


def flood_phases(gateway_pid: int, round_trips: Callable[[float], list[float]],
                 flood: Callable[..., Coroutine[Any, Any, FloodResult]], flood_args: tuple[Any, ...],
                 probe: Callable[[], tuple[int, float]], *, seconds: float, baseline_seconds: float,
                 probe_after: float) -> FloodRun:
    """Warm-up, a baseline alone, then ``flood(*flood_args)`` in another process for ``seconds`` while the
    small client keeps going; ``probe`` runs once ``probe_after`` of the flood has passed (the flood still on)."""
    round_trips(0.5)  # warm-up
    cpu0, wall0 = cpu_seconds(gateway_pid), time.perf_counter()
    baseline = round_trips(baseline_seconds)
    baseline_rate = (cpu_seconds(gateway_pid) - cpu0) / (time.perf_counter() - wall0)
    spawn = multiprocessing.get_context("spawn")
    ready, go, out = spawn.Event(), spawn.Event(), spawn.SimpleQueue()
    flooder = spawn.Process(target=flood_process, args=(flood, flood_args, ready, go, out), daemon=True)
    flooder.start()
    try:
        if not ready.wait(30):
            raise RuntimeError("the flood process did not start")
        cpu1, wall1 = cpu_seconds(gateway_pid), time.perf_counter()
        go.set()
        during = round_trips(seconds * probe_after)
        probed = probe()
        during += round_trips(max(0.0, wall1 + seconds - time.perf_counter()))
        done, errors, flood_s = out.get()
        cpu2, wall2 = cpu_seconds(gateway_pid), time.perf_counter()
    finally:
        flooder.join(timeout=30)
        if flooder.is_alive():
            flooder.terminate()
            flooder.join(timeout=5)
    return FloodRun(baseline, baseline_rate, during, probed, done, errors, flood_s, (cpu2 - cpu1) * 1000, wall2 - wall1)


# --- one scenario --------------------------------------------------------------------------

@dataclass(slots=True)
class ScenarioResult:
    scenario: str
    attempts: int
    errors: int
    flood_s: float
    attempts_per_s: float
    gateway_cpu_ms_per_attempt: float
    gateway_cpu_ms_per_attempt_net: float  # minus the baseline phase's CPU rate
    gateway_cpu_pct_flood: float
    gateway_cpu_pct_baseline: float
    baseline_p50_ms: float
    baseline_p99_ms: float
    flood_p50_ms: float
    flood_p99_ms: float
    flood_max_ms: float
    small_requests_in_flood: int
    fresh_logins_ok: int  # of FRESH_USERS first logins from the same address during the flood
    fresh_login_max_ms: float


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def fresh_logins(address: tuple[str, int]) -> tuple[int, float]:
    """Users who never logged in before log in, one after the other: how many got in, the slowest (ms)."""
    ok, slowest = 0, 0.0
    for i in range(FRESH_USERS):
        start = time.perf_counter()
        client = SmallClient(address)
        try:
            ok += client.login(f"fresh-{i}", f"fresh-{i}-secret")
        except OSError:
            pass  # closed or timed out: not logged in
        finally:
            client.close()
        slowest = max(slowest, (time.perf_counter() - start) * 1000)
    return ok, slowest


def run_scenario(name: str, broker: EmbeddedBroker, workdir: Path, credentials: Path,
                 args: argparse.Namespace) -> ScenarioResult:
    settings, kind = SCENARIOS[name]
    extra = {"sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(credentials),
             "ksgate.sasl.plain.allow.insecure": True, "ksgate.acl.file": str(workdir / "acls.json"),
             "allow.everyone.if.no.acl.found": True, "ksgate.audit.log.file": str(workdir / f"audit-{name}.log"),
             **settings, **parse_settings(args.set)}
    scenario_dir = workdir / name
    scenario_dir.mkdir()
    with SaslGatewayProcess(broker.bootstrap, scenario_dir, extra) as gateway:
        address = ("127.0.0.1", gateway.port)
        small = SmallClient(address)
        if not small.login():
            raise RuntimeError("the small client could not log in")
        pace = args.pace_ms / 1000
        run = flood_phases(gateway.pid, lambda seconds: small.round_trips(seconds, pace),
                           _flood, (address, args.seconds, args.concurrency, kind), lambda: fresh_logins(address),
                           seconds=args.seconds, baseline_seconds=args.baseline_seconds, probe_after=0.7)
        small.close()
    per_attempt, net = run.per_item_ms()
    baseline, during = run.baseline, run.during
    return ScenarioResult(
        scenario=name, attempts=run.done, errors=run.errors, flood_s=round(run.flood_s, 2),
        attempts_per_s=round(run.done / run.flood_s, 1), gateway_cpu_ms_per_attempt=round(per_attempt, 3),
        gateway_cpu_ms_per_attempt_net=round(net, 3), gateway_cpu_pct_flood=round(run.cpu_pct(), 1),
        gateway_cpu_pct_baseline=round(100 * run.baseline_cpu_rate, 1),
        baseline_p50_ms=round(statistics.median(baseline), 2), baseline_p99_ms=round(percentile(baseline, 0.99), 2),
        flood_p50_ms=round(statistics.median(during), 2), flood_p99_ms=round(percentile(during, 0.99), 2),
        flood_max_ms=round(max(during), 2), small_requests_in_flood=len(during),
        fresh_logins_ok=run.probe[0], fresh_login_max_ms=round(run.probe[1], 1))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="flood duration (default 10)")
    parser.add_argument("--baseline-seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=64, help="flood connections at once (default 64)")
    parser.add_argument("--pace-ms", type=float, default=5.0, help="the small client's request interval")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS),
                        help="repeatable; default: all")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra gateway key, repeatable (e.g. ksgate.authentication.verification.threads=1)")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    info = machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; load {loadavg()}", file=sys.stderr)
    results: list[ScenarioResult] = []
    with tempfile.TemporaryDirectory(prefix="ksgate-flood-") as tmp:
        workdir = Path(tmp)
        credentials = workdir / "users.json"
        store = FileCredentialStore(credentials)
        for user, password in [(USER, PASSWORD), ("bob", "bob-secret"),
                               *((f"fresh-{i}", f"fresh-{i}-secret") for i in range(FRESH_USERS))]:
            store.upsert_user(user, password, mechanisms=("PLAIN",))
        with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
            for name in args.scenario or list(SCENARIOS):
                print(f"scenario {name} …", file=sys.stderr)
                results.append(run_scenario(name, broker, workdir, credentials, args))
    print(f"{'scenario':<12} {'att/s':>7} {'cpu ms/att':>10} {'net':>6} {'gw cpu%':>7} "
          f"{'base p50/p99':>13} {'flood p50/p99/max (ms)':>23} {'fresh logins ok, max ms':>24}")
    for r in results:
        print(f"{r.scenario:<12} {r.attempts_per_s:>7.0f} {r.gateway_cpu_ms_per_attempt:>10.3f} "
              f"{r.gateway_cpu_ms_per_attempt_net:>6.3f} {r.gateway_cpu_pct_flood:>7.1f} "
              f"{r.baseline_p50_ms:>6.2f}/{r.baseline_p99_ms:<6.2f} "
              f"{r.flood_p50_ms:>7.2f}/{r.flood_p99_ms:.2f}/{r.flood_max_ms:.2f} "
              f"{r.fresh_logins_ok:>14}/{FRESH_USERS}, {r.fresh_login_max_ms:.0f}")
    print(f"load average after: {loadavg()} (other processes on the machine share its cores)")
    if args.json:
        print(json.dumps({"machine": info, "pid": os.getpid(), "results": [asdict(r) for r in results],
                          "run": uuid.uuid4().hex[:8]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
