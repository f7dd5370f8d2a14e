"""The cyclic garbage collector's pauses in /metrics, and the start-up heap kept out of its walks."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from gateway.ops.collector import CollectorPauses, freeze_start_up_heap
from gateway.ops.metrics import Metrics


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the test process goes on collecting everything


def test_each_collection_is_timed_by_generation_until_removed() -> None:
    metrics = Metrics()
    pauses = CollectorPauses(metrics.gc_pauses)
    pauses.install()
    pauses.install()  # once only
    try:
        gc.collect(0)
        gc.collect()
    finally:
        pauses.remove()
    assert metrics.gc_pauses.count(("0",)) == 1
    assert metrics.gc_pauses.count(("2",)) == 1
    gc.collect()
    assert metrics.gc_pauses.count(("2",)) == 1  # removed: no longer observed
    text = metrics.registry.render()
    assert 'ksgate_gc_pause_seconds_count{generation="2"} 1' in text


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_the_start_up_heap_is_frozen_and_later_cycles_are_still_collected(unfrozen: None) -> None:
    at_start_up = Node()
    frozen = freeze_start_up_heap()
    assert frozen > 0 and gc.get_freeze_count() == frozen
    assert not any(obj is at_start_up for obj in gc.get_objects())  # no collection walks it
    later = Node()
    gone = weakref.ref(later)
    del later
    gc.collect()
    assert gone() is None
