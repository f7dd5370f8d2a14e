"""Two checkouts' gateways side by side: CPU per relayed request, A against B, under the same load.

A benchmark, not a test.  Tansu and two ``ksgate run`` in front of it, one importing ``--tree-a``,
the other ``--tree-b`` (each process gets its tree as ``PYTHONPATH``: a checkout, a worktree, a
copy with compiled modules).  Single-record produce + flush (bench/throughput.py's latency producer,
one per gateway) in blocks of ``--block`` requests, alternating A and B and the order within each pair
of blocks, so that both see the same minutes of a shared machine.  Prints each gateway's CPU per
request (ns-resolution schedstat of every thread, median over blocks), its user/system ticks per
request and the round trip's p50/p99, then B − A per pair of blocks.

``--authorizer``: both gateways run StandardAuthorizer with relay_cost.py's one ACL (ANONYMOUS may WRITE the
topic) and an audit log with Kafka's default (allowed decisions not recorded), the set-up of
``relay_cost.py opcodes --authorizer``; without it they run no authorizer.

``--floor uvloop|asyncio`` puts bench/anchors/pyrelay.py (a do-nothing CPython relay: no Kafka logic) as B
instead of a second gateway, in front of its own Tansu that advertises the relay's address (a relay that rewrites
nothing must be the broker's advertised address, or the client leaves it after bootstrap): what of A's CPU per
request any CPython relay on this machine pays, and what is A's own.

Why not two runs of relay_cost.py produce: on the shared 2-vCPU VM its per-request figure moves by
±25 µs between runs (which core the gateway shares, with what), which hides a 5–10 % change; blocks
interleaved within one run put both gateways under the same conditions (bench/README.md, mypyc).

    PYTHONPATH=$PWD .venv/bin/python bench/anchors/relay_ab.py --tree-a /path/to/main --tree-b $PWD [--blocks 12]
    PYTHONPATH=$PWD .venv/bin/python bench/anchors/relay_ab.py --tree-a /path/to/main --tree-b $PWD --authorizer
    PYTHONPATH=$PWD .venv/bin/python bench/anchors/relay_ab.py --tree-a $PWD --floor uvloop
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from bench.anchors.haproxy_tls import PyRelayProcess  # noqa: E402
from bench.anchors.pyrelay import LOOPS  # noqa: E402
from bench.anchors.relay_cost import TOPIC, allow_write, cpu_s, user_system_ticks  # noqa: E402
from bench.throughput import (  # noqa: E402
    LATENCY_SETTINGS,
    GatewayProcess,
    ListeningProcess,
    create_topic,
    only_node,
    percentile,
    plain_client,
)
from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402

WARM_REQUESTS = 500
TREE_PACKAGES = ("protocol", "auth", "authz", "gateway", "pipeline")  # ksgate's own code in a tree


class TreeGateway(GatewayProcess):
    """The bench gateway, importing ksgate from ``tree`` (env execs the venv's ksgate: same pid)."""

    def __init__(self, tree: Path, upstream: str, workdir: Path, extra: dict[str, Any]) -> None:
        super().__init__(upstream, workdir, extra, tree=tree)
        self.tree: Path = tree

    def compiled_files(self) -> int:
        """Extension files mapped from the tree's packages (mypyc output; 0: all interpreted): which code the
        process runs. A lower bound on the modules (the loader maps files of one inode once, under one name)."""
        return compiled_in(Path(f"/proc/{self.pid}/maps").read_text(), self.tree)


def compiled_in(maps: str, tree: Path) -> int:
    """Distinct extension files in ``maps`` (a /proc/PID/maps) under the tree's own package folders: not those of a
    venv kept inside the checkout (/work/main/.venv), which every gateway maps, compiled or not."""
    folders = tuple(f"{tree / package}/" for package in TREE_PACKAGES)
    paths = (line.split()[-1] for line in maps.splitlines() if line.endswith(".so"))
    return len({path for path in paths if path.startswith(folders)})


@dataclass(slots=True)
class Tally:
    cpu_us: list[float] = field(default_factory=list)  # gateway CPU per request, one per block
    round_trip_ms: list[float] = field(default_factory=list)
    user_ticks: int = 0
    system_ticks: int = 0


def run_block(gateway: ListeningProcess, producer: Producer, value: bytes, requests: int, tally: Tally) -> None:
    cpu, (user, system) = cpu_s(gateway.pid), user_system_ticks(gateway.pid)
    for _ in range(requests):
        start = time.perf_counter()
        producer.produce(TOPIC, value=value)
        if producer.flush(10):
            raise RuntimeError("a record was not delivered")
        tally.round_trip_ms.append((time.perf_counter() - start) * 1000)
    user_after, system_after = user_system_ticks(gateway.pid)
    tally.cpu_us.append(1e6 * (cpu_s(gateway.pid) - cpu) / requests)
    tally.user_ticks += user_after - user
    tally.system_ticks += system_after - system


def report(name: str, what: str, tally: Tally, requests: int) -> None:
    cpu = tally.cpu_us
    print(f"{name} ({what}): proxy CPU per request median {statistics.median(cpu):.1f} us "
          f"(blocks {min(cpu):.1f}-{max(cpu):.1f}); user/system {1e4 * tally.user_ticks / requests:.1f}/"
          f"{1e4 * tally.system_ticks / requests:.1f} us per request (10 ms ticks); round trip "
          f"p50 {percentile(tally.round_trip_ms, 50):.3f} ms, p99 {percentile(tally.round_trip_ms, 99):.3f} ms")


def proxies(stack: ExitStack, args: argparse.Namespace, tmp: Path) -> dict[str, ListeningProcess]:
    """Tansu, gateway A (and B) in front of it, each started, the topic created on every broker; with ``--floor``,
    B is pyrelay in front of a second Tansu that advertises it."""
    broker = stack.enter_context(EmbeddedBroker(log_path=tmp / "tansu.log"))
    extra = {"authorizer.class.name": "", **only_node(plain_client(broker.bootstrap))}
    if args.authorizer:  # one ACL file for both (the same decisions), an audit log each
        extra = {**extra, **allow_write(tmp / "acls", TOPIC)}
    found: dict[str, ListeningProcess] = {
        "A": stack.enter_context(TreeGateway(args.tree_a.resolve(), broker.bootstrap, tmp / "a",
                                             audited(extra, tmp, "a")))}
    create_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), TOPIC, 1)
    if args.floor is None:
        found["B"] = stack.enter_context(TreeGateway(args.tree_b.resolve(), broker.bootstrap, tmp / "b",
                                                     audited(extra, tmp, "b")))
        return found
    relay = PyRelayProcess(tmp, "pyrelay", args.floor)
    behind = stack.enter_context(EmbeddedBroker(log_path=tmp / "tansu-relay.log", advertised=relay.bootstrap))
    relay.upstream = behind.bootstrap
    found["B"] = stack.enter_context(relay)
    create_topic(AdminClient({"bootstrap.servers": relay.bootstrap}), TOPIC, 1)
    return found


def audited(extra: dict[str, Any], tmp: Path, name: str) -> dict[str, Any]:
    """With an authorizer, the gateway's own audit log (as a production gateway runs); without, ``extra``."""
    if extra.get("authorizer.class.name") != "StandardAuthorizer":
        return extra
    return {**extra, "ksgate.audit.log.file": str(tmp / "acls" / f"audit-{name}.log")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree-a", type=Path, required=True, help="checkout imported by gateway A")
    parser.add_argument("--tree-b", type=Path, help="checkout imported by gateway B")
    parser.add_argument("--floor", choices=LOOPS,
                        help="B is bench/anchors/pyrelay.py on this event loop (no Kafka logic), not a gateway")
    parser.add_argument("--blocks", type=int, default=12, help="blocks per gateway")
    parser.add_argument("--block", type=int, default=1000, help="requests per block")
    parser.add_argument("--size", type=int, default=100, help="record value bytes")
    parser.add_argument("--authorizer", action="store_true",
                        help="both gateways with StandardAuthorizer, one ALLOW ACL and the audit log on")
    args = parser.parse_args(argv)
    if (args.tree_b is None) == (args.floor is None):
        parser.error("name one of --tree-b and --floor")
    what = {"A": str(args.tree_a.resolve()),
            "B": f"pyrelay on {args.floor}" if args.floor else str(args.tree_b.resolve())}
    tallies = {name: Tally() for name in what}
    with tempfile.TemporaryDirectory(prefix="ksgate-ab-") as tmp, ExitStack() as stack:
        gateways = proxies(stack, args, Path(tmp))
        for name, gateway in gateways.items():
            mapped = gateway.compiled_files() if isinstance(gateway, TreeGateway) else 0
            print(f"{name}: pid {gateway.pid}, {mapped} extension files mapped from its tree", flush=True)
        producers = {name: Producer({"bootstrap.servers": g.bootstrap, **LATENCY_SETTINGS})
                     for name, g in gateways.items()}
        value = b"x" * args.size
        for producer in producers.values():  # warm: connections, metadata, lazily compiled codecs
            for _ in range(WARM_REQUESTS):
                producer.produce(TOPIC, value=value)
                producer.flush(10)
        for block in range(args.blocks):
            for name in ("A", "B") if block % 2 == 0 else ("B", "A"):
                run_block(gateways[name], producers[name], value, args.block, tallies[name])
    requests = args.blocks * args.block
    for name, text in what.items():
        report(name, text, tallies[name], requests)
    pairs = list(zip(tallies["A"].cpu_us, tallies["B"].cpu_us, strict=True))
    diffs = [b - a for a, b in pairs]
    print(f"B - A per block pair: median {statistics.median(diffs):+.1f} us per request "
          f"(quartiles {quartiles(diffs, '+.1f')}), B lower in {sum(d < 0 for d in diffs)} of {len(diffs)}")
    # The same code's CPU per request moves by up to 2x between minutes of this VM (which core, shared with
    # what), so a pair's ratio says more than its difference when runs taken at different moments are compared.
    ratios = [b / a for a, b in pairs]
    print(f"B / A per block pair: median {statistics.median(ratios):.2f} (quartiles {quartiles(ratios, '.2f')})")
    return 0


def quartiles(values: list[float], spec: str) -> str:
    """The first and third quartiles (one pair of blocks: its value twice; quantiles() needs two)."""
    q1, _, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"{q1:{spec}} to {q3:{spec}}"


if __name__ == "__main__":
    raise SystemExit(main())
