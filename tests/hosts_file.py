"""Test-only name resolution: /etc/hosts lines added for a test and removed after it (needs root).

Test processes may edit the file at once (pytest-xdist workers, two suites): every edit is a read-modify-write
made under an exclusive ``flock`` on the file itself, so that no edit loses another's line; a reader that wants
a consistent view takes a shared lock.  The file is rewritten in place, never replaced: it may be a bind mount.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

HOSTS = Path("/etc/hosts")
MARKER = "# ksgate-test"


def can_edit_hosts() -> bool:
    return os.geteuid() == 0 and os.access(HOSTS, os.W_OK)


@contextmanager
def hosts_entries(address: str, names: list[str], hosts: Path = HOSTS) -> Iterator[None]:
    """``address names…`` resolvable while the block runs; after it, only this block's own line is removed,
    whatever other blocks (here or in other processes) added or removed meanwhile."""
    line = f"{address} {' '.join(names)} {MARKER}\n"
    with _locked(hosts) as file:
        text = file.read()
        # A last line without its newline would swallow ours.
        file.write(line if not text or text.endswith("\n") else "\n" + line)
    try:
        yield
    finally:
        with _locked(hosts) as file:
            lines = file.read().splitlines(keepends=True)
            # Only the last copy: an enclosing block may have added the same line and still needs it.
            if line in lines:
                del lines[len(lines) - 1 - lines[::-1].index(line)]
            file.seek(0)
            file.write("".join(lines))
            file.truncate()


@contextmanager
def _locked(hosts: Path) -> Iterator[IO[str]]:
    """``hosts`` open for reading and writing at its start, under an exclusive lock (released as it closes,
    after the writes are flushed)."""
    with hosts.open("r+", encoding="utf-8") as file:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX)
        yield file
