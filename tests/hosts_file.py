"""Test-only name resolution: /etc/hosts lines added for a test and removed after it (needs root)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HOSTS = Path("/etc/hosts")
MARKER = "# ksgate-test"


def can_edit_hosts() -> bool:
    return os.geteuid() == 0 and os.access(HOSTS, os.W_OK)


@contextmanager
def hosts_entries(address: str, names: list[str]) -> Iterator[None]:
    """``address names…`` resolvable while the block runs; the file is restored line for line after."""
    line = f"{address} {' '.join(names)} {MARKER}\n"
    with HOSTS.open("a") as hosts:
        hosts.write(line)
    try:
        yield
    finally:
        # Only this block's own line: an enclosing block may have added the same one and still needs it.
        lines = HOSTS.read_text().splitlines(keepends=True)
        if line in lines:
            del lines[len(lines) - 1 - lines[::-1].index(line)]
        HOSTS.write_text("".join(lines))  # in place: /etc/hosts may be a bind mount
