"""File descriptors: the process's open-file limit, raised to its hard limit at start-up, and
how many client connections fit in it (each also holds a socket to the upstream).

Kafka sets no default max.connections; a gateway that accepts until accept() fails with
EMFILE leaves nothing for its HTTP endpoints, files or upstream links, so /healthz stops
answering and a liveness probe restarts a gateway whose other clients were fine.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

# Descriptors kept out of client connections' reach: the HTTP endpoint (up to 64 requests at
# once), log and audit files, the event loop's own (epoll, wake-up pipes), upstream probes,
# the gateway's admin links and the security topic's, and a thread pool's occasional file.
RESERVED_DESCRIPTORS = 128
# And a twentieth of the limit, for listening sockets of brokers discovered later and the
# sockets a flood has accepted but not yet closed.
RESERVED_FRACTION = 20
DESCRIPTORS_PER_CONNECTION = 2  # the client's socket and its upstream socket


@dataclass(slots=True, frozen=True)
class OpenFilesLimit:
    soft: int  # what the process may open now (-1: no limit)
    hard: int
    raised_from: int | None = None  # the soft limit before start-up raised it, if it did


def raise_open_files_limit() -> OpenFilesLimit:
    """Raise RLIMIT_NOFILE's soft limit to its hard limit (as the JVM does for Kafka)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or soft == resource.RLIM_INFINITY:
        return OpenFilesLimit(_count(soft), _count(hard))
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):  # e.g. an infinite hard limit above the kernel's nr_open
        return OpenFilesLimit(_count(soft), _count(hard))
    return OpenFilesLimit(_count(hard), _count(hard), raised_from=_count(soft))


def open_files_limit() -> OpenFilesLimit:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return OpenFilesLimit(_count(soft), _count(hard))


def connections_that_fit(open_files: int, listening_sockets: int) -> int | None:
    """Client connections the descriptor limit leaves room for (None: no limit), at least 1."""
    if open_files < 0:
        return None
    reserved = RESERVED_DESCRIPTORS + listening_sockets + open_files // RESERVED_FRACTION
    return max(1, (open_files - reserved) // DESCRIPTORS_PER_CONNECTION)


def _count(limit: int) -> int:
    return -1 if limit == resource.RLIM_INFINITY else limit
