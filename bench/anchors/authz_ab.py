"""ksgate with TLS only against ksgate with SASL_SSL and the authorizer, in alternating fixed-rate blocks.

A benchmark, not a test (issue #23, goal 1).  One Apache Kafka 4.4 and, in front of it, one ``ksgate run`` per
path with haproxy_tls.py's settings: ``ksgate-ssl`` (SSL, no SASL, no authorizer), ``ksgate`` (SASL_SSL
SCRAM-SHA-512, StandardAuthorizer with the bench user's ALLOW ACLs) and, if named, ``ksgate-sasl`` (SASL_SSL, no
authorizer: SASL apart from authorization).  Then only bench/latency.py's fixed-rate run (producer at ``--rate``,
acks=all, linger 5 ms; a consumer in another process), one short block per path per round, the order reversed every
other round, so that each pair of blocks sees the same minutes of a shared machine.  Prints each path's figures
(median over rounds) and, for every other path, its difference from the first path per round: median, quartiles,
how many rounds it was higher, and the two-sided sign test's p-value.

Why not haproxy_tls.py with more repeats: each of its repeats also runs the throughput passes (a minute of other
load per round), so three repeats fit in a bench slot; short blocks of the one figure in question give ~15 pairs.

    export REFERENCE_KAFKA_LIB=$(bash scripts/kafka/fetch.sh)
    PYTHONPATH=$PWD .venv/bin/python bench/anchors/authz_ab.py [--rounds 14] [--rate 5000] [--seconds 5]
        [--paths ksgate-ssl,ksgate,ksgate-sasl]
"""

from __future__ import annotations

import argparse
import math
import secrets
import signal
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka.admin import AdminClient  # noqa: E402

from auth.cert_tools import TlsFiles, write_tls_material  # noqa: E402
from bench.anchors.haproxy_tls import BENCH_USER, kafka_ends, ksgate_settings  # noqa: E402
from bench.anchors.kroxylicious import tls_client  # noqa: E402
from bench.kafka_upstream import MECHANISM  # noqa: E402
from bench.latency import Run, run_once  # noqa: E402
from bench.throughput import GatewayProcess, loadavg, plain_client  # noqa: E402

PATHS = ("ksgate-ssl", "ksgate", "ksgate-sasl")
FIGURES = (("pub p50", "publish", "p50"), ("pub p99", "publish", "p99"), ("e2e p50", "end_to_end", "p50"))
# ksgate's ACL keys: without an authorizer they have nothing to configure
_AUTHORIZER_KEYS = ("ksgate.acl.file", "allow.everyone.if.no.acl.found")


def gateway_keys(path: str, home: Path, tls: TlsFiles, password: str,
                 nodes: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """haproxy_tls.py's listener protocol and keys for ``path``; ksgate-sasl: ksgate's without the authorizer."""
    protocol, keys = ksgate_settings("ksgate" if path == "ksgate-sasl" else path, home, tls, password, nodes)
    if path == "ksgate-sasl":
        keys = {k: v for k, v in keys.items() if k not in _AUTHORIZER_KEYS} | {"authorizer.class.name": ""}
    return protocol, keys


def client_of(gateway: GatewayProcess, protocol: str, tls: TlsFiles, password: str) -> dict[str, Any]:
    client = tls_client(plain_client(gateway.bootstrap), tls)
    if protocol == "SASL_SSL":
        client |= {"security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM, "sasl.username": BENCH_USER,
                   "sasl.password": password}
    return client


def sign_test_p(higher: int, lower: int) -> float:
    """Two-sided sign test: the chance of a split at least this uneven if either path were as likely higher."""
    n = higher + lower
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(higher, lower) + 1)) / (1 << n)
    return min(1.0, 2 * tail)


def figure(run: Run, part: str, key: str) -> float:
    return float(getattr(run, part)[key])


def report(runs: list[Run], paths: list[str]) -> list[str]:
    lines = [f"{'path':<14}" + "".join(f"{label + ' ms':>12}" for label, _, _ in FIGURES)
             + f"{'proxy CPU %':>13}{'errors':>8}   (medians over rounds)"]
    for path in paths:
        mine = [r for r in runs if r.path == path]
        lines.append(f"{path:<14}" + "".join(f"{statistics.median(figure(r, part, key) for r in mine):>12.2f}"
                                             for _, part, key in FIGURES)
                     + f"{statistics.median(r.gateway_cpu_pct for r in mine):>13.1f}{sum(r.errors for r in mine):>8}")
    base = paths[0]
    for path in paths[1:]:
        for label, part, key in FIGURES:
            diffs = [figure(b, part, key) - figure(a, part, key) for a, b in pairs(runs, base, path)]
            q1, _, q3 = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else diffs * 3
            higher, lower = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
            lines.append(f"{path} - {base}, {label}: median {statistics.median(diffs):+.2f} ms (quartiles "
                         f"{q1:+.2f} to {q3:+.2f}), higher in {higher} of {len(diffs)} rounds, sign test p = "
                         f"{sign_test_p(higher, lower):.2f}; per round: {' '.join(f'{d:+.2f}' for d in diffs)}")
    return lines


def pairs(runs: list[Run], base: str, path: str) -> list[tuple[Run, Run]]:
    """The blocks of ``base`` and ``path`` of each round, in round order."""
    by_round = {(r.path, r.repeat): r for r in runs}
    rounds = sorted({r.repeat for r in runs})
    return [(by_round[(base, n)], by_round[(path, n)]) for n in rounds]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", default="ksgate-ssl,ksgate",
                        help=f"comma-separated, of {', '.join(PATHS)}; the first is the one the others are set against")
    parser.add_argument("--rounds", type=int, default=14, help="blocks per path, the order reversed every round")
    parser.add_argument("--rate", type=int, default=5000, help="records/s of each block")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per block")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per block")
    parser.add_argument("--size", type=int, default=1024, help="record value bytes")
    parser.add_argument("--linger-ms", type=float, default=5.0)
    parser.add_argument("--fetch-wait-ms", type=int, default=5)
    args = parser.parse_args(argv)
    args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if len(args.paths) < 2 or len(set(args.paths)) != len(args.paths) or set(args.paths) - set(PATHS):
        parser.error(f"--paths: two or more of {', '.join(PATHS)}")
    if args.rounds < 1 or args.rate < 1 or args.seconds <= 0:
        parser.error("--rounds, --rate and --seconds must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"load average before: {loadavg()}", file=sys.stderr)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="ksgate-authz-ab-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        tls = write_tls_material(workdir / "tls")
        _, broker = kafka_ends(stack, workdir, {})
        admin = AdminClient(broker.admin)
        password = secrets.token_urlsafe(24)
        clients: dict[str, dict[str, Any]] = {}
        gateways: dict[str, GatewayProcess] = {}
        for path in args.paths:
            home = workdir / path
            home.mkdir()
            protocol, keys = gateway_keys(path, home, tls, password, broker.nodes)
            gateways[path] = stack.enter_context(GatewayProcess(broker.address, home, keys, 90.0, protocol=protocol))
            clients[path] = client_of(gateways[path], protocol, tls, password)
            AdminClient(clients[path]).list_topics(timeout=30)
        for round_ in range(-1, args.rounds):  # round -1 warms every path up (connections, codecs), unreported
            for path in args.paths if round_ % 2 == 0 else args.paths[::-1]:
                run = run_once(path, clients[path], args.rate, round_, args, admin, gateways[path].pid,
                               broker.process.pid)
                print(f"  [{round_ + 1}/{args.rounds}] {path:<12} publish {run.publish} e2e {run.end_to_end} "
                      f"proxy CPU {run.gateway_cpu_pct}%", file=sys.stderr)
                if round_ >= 0:
                    runs.append(run)
    print(f"Apache Kafka 4.4, one node; {args.rate}/s x {args.size} B, {args.seconds:g} s measured after "
          f"{args.warmup:g} s per block, {args.rounds} rounds; load average after: {loadavg()}")
    print("\n".join(report(runs, args.paths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
