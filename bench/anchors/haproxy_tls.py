"""ksgate with SASL_SSL and the authorizer against HAProxy terminating TLS, in front of the same kind of broker.

A benchmark, not a test (issue #23: "with TLS, >= 1.15x of HAProxy's TLS termination").  Paths, each
repeat in alternating order (haproxy first on even repeats, last on odd ones):

* ``haproxy``: confluent-kafka ``SSL`` -> Debian's HAProxy (``mode tcp``, ``bind ... ssl crt``, no Kafka
  awareness) -> broker PLAINTEXT.  A TCP proxy cannot rewrite metadata, so the broker advertises HAProxy's
  address to this path: Tansu has one listener, so the ksgate paths get their own, identical Tansu (in-memory)
  process; with ``--upstream kafka`` one Apache Kafka serves all paths, HAProxy's through an extra listener.
* ``ksgate``: confluent-kafka ``SASL_SSL`` (SCRAM-SHA-512) -> ``ksgate run`` with the StandardAuthorizer and
  the bench user's ALLOW ACLs (bench/kafka_upstream.py's BENCH_ACLS, no allow-if-no-ACL) -> broker PLAINTEXT.
* ``ksgate-ssl``: ``SSL``, no SASL, no authorizer, to separate TLS from SASL + authorization.
* ``pyrelay-tls-uvloop`` / ``pyrelay-tls-asyncio``: ``SSL`` -> bench/anchors/pyrelay.py ``--tls`` (a do-nothing
  CPython relay terminating TLS with the loop's own SSL transport, as ksgate does, on uvloop or on asyncio's loop)
  -> broker PLAINTEXT, advertised like HAProxy (its own Tansu, or its own Kafka listener): the CPython TLS floor.
* ``direct`` (only if named in ``--paths``): the client PLAINTEXT to the broker the ksgate paths use, the reference
  from which the fixed-rate runs' added latency is taken (issue #23's goal 1 with TLS on the client leg).
* ``direct-tls`` (only if named, and only with ``--upstream kafka``: Tansu has no TLS listener): the client ``SSL``
  straight to an extra Kafka SSL listener with the proxies' certificate and key, TLSv1.3 and TLS_AES_256_GCM_SHA384
  only, no client certificate: the reference that leaves the client's own TLS work in, so the TLS paths' figures
  set against it are what the relay adds (issue #23's goal 1 "with TLS").

For each path, bench/throughput.py's produce and fetch throughput (librdkafka, 1 KiB records) and
single-record produce latency, with the proxy's and the broker's CPU (% of one core) per phase, and the
proxy's CPU per MB (ms of CPU per MB of record values, = millicores per MB/s), and ksgate against HAProxy,
ksgate-ssl against pyrelay-tls-uvloop (ksgate's TLS against the floor) and that floor against HAProxy.  The TLS
version and cipher each proxy negotiates with an OpenSSL client are printed: all listeners use the same
certificate and key.  ``--rates`` adds bench/latency.py's fixed-rate runs to each path; with ``direct`` among the
paths, each path's fixed-rate and throughput figures are also set against direct's, as ``--plain`` does, and with
``direct-tls`` each TLS path's against direct-tls's, in a second table.

``--plain``: the floor, what the cheapest relay costs (issue #23's latency and fetch goals).  PLAINTEXT on every
leg, paths ``direct`` (the client to the broker ksgate uses), ``ksgate`` (``ksgate run``, no authorizer: the bare
relay), ``haproxy`` (``mode tcp``, plain ``bind``, nothing tuned), ``haproxy-splice`` (the same with
``option splice-request`` and ``splice-response``: the kernel moves the bytes through a pipe, never copying them
into HAProxy), and ``pyrelay-uvloop`` / ``pyrelay-asyncio`` (bench/anchors/pyrelay.py: a do-nothing CPython relay,
no Kafka logic, on uvloop or on asyncio's own loop: the floor of any Python relay), in a rotated order; each also
gets bench/latency.py's fixed-rate runs (``--rates``, default 5,000 and 50,000 records/s there), and the table adds
each proxy against direct, ksgate against haproxy and against pyrelay-uvloop, and each proxy's CPU per
single-record round trip.

    .venv/bin/python bench/anchors/haproxy_tls.py [--upstream tansu|kafka] [--repeat 5] [--records 200000]
        [--haproxy-threads 0] [--paths haproxy,ksgate,ksgate-ssl,pyrelay-tls-uvloop,pyrelay-tls-asyncio] [--json]
    .venv/bin/python bench/anchors/haproxy_tls.py --paths direct,haproxy,ksgate,pyrelay-tls-uvloop --rates 5000,50000
    .venv/bin/python bench/anchors/haproxy_tls.py --upstream kafka --rates 5000
        --paths direct,direct-tls,haproxy,ksgate-ssl,ksgate,pyrelay-tls-uvloop
    .venv/bin/python bench/anchors/haproxy_tls.py --plain [--repeat 3] [--rates 5000,50000]
        [--paths direct,ksgate,haproxy,haproxy-splice,pyrelay-uvloop,pyrelay-asyncio]
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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka.admin import AdminClient  # noqa: E402

from auth.cert_tools import TlsFiles, write_tls_material  # noqa: E402
from bench.anchors.kroxylicious import (  # noqa: E402
    add_fixed_rate_arguments,
    fixed_rate_lines,
    fixed_rate_runs,
    median,
    millicores_per_mb_s,
    path_width,
    rate_list,
    throughput_lines,
    tls_client,
)
from bench.kafka_upstream import MECHANISM, SERVER_JVM_OPTIONS, write_bench_acls  # noqa: E402
from bench.latency import Run, order  # noqa: E402
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
from tests.apache_kafka import KafkaBroker, kafka_lib  # noqa: E402
from tests.apache_kafka.properties import LISTENERS, NODE_ID, BrokerLayout  # noqa: E402

PATHS = ("haproxy", "ksgate", "ksgate-ssl", "pyrelay-tls-uvloop", "pyrelay-tls-asyncio")
DIRECT_TLS = "direct-tls"
# Neither direct path is a default there: each only serves as a reference for the others' figures.
TLS_MODE_PATHS = ("direct", DIRECT_TLS, *PATHS)
PLAIN_PATHS = ("direct", "ksgate", "haproxy", "haproxy-splice", "pyrelay-uvloop", "pyrelay-asyncio")
PYRELAY = Path(__file__).resolve().with_name("pyrelay.py")
BENCH_USER = "bench"
# bench/latency.py's fixed-rate runs (--rates) name their topic and their consumer's group latency-...: without
# these the SASL_SSL ksgate path, which authorizes, refuses that producer (TOPIC_AUTHORIZATION_FAILED).
FIXED_RATE_ACLS = (("TOPIC", "latency-", "PREFIXED", "ALL"), ("GROUP", "latency-", "PREFIXED", "ALL"))


def haproxy_binary() -> str | None:
    found = shutil.which("haproxy") or "/usr/sbin/haproxy"
    return found if Path(found).exists() else None


class HAProxyProcess(ListeningProcess):
    """HAProxy (``mode tcp``) on 127.0.0.1:port in front of ``upstream`` (plaintext); a context manager.

    With ``tls`` it terminates TLS; without, it relays plain TCP, through kernel pipes if ``splice``, and
    answers ``show info`` on a stats socket (its pipe counters say whether splice was used).
    """

    name = "haproxy"

    def __init__(self, binary: str, workdir: Path, tls: TlsFiles | None, threads: int, path: str = "haproxy",
                 splice: bool = False) -> None:
        super().__init__(workdir, f"{path}.cfg", f"{path}.log", 10.0)
        self.binary, self.threads, self.upstream, self.splice = binary, threads, "", splice
        self.pem: Path | None = None
        self.stats: Path | None = None
        if tls is None:
            self.stats = workdir / f"{path}.sock"
        else:  # HAProxy reads the certificate and its key from one PEM file.
            self.pem = workdir / f"{path}.pem"
            self.pem.touch(mode=0o600)
            self.pem.write_text(tls.server_cert.read_text() + tls.server_key.read_text())

    def config_text(self) -> str:
        threads = f"  nbthread {self.threads}\n" if self.threads else ""  # 0: HAProxy's default, one per CPU
        stats = f"  stats socket {self.stats}\n" if self.stats else ""
        # splice-auto would splice only where HAProxy's heuristics expect bulk data; these two always do.
        splice = "  option splice-request\n  option splice-response\n" if self.splice else ""
        frontend = (f"frontend kafka_tls\n  bind {self.bootstrap} ssl crt {self.pem}\n" if self.pem
                    else f"frontend kafka\n  bind {self.bootstrap}\n")
        return ("global\n  maxconn 1024\n" + threads + stats
                + "defaults\n  mode tcp\n  timeout connect 5s\n  timeout client 120s\n  timeout server 120s\n"
                + splice + frontend + "  default_backend broker\n"
                + f"backend broker\n  server broker {self.upstream}\n")

    def pipes(self) -> str:
        """``show info``'s pipe counters: splice takes its pipes from this pool, so none means no splice."""
        if self.stats is None:
            return "-"
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(5)
            conn.connect(str(self.stats))
            conn.sendall(b"show info\n")
            answer = b"".join(iter(lambda: conn.recv(65536), b"")).decode()
        return pipe_counters(answer)

    def command(self) -> list[str]:
        return [self.binary, "-db", "-f", str(self.config_path)]


class PyRelayProcess(ListeningProcess):
    """bench/anchors/pyrelay.py (a do-nothing CPython relay, on ``loop``) on 127.0.0.1:port in front of
    ``upstream``, terminating TLS with the server certificate and key of ``tls`` if given; a context manager.
    It runs this interpreter, as ``ksgate run`` does."""

    name = "pyrelay"

    def __init__(self, workdir: Path, path: str, loop: str, tls: TlsFiles | None = None) -> None:
        super().__init__(workdir, f"{path}.args", f"{path}.log", 10.0)
        self.loop, self.upstream, self.tls = loop, "", tls

    def config_text(self) -> str:  # no configuration file: its arguments, for the record
        return " ".join(self.command()) + "\n"

    def command(self) -> list[str]:
        tls = [] if self.tls is None else ["--tls", str(self.tls.server_cert), str(self.tls.server_key)]
        return [sys.executable, str(PYRELAY), "--port", str(self.port), "--upstream", self.upstream,
                "--loop", self.loop, *tls]


def relays(paths: list[str], binary: str, workdir: Path, tls: TlsFiles | None,
           threads: int) -> dict[str, HAProxyProcess | PyRelayProcess]:
    """The Kafka-blind proxies of ``paths`` (HAProxy, pyrelay), not started: each needs a broker advertising it."""
    found: dict[str, HAProxyProcess | PyRelayProcess] = {}
    for path in paths:
        if path.startswith("haproxy"):
            found[path] = HAProxyProcess(binary, workdir, tls, threads, path, splice=path == "haproxy-splice")
        elif path.startswith("pyrelay-"):  # pyrelay-LOOP (--plain) or pyrelay-tls-LOOP
            found[path] = PyRelayProcess(workdir, path, path.rsplit("-", 1)[1], tls)
    return found


def pipe_counters(show_info: str) -> str:
    """``PipesUsed=N PipesFree=M`` from the text of HAProxy's ``show info``."""
    found = dict(line.split(": ", 1) for line in show_info.splitlines() if line.startswith("Pipes"))
    return " ".join(f"{name}={found.get(name, '?')}" for name in ("PipesUsed", "PipesFree"))


def speaks_tls(client: dict[str, Any]) -> bool:
    """Whether a path's client settings take TLS (SSL, SASL_SSL): every proxy path and direct-tls, not direct."""
    return str(client.get("security.protocol", "PLAINTEXT")).upper().endswith("SSL")


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


def ksgate_settings(path: str, workdir: Path, tls: TlsFiles | None, password: str,
                    nodes: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The listener protocol and the keys of the ksgate process for ``path``; no ``tls``: the bare relay."""
    if tls is None:
        return "PLAINTEXT", {**nodes, "authorizer.class.name": ""}
    keys: dict[str, Any] = {**nodes, "ssl.keystore.location": str(tls.server_cert),
                            "ssl.key.location": str(tls.server_key)}
    if path == "ksgate-ssl":
        return "SSL", {**keys, "authorizer.class.name": ""}
    credentials = workdir / "users.json"
    FileCredentialStore(credentials).upsert_user(BENCH_USER, password, [MECHANISM])
    acls = write_bench_acls(workdir / "acls.json", BENCH_USER, FIXED_RATE_ACLS)
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


def tansu_ends(stack: ExitStack, workdir: Path, fronts: dict[str, str],
               tls: TlsFiles | None) -> tuple[dict[str, BrokerEnd], BrokerEnd]:
    """Identical Tansu processes: one per relay path (HAProxy, pyrelay) advertising that relay's address, one
    itself (direct, ksgate).

    Tansu has one listener, so one process cannot advertise a relay to one path and itself to the other.
    """
    behind: dict[str, BrokerEnd] = {}
    for path, front in fronts.items():
        broker = stack.enter_context(EmbeddedBroker(log_path=workdir / f"tansu-{path}.log", advertised=front))
        # This broker's metadata names the relay's port only: set-up goes through the relay too.
        behind[path] = BrokerEnd(broker.process, broker.bootstrap, tls_client(plain_client(front), tls))
    plain = stack.enter_context(EmbeddedBroker(log_path=workdir / "tansu-ksgate.log"))
    return behind, BrokerEnd(plain.process, plain.bootstrap, plain_client(plain.bootstrap),
                             only_node(plain_client(plain.bootstrap)))


def listener_name(path: str) -> str:
    return path.upper().replace("-", "_")


# The direct-tls listener's TLS: the version and the one suite the proxy paths negotiate (printed per path), so the
# JVM's own preference order cannot make the reference's TLS differ from that of the paths set against it.
DIRECT_TLS_PROTOCOLS = "TLSv1.3"
DIRECT_TLS_SUITES = "TLS_AES_256_GCM_SHA384"


@dataclass(slots=True, frozen=True)
class ExtraListener:
    """A Kafka listener besides the test kit's: its name, where it binds, what it advertises, its protocol."""

    name: str
    bind: str
    advertised: str
    protocol: str = "PLAINTEXT"


def listener_properties(layout: BrokerLayout, extra: list[ExtraListener]) -> dict[str, object]:
    """The kit's three listener keys again (later lines of server.properties win), with ``extra`` added."""
    named = [name for name in LISTENERS if name != "CONTROLLER"]
    return {
        "listeners": ",".join([*(f"{n}://{layout.address(n)}" for n in LISTENERS),
                               *(f"{e.name}://{e.bind}" for e in extra)]),
        "advertised.listeners": ",".join([*(f"{n}://{layout.address(n)}" for n in named),
                                          *(f"{e.name}://{e.advertised}" for e in extra)]),
        "listener.security.protocol.map": ",".join(
            [*(f"{n}:{'PLAINTEXT' if n == 'CONTROLLER' else n}" for n in LISTENERS),
             *(f"{e.name}:{e.protocol}" for e in extra)]),
    }


def write_direct_tls_keystore(tls: TlsFiles, workdir: Path) -> Path:
    """The proxies' server key and certificate chain in one file, key first, as Kafka's PEM keystore reads them."""
    keystore = workdir / "direct-tls-keystore.pem"
    keystore.touch(mode=0o600)  # it holds the private key
    keystore.write_text(tls.server_key.read_text() + tls.server_cert.read_text())
    return keystore


def direct_tls_properties(keystore: Path) -> dict[str, object]:
    """The direct-tls listener's own SSL keys: the proxies' certificate, no client certificate asked for (as the
    proxies ask none), and the proxies' TLS version and suite."""
    prefix = f"listener.name.{listener_name(DIRECT_TLS).lower()}."
    return {f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": keystore,
            f"{prefix}ssl.client.auth": "none", f"{prefix}ssl.enabled.protocols": DIRECT_TLS_PROTOCOLS,
            f"{prefix}ssl.cipher.suites": DIRECT_TLS_SUITES}


def kafka_ends(stack: ExitStack, workdir: Path, fronts: dict[str, str],
               tls: TlsFiles | None = None) -> tuple[dict[str, BrokerEnd], BrokerEnd]:
    """One Apache Kafka with an extra PLAINTEXT listener per relay path (HAPROXY, HAPROXY_SPLICE, PYRELAY_UVLOOP...)
    that advertises that relay's address, and with ``tls`` an SSL listener DIRECT_TLS for the direct-tls path
    (keyed direct-tls in the first mapping)."""
    lib = kafka_lib()
    if lib is None:
        raise SystemExit("--upstream kafka needs Apache Kafka's jars: run `bash scripts/kafka/fetch.sh` and export "
                         "REFERENCE_KAFKA_LIB=<the folder it prints>")
    broker = KafkaBroker(lib, workdir / "kafka", jvm_options=SERVER_JVM_OPTIONS)
    behind = {listener_name(path): f"127.0.0.1:{free_port()}" for path in fronts}
    extra = [ExtraListener(listener_name(p), behind[listener_name(p)], f) for p, f in fronts.items()]
    properties: dict[str, object] = {}
    if tls is not None:
        address = f"127.0.0.1:{free_port()}"
        behind[listener_name(DIRECT_TLS)] = address
        extra.append(ExtraListener(listener_name(DIRECT_TLS), address, address, "SSL"))
        properties = direct_tls_properties(write_direct_tls_keystore(tls, workdir))
    broker.set_properties({**listener_properties(broker.layout, extra), **properties})
    stack.enter_context(broker)
    plain = broker.bootstrap("PLAINTEXT")  # ANONYMOUS there is a super user: set-up for every path
    paths = [*fronts, *([DIRECT_TLS] if tls is not None else [])]
    return ({p: BrokerEnd(broker.process, behind[listener_name(p)], plain_client(plain)) for p in paths},
            BrokerEnd(broker.process, plain, plain_client(plain), {"node.id.min": NODE_ID, "node.id.max": NODE_ID}))


@dataclass(slots=True)
class Leg:
    """One path: how the client reaches it, the proxy and broker processes, and set-up (topics) on its broker."""

    client: dict[str, Any]
    proxy: ListeningProcess | None  # None: direct
    broker: BrokerEnd
    admin: AdminClient

    def pids(self) -> Pids:
        if self.proxy is None:  # no proxy pid: its CPU is reported as nan
            return Pids(self.broker.process.pid, -1, {"broker": self.broker.process})
        assert self.proxy.process is not None
        return Pids(self.broker.process.pid, self.proxy.pid,
                    {"broker": self.broker.process, "proxy": self.proxy.process})

    @property
    def proxy_pid(self) -> int | None:
        return None if self.proxy is None else self.proxy.pid


@contextmanager
def legs(args: argparse.Namespace, workdir: Path, tls: TlsFiles | None, binary: str) -> Iterator[dict[str, Leg]]:
    """Start the brokers and proxies of ``args.paths`` (``tls`` None: PLAINTEXT everywhere); stopped at the end,
    proxies first."""
    with ExitStack() as stack:
        proxies = relays(args.paths, binary, workdir, tls, args.haproxy_threads)
        fronts = {path: proxy.bootstrap for path, proxy in proxies.items()}
        # The broker advertises the relay's address to its path, or clients would bypass it after bootstrap.
        if args.upstream == "kafka":
            behind, plain = kafka_ends(stack, workdir, fronts, tls if DIRECT_TLS in args.paths else None)
        else:
            behind, plain = tansu_ends(stack, workdir, fronts, tls)
        found: dict[str, Leg] = {}
        for path, proxy in proxies.items():
            proxy.upstream = behind[path].address
            stack.enter_context(proxy)
            found[path] = Leg(tls_client(plain_client(proxy.bootstrap), tls), proxy, behind[path],
                              AdminClient(behind[path].admin))
        if "direct" in args.paths:
            found["direct"] = Leg(plain_client(plain.address), None, plain, AdminClient(plain.admin))
        if DIRECT_TLS in args.paths:  # the client's TLS as on the proxy paths, no client certificate
            end = behind[DIRECT_TLS]
            found[DIRECT_TLS] = Leg(tls_client(plain_client(end.address), tls), None, end, AdminClient(end.admin))
        password = secrets.token_urlsafe(24)
        for path in [p for p in args.paths if p.startswith("ksgate")]:
            home = workdir / path
            home.mkdir()
            protocol, keys = ksgate_settings(path, home, tls, password, plain.nodes)
            gateway = stack.enter_context(GatewayProcess(plain.address, home, keys, 90.0, protocol=protocol))
            client = tls_client(plain_client(gateway.bootstrap), tls)
            if protocol == "SASL_SSL":
                client |= {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
                           "sasl.username": BENCH_USER, "sasl.password": password}
            found[path] = Leg(client, gateway, plain, AdminClient(plain.admin))
        yield {path: found[path] for path in args.paths}


@dataclass(slots=True)
class Report:
    runs: list[PathRun] = field(default_factory=list)
    tls: dict[str, str] = field(default_factory=dict)
    latency: list[Run] = field(default_factory=list)  # fixed-rate runs (--rates)
    pipes: dict[str, str] = field(default_factory=dict)  # --plain: HAProxy's pipe counters after the runs


def ordered(paths: list[str], repeat: int) -> list[str]:
    """Alternate the order between repeats, so drift on the machine hits each path alike."""
    return paths if repeat % 2 == 0 else paths[::-1]


def series(report: Report, path: str, figure: str, rate: int | None) -> list[float]:
    """``figure`` of ``path`` per repeat, in repeat order: a PathRun field, or with ``rate`` e.g. "publish p50"."""
    if rate is None:
        return [getattr(r, figure) for r in report.runs if r.path == path]
    part, key = figure.split()
    return [getattr(r, part)[key] for r in report.latency if r.path == path and r.rate == rate]


def contrast(mine: list[float], base: list[float], ratio: bool, digits: int = 3) -> str:
    """mine/base (throughput) or mine - base (latency, ms, to ``digits``): of the medians, and [the median of each
    repeat's own] (the paths of a repeat run back to back, so slow drift in the machine's load moves it less)."""
    if not mine or len(mine) != len(base):
        return "-"
    if ratio:
        return f"{median(mine) / median(base):.2f}x [{median([m / b for m, b in zip(mine, base, strict=True)]):.2f}x]"
    paired = median([m - b for m, b in zip(mine, base, strict=True)])
    return f"{median(mine) - median(base):+.{digits}f} [{paired:+.{digits}f}]"


# Each figure compared: label, PathRun field or fixed-rate part and percentile, ratio (else difference).
COMPARED = (("produce MB/s", "produce_mb_s", True), ("fetch MB/s", "fetch_mb_s", True),
            ("lat p50 ms", "latency_p50_ms", False), ("lat p99 ms", "latency_p99_ms", False))
FIXED_RATE_COMPARED = (("pub p50 ms", "publish p50"), ("pub p99 ms", "publish p99"),
                       ("e2e p50 ms", "end_to_end p50"), ("e2e p99 ms", "end_to_end p99"))


def comparison_lines(report: Report, paths: list[str], rates: list[int]) -> list[str]:
    """Each proxy against direct, and ksgate against haproxy: a row per figure, a column per pair."""
    pairs = [(p, "direct") for p in paths if p != "direct" and "direct" in paths]
    pairs += [("ksgate", base) for base in ("haproxy", "pyrelay-uvloop") if {"ksgate", base} <= set(paths)]
    return pair_lines(report, pairs, rates, "direct")


def direct_tls_lines(report: Report, paths: list[str], rates: list[int]) -> list[str]:
    """Each TLS path against direct-tls, the client's TLS straight to the broker: what the relay adds to the TLS the
    client does anyway; none without a direct-tls path."""
    if DIRECT_TLS not in paths:
        return []
    return pair_lines(report, [(p, DIRECT_TLS) for p in paths if p not in ("direct", DIRECT_TLS)], rates, DIRECT_TLS)


def pair_lines(report: Report, pairs: list[tuple[str, str]], rates: list[int], reference: str) -> list[str]:
    """A row per figure, a column per pair (path, base); ``reference`` names the base in the legend."""
    if not pairs:
        return []
    rows: list[tuple[str, str, int | None, bool]] = [(label, field_, None, ratio) for label, field_, ratio in COMPARED]
    rows += [(f"{rate}/s {label}", figure, rate, False) for rate in rates for label, figure in FIXED_RATE_COMPARED]
    # 26 wide, or wider where a pair's name would otherwise run into the next (the TLS mode's pyrelay-tls-* paths)
    width = max(26, *(len(f"{a} vs {b}") + 1 for a, b in pairs))
    lines = [f"{'':<20}" + "".join(f"{f'{a} vs {b}':>{width}}" for a, b in pairs),
             f"(throughput: proxy/{reference}; latency: proxy - {reference}, ms; of the medians [median of each "
             "repeat's own]; fixed-rate latencies are kept to 0.01 ms)"]
    for label, figure, rate, ratio in rows:
        digits = 3 if rate is None else 2
        lines.append(f"{label:<20}" + "".join(
            f"{contrast(series(report, a, figure, rate), series(report, b, figure, rate), ratio, digits):>{width}}"
            for a, b in pairs))
    return lines


def cpu_us_per_round_trip(run: PathRun) -> float:
    """The proxy's CPU per single-record produce + flush, µs: its CPU share over the phase times the mean round
    trip (the phase is the round trips back to back).  /proc ticks of 10 ms: ±10 ms over the phase's CPU."""
    return run.cpu_latency.get("gateway", float("nan")) / 100 * run.latency_mean_ms * 1000


def round_trip_cpu_lines(report: Report, paths: list[str]) -> list[str]:
    lines = ["proxy CPU per single-record round trip, us: median [each repeat]"]
    proxies = [p for p in paths if p != "direct"]
    width = path_width(proxies) + 2
    for path in proxies:
        each = [cpu_us_per_round_trip(r) for r in report.runs if r.path == path]
        if each:
            lines.append(f"  {path:<{width}}{median(each):>7.1f}  [{' '.join(f'{v:.1f}' for v in each)}]")
    return lines


def plain_table(report: Report, paths: list[str], rates: list[int]) -> str:
    lines = throughput_lines(report.runs, paths)
    if rates:
        lines += ["", *fixed_rate_lines(report.latency, paths, rates)]
    return "\n".join([*lines, "", *round_trip_cpu_lines(report, paths), "", *comparison_lines(report, paths, rates)])


def tls_fixed_rate_lines(report: Report, paths: list[str], rates: list[int]) -> list[str]:
    """The TLS mode's fixed-rate table (none without ``rates``) and, with a direct path to take it from, what each
    proxy adds, as ``--plain`` sets it out; with direct-tls, then what each TLS path adds to it."""
    if not rates:
        return []
    lines = fixed_rate_lines(report.latency, paths, rates)
    if "direct" in paths:
        lines += ["", *comparison_lines(report, paths, rates)]
    against_tls = direct_tls_lines(report, paths, rates)
    return [*lines, "", *against_tls] if against_tls else lines


def cpu_ms_per_mb(run: PathRun, phase: str) -> float:
    cpu = run.cpu_produce if phase == "produce" else run.cpu_fetch
    return millicores_per_mb_s(cpu.get("gateway", 0.0), run.produce_mb_s if phase == "produce" else run.fetch_mb_s)


# The TLS mode's pairs: the bar (ksgate with SASL and the authorizer against HAProxy), ksgate's TLS against the
# CPython TLS floor (neither with SASL or an authorizer), and that floor against HAProxy.
TLS_PAIRS = (("ksgate", "haproxy"), ("ksgate-ssl", "pyrelay-tls-uvloop"), ("pyrelay-tls-uvloop", "haproxy"))
TLS_COMPARED: tuple[tuple[str, Callable[[PathRun], float]], ...] = (
    ("produce MB/s", lambda r: r.produce_mb_s), ("fetch MB/s", lambda r: r.fetch_mb_s),
    ("CPU ms/MB prod", lambda r: cpu_ms_per_mb(r, "produce")), ("CPU ms/MB fetch", lambda r: cpu_ms_per_mb(r, "fetch")))


def ratio(mine: float, base: float) -> float:
    """nan where the base is 0: a short run's CPU can be under one /proc tick (10 ms)."""
    return mine / base if base else float("nan")


def ratio_line(report: Report, label: str, pick: Callable[[PathRun], float], mine: str, base: str) -> str:
    """mine/base for a figure: the ratio of medians, and the median of each repeat's own ratio (the paths of a
    repeat run back to back, so that one is less moved by slow drift in the machine's load), then each repeat's."""
    each = {p: [pick(r) for r in report.runs if r.path == p] for p in (mine, base)}
    if not all(each.values()) or len(each[mine]) != len(each[base]):
        return ""
    paired = [ratio(m, b) for m, b in zip(each[mine], each[base], strict=True)]
    of_medians = ratio(median(each[mine]), median(each[base]))
    return (f"{label:<16}{f'{mine}/{base}':>30} {of_medians:.2f}x (ratio of medians), "
            f"{median(paired):.2f}x (median of each repeat's ratio: {' '.join(f'{r:.2f}' for r in paired)})")


def tls_ratio_lines(report: Report, paths: list[str]) -> list[str]:
    pairs = [(a, b) for a, b in TLS_PAIRS if {a, b} <= set(paths)]
    lines = [ratio_line(report, label, pick, a, b) for a, b in pairs for label, pick in TLS_COMPARED]
    return [line for line in lines if line]


def table(report: Report, paths: list[str]) -> str:
    lines = [f"{'path':<20}{'produce MB/s':>13}{'fetch MB/s':>11}{'lat p50':>8}{'p99':>7}"
             f"{'proxy CPU% prod':>16}{'fetch':>6}{'lat':>5}{'broker% prod':>13}{'fetch':>6}"
             f"{'CPU ms/MB prod':>15}{'fetch':>6}{'other%':>7}"]
    for path in paths:
        runs = [r for r in report.runs if r.path == path]

        def m(pick: Any, runs: list[PathRun] = runs) -> float:
            return median([pick(r) for r in runs])
        lines.append(
            f"{path:<20}{m(lambda r: r.produce_mb_s):>13.1f}{m(lambda r: r.fetch_mb_s):>11.1f}"
            f"{m(lambda r: r.latency_p50_ms):>8.3f}{m(lambda r: r.latency_p99_ms):>7.3f}"
            f"{m(lambda r: r.cpu_produce['gateway']):>16.0f}{m(lambda r: r.cpu_fetch['gateway']):>6.0f}"
            f"{m(lambda r: r.cpu_latency['gateway']):>5.0f}"
            f"{m(lambda r: r.cpu_produce['broker']):>13.0f}{m(lambda r: r.cpu_fetch['broker']):>6.0f}"
            f"{m(lambda r: cpu_ms_per_mb(r, 'produce')):>15.2f}{m(lambda r: cpu_ms_per_mb(r, 'fetch')):>6.2f}"
            f"{max(max(r.cpu_produce['other'], r.cpu_fetch['other']) for r in runs):>7.0f}")
    lines.append("(medians; latency: single-record produce+flush, ms; CPU % of one core; CPU ms/MB = proxy CPU per "
                 "MB of record values; other% = the most the rest of the machine used in a phase)")
    lines += tls_ratio_lines(report, paths)
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
    parser.add_argument("--plain", action="store_true",
                        help="PLAINTEXT client leg: paths direct, ksgate (bare relay), haproxy, haproxy-splice")
    parser.add_argument("--paths", help="comma-separated, of " + ", ".join(TLS_MODE_PATHS) + " (default: all but "
                        "direct); with --plain, of " + ", ".join(PLAIN_PATHS) + " (default: all of them)")
    add_fixed_rate_arguments(parser, None)  # default: 5000,50000 with --plain, none without
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    known, default = (PLAIN_PATHS, PLAIN_PATHS) if args.plain else (TLS_MODE_PATHS, PATHS)
    named = {p.strip() for p in (args.paths or ",".join(default)).split(",") if p.strip()}
    if not named or named - set(known):
        parser.error(f"--paths: name some of {', '.join(known)}")
    if DIRECT_TLS in named and args.upstream != "kafka":
        parser.error(f"--paths {DIRECT_TLS} needs --upstream kafka: Tansu has no TLS listener")
    args.paths = [p for p in known if p in named]
    args.rates = rate_list(("5000,50000" if args.plain else "") if args.rates is None else args.rates)
    require_at_least_one(parser, args, "records", "size", "repeat", "partitions", "latency_samples")
    return args


def measure(args: argparse.Namespace, found: dict[str, Leg], report: Report) -> None:
    """Every path, each repeat in alternating (TLS) or rotated (--plain) order; repeat -1 warms up, unreported."""
    for repeat in range(-1, args.repeat):
        for path in (order if args.plain else ordered)(args.paths, max(repeat, 0)):
            leg = found[path]

            def progress(text: str, repeat: int = repeat, path: str = path) -> None:
                print(f"  [{repeat + 1}/{args.repeat}] {path:<11} {text}", file=sys.stderr)
            run = run_path(path, leg.client, leg.admin, args, repeat, leg.pids(), progress)
            if repeat >= 0:
                report.runs.append(run)
                report.latency += fixed_rate_runs(path, leg.client, repeat, args, leg.admin, leg.proxy_pid,
                                                  leg.broker.process.pid, progress)


def tls_header(args: argparse.Namespace, haproxy: str, report: Report) -> str:
    upstream = "Apache Kafka (one node)" if args.upstream == "kafka" else "Tansu (in-memory, one per side)"
    upstream += ", PLAINTEXT"
    if DIRECT_TLS in args.paths:  # the one path whose TLS the broker itself terminates
        upstream += (f" (but {DIRECT_TLS}: Kafka's own SSL listener, {DIRECT_TLS_PROTOCOLS} {DIRECT_TLS_SUITES} only, "
                     "the proxies' certificate)")
    lines = [f"upstream: {upstream}; {args.records:,} x {args.size} B, median of {args.repeat} "
             f"repeats; {haproxy}; ksgate SASL: {MECHANISM}",
             "TLS negotiated (OpenSSL client, default settings): "
             + "; ".join(f"{p} {t}" for p, t in report.tls.items()) + f"; load average after: {loadavg()}"]
    if len(set(report.tls.values())) > 1:
        lines.append("WARNING: the paths negotiated different TLS versions or ciphers; the comparison is not like "
                     "for like")
    return "\n".join(lines)


def plain_header(args: argparse.Namespace, haproxy: str, report: Report) -> str:
    upstream = ("Apache Kafka (one node, a listener per relay path)" if args.upstream == "kafka"
                else "Tansu (in-memory, one per relay path and one for direct and ksgate)")
    return (f"upstream: {upstream}; PLAINTEXT on every leg; {args.records:,} x {args.size} B, median of "
            f"{args.repeat} repeats (order rotated); {haproxy}; ksgate: bare relay (no authorizer)\n"
            "HAProxy pipes after the runs (show info; splice draws its pipes from this pool): "
            + "; ".join(f"{p} {c}" for p, c in report.pipes.items()) + f"; load average after: {loadavg()}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    binary = haproxy_binary()
    if binary is None and any(p.startswith("haproxy") for p in args.paths):
        raise SystemExit("haproxy is not installed (Debian: apt-get install haproxy)")
    info = machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; load average before: {loadavg()}", file=sys.stderr)
    report = Report()
    with tempfile.TemporaryDirectory(prefix="ksgate-haproxy-") as tmp:
        workdir = Path(tmp)
        tls = None if args.plain else write_tls_material(workdir / "tls")
        with legs(args, workdir, tls, binary or "") as found:
            for path, leg in found.items():  # readiness of each whole path, and what TLS it speaks
                AdminClient(leg.client).list_topics(timeout=30)
                if tls is not None and speaks_tls(leg.client):
                    report.tls[path] = negotiated_tls(leg.client["bootstrap.servers"], tls.ca)
            measure(args, found, report)
            report.pipes = {p: leg.proxy.pipes() for p, leg in found.items() if isinstance(leg.proxy, HAProxyProcess)
                            and args.plain}
    threads = args.haproxy_threads or "default (one per CPU)"
    haproxy = f"HAProxy: {version_of(binary) if binary else '-'}, nbthread {threads}"
    print(plain_header(args, haproxy, report) if args.plain else tls_header(args, haproxy, report))
    print(plain_table(report, args.paths, args.rates) if args.plain else table(report, args.paths))
    if not args.plain and (fixed := tls_fixed_rate_lines(report, args.paths, args.rates)):
        print("\n".join(["", *fixed]))
    if args.json:
        extra = {"latency": [asdict(r) for r in report.latency], "pipes": report.pipes} if args.plain else {}
        print(json.dumps({"runs": [asdict(r) for r in report.runs], "tls": report.tls, "machine": info,
                          "haproxy": version_of(binary) if binary else None,
                          "args": {k: v for k, v in vars(args).items()}, **extra}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
