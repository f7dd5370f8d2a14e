"""The process's own resource use, read at scrape time: CPU seconds, memory, file descriptors.

Prometheus's standard ``process_*`` names (as every official client exports them), so
existing dashboards work.  Linux reads /proc; elsewhere only what ``os``/``resource`` give.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(slots=True, frozen=True)
class ProcessMetric:
    name: str
    kind: str  # "counter" or "gauge"
    help: str
    read: Callable[[], float | None]  # None: not available on this system


def cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def resident_memory_bytes() -> float | None:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_SIZE
    except OSError:
        return None


def virtual_memory_bytes() -> float | None:
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[0]) * _PAGE_SIZE
    except OSError:
        return None


def open_fds() -> float | None:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


def max_fds() -> float:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def _start_time() -> float:
    """Seconds since the epoch the process started (/proc: boot time + start ticks)."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            # Fields after the ")" that closes the command name; starttime is field 22 overall.
            start_ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])
        with open("/proc/stat", "rb") as system:
            boot = next(int(line.split()[1]) for line in system if line.startswith(b"btime "))
        return boot + start_ticks / _TICKS
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()  # the first scrape: close enough for a rate window


_started: dict[int, float] = {}  # per pid: a forked worker is a process of its own


def start_time_seconds() -> float:
    pid = os.getpid()
    started = _started.get(pid)
    if started is None:
        started = _started[pid] = _start_time()
    return started

PROCESS_METRICS: tuple[ProcessMetric, ...] = (
    ProcessMetric("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
                  cpu_seconds),
    ProcessMetric("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                  resident_memory_bytes),
    ProcessMetric("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", virtual_memory_bytes),
    ProcessMetric("process_open_fds", "gauge", "Number of open file descriptors.", open_fds),
    ProcessMetric("process_max_fds", "gauge", "Maximum number of open file descriptors.", max_fds),
    ProcessMetric("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                  start_time_seconds),
)
