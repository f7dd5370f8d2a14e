"""Measuring how much heap a block of code grows by (for the bounded-allocation proofs)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def heap_peak() -> Iterator[list[int]]:
    """Yields a list that receives the peak heap growth (bytes) of the block."""
    already = tracemalloc.is_tracing()
    if not already:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    result: list[int] = []
    try:
        yield result
    finally:
        result.append(tracemalloc.get_traced_memory()[1] - base)
        if not already:
            tracemalloc.stop()
