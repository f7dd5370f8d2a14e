"""Python's cyclic garbage collector in a long-running gateway: its pauses timed for /metrics,
and the start-up heap moved out of its reach.

A collection of the oldest generation walks every tracked object that is not frozen, holding
the GIL (so the event loop) meanwhile: its pause grows with the heap, i.e. with the open
connections.  Everything built at start-up (modules, schemas, routes, ACL tables) lives as
long as the process, so ``gc.freeze()`` moves it to the permanent generation, which no
collection walks; objects made later (connections) are collected as before.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from gateway.ops.metrics import Histogram

GENERATIONS = ("0", "1", "2")


class CollectorPauses:
    """A ``gc.callbacks`` entry observing each collection's duration, by generation.

    Collections never overlap (the interpreter runs one at a time), so one start time serves.
    """

    __slots__ = ("_histogram", "_labels", "_started")

    def __init__(self, histogram: Histogram) -> None:
        self._histogram = histogram
        self._labels = tuple((generation,) for generation in GENERATIONS)
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self._histogram.observe(self._labels[info["generation"]], time.perf_counter() - self._started)

    def install(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def remove(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)


def freeze_start_up_heap() -> int:
    """Collect once, then freeze what survives (it lives as long as the process): later full
    collections walk only what was made after start-up. Returns how many objects were frozen.
    The collection holds the loop for tens of ms: ``ksgate run`` calls this before its ports open."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
