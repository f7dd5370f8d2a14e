"""Multi-process serving on one host: N forked workers sharing listening ports (SO_REUSEPORT).

The parent only supervises — it forwards SIGTERM/SIGINT, restarts a worker that dies
unexpectedly (with exponential backoff, bounded), and exits non-zero if one keeps failing.

Start method: ``fork``.  A worker inherits the configuration the parent already loaded and
validated (a ConfigError stops ``ksgate run`` before any worker exists), ``serve_one`` may be
a closure, and a restart costs milliseconds.  ``fork`` is safe here because the parent never
starts a thread or an event loop: every loop, socket and connection is created in the worker
after the fork.  Each worker binds its own listening sockets with SO_REUSEPORT and the Linux
kernel spreads new connections across them (other systems accept the option but may not
balance; Linux also only lets sockets of the same user share a port).

Each worker has its own connections, connection limits (``max.connections*`` and the creation
rate count per process: N workers act as N brokers would), counters and metrics: worker ``i`` serves its metrics
endpoint on ``metrics_port(base, i)`` = base + i, and Prometheus scrapes each as a target.
(A shared SO_REUSEPORT metrics port would hand each scrape to a random worker; summing in
the parent would need IPC for every series.  Distinct ports are the honest simple design.)
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from types import FrameType

from gateway.config import ConfigError
from gateway.edge.acceptor import set_ipv6_only
from gateway.ops.logs import get_logger

log = get_logger(component="workers")

_FORWARDED = (signal.SIGTERM, signal.SIGINT)


def reuse_port_socket(host: str, port: int, backlog: int = 1024, ipv6_only: bool = False) -> socket.socket:
    """A listening, non-blocking TCP socket that other workers may bind to the same port."""
    if not hasattr(socket, "SO_REUSEPORT"):
        raise ConfigError("this platform has no SO_REUSEPORT: run a single worker")
    if port == 0:
        raise ConfigError(f"{host}:0: workers need a fixed port (each would get a different ephemeral one)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        set_ipv6_only(sock, ipv6_only)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"listeners: cannot bind {host}:{port} with SO_REUSEPORT: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


def metrics_port(base_port: int, worker_index: int) -> int:
    """Where worker ``worker_index`` serves /metrics (ports base..base+N-1 must be free)."""
    return base_port + worker_index if base_port else 0


def watch_parent(loop: asyncio.AbstractEventLoop, on_orphaned: Callable[[], None], interval_s: float = 1.0,
                 parent_pid: int | None = None) -> None:
    """Call ``on_orphaned`` (once) if the supervising parent dies, e.g. of SIGKILL.

    Polls ``os.getppid()`` every ``interval_s``: the pipe-based multiprocessing sentinel is
    inherited by sibling workers, so it would not signal the parent's death reliably.
    """
    expected = os.getppid() if parent_pid is None else parent_pid

    def check() -> None:
        if os.getppid() != expected:
            log.warning("supervisor_gone", parent_pid=expected)
            on_orphaned()
        else:
            loop.call_later(interval_s, check)

    loop.call_soon(check)


@dataclass(slots=True)
class _Slot:
    index: int
    process: BaseProcess | None = None
    started: float = 0.0
    failures: int = 0  # consecutive unexpected exits
    restart_at: float | None = None


def _worker_main(serve_one: Callable[[int], int], index: int, inherited_fds: tuple[int, ...]) -> None:
    """The child side: drop the parent's signal set-up, then run the worker's own loop."""
    signal.set_wakeup_fd(-1)
    for sig in _FORWARDED:  # until serve_one installs its own handlers, a signal ends the worker
        signal.signal(sig, signal.SIG_DFL)
    for fd in inherited_fds:
        os.close(fd)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)  # a signal sent meanwhile arrives now
    sys.exit(serve_one(index))


class _Supervisor:
    def __init__(self, n: int, serve_one: Callable[[int], int], max_restarts: int, backoff_s: float,
                 max_backoff_s: float, stable_after_s: float, stop_timeout_s: float) -> None:
        self.serve_one = serve_one
        self.max_restarts = max_restarts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.stable_after_s = stable_after_s
        self.stop_timeout_s = stop_timeout_s
        self.slots = [_Slot(i) for i in range(n)]
        self.context = multiprocessing.get_context("fork")
        self.signals: list[int] = []
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signals.append(signum)  # acted on by the main loop (the wakeup fd interrupts its wait)

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self.on_signal) for sig in _FORWARDED}
        previous_wakeup = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        try:
            return self._supervise()
        finally:
            signal.set_wakeup_fd(previous_wakeup)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            os.close(self.wake_r)
            os.close(self.wake_w)

    def _start(self, slot: _Slot) -> None:
        process = self.context.Process(target=_worker_main, name=f"ksgate-worker-{slot.index}",
                                       args=(self.serve_one, slot.index, (self.wake_r, self.wake_w)))
        # Block the forwarded signals across the fork so the child cannot run the parent's handler.
        signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
        slot.process, slot.started, slot.restart_at = process, time.monotonic(), None
        log.info("worker_started", worker=slot.index, pid=process.pid)

    def _live(self) -> list[_Slot]:
        return [slot for slot in self.slots if slot.process is not None]

    def _wait(self, timeout: float | None) -> None:
        sentinels: list[int] = [slot.process.sentinel for slot in self._live() if slot.process is not None]
        multiprocessing.connection.wait([*sentinels, self.wake_r], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self.wake_r, 512):
                pass

    def _forward(self, signum: int) -> None:
        for slot in self._live():
            assert slot.process is not None and slot.process.pid is not None
            with contextlib.suppress(ProcessLookupError):  # exited, not yet reaped
                os.kill(slot.process.pid, signum)

    def _reap(self) -> list[tuple[_Slot, int]]:
        exited = []
        for slot in self._live():
            assert slot.process is not None
            code = slot.process.exitcode
            if code is not None:
                slot.process.close()
                slot.process = None
                exited.append((slot, code))
        return exited

    def _supervise(self) -> int:
        for slot in self.slots:
            self._start(slot)
        while True:
            if self.signals:
                return self._stop(self.signals.pop(0))
            now = time.monotonic()
            for slot, code in self._reap():
                failed = self._on_exit(slot, code, now)
                if failed is not None:
                    return self._give_up(failed)
            for slot in self.slots:
                if slot.restart_at is not None and slot.restart_at <= now:
                    self._start(slot)
            pending = [slot.restart_at for slot in self.slots if slot.restart_at is not None]
            if not pending and not self._live():
                log.info("workers_finished")
                return 0
            self._wait(max(0.0, min(pending) - now) if pending else None)

    def _on_exit(self, slot: _Slot, code: int, now: float) -> int | None:
        """Schedule a restart; the exit code to give up with if the worker keeps failing."""
        if code == 0:  # the worker chose to stop: not restarted
            log.info("worker_exited", worker=slot.index, exit_code=0)
            return None
        if now - slot.started >= self.stable_after_s:
            slot.failures = 0
        slot.failures += 1
        if slot.failures > self.max_restarts:
            log.error("worker_keeps_failing", worker=slot.index, exit_code=code, restarts=self.max_restarts)
            return code if code > 0 else 1
        delay = min(self.backoff_s * 2 ** (slot.failures - 1), self.max_backoff_s)
        slot.restart_at = now + delay
        log.warning("worker_died", worker=slot.index, exit_code=code, restart_in_s=delay, failures=slot.failures)
        return None

    def _give_up(self, code: int) -> int:
        for slot in self.slots:
            slot.restart_at = None
        self._stop(signal.SIGTERM)
        return code

    def _stop(self, signum: int) -> int:
        """Forward the signal, wait for every worker (bounded), then kill what is left."""
        log.info("workers_stopping", signal=signal.Signals(signum).name)
        clean = True
        self._forward(signum)
        deadline = time.monotonic() + self.stop_timeout_s
        while self._live():
            for _, code in self._reap():
                clean = clean and code in (0, -signal.SIGTERM, -signal.SIGINT)
            while self.signals:  # repeated signals are forwarded again
                self._forward(self.signals.pop(0))
            remaining = deadline - time.monotonic()
            if not self._live() or remaining <= 0:
                break
            self._wait(remaining)
        for slot in self._live():
            assert slot.process is not None
            log.error("worker_killed", worker=slot.index, pid=slot.process.pid, after_s=self.stop_timeout_s)
            slot.process.kill()
            slot.process.join()
            slot.process.close()
            slot.process = None
            clean = False
        log.info("workers_stopped", clean=clean)
        return 0 if clean else 1


def run_workers(n: int, serve_one: Callable[[int], int], *, max_restarts: int = 5, backoff_s: float = 1.0,
                max_backoff_s: float = 30.0, stable_after_s: float = 60.0, stop_timeout_s: float = 30.0) -> int:
    """Run ``serve_one(i)`` for i in 0..n-1, each in its own forked process, until stopped.

    Returns 0 after SIGTERM/SIGINT once every worker exited cleanly (or when all exited 0 by
    themselves); 1 if a worker had to be killed after ``stop_timeout_s`` or exited non-zero
    while stopping; a worker's exit code (1 if it died of a signal) if it failed more than
    ``max_restarts`` times in a row (a run of ``stable_after_s`` resets its count) — the
    other workers are then stopped.  Restart delays double from ``backoff_s`` up to
    ``max_backoff_s``.  A worker exiting 0 on its own is not restarted.  Call it from the
    main thread of a process with no event loop and no other threads.
    """
    if n < 1:
        raise ValueError(f"need at least one worker, got {n}")
    return _Supervisor(n, serve_one, max_restarts, backoff_s, max_backoff_s, stable_after_s, stop_timeout_s).run()
