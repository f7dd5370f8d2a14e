"""The one worker thread where large requests and responses are decoded, authorized and re-encoded.

A Metadata request naming 100,000 topics takes the CPU for a second or more; on the event
loop every other connection of the process would wait that long.  In the worker the loop
thread gets the GIL back every switch interval, so other clients wait milliseconds.  The
session decides what goes here (a RunJob of kind LARGE, gateway/session/session.py): it
reads no further request of that connection meanwhile, and the answer keeps its slot.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

_T = TypeVar("_T")
SWITCH_INTERVAL_S = 0.001

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


def run_large(work: Callable[[], _T]) -> asyncio.Future[_T]:
    """Run ``work`` in the worker thread, with the collector paused (one large job at a time)."""
    return asyncio.get_running_loop().run_in_executor(_worker(), _collector_paused, work)
