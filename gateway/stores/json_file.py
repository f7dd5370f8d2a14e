"""The file side of the JSON-file stores (ACLs, quotas): atomic writes, polling, the last good version.

A bad or vanished file is never partly applied: the store keeps its last good state and refuses writes
until the file is fixed, so a write never clobbers an operator's edit and deleting the file never silently
drops DENY rules. (auth/watched_file.py is the credential files' rule: there a removed file empties them.)
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")
Signature = tuple[int, int, int, int, int]  # (dev, inode, size, mtime_ns, ctime_ns)


def file_signature(st: os.stat_result) -> Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def write_atomically(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` so that readers (and a crash) see the old or the new file, whole."""
    directory = path.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as file:
            os.fchmod(file.fileno(), mode)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class StoreFile(Generic[T]):
    """Which version of one store file the store's state reflects, and whether the file on disk is good.

    Not locked: the store calls it under its own lock. ``decode`` raises ``error`` for a bad file;
    ``what`` names the file ("ACL file"), ``held`` what it holds ("ACLs"), ``changing`` what a write changes.
    """

    def __init__(self, path: Path, decode: Callable[[bytes], T], *, error: type[Exception],
                 what: str, held: str, changing: str, log: logging.Logger) -> None:
        self.path, self._decode, self._error = path, decode, error
        self._what, self._held, self._changing, self._log = what, held, changing, log
        self._seen: Signature | None = None  # the version the state reflects (or the last one refused)
        self._disk_ok = True

    def load(self) -> T | None:
        """The file's content (None: it does not exist yet); ``error`` if it is unreadable or invalid."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._seen, self._disk_ok = None, True
            return None
        content = self._read()
        self._seen, self._disk_ok = file_signature(st), True
        return content

    def _read(self) -> T:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise self._error(f"cannot read {self._what} {self.path}: {exc}") from exc
        try:
            return self._decode(data)
        except self._error as exc:
            raise self._error(f"{self._what} {self.path}: {exc}") from None

    def forget(self) -> None:
        """The file is gone and that is fine (the store holds nothing from it): writes are allowed again."""
        self._seen, self._disk_ok = None, True

    def poll(self, holding: int) -> T | None:
        """The new content if the file changed (inode, size, mtime or ctime) and is good, else None.

        A bad or vanished file keeps the last good state (``holding`` entries), logged once per version.
        """
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._seen is not None and self._disk_ok:
                self._log.error("%s %s disappeared; keeping the %d %s last loaded",
                                self._what, self.path, holding, self._held)
                self._disk_ok = False
            return None
        signature = file_signature(st)
        if signature == self._seen:
            return None
        try:
            content = self._read()
        except self._error as exc:
            self._log.error("%s; keeping the %d %s last loaded", exc, holding, self._held)
            self._seen, self._disk_ok = signature, False
            return None
        self._seen, self._disk_ok = signature, True
        return content

    def ensure_writable(self) -> None:
        """Refuse a write while the file on disk is bad (call after polling, so external edits are adopted)."""
        if not self._disk_ok:
            raise self._error(f"{self._what} {self.path} is unreadable or missing; fix it before changing "
                              f"{self._changing}")

    def write(self, data: bytes) -> None:
        """Replace the file with ``data`` and remember that version as the one the state reflects."""
        try:
            write_atomically(self.path, data)
            self._seen = file_signature(os.stat(self.path))
        except OSError as exc:
            raise self._error(f"cannot write {self._what} {self.path}: {exc}") from exc
