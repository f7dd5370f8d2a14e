"""Large requests and responses are decoded, authorized and re-encoded in a worker thread.

A Metadata request naming 100,000 topics takes the CPU for a second or more; on the event
loop every other connection of the process would wait that long.  In the worker the loop
thread gets the GIL back every switch interval, so other clients wait milliseconds.  The
connection reads no further request meanwhile and the response keeps its slot, so order is
kept.  Produce and Fetch (relayed without decoding their records) never come here.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from gateway.context import Counters
from gateway.session.address_rewrite import NodeAddressBook
from gateway.session.request_stage import PipelineRefusal, handle_request, needs_decoding, response_pieces
from gateway.session.response_queue import Slot, WireBytes
from protocol.api_keys import ApiKey
from protocol.framing import Frame
from protocol.header import peek_api

if TYPE_CHECKING:
    from gateway.transport.client_connection import ClientConnection

_T = TypeVar("_T")
# Frames at least this large (size prefix excluded) leave the loop; below it the thread hop
# costs more than it saves.
OFFLOAD_MIN_BYTES = 32 * 1024
# Relayed without decoding (records stay bytes), answered at once, or part of authentication.
SWITCH_INTERVAL_S = 0.001
_STAY_ON_LOOP = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                           ApiKey.SASL_AUTHENTICATE})

# One worker per process: large requests of all connections queue behind each other, never
# behind (or in front of) the store writes and password checks of the default executor.
_pool: ThreadPoolExecutor | None = None


def _worker() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ksgate-large")
        # While the worker computes, the loop thread waits up to one switch interval for the
        # GIL at every wake-up (5 ms by default, several per request); 1 ms keeps that small.
        # With one thread running (the usual case) the interval costs nothing.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
    return _pool


def _forget_pool() -> None:  # a forked worker process does not inherit the parent's thread
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def _collector_paused(work: Callable[..., _T], *args: Any) -> _T:
    """Run ``work`` with the cyclic garbage collector off.

    One 100,000-topic request allocates about a million dicts and lists that live until it
    ends; they would set off several full collections, each holding the GIL (and so the
    event loop) for up to ~100 ms.  Reference counting frees them when ``work`` returns, so
    the collector is paused only for one large request at a time (one worker thread).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return work(*args)
    finally:
        if enabled:
            gc.enable()


def offloads_request(conn: ClientConnection, frame: Frame) -> bool:
    payload = frame.payload
    if len(payload) < OFFLOAD_MIN_BYTES or conn.principal is None:
        return False
    key = peek_api(payload)[0]
    shared = conn.ctx.authorization
    # Local answers (ACL and token admin) keep their own per-connection chain.
    return key not in _STAY_ON_LOOP and (shared is None or key not in shared.local)


async def handle_request_off_loop(conn: ClientConnection, frame: Frame) -> list[WireBytes] | None:
    """handle_request in the worker: its slot is reserved now, its effects applied back on the loop."""
    key, version, correlation_id = peek_api(frame.payload)
    slot = conn.responses.add_deferred(correlation_id, key, version)
    slot.large = True
    stand_in = _WorkerConnection(conn, _OneAnswer(conn.responses.reserve_upstream_id()))
    relay = await asyncio.get_running_loop().run_in_executor(
        _worker(), _collector_paused, handle_request, cast("ClientConnection", stand_in), frame)
    stand_in.ctx.replay()
    answer = stand_in.responses
    if answer.local is not None:
        slot.response, slot.ready = [answer.local], True
    elif answer.relayed:
        slot.hook = answer.hook
        conn.responses.await_upstream(answer.upstream_id, slot)
    else:
        raise PipelineRefusal(f"api key {key}: a large request neither answered nor relayed")
    return relay


def offloads_response(slot: Slot, frame: Frame) -> bool:
    return (slot.large or len(frame.payload) >= OFFLOAD_MIN_BYTES) and needs_decoding(slot)


async def fill_response_off_loop(conn: ClientConnection, slot: Slot, frame: Frame) -> None:
    """response_pieces in the worker; the slot (already out of the awaited ones) is ready afterwards."""
    book = _RecordingAddressBook(conn.ctx.address_book(conn.listener))
    # learn_topics runs in the worker too: plain dict stores, atomic under the GIL, and the
    # loop only ever looks names up (.get), never iterates the map.
    slot.response = await asyncio.get_running_loop().run_in_executor(
        _worker(), _collector_paused, _pieces_and_drop_hook, slot, frame, conn.ctx.cluster, book)
    book.replay()
    slot.ready = True


def _pieces_and_drop_hook(slot: Slot, frame: Frame, cluster: Any, book: NodeAddressBook) -> list[WireBytes]:
    pieces = response_pieces(slot, frame, cluster, book)
    slot.hook = None  # its state (an entry per item of the request) is freed here, not on the loop
    return pieces


# --- what handle_request sees in the worker ------------------------------------------------------

@dataclass(slots=True)
class _OneAnswer:
    """Stands in for the ResponseQueue: records where the one request's answer comes from."""

    upstream_id: int
    local: WireBytes | None = None
    relayed: bool = False
    hook: Any = None

    def add_local(self, correlation_id: int, api_key: int, api_version: int, response: WireBytes) -> None:
        self.local = response

    def expect_upstream(self, correlation_id: int, api_key: int, api_version: int, hook: Any = None) -> int:
        self.relayed, self.hook = True, hook
        return self.upstream_id


@dataclass(slots=True)
class _DeferredCalls:
    """Method calls recorded in the worker, made on the loop (the metrics are not thread-safe)."""

    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return lambda *args: self.calls.append((name, args))


class _WorkerContext:
    """The shared context as the worker may use it: reads pass through, counts are kept aside."""

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self.metrics = _DeferredCalls()
        self.counters = Counters()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)

    def replay(self) -> None:
        for name, args in self.metrics.calls:
            getattr(self._ctx.metrics, name)(*args)
        self._ctx.counters.relayed_requests += self.counters.relayed_requests


class _WorkerConnection:
    """The attributes of ClientConnection that handle_request reads, frozen for one request."""

    def __init__(self, conn: ClientConnection, answer: _OneAnswer) -> None:
        self.ctx = _WorkerContext(conn.ctx)
        self.responses = answer
        self.principal = conn.principal
        self.authenticator = conn.authenticator
        self.client_host, self.client_port = conn.client_host, conn.client_port
        self.listener = conn.listener
        self.log = conn.log
        self.local_chain = None


@dataclass(slots=True)
class _RecordingAddressBook:
    """Node addresses learned in the worker are passed on from the loop (they may open listeners)."""

    book: NodeAddressBook
    learned: list[tuple[int, str, int]] = field(default_factory=list)

    def learn(self, node_id: int, host: str, port: int) -> None:
        self.learned.append((node_id, host, port))

    def client_address(self, node_id: int) -> tuple[str, int]:
        return self.book.client_address(node_id)

    def replay(self) -> None:
        for node_id, host, port in self.learned:
            self.book.learn(node_id, host, port)
