"""ksgate against Kroxylicious in the same run: throughput, fixed-rate latency and proxy CPU per MB/s.

A benchmark, not a test.  One broker (the embedded Tansu, or Apache Kafka 4.4 with ``--upstream kafka``),
and in front of it a ``ksgate run`` process and a Kroxylicious proxy with no filters (pass-through, its
port-per-node addressing), both PLAINTEXT, or both with TLS on the client leg (``--tls``: ksgate's SSL
listener, Kroxylicious's gateway ``tls``; the broker leg stays PLAINTEXT for both).  Each repeat runs the
paths direct, ksgate and kroxylicious in a rotated order (so drift on the machine hits each):

* bench/throughput.py's produce and fetch throughput (librdkafka, 1 KiB records) and its single-record
  produce latency, with the proxy's CPU during each phase;
* bench/latency.py's fixed-rate producer + consumer (publish and end-to-end percentiles) at ``--rates``.

CPU per MB/s = the proxy process's CPU (from /proc, in millicores: 1000 = one core busy) / MB/s of record
values relayed, the unit of Kroxylicious's sizing guidance; it depends far less on a busy machine than the
throughput itself.  Kroxylicious is kroxylicious-runtime from
Maven Central (scripts/kroxylicious/fetch.sh; kroxylicious-app is not published there), started by
scripts/kroxylicious/KroxyliciousMain.java on Java 17 with the JVM's default options.

    .venv/bin/python bench/anchors/kroxylicious.py [--upstream tansu|kafka] [--tls] [--repeat 3]
        [--records 200000] [--rates 5000,50000] [--seconds 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka.admin import AdminClient  # noqa: E402

from auth.cert_tools import TlsFiles, write_tls_material  # noqa: E402
from bench.latency import Run, run_once  # noqa: E402
from bench.throughput import (  # noqa: E402
    GatewayProcess,
    ListeningProcess,
    PathRun,
    Pids,
    loadavg,
    machine,
    run_path,
    upstream_broker,
)
from tests.harness import free_port_block  # noqa: E402

SCRIPTS = REPO / "scripts" / "kroxylicious"
PATHS = ("direct", "ksgate", "kroxylicious")


def kroxylicious_lib() -> Path:
    """The folder of Kroxylicious's jars (fetched into the cache the first time)."""
    out = subprocess.run(["bash", str(SCRIPTS / "fetch.sh")], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


class KroxyliciousProcess(ListeningProcess):
    """Kroxylicious with one virtual cluster and no filters in front of ``upstream``; a context manager."""

    name = "kroxylicious"
    poll_interval_s = 0.1

    def __init__(self, lib: Path, upstream: str, node_ids: list[int], workdir: Path,
                 tls: TlsFiles | None) -> None:
        # 60 s: the source launcher compiles main() first, a few seconds.
        super().__init__(workdir, "kroxylicious.yaml", "kroxylicious.log", 60.0)
        self.lib, self.upstream, self.node_ids, self.tls = lib, upstream, node_ids, tls
        # The node ports follow the bootstrap port, so all of them must be free, and outside the ephemeral
        # range: after a run with thousands of client connections, bootstrap + 1 was one of their ports
        # (Kroxylicious failed to start: address already in use).
        self.port = free_port_block(len(node_ids) + 1)

    def config_text(self) -> str:
        # Port-per-node: node N is served on bootstrap port + 1 + (N - first id), which is what Kroxylicious's
        # own quick start does; the node id range is the broker's, so the ports are bootstrap + 1 ...
        lines = ["virtualClusters:", "  - name: bench", "    targetCluster:",
                 f"      bootstrapServers: {self.upstream}", "    gateways:", "      - name: bench",
                 "        portIdentifiesNode:", f"          bootstrapAddress: 127.0.0.1:{self.port}",
                 "          nodeIdRanges:", "            - name: broker",
                 f"              start: {self.node_ids[0]}", f"              end: {self.node_ids[-1]}"]
        if self.tls is not None:
            lines += ["        tls:", "          key:", f"            privateKeyFile: {self.tls.server_key}",
                      f"            certificateFile: {self.tls.server_cert}"]
        return "\n".join(lines) + "\n"

    def command(self) -> list[str]:
        return ["java", "-cp", f"{self.lib}/*", str(SCRIPTS / "KroxyliciousMain.java"), str(self.config_path)]


@dataclass(slots=True)
class Report:
    throughput: list[PathRun] = field(default_factory=list)
    latency: list[Run] = field(default_factory=list)


def rotated(repeat: int) -> list[str]:
    shift = repeat % len(PATHS)
    return list(PATHS[shift:] + PATHS[:shift])


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def millicores_per_mb_s(cpu_pct: float, mb_s: float) -> float:
    """CPU (% of one core) per MB/s relayed, in millicores per MB/s (Kroxylicious's sizing unit): 1 % = 10."""
    return 10 * cpu_pct / mb_s if mb_s else float("nan")


def path_width(paths: Sequence[str]) -> int:
    """The path column's width in the tables: the longest path name's (pyrelay-tls-asyncio is 19), at least the 14
    this bench's own names need."""
    return max(14, *map(len, paths))


def throughput_lines(runs: list[PathRun], paths: list[str]) -> list[str]:
    """A row per path: produce and fetch MB/s, single-record latency, proxy millicores per MB/s (medians)."""
    width = path_width(paths)
    lines = [f"{'path':<{width}}{'produce MB/s':>13}{'fetch MB/s':>11}{'lat p50':>8}{'p99':>7}"
             f"{'proxy mcores/MB/s produce':>27}{'fetch':>7}   (medians; single-record latency, ms)"]
    for path in paths:
        mine = [r for r in runs if r.path == path]
        lines.append(
            f"{path:<{width}}{median([r.produce_mb_s for r in mine]):>13.1f}"
            f"{median([r.fetch_mb_s for r in mine]):>11.1f}"
            f"{median([r.latency_p50_ms for r in mine]):>8.3f}{median([r.latency_p99_ms for r in mine]):>7.3f}"
            f"{median([millicores_per_mb_s(r.cpu_produce.get('gateway', 0), r.produce_mb_s) for r in mine]):>27.2f}"
            f"{median([millicores_per_mb_s(r.cpu_fetch.get('gateway', 0), r.fetch_mb_s) for r in mine]):>7.2f}")
    return lines


def fixed_rate_lines(runs: list[Run], paths: list[str], rates: list[int]) -> list[str]:
    """A row per rate and path: publish and end-to-end p50/p99, proxy CPU and its millicores per MB/s (medians)."""
    width = path_width(paths)
    lines = [f"{'rate/s':>7} {'path':<{width}}{'pub p50':>10}{'p99':>10}{'e2e p50':>10}{'p99':>10}{'proxy CPU%':>11}"
             f"{'mcores/MB/s':>12}   (ms, medians of repeats)"]
    for rate in rates:
        for path in paths:
            fixed = [r for r in runs if r.path == path and r.rate == rate]
            lines.append(f"{rate:>7} {path:<{width}}{median([r.publish['p50'] for r in fixed]):>10.2f}"
                         f"{median([r.publish['p99'] for r in fixed]):>10.2f}"
                         f"{median([r.end_to_end['p50'] for r in fixed]):>10.2f}"
                         f"{median([r.end_to_end['p99'] for r in fixed]):>10.2f}"
                         f"{median([r.gateway_cpu_pct for r in fixed]):>11.2f}"
                         f"{10 * median([r.gateway_cpu_pct_per_mb_s for r in fixed]):>12.2f}")
    return lines


def table(report: Report, rates: list[int]) -> str:
    return "\n".join([*throughput_lines(report.throughput, list(PATHS)), "",
                      *fixed_rate_lines(report.latency, list(PATHS), rates)])


def add_fixed_rate_arguments(parser: argparse.ArgumentParser, rates: str | None) -> None:
    """bench/latency.py's run_once settings, for a bench that runs it beside throughput.py's passes."""
    parser.add_argument("--rates", default=rates, help="fixed rates, records/s, comma-separated ('' skips)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per fixed-rate run")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds per fixed-rate run")
    parser.add_argument("--linger-ms", type=float, default=5.0)
    parser.add_argument("--fetch-wait-ms", type=int, default=5)


def rate_list(text: str) -> list[int]:
    return [int(r) for r in text.split(",") if r]


def fixed_rate_runs(path: str, config: dict[str, Any], repeat: int, args: argparse.Namespace, admin: AdminClient,
                    proxy_pid: int | None, broker_pid: int, progress: Callable[[str], None]) -> list[Run]:
    """bench/latency.py's fixed-rate producer + consumer on ``path`` at each of ``args.rates``."""
    runs: list[Run] = []
    for rate in args.rates:
        r = run_once(path, config, rate, repeat, args, admin, proxy_pid, broker_pid)
        progress(f"{rate}/s publish {r.publish} e2e {r.end_to_end} proxy CPU "
                 f"{r.gateway_cpu_pct}% ({r.gateway_cpu_pct_per_mb_s} %/MB/s)")
        runs.append(r)
    return runs


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", choices=("tansu", "kafka"), default="tansu")
    parser.add_argument("--tls", action="store_true", help="TLS on the client leg of both proxies")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the three paths, order rotated")
    parser.add_argument("--records", type=int, default=200_000, help="records per throughput run")
    parser.add_argument("--size", type=int, default=1024, help="record value size in bytes")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--latency-samples", type=int, default=2000)
    parser.add_argument("--latency-warmup", type=int, default=200)
    add_fixed_rate_arguments(parser, "5000,50000")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    args.rates = rate_list(args.rates)
    return args


def tls_client(config: dict[str, Any], tls: TlsFiles | None) -> dict[str, Any]:
    if tls is None:
        return config
    return {**config, "security.protocol": "SSL", "ssl.ca.location": str(tls.ca),
            "ssl.endpoint.identification.algorithm": "none"}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    info = machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; load average before: {loadavg()}", file=sys.stderr)
    lib = kroxylicious_lib()
    report = Report()
    with tempfile.TemporaryDirectory(prefix="ksgate-anchor-") as tmp:
        workdir = Path(tmp)
        tls = write_tls_material(workdir / "tls") if args.tls else None
        with upstream_broker(args.upstream, "plaintext", workdir) as broker:
            upstream = broker.gateway_upstream
            node_ids = sorted(AdminClient(broker.admin).list_topics(timeout=20).brokers)
            extra = dict(broker.gateway_extra)
            if tls is not None:
                extra |= {"ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key)}
            ksgate = GatewayProcess(upstream, workdir, {"authorizer.class.name": "", **extra},
                                    90.0, protocol="SSL" if tls else "PLAINTEXT")
            kroxy = KroxyliciousProcess(lib, upstream, node_ids, workdir, tls)
            with ksgate, kroxy:
                assert ksgate.process is not None and kroxy.process is not None
                legs = {"direct": (broker.direct, ksgate.process),
                        "ksgate": (tls_client(broker.through(ksgate.bootstrap), tls), ksgate.process),
                        "kroxylicious": (tls_client(broker.through(kroxy.bootstrap), tls), kroxy.process)}
                admin = AdminClient(broker.admin)
                for config, _ in legs.values():  # readiness of each path, and a first JIT pass for the JVMs
                    AdminClient(config).list_topics(timeout=30)
                for repeat in range(-1, args.repeat):  # repeat -1: warm-up of every path, not reported
                    for path in rotated(max(repeat, 0)):
                        config, proxy = legs[path]
                        pids = Pids(broker.process.pid, proxy.pid if path != "direct" else -1,
                                    {"broker": broker.process, "proxy": proxy})

                        def progress(text: str, repeat: int = repeat, path: str = path) -> None:
                            print(f"  [{repeat + 1}/{args.repeat}] {path:<13} {text}", file=sys.stderr)
                        run = run_path(path, config, admin, args, repeat, pids, progress)
                        if repeat >= 0:
                            report.throughput.append(run)
                        if repeat >= 0:
                            report.latency += fixed_rate_runs(path, config, repeat, args, admin,
                                                              proxy.pid if path != "direct" else None,
                                                              broker.process.pid, progress)
                del admin
    print(f"upstream: {broker.description}; client leg: {'TLS' if args.tls else 'PLAINTEXT'}; "
          f"Kroxylicious {lib.parent.name} (no filters); load average after: {loadavg()}")
    print(table(report, args.rates))
    if args.json:
        print(json.dumps({"throughput": [asdict(r) for r in report.throughput],
                          "latency": [asdict(r) for r in report.latency], "machine": info,
                          "args": vars(args)}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
