"""The cyclic garbage collector's pauses in /metrics, and the start-up heap kept out of its walks
(frozen before any port accepts)."""

from __future__ import annotations

import asyncio
import gc
import socket
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.commands import serving
from gateway.commands.embedded_broker import EmbeddedBroker, free_port
from gateway.config import build_config
from gateway.ops.collector import CollectorPauses, freeze_start_up_heap
from gateway.ops.metrics import Metrics
from gateway.server import Gateway
from tests.harness import free_port_block

TANSU_NODE_ID = 111


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


def _accepts(port: int) -> bool:
    """Whether the port is listening (the kernel completes the connection even while the loop is busy)."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def test_ksgate_run_freezes_the_start_up_heap_before_any_port_accepts(
        broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collection before the freeze holds the loop for tens of ms: done once the ports accept,
    the first clients would wait that long for their first answer."""
    port, node_base = free_port(), free_port_block()
    config = build_config({
        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "upstream.bootstrap.servers": broker.bootstrap, "listener.name.plaintext.node.port.base": node_base,
        "ksgate.audit.log.file": str(tmp_path / "audit.log")})
    accepting_at_freeze: list[tuple[bool, bool]] = []

    def freeze() -> int:  # the test process keeps collecting: nothing is frozen here
        accepting_at_freeze.append((_accepts(port), _accepts(node_base + TANSU_NODE_ID)))
        return 0

    monkeypatch.setattr(serving, "freeze_start_up_heap", freeze)
    started: list[Gateway] = []

    def on_started(gateway: Gateway) -> None:
        started.append(gateway)
        running.cancel()  # instead of a signal to the test process

    running = asyncio.create_task(serving.serve(config, on_started))
    with pytest.raises(asyncio.CancelledError):
        await running
    try:
        assert len(started) == 1 and _accepts(port) and _accepts(node_base + TANSU_NODE_ID)  # served after
        assert accepting_at_freeze == [(False, False)]
    finally:
        for gateway in started:
            await gateway.shutdown()
