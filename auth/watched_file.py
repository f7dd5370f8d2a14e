"""A store's file, re-read when it changes on disk: the one reload rule every file store follows.

The (mtime, size, inode) signature is checked at most once per interval; a new version
that fails to load keeps the last good content and is reported once; a removed file
empties the content.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock
    fcntl = None  # type: ignore[assignment]

T = TypeVar("T")
Signature = tuple[int, int, int]  # (mtime_ns, size, inode)
log = logging.getLogger("ksgate.auth")


def read_with_signature(path: Path) -> tuple[Signature, bytes] | None:
    """The file's bytes and its signature, both from one open file (so they match); None if it is missing."""
    try:
        with open(path, "rb") as file:
            st = os.fstat(file.fileno())
            data = file.read()
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino), data


@contextlib.contextmanager
def writer_lock(path: Path) -> Iterator[None]:
    """Serialise the processes that rewrite ``path`` (gateways, ``ksgate`` commands) so none loses
    another's change: an exclusive flock on ``.<name>.lock`` beside it."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class WatchedFile(Generic[T]):
    """``content`` is what ``load`` last produced from ``path``; ``load`` raises one of ``errors``
    for a broken file and returns None when the file vanished between stat and open."""

    def __init__(self, path: Path, load: Callable[[], tuple[Signature, T] | None], empty: Callable[[], T], *,
                 errors: tuple[type[Exception], ...], what: str, describe: Callable[[T], str],
                 removed: str, clock: Callable[[], float], interval: float,
                 initial: tuple[Signature, T] | None, reload_level: int = logging.INFO) -> None:
        self._path, self._load, self._empty = path, load, empty
        self._errors, self._what, self._describe, self._removed = errors, what, describe, removed
        self._clock, self._interval, self._level = clock, interval, reload_level
        self.lock = threading.Lock()
        self.signature: Signature | None = None
        self.content: T = empty()
        if initial is not None:
            self.signature, self.content = initial
        self._next_check = clock() + interval

    def maybe_reload(self) -> None:
        """Check the file if the interval has passed since the last check (lookups call this)."""
        now = self._clock()
        if now < self._next_check:
            return
        self._next_check = now + self._interval
        self.reload_if_changed()

    def reload_if_changed(self) -> bool:
        """Re-read the file if its signature changed; True if the content was replaced."""
        with self.lock:
            try:
                st = os.stat(self._path)
            except FileNotFoundError:
                if self.signature is None:
                    return False
                log.warning("%s %s was removed: %s", self._what, self._path, self._removed)
                self.signature, self.content = None, self._empty()
                return True
            except OSError as exc:
                log.error("%s %s cannot be checked, keeping %s: %s", self._what, self._path,
                          self._describe(self.content), exc)
                return False
            if (st.st_mtime_ns, st.st_size, st.st_ino) == self.signature:
                return False
            try:
                loaded = self._load()
            except self._errors as exc:
                log.error("%s %s could not be reloaded, keeping the previous %s: %s", self._what, self._path,
                          self._describe(self.content), exc)
                # Remember this version so the same broken file is reported once, not every check.
                self.signature = (st.st_mtime_ns, st.st_size, st.st_ino)
                return False
            if loaded is None:  # removed between stat and open; the next check sees it
                return False
            self.signature, self.content = loaded
            log.log(self._level, "%s %s reloaded: %s", self._what, self._path, self._describe(self.content))
            return True
