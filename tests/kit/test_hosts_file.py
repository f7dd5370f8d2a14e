"""tests/hosts_file.py under concurrent edits: several processes adding and removing their lines of one hosts
file at once lose none of them, leave none behind, and restore the file line for line."""

from __future__ import annotations

import fcntl
import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

from tests.hosts_file import MARKER, hosts_entries

WORKERS = 6
ROUNDS = 150
ORIGINAL = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n10.9.9.9 kept.example  # the operator's own\n"


def _lines(hosts: Path) -> list[str]:
    """The file as a reader sees it, under the editors' lock (shared): never half written."""
    with hosts.open(encoding="utf-8") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_SH)
        return file.read().splitlines(keepends=True)


def _edit(hosts: Path, worker: int, barrier: Barrier) -> int:
    """Hold one line for the whole run while adding and removing ROUNDS others; how many times a line of this
    worker's was missing while its block ran."""
    missing = 0
    held = f"10.0.0.{worker} held-{worker}.test {MARKER}\n"
    with hosts_entries(f"10.0.0.{worker}", [f"held-{worker}.test"], hosts):
        barrier.wait(timeout=30)  # every worker holds its line before any churns
        for round_ in range(ROUNDS):
            name = f"churn-{worker}-{round_}.test"
            with hosts_entries(f"10.1.{worker}.{round_ % 250}", [name], hosts):
                present = _lines(hosts)
                missing += f"10.1.{worker}.{round_ % 250} {name} {MARKER}\n" not in present
                missing += held not in present
        barrier.wait(timeout=30)  # every worker has churned: the held lines must all be there
        missing += sum(f"10.0.0.{other} held-{other}.test {MARKER}\n" not in _lines(hosts) for other in range(WORKERS))
        barrier.wait(timeout=30)  # and stay there until every worker has looked
    return missing


def _worker(hosts: Path, worker: int, barrier: Barrier, results: multiprocessing.SimpleQueue[tuple[int, int]]) -> None:
    results.put((worker, _edit(hosts, worker, barrier)))


def test_concurrent_edits_from_several_processes_lose_no_line_and_restore_the_file(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(ORIGINAL)
    context = multiprocessing.get_context("spawn")  # no copy of the test process's threads
    barrier = context.Barrier(WORKERS)
    results: multiprocessing.SimpleQueue[tuple[int, int]] = context.SimpleQueue()
    processes = [context.Process(target=_worker, args=(hosts, worker, barrier, results)) for worker in range(WORKERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [process.exitcode for process in processes] == [0] * WORKERS
    missing = dict(results.get() for _ in processes)
    assert missing == dict.fromkeys(range(WORKERS), 0)
    assert hosts.read_text() == ORIGINAL


def test_a_last_line_without_its_newline_keeps_it_and_nested_blocks_keep_the_outer_copy(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost")
    line = f"127.0.0.1 a.test {MARKER}\n"
    with hosts_entries("127.0.0.1", ["a.test"], hosts):
        with hosts_entries("127.0.0.1", ["a.test"], hosts):
            assert hosts.read_text() == "127.0.0.1 localhost\n" + line * 2
        assert hosts.read_text() == "127.0.0.1 localhost\n" + line
    assert hosts.read_text() == "127.0.0.1 localhost\n"
