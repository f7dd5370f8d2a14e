"""The worker threads that verify passwords, so a PBKDF2 never runs on the event loop.

hashlib's PBKDF2 releases the GIL, so threads give real parallelism; the number of jobs
queued or running is bounded, and a job beyond the bound is refused rather than queued.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

DEFAULT_THREADS = 1
DEFAULT_QUEUE_SIZE = 256


class VerificationPool:
    """Runs ``job`` on a worker thread and calls ``done`` with its result on the event loop."""

    def __init__(self, threads: int = DEFAULT_THREADS, queue_size: int = DEFAULT_QUEUE_SIZE) -> None:
        self.threads = max(1, threads)
        self.queue_size = max(1, queue_size)
        self._executor: ThreadPoolExecutor | None = None  # threads start with the first job
        self.pending = 0  # queued or running
        self.completed = 0

    def submit(self, job: Callable[[], bytes], done: Callable[[bytes | BaseException], None]) -> bool:
        """False, and nothing runs, when ``queue_size`` jobs are already pending."""
        if self.pending >= self.queue_size:
            return False
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="ksgate-verify")
        future = asyncio.get_running_loop().run_in_executor(self._executor, job)
        self.pending += 1

        def finished(result: asyncio.Future[bytes]) -> None:
            self.pending -= 1
            self.completed += 1
            if result.cancelled():
                done(asyncio.CancelledError())
            elif (error := result.exception()) is not None:
                done(error)
            else:
                done(result.result())

        future.add_done_callback(finished)
        return True

    def close(self) -> None:
        """At shutdown: queued jobs are dropped, running ones finish on their own."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
