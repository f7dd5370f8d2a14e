"""Multi-process serving: SO_REUSEPORT sockets and the worker supervisor (run in a child process)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config import ConfigError
from gateway.ops.workers import metrics_port, reuse_port_socket, run_workers, watch_parent

REPO = Path(__file__).resolve().parents[3]

# The supervised program: each worker records "start-<index>-<pid>", then waits for SIGTERM
# or SIGINT, records "stop-<index>-<pid>" and exits 0.  Modes make worker 0 misbehave.
SUPERVISED = """
import os, signal, sys, time
from pathlib import Path
from gateway.ops.workers import run_workers

out, mode, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])

def serve_one(index: int) -> int:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    earlier = len(list(out.glob(f"start-{index}-*")))
    (out / f"start-{index}-{os.getpid()}").touch()
    if index == 0 and mode == "always-fails":
        # Fail only once the healthy worker is up: else, on a loaded machine, the supervisor may give up and stop
        # worker 1 before it has even written its start marker.
        deadline = time.monotonic() + 30
        while not list(out.glob("start-1-*")) and time.monotonic() < deadline:
            time.sleep(0.01)
        return 3
    if index == 0 and mode == "fails-once" and earlier == 0:
        return 3
    if mode == "all-finish":
        return 0
    if index == 0 and mode == "ignores-sigterm":
        signal.sigwait({signal.SIGUSR1})  # never sent: the supervisor has to kill it
    signum = signal.sigwait({signal.SIGTERM, signal.SIGINT})
    (out / f"stop-{index}-{os.getpid()}").write_text(signal.Signals(signum).name)
    return 0

sys.exit(run_workers(n, serve_one, max_restarts=2, backoff_s=0.01, stop_timeout_s=float(sys.argv[4])))
"""


class Supervised:
    def __init__(self, tmp_path: Path, mode: str, n: int, stop_timeout_s: float = 20.0) -> None:
        self.out = tmp_path / "events"
        self.out.mkdir()
        script = tmp_path / "supervised.py"
        script.write_text(SUPERVISED)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.process = subprocess.Popen([sys.executable, str(script), str(self.out), mode, str(n),
                                         str(stop_timeout_s)], env=env, start_new_session=True)

    def events(self, kind: str, index: int | None = None) -> list[Path]:
        return sorted(self.out.glob(f"{kind}-{'*' if index is None else index}-*"))

    def wait_for(self, kind: str, count: int, index: int | None = None, timeout: float = 20.0) -> list[Path]:
        deadline = time.monotonic() + timeout
        while len(found := self.events(kind, index)) < count:
            assert self.process.poll() is None, f"supervisor exited early with {self.process.returncode}"
            assert time.monotonic() < deadline, f"only {len(found)} of {count} {kind} events"
            time.sleep(0.02)
        return found

    def finish(self, timeout: float = 30.0) -> int:
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def supervised(tmp_path: Path) -> Iterator[list[Supervised]]:
    started: list[Supervised] = []
    yield started
    for program in started:
        program.kill()


def pids(paths: list[Path]) -> set[int]:
    return {int(path.name.rsplit("-", 1)[1]) for path in paths}


def assert_gone(worker_pids: set[int]) -> None:
    for pid in worker_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


# --- SO_REUSEPORT ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_two_reuse_port_sockets_listen_on_the_same_port_and_both_accept() -> None:
    port = _free_port()
    first, second = reuse_port_socket("127.0.0.1", port), reuse_port_socket("127.0.0.1", port)
    try:
        assert first.getsockname() == second.getsockname() == ("127.0.0.1", port)
        assert not first.getblocking() and not second.getblocking()
        with socket.socket() as plain, pytest.raises(OSError):  # without SO_REUSEPORT it cannot join
            plain.bind(("127.0.0.1", port))
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # accepted into one of the two backlogs
    finally:
        first.close()
        second.close()


def test_reuse_port_socket_needs_a_fixed_port_and_reports_bind_failures() -> None:
    with pytest.raises(ConfigError, match="fixed port"):
        reuse_port_socket("127.0.0.1", 0)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigError, match=r"cannot bind 127\.0\.0\.1:\d+ with SO_REUSEPORT"):
            reuse_port_socket("127.0.0.1", taken.getsockname()[1])


def test_each_worker_serves_metrics_on_its_own_port() -> None:
    assert [metrics_port(9404, i) for i in range(3)] == [9404, 9405, 9406]
    assert metrics_port(0, 2) == 0  # ephemeral stays ephemeral


# --- the supervisor ----------------------------------------------------------------


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_n_workers_start_and_a_signal_to_the_parent_stops_them_all(
        tmp_path: Path, supervised: list[Supervised], stop_signal: signal.Signals) -> None:
    program = Supervised(tmp_path, "well-behaved", 3)
    supervised.append(program)
    starts = program.wait_for("start", 3)
    assert sorted(path.name.split("-")[1] for path in starts) == ["0", "1", "2"]
    program.process.send_signal(stop_signal)
    assert program.finish() == 0
    stops = program.events("stop")
    assert pids(stops) == pids(starts)
    assert {path.read_text() for path in stops} == {stop_signal.name}
    assert_gone(pids(starts))


def test_a_worker_that_exits_non_zero_is_restarted(tmp_path: Path, supervised: list[Supervised]) -> None:
    program = Supervised(tmp_path, "fails-once", 2)
    supervised.append(program)
    restarted = program.wait_for("start", 2, index=0)
    program.wait_for("start", 1, index=1)
    assert len(pids(restarted)) == 2  # a new process
    program.process.send_signal(signal.SIGTERM)
    assert program.finish() == 0
    assert len(program.events("start", 1)) == 1  # the healthy worker was left alone
    (second_run,) = pids(program.events("stop", 0))  # the first run exited 3 without a stop event
    assert second_run in pids(restarted)


def test_a_worker_that_keeps_failing_stops_everything_with_its_exit_code(
        tmp_path: Path, supervised: list[Supervised]) -> None:
    program = Supervised(tmp_path, "always-fails", 2)
    supervised.append(program)
    assert program.finish() == 3
    assert len(program.events("start", 0)) == 3  # the first run and max_restarts=2 restarts
    healthy = program.events("start", 1)
    assert len(healthy) == 1 and pids(program.events("stop", 1)) == pids(healthy)
    assert_gone(pids(program.events("start")))


def test_workers_that_exit_zero_on_their_own_are_not_restarted_and_the_parent_exits_zero(
        tmp_path: Path, supervised: list[Supervised]) -> None:
    program = Supervised(tmp_path, "all-finish", 2)
    supervised.append(program)
    assert program.finish() == 0
    assert len(program.events("start", 0)) == len(program.events("start", 1)) == 1


def test_a_worker_that_ignores_the_stop_signal_is_killed_and_the_exit_is_non_zero(
        tmp_path: Path, supervised: list[Supervised]) -> None:
    program = Supervised(tmp_path, "ignores-sigterm", 2, stop_timeout_s=0.5)
    supervised.append(program)
    starts = program.wait_for("start", 2)
    program.process.send_signal(signal.SIGTERM)
    assert program.finish() == 1
    assert pids(program.events("stop")) == pids(program.events("start", 1))
    assert_gone(pids(starts))


def test_run_workers_needs_at_least_one_worker() -> None:
    with pytest.raises(ValueError, match="at least one"):
        run_workers(0, lambda index: 0)


async def test_an_orphaned_worker_is_told_when_its_supervisor_is_gone() -> None:
    orphaned = asyncio.Event()
    watch_parent(asyncio.get_running_loop(), orphaned.set, parent_pid=-1)  # not our parent: gone
    await asyncio.wait_for(orphaned.wait(), 5)
