"""What the client-quota machinery costs as entities grow: lookups (per request, on the hot path),
rebuilding the book on a change, DescribeClientQuotas, and one AlterClientQuotas into the quota file.

A benchmark, not a test: no broker, no gateway, just the modules enforcement and the admin API call.
Entities: per ``N``, N/2 user+client-id, N/4 user, N/8 client-id, the rest users with a default client.
Lookups: the most specific entity present (user+client-id), the least (default client-id, reached
after seven misses), and no quota at all (an empty book, which enforcement sees when none is set).
Each figure is the median of ``--repeats`` runs, with the min-max spread.

    PYTHONPATH=. .venv/bin/python bench/availability/quota_book.py [--entities 0,100,10000,100000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gateway.admin.client_quotas import alter_client_quotas, describe_client_quotas  # noqa: E402
from gateway.quotas.book import QuotaBook  # noqa: E402
from gateway.quotas.model import Part, QuotaEntity  # noqa: E402
from gateway.quotas.state import QuotaState  # noqa: E402
from gateway.stores.file_quotas import FileQuotaStore  # noqa: E402

PBR = "producer_byte_rate"


def state_of(n: int) -> dict[QuotaEntity, dict[str, float]]:
    state: dict[QuotaEntity, dict[str, float]] = {}
    for i in range(n):
        if i % 2 == 0:
            parts: list[Part] = [("user", f"u{i}"), ("client-id", f"c{i % 97}")]
        elif i % 4 == 1:
            parts = [("user", f"u{i}")]
        elif i % 8 == 3:
            parts = [("client-id", f"c{i}")]
        else:
            parts = [("user", f"u{i}"), ("client-id", None)]
        state[QuotaEntity.of(parts)] = {PBR: float(1000 + i)}
    if n:
        state[QuotaEntity.of([("client-id", None)])] = {PBR: 1.0}
    return state


def timed(run: Callable[[], object], loops: int, repeats: int) -> tuple[float, float, float]:
    """(median, min, max) seconds per call."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            run()
        samples.append((time.perf_counter() - start) / loops)
    return statistics.median(samples), min(samples), max(samples)


def show(what: str, figures: tuple[float, float, float], unit: str = "us") -> None:
    scale = {"ns": 1e9, "us": 1e6, "ms": 1e3}[unit]
    median, low, high = (f * scale for f in figures)
    print(f"  {what:<46} {median:10.2f} {unit}   ({low:.2f}-{high:.2f})")


def bench(n: int, repeats: int) -> None:
    state: QuotaState = state_of(n)
    book = QuotaBook(state)
    print(f"{n} entities")
    show("lookup, user+client-id entity (1 probe)", timed(lambda: book.lookup("u0", "c0", PBR), 200_000, repeats),
         "ns")
    show("lookup, default client-id (8 probes)", timed(lambda: book.lookup("nobody", "x", PBR), 200_000, repeats),
         "ns")
    show("lookup, kind with no quota", timed(lambda: book.lookup("u0", "c0", "request_percentage"), 200_000,
                                             repeats), "ns")
    show("connection_creation_rate, none set", timed(lambda: book.connection_creation_rate("10.0.0.1"), 200_000,
                                                     repeats), "ns")
    show("book.replace (a change arrives)", timed(lambda: book.replace(state), max(1, 2000 // max(1, n // 100)),
                                                  repeats), "ms")
    request = {"components": [{"entity_type": "user", "match_type": 0, "match": "u0"}],
               "strict": False}
    show("DescribeClientQuotas, one user", timed(lambda: describe_client_quotas(state, request, 1),
                                                 max(1, 2000 // max(1, n // 100)), repeats), "ms")
    with tempfile.TemporaryDirectory() as scratch:
        store = FileQuotaStore(Path(scratch) / "quotas.json")
        store.alter(list(state.items()))
        counter = iter(range(10**9))

        def alter_one() -> None:
            alter_client_quotas(store, {"validate_only": False, "entries": [
                {"entity": [{"entity_type": "user", "entity_name": "bench"}],
                 "ops": [{"key": PBR, "value": float(next(counter) + 1), "remove": False}]}]}, 1)

        show("AlterClientQuotas, one entity, file store", timed(alter_one, 5, repeats), "ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", default="0,100,10000,100000")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"median per call over {args.repeats} runs (min-max)")
    for n in (int(x) for x in args.entities.split(",")):
        bench(n, args.repeats)


if __name__ == "__main__":
    main()
