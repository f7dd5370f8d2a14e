"""bench/latency.py --tree-b: a second checkout's gateways in the same rotation, and their difference."""

from __future__ import annotations

from pathlib import Path

from bench.latency import Run, parse_args, table
from bench.throughput import GatewayProcess


def test_tree_b_adds_a_path_per_gateway_path_not_for_direct(tmp_path: Path) -> None:
    args = parse_args(["--paths", "direct,plaintext,sasl_ssl", "--tree-b", str(tmp_path)])
    assert args.paths == ["direct", "plaintext", "sasl_ssl", "plaintext-b", "sasl_ssl-b"]
    assert parse_args(["--paths", "direct,plaintext"]).paths == ["direct", "plaintext"]


def test_the_table_says_tree_b_minus_tree_a_per_percentile() -> None:
    def run(path: str, repeat: int, p50: float) -> Run:
        return Run(path, 5000, repeat, publish={"p50": p50, "p99": 2.0, "p99.9": 3.0},
                   end_to_end={"p50": p50 + 1, "p99": 4.0, "p99.9": 5.0})

    runs = [run("direct", r, 1.0) for r in range(3)] + [run("plaintext", r, 1.5 + r) for r in range(3)] \
        + [run("plaintext-b", r, 1.2 + r) for r in range(3)]
    lines = table(runs, ["direct", "plaintext", "plaintext-b"], [5000]).splitlines()
    moved = next(line for line in lines if "plaintext-b-a" in line)
    # medians: plaintext 2.5, plaintext-b 2.2 -> publish p50 -0.30, end to end p50 -0.30, the rest 0
    assert moved.split()[2:8] == ["-0.30", "0.00", "0.00", "-0.30", "0.00", "0.00"]


def test_a_gateway_from_another_tree_imports_it(tmp_path: Path) -> None:
    own = GatewayProcess("127.0.0.1:9092", tmp_path / "a")
    other = GatewayProcess("127.0.0.1:9092", tmp_path / "b", tree=tmp_path / "checkout")
    assert own.command()[0] != "env"
    assert other.command()[:2] == ["env", f"PYTHONPATH={tmp_path / 'checkout'}"]
    assert other.command()[2:] == [*own.command()[:-1], str(other.config_path)]
