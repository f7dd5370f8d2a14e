"""Throughput through a one-port SNI listener vs. port-per-broker, both TLS, in one run.

A benchmark, not a test. It starts an embedded Tansu broker and two gateway processes in front of it:
``ports`` is an SSL listener with a port per broker, ``sni`` an SSL listener that serves every broker on its
one port by TLS server name. It then alternates the two paths, repeating, with bench/throughput.py's
produce, fetch and latency measurements (confluent-kafka over TLS). The SNI names resolve through
/etc/hosts lines added for the run and removed after it, so it needs root.

    .venv/bin/python bench/edge_throughput.py [--records N] [--size 1024] [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auth.cert_tools import issue_cert, make_ca
from bench import throughput
from gateway.commands.embedded_broker import EmbeddedBroker
from tests.hosts_file import can_edit_hosts, hosts_entries

DOMAIN = "bench.ksgate.test"
NODE = 111  # Tansu's node id


def tls_material(directory: Path) -> tuple[Path, dict[str, Any]]:
    ca = make_ca()
    issue_cert(ca, f"CN={DOMAIN}", dns_names=("localhost", DOMAIN, f"*.{DOMAIN}"), ip_addresses=()).write_pem(
        directory / "server.pem", directory / "server.key")
    return ca.write(directory / "ca.pem"), {"ssl.keystore.location": str(directory / "server.pem"),
                                             "ssl.key.location": str(directory / "server.key")}


class TlsGateway(throughput.GatewayProcess):
    """bench/throughput.py's gateway process, on an SSL listener: port per broker, or one port by SNI."""

    def __init__(self, upstream: str, workdir: Path, tls: dict[str, Any], sni: bool) -> None:
        super().__init__(upstream, workdir, tls)
        self.sni = sni
        name = "sni" if sni else "ports"
        self.config_path = workdir / f"gateway-{name}.yaml"
        self.log_path = workdir / f"gateway-{name}.log"

    @property
    def settings(self) -> dict[str, Any]:
        settings = {"listeners": f"SSL://127.0.0.1:{self.port}", "upstream.bootstrap.servers": self.upstream,
                    "log.level": "WARNING", **self.extra}
        if self.sni:
            settings["advertised.listeners"] = f"SSL://bootstrap.{DOMAIN}:{self.port}"
            settings["listener.name.ssl.ksgate.sni.broker.host.pattern"] = f"broker-{{nodeId}}.{DOMAIN}"
        else:
            settings["advertised.listeners"] = f"SSL://localhost:{self.port}"
            settings["listener.name.ssl.node.port.base"] = self.node_port_base
        return settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--latency-samples", type=int, default=1000)
    parser.add_argument("--latency-warmup", type=int, default=100)
    args = parser.parse_args(argv)
    if not can_edit_hosts():
        print("edge_throughput: needs root (the SNI names resolve through /etc/hosts)", file=sys.stderr)
        return 2
    info = throughput.machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; librdkafka {info['librdkafka']}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="ksgate-edge-bench-") as tmp, \
            hosts_entries("127.0.0.1", [f"bootstrap.{DOMAIN}", f"broker-{NODE}.{DOMAIN}"]):
        workdir = Path(tmp)
        ca, tls = tls_material(workdir)
        client = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
        # bench/throughput.py's clients are plaintext: every client of this run speaks TLS instead.
        for settings in (throughput.PRODUCER_SETTINGS, throughput.CONSUMER_SETTINGS, throughput.LATENCY_SETTINGS):
            settings.update(client)
        with EmbeddedBroker(log_path=workdir / "tansu.log") as broker, \
                TlsGateway(broker.bootstrap, workdir, tls, sni=False) as ports, \
                TlsGateway(broker.bootstrap, workdir, tls, sni=True) as sni:
            assert ports.process is not None and sni.process is not None
            paths = {"ports": f"localhost:{ports.port}", "sni": f"bootstrap.{DOMAIN}:{sni.port}"}
            pids = {name: throughput.Pids(broker=broker.process.pid, gateway=process.pid,
                                          processes={"broker": broker.process, "gateway": process.process})
                    for name, process in (("ports", ports), ("sni", sni))}
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for name, bootstrap in paths.items():
                metadata = AdminClient({"bootstrap.servers": bootstrap, **client}).list_topics(timeout=20)
                print(f"{name}: brokers {[f'{b.host}:{b.port}' for b in metadata.brokers.values()]}",
                      file=sys.stderr)
            runs: dict[str, list[throughput.PathRun]] = {"ports": [], "sni": []}
            for rep in range(args.repeat):
                for name in (["ports", "sni"] if rep % 2 == 0 else ["sni", "ports"]):
                    def progress(text: str, rep: int = rep, name: str = name) -> None:
                        print(f"  [{rep + 1}/{args.repeat}] {name:<6} {text}", file=sys.stderr)
                    runs[name].append(throughput.run_path(name, {"bootstrap.servers": paths[name]}, admin, args, rep,
                                                          pids[name], progress))
            del admin
    print(f"\n{args.records} x {args.size} B records, {args.partitions} partition(s), TLS, "
          f"median of {args.repeat} alternating pairs")
    print(f"{'':<8}{'produce MB/s':>14}{'fetch MB/s':>12}{'p50 ms':>9}{'p99 ms':>9}")
    medians = {}
    for name, done in runs.items():
        medians[name] = {field: statistics.median(getattr(r, field) for r in done)
                         for field in ("produce_mb_s", "fetch_mb_s", "latency_p50_ms", "latency_p99_ms")}
        m = medians[name]
        print(f"{name:<8}{m['produce_mb_s']:>14.1f}{m['fetch_mb_s']:>12.1f}{m['latency_p50_ms']:>9.3f}"
              f"{m['latency_p99_ms']:>9.3f}")
    pairs = list(zip(runs["ports"], runs["sni"], strict=True))
    for field in ("produce_mb_s", "fetch_mb_s"):
        ratio = statistics.median(getattr(s, field) / getattr(p, field) for p, s in pairs)
        print(f"sni/ports {field.removesuffix('_mb_s')}: {ratio:.2f}x (median of per-pair ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
