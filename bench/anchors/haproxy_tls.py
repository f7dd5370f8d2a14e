"""ksgate with SASL_SSL and the authorizer against HAProxy terminating TLS, in front of the same kind of broker.

A benchmark, not a test (issue #23: "with TLS, >= 1.15x of HAProxy's TLS termination").  Paths, each
repeat in alternating order (haproxy first on even repeats, last on odd ones):

* ``haproxy``: confluent-kafka ``SSL`` -> Debian's HAProxy (``mode tcp``, ``bind ... ssl crt``, no Kafka
  awareness) -> broker PLAINTEXT.  A TCP proxy cannot rewrite metadata, so the broker advertises HAProxy's
  address to this path: Tansu has one listener, so the ksgate paths get their own, identical Tansu (in-memory)
  process; with ``--upstream kafka`` one Apache Kafka serves all paths, HAProxy's through an extra listener.
* ``ksgate``: confluent-kafka ``SASL_SSL`` (SCRAM-SHA-512) -> ``ksgate run`` with the StandardAuthorizer and
  the bench user's ALLOW ACLs (bench/kafka_upstream.py's BENCH_ACLS, no allow-if-no-ACL) -> broker PLAINTEXT.
* ``ksgate-ssl`` (``--paths``): ``SSL``, no SASL, no authorizer, to separate TLS from SASL + authorization.

For each path, bench/throughput.py's produce and fetch throughput (librdkafka, 1 KiB records) and
single-record produce latency, with the proxy's and the broker's CPU (% of one core) per phase, and the
proxy's CPU per MB (ms of CPU per MB of record values, = millicores per MB/s).  The TLS version and cipher
each proxy negotiates with an OpenSSL client are printed: both listeners use the same certificate and key.

    .venv/bin/python bench/anchors/haproxy_tls.py [--upstream tansu|kafka] [--repeat 5] [--records 200000]
        [--haproxy-threads 0] [--paths haproxy,ksgate,ksgate-ssl] [--json]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka.admin import AdminClient  # noqa: E402

from auth.cert_tools import TlsFiles, write_tls_material  # noqa: E402
from bench.anchors.kroxylicious import median, millicores_per_mb_s, tls_client  # noqa: E402
from bench.kafka_upstream import MECHANISM, write_bench_acls  # noqa: E402
from bench.throughput import (  # noqa: E402
    GatewayProcess,
    ListeningProcess,
    PathRun,
    Pids,
    loadavg,
    machine,
    only_node,
    plain_client,
    require_at_least_one,
    run_path,
)
from gateway.commands.embedded_broker import EmbeddedBroker, free_port  # noqa: E402
from gateway.stores.file_users import FileCredentialStore  # noqa: E402

PATHS = ("haproxy", "ksgate", "ksgate-ssl")
BENCH_USER = "bench"


def haproxy_binary() -> str | None:
    found = shutil.which("haproxy") or "/usr/sbin/haproxy"
    return found if Path(found).exists() else None


class HAProxyProcess(ListeningProcess):
    """HAProxy terminating TLS on 127.0.0.1:port in front of ``upstream`` (plaintext); a context manager."""

    name = "haproxy"

    def __init__(self, binary: str, workdir: Path, tls: TlsFiles, threads: int) -> None:
        super().__init__(workdir, "haproxy.cfg", "haproxy.log", 10.0)
        self.binary, self.threads, self.upstream = binary, threads, ""
        # HAProxy reads the certificate and its key from one PEM file.
        self.pem = workdir / "haproxy.pem"
        self.pem.touch(mode=0o600)
        self.pem.write_text(tls.server_cert.read_text() + tls.server_key.read_text())

    def config_text(self) -> str:
        threads = f"  nbthread {self.threads}\n" if self.threads else ""  # 0: HAProxy's default, one per CPU
        return ("global\n  maxconn 1024\n" + threads
                + "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\n"
                + f"frontend kafka_tls\n  bind {self.bootstrap} ssl crt {self.pem}\n  default_backend broker\n"
                + f"backend broker\n  server broker {self.upstream}\n")

    def command(self) -> list[str]:
        return [self.binary, "-db", "-f", str(self.config_path)]


def version_of(binary: str) -> str:
    out = subprocess.run([binary, "-v"], check=False, stdout=subprocess.PIPE, text=True).stdout
    return out.splitlines()[0] if out else "?"


def negotiated_tls(bootstrap: str, ca: Path) -> str:
    """The TLS version and cipher suite an OpenSSL client with default settings gets from ``bootstrap``."""
    host, port = bootstrap.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as conn:
        return f"{conn.version()} {conn.cipher()[0]}"  # type: ignore[index]


def ksgate_settings(path: str, workdir: Path, tls: TlsFiles, password: str,
                    nodes: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The listener protocol and the keys of the ksgate process for ``path``."""
    keys: dict[str, Any] = {**nodes, "ssl.keystore.location": str(tls.server_cert),
                            "ssl.key.location": str(tls.server_key)}
    if path == "ksgate-ssl":
        return "SSL", {**keys, "authorizer.class.name": ""}
    credentials = workdir / "users.json"
    FileCredentialStore(credentials).upsert_user(BENCH_USER, password, [MECHANISM])
    acls = write_bench_acls(workdir / "acls.json", BENCH_USER)
    return "SASL_SSL", {**keys, "sasl.enabled.mechanisms": MECHANISM, "ksgate.credentials.file": str(credentials),
                        "authorizer.class.name": "StandardAuthorizer", "ksgate.acl.file": str(acls),
                        "allow.everyone.if.no.acl.found": False}


@dataclass(slots=True)
class BrokerEnd:
    """A broker as one path sees it: its process, its PLAINTEXT address, set-up settings, ksgate's node keys."""

    process: subprocess.Popen[bytes]
    address: str
    admin: dict[str, Any]
    nodes: dict[str, Any] = field(default_factory=dict)


def tansu_ends(stack: ExitStack, workdir: Path, front: str, tls: TlsFiles) -> tuple[BrokerEnd, BrokerEnd]:
    """Two identical Tansu processes: one advertising HAProxy's address ``front``, one itself (for ksgate).

    Tansu has one listener, so one process cannot advertise HAProxy to one path and itself to the other.
    """
    behind = stack.enter_context(EmbeddedBroker(log_path=workdir / "tansu-haproxy.log", advertised=front))
    plain = stack.enter_context(EmbeddedBroker(log_path=workdir / "tansu-ksgate.log"))
    assert behind._process is not None and plain._process is not None
    # The first broker's metadata names HAProxy's TLS port only: set-up goes through HAProxy too.
    return (BrokerEnd(behind._process, behind.bootstrap, tls_client(plain_client(front), tls)),
            BrokerEnd(plain._process, plain.bootstrap, plain_client(plain.bootstrap),
                      only_node(plain_client(plain.bootstrap))))


def kafka_ends(stack: ExitStack, workdir: Path, front: str) -> tuple[BrokerEnd, BrokerEnd]:
    """One Apache Kafka with a fifth listener, HAPROXY (PLAINTEXT), that advertises HAProxy's address ``front``."""
    from bench.kafka_upstream import SERVER_JVM_OPTIONS
    from tests.apache_kafka import KafkaBroker, kafka_lib
    from tests.apache_kafka.properties import LISTENERS, NODE_ID

    lib = kafka_lib()
    if lib is None:
        raise SystemExit("--upstream kafka needs Apache Kafka's jars: run `bash scripts/kafka/fetch.sh` and export "
                         "REFERENCE_KAFKA_LIB=<the folder it prints>")
    broker = KafkaBroker(lib, workdir / "kafka", jvm_options=SERVER_JVM_OPTIONS)
    behind = f"127.0.0.1:{free_port()}"
    named = [name for name in LISTENERS if name != "CONTROLLER"]
    # Later lines of server.properties win: the kit's three keys again, plus the HAPROXY listener.
    broker.set_properties({
        "listeners": ",".join([*(f"{n}://{broker.layout.address(n)}" for n in LISTENERS), f"HAPROXY://{behind}"]),
        "advertised.listeners": ",".join([*(f"{n}://{broker.layout.address(n)}" for n in named),
                                          f"HAPROXY://{front}"]),
        "listener.security.protocol.map": ",".join(
            [*(f"{n}:{'PLAINTEXT' if n == 'CONTROLLER' else n}" for n in LISTENERS), "HAPROXY:PLAINTEXT"]),
    })
    stack.enter_context(broker)
    assert broker._process is not None
    plain = broker.bootstrap("PLAINTEXT")  # ANONYMOUS there is a super user: set-up for every path
    return (BrokerEnd(broker._process, behind, plain_client(plain)),
            BrokerEnd(broker._process, plain, plain_client(plain), {"node.id.min": NODE_ID, "node.id.max": NODE_ID}))


@dataclass(slots=True)
class Leg:
    """One path: how the client reaches it, the proxy and broker processes, and set-up (topics) on its broker."""

    client: dict[str, Any]
    proxy: ListeningProcess
    broker: BrokerEnd
    admin: AdminClient

    def pids(self) -> Pids:
        assert self.proxy.process is not None
        return Pids(self.broker.process.pid, self.proxy.pid,
                    {"broker": self.broker.process, "proxy": self.proxy.process})


@contextmanager
def legs(args: argparse.Namespace, workdir: Path, tls: TlsFiles, binary: str) -> Iterator[dict[str, Leg]]:
    """Start the brokers and proxies of ``args.paths``; stopped at the end, proxies first."""
    with ExitStack() as stack:
        haproxy = HAProxyProcess(binary, workdir, tls, args.haproxy_threads)
        # The broker advertises HAProxy's address to HAProxy's path, or clients would bypass it after bootstrap.
        if args.upstream == "kafka":
            behind, plain = kafka_ends(stack, workdir, haproxy.bootstrap)
        else:
            behind, plain = tansu_ends(stack, workdir, haproxy.bootstrap, tls)
        found: dict[str, Leg] = {}
        if "haproxy" in args.paths:
            haproxy.upstream = behind.address
            stack.enter_context(haproxy)
            found["haproxy"] = Leg(tls_client(plain_client(haproxy.bootstrap), tls), haproxy, behind,
                                   AdminClient(behind.admin))
        password = secrets.token_urlsafe(24)
        for path in [p for p in args.paths if p != "haproxy"]:
            home = workdir / path
            home.mkdir()
            protocol, keys = ksgate_settings(path, home, tls, password, plain.nodes)
            gateway = stack.enter_context(GatewayProcess(plain.address, home, keys, 90.0, protocol=protocol))
            client = tls_client(plain_client(gateway.bootstrap), tls)
            if protocol == "SASL_SSL":
                client |= {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
                           "sasl.username": BENCH_USER, "sasl.password": password}
            found[path] = Leg(client, gateway, plain, AdminClient(plain.admin))
        yield found


@dataclass(slots=True)
class Report:
    runs: list[PathRun] = field(default_factory=list)
    tls: dict[str, str] = field(default_factory=dict)


def ordered(paths: list[str], repeat: int) -> list[str]:
    """Alternate the order between repeats, so drift on the machine hits each path alike."""
    return paths if repeat % 2 == 0 else paths[::-1]


def cpu_ms_per_mb(run: PathRun, phase: str) -> float:
    cpu = run.cpu_produce if phase == "produce" else run.cpu_fetch
    return millicores_per_mb_s(cpu.get("gateway", 0.0), run.produce_mb_s if phase == "produce" else run.fetch_mb_s)


def ratio_line(report: Report, figure: str, paths: list[str]) -> str:
    """ksgate/haproxy for ``figure``: the ratio of medians, and the median of each repeat's own ratio (the paths
    of a repeat run back to back, so that one is less moved by slow drift in the machine's load)."""
    mine = {p: [getattr(r, figure) for r in report.runs if r.path == p] for p in ("haproxy", "ksgate")}
    if not all(mine.values()) or "ksgate" not in paths:
        return ""
    paired = [k / h for k, h in zip(mine["ksgate"], mine["haproxy"], strict=True)]
    per = " ".join(f"{r:.2f}" for r in paired)
    return (f"{figure:<14} ksgate/haproxy {median(mine['ksgate']) / median(mine['haproxy']):.2f}x (ratio of medians), "
            f"{median(paired):.2f}x (median of each repeat's ratio: {per})")


def table(report: Report, paths: list[str]) -> str:
    lines = [f"{'path':<12}{'produce MB/s':>13}{'fetch MB/s':>11}{'lat p50':>8}{'p99':>7}"
             f"{'proxy CPU% prod':>16}{'fetch':>6}{'lat':>5}{'broker% prod':>13}{'fetch':>6}"
             f"{'CPU ms/MB prod':>15}{'fetch':>6}{'other%':>7}"]
    for path in paths:
        runs = [r for r in report.runs if r.path == path]

        def m(pick: Any, runs: list[PathRun] = runs) -> float:
            return median([pick(r) for r in runs])
        lines.append(
            f"{path:<12}{m(lambda r: r.produce_mb_s):>13.1f}{m(lambda r: r.fetch_mb_s):>11.1f}"
            f"{m(lambda r: r.latency_p50_ms):>8.3f}{m(lambda r: r.latency_p99_ms):>7.3f}"
            f"{m(lambda r: r.cpu_produce['gateway']):>16.0f}{m(lambda r: r.cpu_fetch['gateway']):>6.0f}"
            f"{m(lambda r: r.cpu_latency['gateway']):>5.0f}"
            f"{m(lambda r: r.cpu_produce['broker']):>13.0f}{m(lambda r: r.cpu_fetch['broker']):>6.0f}"
            f"{m(lambda r: cpu_ms_per_mb(r, 'produce')):>15.2f}{m(lambda r: cpu_ms_per_mb(r, 'fetch')):>6.2f}"
            f"{max(max(r.cpu_produce['other'], r.cpu_fetch['other']) for r in runs):>7.0f}")
    lines.append("(medians; latency: single-record produce+flush, ms; CPU % of one core; CPU ms/MB = proxy CPU per "
                 "MB of record values; other% = the most the rest of the machine used in a phase)")
    lines += [text for text in (ratio_line(report, f, paths) for f in ("produce_mb_s", "fetch_mb_s")) if text]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="rounds of the paths, order alternated")
    parser.add_argument("--records", type=int, default=200_000, help="records per throughput run")
    parser.add_argument("--size", type=int, default=1024, help="record value size in bytes")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--latency-samples", type=int, default=2000)
    parser.add_argument("--latency-warmup", type=int, default=200)
    parser.add_argument("--upstream", choices=("tansu", "kafka"), default="tansu",
                        help="tansu: two identical embedded brokers; kafka: one Apache Kafka 4.4 with a listener "
                             "advertising HAProxy (jars from scripts/kafka/fetch.sh)")
    parser.add_argument("--haproxy-threads", type=int, default=0,
                        help="HAProxy's nbthread; 0 leaves HAProxy's default (one thread per CPU)")
    parser.add_argument("--paths", default=",".join(PATHS), help="comma-separated, of " + ", ".join(PATHS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    named = {p.strip() for p in args.paths.split(",") if p.strip()}
    if not named or named - set(PATHS):
        parser.error(f"--paths: name some of {', '.join(PATHS)}")
    args.paths = [p for p in PATHS if p in named]
    require_at_least_one(parser, args, "records", "size", "repeat", "partitions", "latency_samples")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    binary = haproxy_binary()
    if binary is None and "haproxy" in args.paths:
        raise SystemExit("haproxy is not installed (Debian: apt-get install haproxy)")
    info = machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; load average before: {loadavg()}", file=sys.stderr)
    report = Report()
    with tempfile.TemporaryDirectory(prefix="ksgate-haproxy-") as tmp:
        workdir = Path(tmp)
        tls = write_tls_material(workdir / "tls")
        with legs(args, workdir, tls, binary or "") as found:
            for path, leg in found.items():  # readiness of each whole path, and what TLS it speaks
                AdminClient(leg.client).list_topics(timeout=30)
                report.tls[path] = negotiated_tls(leg.proxy.bootstrap, tls.ca)
            for repeat in range(-1, args.repeat):  # repeat -1: warm-up of every path, not reported
                for path in ordered(args.paths, max(repeat, 0)):
                    leg = found[path]

                    def progress(text: str, repeat: int = repeat, path: str = path) -> None:
                        print(f"  [{repeat + 1}/{args.repeat}] {path:<11} {text}", file=sys.stderr)
                    run = run_path(path, leg.client, leg.admin, args, repeat, leg.pids(), progress)
                    if repeat >= 0:
                        report.runs.append(run)
    threads = args.haproxy_threads or "default (one per CPU)"
    upstream = "Apache Kafka (one node)" if args.upstream == "kafka" else "Tansu (in-memory, one per side)"
    print(f"upstream: {upstream}, PLAINTEXT; {args.records:,} x {args.size} B, median of {args.repeat} "
          f"repeats; HAProxy: {version_of(binary) if binary else '-'}, nbthread {threads}; ksgate SASL: {MECHANISM}")
    print("TLS negotiated (OpenSSL client, default settings): "
          + "; ".join(f"{p} {t}" for p, t in report.tls.items()) + f"; load average after: {loadavg()}")
    if len(set(report.tls.values())) > 1:
        print("WARNING: the paths negotiated different TLS versions or ciphers; the comparison is not like for like")
    print(table(report, args.paths))
    if args.json:
        print(json.dumps({"runs": [asdict(r) for r in report.runs], "tls": report.tls, "machine": info,
                          "haproxy": version_of(binary) if binary else None,
                          "args": {k: v for k, v in vars(args).items()}}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
