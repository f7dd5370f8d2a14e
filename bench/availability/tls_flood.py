"""What a TLS handshake flood from one address does to the gateway's other clients.

A benchmark, not a test.  It starts an embedded Tansu broker and a gateway process (``ksgate
run``) with one SSL listener (an ECDSA P-256 certificate, auth/cert_tools.py).  A small client
connected over TLS before the flood sends ApiVersions and Metadata one at a time (paced, as in
login_flood.py) and records each round trip: alone (baseline), then while a second process
floods the listener from 127.0.0.1 for --seconds: --concurrency connections at once, each a full
TLS handshake (no session resumption: a new SSLContext per process, tickets off) and then closed.
Midway, new honest clients connect from another loopback address (127.0.0.2), complete their
handshake and send one ApiVersions: how many got an answer and how long the slowest took.

Printed: handshakes/s, the gateway process's CPU per handshake over the flood (raw and net of
the baseline CPU rate), the small client's p50/p99/max alone and under the flood, and the new
clients' outcome; then the gateway's open descriptors midway through the flood.

--flood chooses what each flood connection does: ``handshake`` (the default, above), ``hello``
(sends one ClientHello and closes at once without reading the answer: does the gateway still
pay for its key share and signature?) or ``silent`` (opens TCP and sends nothing until the
gateway closes it: the handshake timeout's job; descriptors held).  --flooder-host and
--honest-host choose the addresses (``::1``, or the IPv4-mapped ``::ffff:127.0.0.1``, make the
listener dual-stack, [::]); with --honest-host the small client and the new clients both use it.

    .venv/bin/python bench/availability/tls_flood.py [--seconds 10] [--concurrency 64] [--set K=V]
        [--flood handshake|hello|silent] [--flooder-host 127.0.0.1] [--honest-host ::1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import ssl
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from throughput import GatewayProcess, loadavg, machine, only_node, parse_settings, plain_client  # noqa: E402

from auth.cert_tools import TlsFiles, write_tls_material  # noqa: E402
from bench.availability.login_flood import SmallClient, flood_phases, percentile  # noqa: E402
from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from protocol.api_keys import ApiKey  # noqa: E402

NEW_CLIENTS = 5  # honest clients connecting from HONEST_HOST during the flood
HONEST_HOST = "127.0.0.2"  # loopback answers the whole of 127/8: another client address


def client_context(tls: TlsFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.check_hostname = False
    context.options |= ssl.OP_NO_TICKET  # every flood handshake is a full one
    return context


class TlsSmallClient(SmallClient):
    """login_flood.py's paced client over TLS, optionally from a chosen source address."""

    def __init__(self, address: tuple[str, int], tls: TlsFiles, source: str | None = None,
                 timeout_s: float = 30.0) -> None:
        raw = socket.create_connection(address, timeout=timeout_s,
                                       source_address=(source, 0) if source else None)
        # ("::1", port) or ("127.0.0.1", port): create_connection picks the family from the address
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = client_context(tls).wrap_socket(raw)
        self.cid = 0


# --- the flood: another process, many connections each a full TLS handshake, then closed ----

async def _flood(address: tuple[str, int], seconds: float, concurrency: int, tls: TlsFiles,
                 kind: str = "handshake") -> tuple[int, int]:
    """``concurrency`` workers, each opening one connection after another until ``seconds`` pass;
    what a connection does is ``kind`` (see the module's docstring).  (done, errors)."""
    done = errors = 0
    deadline = time.monotonic() + seconds
    context = client_context(tls)
    hello = client_hello(context)

    async def one() -> None:
        if kind == "handshake":
            _, writer = await asyncio.wait_for(asyncio.open_connection(*address, ssl=context), 30)
            writer.transport.abort()  # closed at once: the handshake was the point
        elif kind == "hello":
            _, writer = await asyncio.wait_for(asyncio.open_connection(*address), 30)
            writer.write(hello)
            writer.close()  # the hello is flushed, then FIN: nothing of the answer is read
        else:  # silent: held until the gateway closes it (or the flood ends)
            reader, writer = await asyncio.wait_for(asyncio.open_connection(*address), 30)
            try:
                await asyncio.wait_for(reader.read(), max(0.0, deadline - time.monotonic()))
            finally:
                writer.transport.abort()

    async def worker() -> None:
        nonlocal done, errors
        while time.monotonic() < deadline:
            try:
                await one()
                done += 1
            except (OSError, ssl.SSLError, TimeoutError):
                errors += 1  # for silent: also a connection still held when the flood ended
                await asyncio.sleep(0.01)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, errors


def client_hello(context: ssl.SSLContext) -> bytes:
    """One TLS ClientHello from ``context`` (a fresh key share), as bytes to send over plain TCP."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing)
    with contextlib.suppress(ssl.SSLWantReadError):  # it waits for the server: the hello is out
        tls.do_handshake()
    return outgoing.read()


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# --- the measurement ------------------------------------------------------------------------

@dataclass(slots=True)
class Result:
    handshakes: int
    errors: int
    flood_s: float
    handshakes_per_s: float
    gateway_cpu_ms_per_handshake: float
    gateway_cpu_ms_per_handshake_net: float  # minus the baseline phase's CPU rate
    gateway_cpu_pct_flood: float
    baseline_p50_ms: float
    baseline_p99_ms: float
    baseline_max_ms: float
    flood_p50_ms: float
    flood_p99_ms: float
    flood_max_ms: float
    small_requests_in_flood: int
    new_clients_ok: int  # of NEW_CLIENTS from HONEST_HOST: connected, handshaken, answered
    new_client_max_ms: float
    gateway_fds_midway: int  # the gateway process's open descriptors when the new clients had connected


def new_clients(address: tuple[str, int], tls: TlsFiles, source: str = HONEST_HOST) -> tuple[int, float]:
    """Honest clients from another address connect and send one ApiVersions, one after the other."""
    ok, slowest = 0, 0.0
    for _ in range(NEW_CLIENTS):
        start = time.perf_counter()
        try:
            client = TlsSmallClient(address, tls, source=source)
            try:
                answer = client.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "bench",
                                                              "client_software_version": "1"})
                ok += answer["error_code"] == 0
            finally:
                client.close()
        except (OSError, ssl.SSLError):
            pass  # refused, reset or timed out: not answered
        slowest = max(slowest, (time.perf_counter() - start) * 1000)
    return ok, slowest


def measure(broker: EmbeddedBroker, workdir: Path, tls: TlsFiles, args: argparse.Namespace) -> Result:
    extra = {"ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
             **only_node(plain_client(broker.bootstrap)), **parse_settings(args.set)}
    pace = args.pace_ms / 1000
    dual_stack = any(":" in host for host in (args.flooder_host, args.honest_host or ""))
    process = DualStackGatewayProcess if dual_stack else GatewayProcess
    with process(broker.bootstrap, workdir, extra, protocol="SSL") as gateway:
        address = ("127.0.0.1", gateway.port)
        honest = (args.honest_host, gateway.port) if args.honest_host else address
        small = TlsSmallClient(honest, tls)
        fds: list[int] = []

        def probe() -> tuple[int, float]:
            answered = new_clients(honest, tls, args.honest_host or HONEST_HOST)
            fds.append(open_descriptors(gateway.pid))
            return answered

        flood_args = ((args.flooder_host, gateway.port), args.seconds, args.concurrency, tls, args.flood)
        run = flood_phases(gateway.pid, lambda seconds: small.round_trips(seconds, pace), _flood, flood_args,
                           probe, seconds=args.seconds, baseline_seconds=args.baseline_seconds, probe_after=0.5)
        small.close()
    per, net = run.per_item_ms()
    baseline, during = run.baseline, run.during
    return Result(
        handshakes=run.done, errors=run.errors, flood_s=round(run.flood_s, 2),
        handshakes_per_s=round(run.done / run.flood_s, 1), gateway_cpu_ms_per_handshake=round(per, 3),
        gateway_cpu_ms_per_handshake_net=round(net, 3), gateway_cpu_pct_flood=round(run.cpu_pct(), 1),
        baseline_p50_ms=round(statistics.median(baseline), 2), baseline_p99_ms=round(percentile(baseline, 0.99), 2),
        baseline_max_ms=round(max(baseline), 2),
        flood_p50_ms=round(statistics.median(during), 2), flood_p99_ms=round(percentile(during, 0.99), 2),
        flood_max_ms=round(max(during), 2), small_requests_in_flood=len(during),
        new_clients_ok=run.probe[0], new_client_max_ms=round(run.probe[1], 1), gateway_fds_midway=fds[0])


class DualStackGatewayProcess(GatewayProcess):
    """The bench gateway with its listener on [::], dual-stack: IPv6 clients and IPv4 ones (as ::ffff:a.b.c.d)."""

    @property
    def settings(self) -> dict[str, Any]:
        return {**super().settings, "listeners": f"{self.protocol}://[::]:{self.port}",
                "advertised.listeners": f"{self.protocol}://127.0.0.1:{self.port}"}


def measure_retrying(broker: EmbeddedBroker, workdir: Path, tls: TlsFiles, args: argparse.Namespace) -> Result:
    """The free port chosen for the gateway can be taken by another process before the gateway
    binds it (a busy shared machine): start again on another port."""
    for attempt in range(3):
        run_dir = workdir / f"run-{attempt}"
        run_dir.mkdir()
        try:
            return measure(broker, run_dir, tls, args)
        except RuntimeError as exc:
            if "Address already in use" not in str(exc):
                raise
            print("the gateway's port was taken before it bound it: again", file=sys.stderr)
    raise RuntimeError("the gateway could not bind a port three times")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="flood duration (default 10)")
    parser.add_argument("--baseline-seconds", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=64, help="flood connections at once (default 64)")
    parser.add_argument("--pace-ms", type=float, default=5.0, help="the small client's request interval")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra gateway key, repeatable")
    parser.add_argument("--flood", choices=("handshake", "hello", "silent"), default="handshake",
                        help="what each flood connection does (default: a full handshake, then closed)")
    parser.add_argument("--flooder-host", default="127.0.0.1",
                        help="the address the flood connects to and from (::ffff:127.0.0.1: IPv4-mapped)")
    parser.add_argument("--honest-host", default=None,
                        help="the small client's and new clients' address (::1: over IPv6); default 127.0.0.1 "
                        f"for the small client, {HONEST_HOST} for the new ones")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    info = machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; load {loadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="ksgate-tls-flood-") as tmp:
        workdir = Path(tmp)
        tls = write_tls_material(workdir)
        with EmbeddedBroker(log_path=workdir / "tansu.log") as broker:
            r = measure_retrying(broker, workdir, tls, args)
    print(f"{'hs/s':>6} {'errors':>6} {'cpu ms/hs':>9} {'net':>6} {'gw cpu%':>7} {'base p50/p99/max':>18} "
          f"{'flood p50/p99/max (ms)':>24} {'new clients ok, max ms':>23}")
    print(f"{r.handshakes_per_s:>6.0f} {r.errors:>6} {r.gateway_cpu_ms_per_handshake:>9.3f} "
          f"{r.gateway_cpu_ms_per_handshake_net:>6.3f} {r.gateway_cpu_pct_flood:>7.1f} "
          f"{r.baseline_p50_ms:>6.2f}/{r.baseline_p99_ms:.2f}/{r.baseline_max_ms:.2f} "
          f"{r.flood_p50_ms:>8.2f}/{r.flood_p99_ms:.2f}/{r.flood_max_ms:.2f} "
          f"{r.new_clients_ok:>14}/{NEW_CLIENTS}, {r.new_client_max_ms:.0f}")
    print(f"flood {args.flood} from {args.flooder_host}, honest clients on {args.honest_host or 'IPv4'}; "
          f"gateway descriptors open midway: {r.gateway_fds_midway}")
    print(f"load average after: {loadavg()} (other processes on the machine share its cores)")
    if args.json:
        print(json.dumps({"machine": info, "result": asdict(r)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
