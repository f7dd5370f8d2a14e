"""Authorizer benchmark: decisions per second, build time, single-change cost and memory vs. ACL count.

Each size runs in its own subprocess (so memory figures are clean); single core, no I/O.

    .venv/bin/python bench/authorizer_bench.py                  # 1k, 10k, 100k, 1M
    .venv/bin/python bench/authorizer_bench.py --sizes 1000 100000 --queries 300000 --json

The ACL mix imitates a multi-team cluster: per team, service principals with LITERAL and
PREFIXED topic ACLs (READ/WRITE/DESCRIBE/…), consumer-group and transactional-id ACLs, a few
host-restricted entries, ~5 % DENYs, and a handful of wildcards (``User:*`` on ``public.``
topics, a monitoring user on ``*``).  Queries are 70 % built from existing ACLs (literal
names, names under a prefix, implied DESCRIBE) and 30 % misses (other principals, unknown
topics, wrong hosts).

Rates are decisions per CPU second of the benchmark process (``time.process_time``), so that
other load on the machine does not distort them; wall-clock rates are in the --json output.

Columns:
  uncached      cache_size=0: every decision walks the index (prefix walk, bucket tables).
  cold cache    default cache, first pass over a fresh query set: every decision is a miss
                (the resource memo still helps repeated names).
  warm cache    default cache, same queries again: the steady state of a gateway whose
                clients ask the same questions (served from the per-snapshot decision cache).
  build s       CPU s of StandardAuthorizer.load (validation + index), not generating the bindings.
  1 add µs      CPU µs of one apply(added=[binding]) on the delta layer (mean of 100).
  compact s     CPU s of folding the delta into a new base (once every ~8·sqrt(n) changes).
  bindings MB   RSS growth for the AclBinding objects themselves; index MB: on top, for the index.

``--shadow`` measures instead what a shadow ACL set (authz/shadow.py) costs the gateway's hot path:
one request with one decision through ConnectionAuthzView (view, decision, audit flush), with no
shadow set, with a shadow set equal to the live one (no divergence: a candidate that fits the
traffic), and with a different one of the same size (divergences, rate-limited, written to an
audit file).  The variants alternate ``--repeat`` times; medians and the min–max spread are printed.

    .venv/bin/python bench/authorizer_bench.py --shadow --sizes 10000 --queries 200000 --repeat 7

``--shadow --gateway`` measures the whole gateway instead: ``ksgate run`` processes in front of an
embedded Tansu, alternately without and with the shadow set (equal to the live set of ``--sizes``
bindings, the benchmark's principal allowed), each sent ``--queries`` single-record produce
requests one at a time; the figure is the gateway process's CPU time (/proc, both modes) per request.
Each gateway is waited for on its /readyz, then on a first relayed produce (30 s each); a gateway that
exits or stays unready stops the run with the step that timed out and the end of its log.

    .venv/bin/python bench/authorizer_bench.py --shadow --gateway --sizes 10000 --queries 4000 --repeat 5
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auth.principal import KafkaPrincipal
from authz.authorizer import DEFAULT_CACHE_SIZE, StandardAuthorizer
from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, GROUP, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
DOMAINS = ("orders", "payments", "users", "events", "audit", "metrics", "billing", "search")
HOSTS = [f"10.1.{i // 256}.{i % 256}" for i in range(512)]
Query = tuple[KafkaPrincipal, str, AclOperation, ResourceType, str]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def make_acls(n: int, rng: random.Random) -> list[AclBinding]:
    teams = max(4, n // 250)
    acls: dict[AclBinding, None] = {}

    def add(rt: ResourceType, name: str, pt: PatternType, principal: str, op: AclOperation,
            perm: AclPermissionType = ALLOW, host: str = "*") -> None:
        acls[AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))] = None

    # A few cluster-wide wildcards.
    add(TOPIC, "public.", PREFIXED, "User:*", Op.READ)
    add(TOPIC, "*", LITERAL, "User:monitoring", Op.DESCRIBE)
    add(GROUP, "*", LITERAL, "User:monitoring", Op.DESCRIBE)
    add(TOPIC, "public.restricted.", PREFIXED, "User:*", Op.READ, DENY)
    while len(acls) < n:
        team = rng.randrange(teams)
        svc = f"User:svc-{team}-{rng.randrange(6)}"
        domain = rng.choice(DOMAINS)
        topic = f"team-{team}.{domain}.{rng.choice(('v1', 'v2', 'raw', 'clean', 'dlq'))}-{rng.randrange(40)}"
        host = rng.choice(HOSTS) if rng.random() < 0.05 else "*"
        perm = DENY if rng.random() < 0.05 else ALLOW
        r = rng.random()
        if r < 0.55:
            add(TOPIC, topic, LITERAL, svc, rng.choice((Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALL)), perm, host)
        elif r < 0.75:
            prefix = f"team-{team}." if rng.random() < 0.3 else f"team-{team}.{domain}."
            add(TOPIC, prefix, PREFIXED, svc, rng.choice((Op.READ, Op.WRITE, Op.DESCRIBE_CONFIGS)), perm, host)
        elif r < 0.90:
            if rng.random() < 0.6:
                add(GROUP, f"cg-{team}-{domain}-{rng.randrange(20)}", LITERAL, svc, Op.READ, perm)
            else:
                add(GROUP, f"team-{team}-", PREFIXED, svc, Op.READ, perm)
        elif r < 0.95:
            add(TXN, f"team-{team}-{domain}-", PREFIXED, svc, Op.WRITE, perm)
        else:
            add(TOPIC, topic, LITERAL, f"User:svc-{team}-{rng.randrange(6)}", Op.READ, DENY, host)
    return list(acls)


def make_queries(acls: list[AclBinding], count: int, rng: random.Random, distinct: int) -> list[Query]:
    principals: dict[str, KafkaPrincipal] = {}

    def principal(text: str) -> KafkaPrincipal:
        found = principals.get(text)
        if found is None:
            found = principals[text] = KafkaPrincipal.parse(text)
        return found

    pool: list[Query] = []
    while len(pool) < distinct:
        binding = rng.choice(acls)
        pattern, entry = binding.pattern, binding.entry
        if rng.random() < 0.7:  # derived from an ACL: mostly a hit
            name = pattern.name if pattern.pattern_type == LITERAL else pattern.name + rng.choice(
                ("orders.v1-3", "x", "payments.raw-7", "a-b-c"))
            if name == "*":
                name = f"anything-{rng.randrange(1000)}"
            who = entry.principal if entry.principal != "User:*" else f"User:svc-{rng.randrange(100)}-1"
            op = entry.operation if entry.operation != Op.ALL else Op.WRITE
            if rng.random() < 0.2 and op in (Op.READ, Op.WRITE):
                op = Op.DESCRIBE
            host = entry.host if entry.host != "*" else rng.choice(HOSTS)
            pool.append((principal(who), host, op, pattern.resource_type, name))
        else:  # a miss: someone else, somewhere else
            name = f"unknown-{rng.randrange(10**6)}" if rng.random() < 0.5 else pattern.name.rstrip(".") + "-zz"
            who = f"User:svc-{rng.randrange(10**4)}-{rng.randrange(6)}"
            pool.append((principal(who), rng.choice(HOSTS), rng.choice((Op.READ, Op.WRITE, Op.DESCRIBE)),
                         pattern.resource_type, name))
    return [rng.choice(pool) for _ in range(count)]


def run_queries(authorizer: StandardAuthorizer, queries: list[Query]) -> tuple[float, float, int]:
    """(decisions per CPU second, decisions per wall second, allowed count)."""
    authorize = authorizer.authorize
    allowed = 0
    gc.disable()
    wall, cpu = time.perf_counter(), time.process_time()
    for principal, host, op, rt, name in queries:
        if authorize(principal, host, op, rt, name).allowed:
            allowed += 1
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    gc.enable()
    return len(queries) / cpu, len(queries) / wall, allowed


def measure(n: int, query_count: int, distinct: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    base_rss = rss_mb()
    t0 = time.perf_counter()
    acls = make_acls(n, rng)
    generate_s = time.perf_counter() - t0
    bindings_rss = rss_mb()

    t0 = time.process_time()
    authorizer = StandardAuthorizer({"User:admin"}, False)
    authorizer.load(acls)
    build_s = time.process_time() - t0
    gc.collect()
    loaded_rss = rss_mb()

    queries = make_queries(acls, query_count, rng, distinct)
    authorizer.cache_size = 0
    uncached_rate, uncached_wall, allowed = run_queries(authorizer, queries)
    authorizer.cache_size = DEFAULT_CACHE_SIZE
    cold_rate, cold_wall, _ = run_queries(authorizer, queries[: len(queries) // 2])
    warm_rate, warm_wall, _ = run_queries(authorizer, queries)

    # One-ACL changes (the delta path), then what a batch costs.
    extra = make_acls(100, random.Random(seed + 1))
    t0 = time.process_time()
    for binding in extra:
        authorizer.apply(added=[binding])
    single_add_us = (time.process_time() - t0) / len(extra) * 1e6
    t0 = time.process_time()
    authorizer.index.compacted()  # what folding the delta into the base costs (every ~8·sqrt(n) changes)
    compact_s = time.process_time() - t0
    t0 = time.process_time()
    authorizer.apply(removed=extra)
    batch_remove_ms = (time.process_time() - t0) * 1e3

    return {
        "acls": n, "generate_s": generate_s, "build_s": build_s, "bindings_mb": bindings_rss - base_rss,
        "index_mb": loaded_rss - bindings_rss, "total_mb": loaded_rss - base_rss,
        "uncached_per_s": uncached_rate, "cold_cache_per_s": cold_rate, "warm_cache_per_s": warm_rate,
        "uncached_per_wall_s": uncached_wall, "cold_cache_per_wall_s": cold_wall, "warm_cache_per_wall_s": warm_wall,
        "load_average": os.getloadavg()[0],
        "allowed_fraction": allowed / len(queries), "queries": len(queries), "distinct_queries": distinct,
        "single_add_us": single_add_us, "compact_s": compact_s, "remove_100_ms": batch_remove_ms,
    }


def _request_loop(shared: Any, queries: list[Query]) -> float:
    """Requests (one decision each) per CPU second through the gateway's ConnectionAuthzView."""
    from authz.request_policy import Action
    from gateway.session.authz_view import ConnectionAuthzView, TopicIdMisses

    misses = TopicIdMisses()  # one per connection in the gateway; these queries name topics, not ids
    actions = [(principal, host, Action(op, rt, name)) for principal, host, op, rt, name in queries]
    gc.disable()
    cpu = time.process_time()
    for principal, host, action in actions:
        view = ConnectionAuthzView(shared, principal, host, 5000, "PLAINTEXT", 0, 9, {}, misses)
        view.allowed(action)
        view.flush_audit()
    cpu = time.process_time() - cpu
    gc.enable()
    return len(actions) / cpu


def measure_shadow(n: int, query_count: int, distinct: int, seed: int, repeat: int, workdir: str) -> dict[str, Any]:
    from authz.shadow import ShadowAcls
    from gateway.authorization import GatewayAuthorization
    from gateway.ops.audit import AuditLog

    rng = random.Random(seed)
    acls = make_acls(n, rng)
    queries = make_queries(acls, query_count, rng, distinct)
    live = StandardAuthorizer({"User:admin"}, False)
    live.load(acls)
    audit = AuditLog(os.path.join(workdir, "audit.log"))  # denials are written, as in production
    equal, other = ShadowAcls(live), ShadowAcls(live)
    equal.load(acls)
    other.load(make_acls(n, random.Random(seed + 7)))
    variants = {"none": None, "equal": equal, "different": other}
    shared = {name: GatewayAuthorization(live, None, audit, {}, shadow=shadow)  # type: ignore[arg-type]
              for name, shadow in variants.items()}
    for name in variants:  # warm every cache once: the steady state a gateway's clients see
        _request_loop(shared[name], queries)
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name in variants:
            rates[name].append(_request_loop(shared[name], queries))
    audit.close()
    return {"acls": n, "queries": query_count, "repeat": repeat, "rates": rates,
            "divergences_counted": sum(other.counts().values()), "reported_suppressed": other.suppressed,
            "load_average": os.getloadavg()[0]}


def _gateway_cpu_per_request(bootstrap: str, only_node: dict[str, int], workdir: str, shadow: bool,
                             requests: int) -> float:
    """CPU µs of one ``ksgate run`` process per single-record produce request (after a warm-up)."""
    import yaml
    from confluent_kafka import Producer

    from gateway.commands.embedded_broker import free_port

    port, metrics_port = free_port(), free_port()
    settings: dict[str, Any] = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "upstream.bootstrap.servers": bootstrap, "authorizer.class.name": "StandardAuthorizer",
        "allow.everyone.if.no.acl.found": True, "ksgate.acl.file": os.path.join(workdir, "acls.json"),
        # only_node: the broker's node port is the base itself, found free (base + 111 may be a client's port)
        "listener.name.plaintext.node.port.base": free_port(), **only_node,
        "ksgate.metrics.listener": f"127.0.0.1:{metrics_port}", "log.level": "WARNING"}
    if shadow:
        settings["ksgate.acl.shadow.file"] = os.path.join(workdir, "shadow.json")
    config = Path(workdir) / f"gateway-{port}.yaml"
    config.write_text(yaml.safe_dump(settings))
    log_path = Path(workdir) / f"gateway-{port}.log"  # quoted in the error if it does not start
    with open(log_path, "wb") as log:
        gateway = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                                   cwd=Path(__file__).resolve().parent.parent, stdout=log, stderr=log)
    try:
        _await_ready(gateway, metrics_port, log_path)
        # Created once the gateway is ready: no reconnect back-off left over from its start-up.
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0, "acks": "all",
                             "enable.idempotence": False, "log_level": 0})
        producer.produce("shadow-bench", b"x")
        if producer.flush(30) != 0:
            raise RuntimeError(f"the gateway was ready (/readyz) but did not relay a first produce within 30 s"
                               f"{_exit_and_log(gateway, log_path)}")
        for _ in range(300):
            producer.produce("shadow-bench", b"x")
            producer.flush()
        before = _process_cpu_s(gateway.pid)
        for _ in range(requests):
            producer.produce("shadow-bench", b"x")
            producer.flush()
        return (_process_cpu_s(gateway.pid) - before) / requests * 1e6
    finally:
        gateway.terminate()
        gateway.wait(10)


def _await_ready(gateway: subprocess.Popen[bytes], metrics_port: int, log_path: Path, timeout_s: float = 30) -> None:
    """Until the gateway's /readyz answers 200 (listeners open, upstream answered); a gateway that exits or
    stays unready fails the run naming the step and quoting its log."""
    import urllib.error
    import urllib.request

    deadline, why = time.monotonic() + timeout_s, "its metrics port did not answer"
    while time.monotonic() < deadline:
        if gateway.poll() is not None:
            raise RuntimeError(f"the gateway exited during start-up{_exit_and_log(gateway, log_path)}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except urllib.error.HTTPError as exc:  # 503 while starting: its body says why
            why = exc.read().decode(errors="replace").strip()
        except OSError as exc:
            why = f"its metrics port did not answer ({exc})"
        time.sleep(0.05)
    raise RuntimeError(f"the gateway was not ready (/readyz) within {timeout_s:.0f} s: {why}"
                       f"{_exit_and_log(gateway, log_path)}")


def _exit_and_log(gateway: subprocess.Popen[bytes], log_path: Path) -> str:
    tail = log_path.read_text(errors="replace").splitlines()[-5:]
    return f" (exit code {gateway.poll()}); its log {log_path} ends:\n" + "\n".join(tail)


def _process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_shadow_gateway(n: int, requests: int, seed: int, repeat: int, workdir: str) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    from authz.acl_json import encode_acl_file
    from bench.throughput import only_node
    from gateway.commands.embedded_broker import EmbeddedBroker

    acls = make_acls(n, random.Random(seed))
    for resource_type in (TOPIC, GROUP):  # the benchmark's client (PLAINTEXT: User:ANONYMOUS) may do anything
        acls.append(AclBinding(ResourcePattern(resource_type, "*", LITERAL),
                               AccessControlEntry("User:ANONYMOUS", "*", Op.ALL, ALLOW)))
    for name in ("acls.json", "shadow.json"):
        Path(workdir, name).write_bytes(encode_acl_file(acls))
    rates: dict[str, list[float]] = {"none": [], "equal": []}
    with EmbeddedBroker() as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept: its futures need the handle
        admin.create_topics([NewTopic("shadow-bench", 1, 1)])["shadow-bench"].result(15)
        node = only_node({"bootstrap.servers": broker.bootstrap})
        for _ in range(repeat):
            for name in rates:
                rates[name].append(_gateway_cpu_per_request(broker.bootstrap, node, workdir, name == "equal",
                                                            requests))
    return {"acls": len(acls), "requests": requests, "repeat": repeat, "cpu_us_per_request": rates,
            "load_average": os.getloadavg()[0]}


def _print_by_variant(rates: dict[str, list[float]], metric: str, metric_width: int, range_width: int,
                      spec: str) -> None:
    """One row per shadow-set variant: the median of ``metric``, its min and max, and the median
    against the 'none' variant; ``spec`` formats the three figures (e.g. ".1f")."""
    base = statistics.median(rates["none"])
    header = (f"{'shadow set':>10} | {metric:>{metric_width}} | {'min':>{range_width}} | "
              f"{'max':>{range_width}} | {'vs none':>7}")
    print(header)
    print("-" * (len(header) + 1))  # one wider than the header, as these tables have always been
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"{name:>10} | {median:>{metric_width}{spec}} | {min(values):>{range_width}{spec}} | "
              f"{max(values):>{range_width}{spec}} | {median / base:>7.3f}")


def print_shadow_gateway(result: dict[str, Any]) -> None:
    _print_by_variant(result["cpu_us_per_request"], "gateway CPU µs/request", 22, 6, ".1f")
    print(f"\n{result['acls']:,} live ACLs (and as many in the shadow set); {result['requests']:,} single-record "
          f"produce requests per run, {result['repeat']} alternating runs per variant (medians, min–max); CPU time "
          f"of the gateway process from /proc ({1e6 / os.sysconf('SC_CLK_TCK') / result['requests']:.1f} µs "
          f"resolution per request); load average {result['load_average']:.1f} on {os.cpu_count()} CPUs.")


def print_shadow(result: dict[str, Any]) -> None:
    _print_by_variant(result["rates"], "requests/CPU s", 14, 9, ",.0f")
    print(f"\n{result['acls']:,} live ACLs, shadow sets of the same size; {result['queries']:,} requests of one "
          f"decision per run, {result['repeat']} alternating runs per variant (medians, min–max); "
          f"{result['divergences_counted']:,} divergences counted in the 'different' runs; Python "
          f"{sys.version.split()[0]}; load average {result['load_average']:.1f} on {os.cpu_count()} CPUs.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200_000)
    parser.add_argument("--distinct", type=int, default=20_000, help="distinct queries in the pool")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--shadow", action="store_true", help="the hot-path cost of a shadow ACL set instead")
    parser.add_argument("--repeat", type=int, default=5, help="with --shadow: alternating runs per variant")
    parser.add_argument("--gateway", action="store_true",
                        help="with --shadow: gateway CPU per request (ksgate run in front of Tansu), not the stage")
    args = parser.parse_args()

    if args.shadow and args.gateway:
        with tempfile.TemporaryDirectory() as workdir:
            for n in args.sizes:
                result = measure_shadow_gateway(n, args.queries, args.seed, args.repeat, workdir)
                print_shadow_gateway(result)
                if args.json:
                    print(json.dumps(result))
        return
    if args.shadow:
        with tempfile.TemporaryDirectory() as workdir:
            for n in args.sizes:
                result = measure_shadow(n, args.queries, args.distinct, args.seed, args.repeat, workdir)
                print_shadow(result)
                if args.json:
                    print(json.dumps(result))
        return

    if args.one is not None:
        print(json.dumps(measure(args.one, args.queries, args.distinct, args.seed)))
        return

    results = []
    for n in args.sizes:
        print(f"measuring {n:,} ACLs ...", file=sys.stderr, flush=True)
        out = subprocess.run([sys.executable, __file__, "--one", str(n), "--queries", str(args.queries),
                              "--distinct", str(args.distinct), "--seed", str(args.seed)],
                             check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))

    print(f"{'ACLs':>9} | {'uncached/s':>10} | {'cold cache/s':>12} | {'warm cache/s':>12} | {'allowed':>7} | "
          f"{'build s':>7} | {'1 add µs':>8} | {'compact s':>9} | {'bindings MB':>11} | {'index MB':>8}")
    print("-" * 120)
    for r in results:
        print(f"{r['acls']:>9,} | {r['uncached_per_s']:>10,.0f} | {r['cold_cache_per_s']:>12,.0f} | "
              f"{r['warm_cache_per_s']:>12,.0f} | {r['allowed_fraction']:>7.0%} | {r['build_s']:>7.1f} | "
              f"{r['single_add_us']:>8,.0f} | {r['compact_s']:>9.2f} | {r['bindings_mb']:>11,.0f} | "
              f"{r['index_mb']:>8,.0f}")
    print(f"\nDecisions per CPU second of the (single-threaded) benchmark process; {args.queries:,} queries "
          f"per column from a pool of {args.distinct:,} distinct; Python {sys.version.split()[0]}; "
          f"load average {max(r['load_average'] for r in results):.1f} on {os.cpu_count()} CPUs "
          f"(wall-clock rates are in --json).")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
