"""Where ACL bindings live between restarts: the AclStore protocol and a JSON-file implementation.

Writes are atomic (temp file, fsync, rename, fsync dir); external edits are picked up by polling.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Protocol

from authz.acl_json import AclStoreError, decode_acl_file, encode_acl_file
from authz.model import AclBinding, AclBindingFilter, validate_binding, validate_filter

log = logging.getLogger("ksgate.authz")

AclChangeListener = Callable[[Sequence[AclBinding], Sequence[AclBinding]], None]
"""Called with ``(added, removed)`` after each change, in the order the changes happened.

The signature matches ``StandardAuthorizer.apply``, so ``store.subscribe(authorizer.apply)``
keeps an authorizer in step with a store.
"""


class AclStore(Protocol):
    def load(self) -> list[AclBinding]:
        """(Re)read every binding from the backing storage."""
        ...

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Validate and persist ``bindings``; ones already present are ignored."""
        ...

    def remove_matching(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Delete every binding matching any of ``filters``; return what was deleted."""
        ...

    def remove_each(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every binding matching any of ``filters`` in one write; per filter, what it matched
        (each filter against the state before the call, as Kafka's DeleteAcls)."""
        ...

    def subscribe(self, callback: AclChangeListener) -> Callable[[], None]:
        """Call ``callback(added, removed)`` after every change; returns an unsubscribe function."""
        ...

    def reload_if_changed(self) -> bool:
        """Pick up changes made outside this process; True when something changed."""
        ...


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


def matches_per_filter(bindings: Iterable[AclBinding],
                       filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
    """For each filter, the bindings it matches, in ``bindings`` order.

    A filter naming one binding exactly (what ``kafka-acls --remove`` and the admin client
    send for a known ACL) is a set lookup, so deleting N such ACLs costs O(N), not O(N²);
    the others scan, as Kafka's controller does.
    """
    present = bindings if isinstance(bindings, dict) else dict.fromkeys(bindings)
    found: list[list[AclBinding]] = []
    scanned: list[tuple[int, AclBindingFilter]] = []
    for i, binding_filter in enumerate(filters):
        exact = binding_filter.exact_binding()
        if exact is None:
            scanned.append((i, binding_filter))
            found.append([])
        else:
            found.append([exact] if exact in present else [])
    if scanned:
        for binding in present:
            for i, binding_filter in scanned:
                if binding_filter.matches(binding):
                    found[i].append(binding)
    return found


def union(groups: Iterable[Iterable[AclBinding]]) -> list[AclBinding]:
    """Each binding of ``groups`` once, in first-seen order."""
    return list(dict.fromkeys(b for group in groups for b in group))


_Signature = tuple[int, int, int, int, int]


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FileAclStore:
    """ACLs in one JSON file (mode 0600).  Thread-safe; listeners run in change order.

    File format (field names as Kafka's AccessControlEntryRecord; enum values by name, any
    case, or by wire code)::

        {"version": 1, "acls": [{"resourceType": "TOPIC", "resourceName": "orders",
          "patternType": "LITERAL", "principal": "User:alice", "host": "*",
          "operation": "READ", "permissionType": "ALLOW"}]}

    A file that cannot be read, parsed or validated as a whole is never partly applied: at
    ``load()`` that is an ``AclStoreError``; at ``reload_if_changed()`` the last good state
    stays in force and the problem is logged on ``ksgate.authz``.  A vanished file is treated
    the same way (deleting the file must not silently drop DENY rules).  While the file on
    disk is bad, ``add``/``remove_matching`` refuse rather than overwrite an operator's edit.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._bindings: dict[AclBinding, None] = {}
        self._seen: _Signature | None = None  # the file version _bindings reflects (or last refused)
        self._disk_ok = True
        self._listeners: list[AclChangeListener] = []

    @property
    def bindings(self) -> list[AclBinding]:
        """The last good state, without touching the disk."""
        with self._lock:
            return list(self._bindings)

    def load(self) -> list[AclBinding]:
        """Read the file (missing = no ACLs yet); AclStoreError if it is unreadable or invalid."""
        with self._lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                log.info("ACL file %s does not exist yet: no ACLs", self.path)
                self._replace_state([], None)
                return []
            bindings = self._read()
            self._replace_state(bindings, _signature(st))
            return list(self._bindings)

    def _read(self) -> list[AclBinding]:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise AclStoreError(f"cannot read ACL file {self.path}: {exc}") from exc
        try:
            return decode_acl_file(data)
        except AclStoreError as exc:
            raise AclStoreError(f"ACL file {self.path}: {exc}") from None

    def _replace_state(self, bindings: list[AclBinding], signature: _Signature | None) -> None:
        new = dict.fromkeys(bindings)
        added = [b for b in new if b not in self._bindings]
        removed = [b for b in self._bindings if b not in new]
        self._bindings = new
        self._seen = signature
        self._disk_ok = True
        if added or removed:
            self._notify(added, removed)

    def reload_if_changed(self) -> bool:
        """Pick up an external edit if the file changed (inode, size, mtime or ctime).

        Returns True when a new good state was adopted.  A bad file keeps the last good
        state; it is logged once per version of the file.
        """
        with self._lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                if self._seen is not None and self._disk_ok:
                    log.error("ACL file %s disappeared; keeping the %d ACLs last loaded",
                              self.path, len(self._bindings))
                    self._disk_ok = False
                return False
            signature = _signature(st)
            if signature == self._seen:
                return False
            try:
                bindings = self._read()
            except AclStoreError as exc:
                log.error("%s; keeping the %d ACLs last loaded", exc, len(self._bindings))
                self._seen = signature
                self._disk_ok = False
                return False
            self._replace_state(bindings, signature)
            log.info("reloaded %d ACLs from %s", len(self._bindings), self.path)
            return True

    def _ensure_current(self) -> None:
        """Adopt external edits before a write, so a write never clobbers them."""
        self.reload_if_changed()
        if not self._disk_ok:
            raise AclStoreError(f"ACL file {self.path} is unreadable or missing; fix it before changing ACLs")

    def _persist(self, bindings: Iterable[AclBinding]) -> _Signature:
        try:
            write_atomically(self.path, encode_acl_file(bindings))
            return _signature(os.stat(self.path))
        except OSError as exc:
            raise AclStoreError(f"cannot write ACL file {self.path}: {exc}") from exc

    def add(self, bindings: Iterable[AclBinding]) -> None:
        bindings = list(bindings)
        for binding in bindings:
            validate_binding(binding)
        with self._lock:
            self._ensure_current()
            added = [b for b in dict.fromkeys(bindings) if b not in self._bindings]
            if not added:
                return
            new = {**self._bindings, **dict.fromkeys(added)}
            self._seen = self._persist(new)
            self._bindings = new
            self._notify(added, [])

    def remove_matching(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        return union(self.remove_each(list(filters)))

    def remove_each(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        for binding_filter in filters:
            validate_filter(binding_filter)
        with self._lock:
            self._ensure_current()
            matched = matches_per_filter(self._bindings, filters)
            removed = union(matched)
            if not removed:
                return matched
            gone = set(removed)
            new = {b: None for b in self._bindings if b not in gone}
            self._seen = self._persist(new)
            self._bindings = new
            self._notify([], removed)
            return matched

    def subscribe(self, callback: AclChangeListener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(callback)

        def unsubscribe() -> None:
            with self._lock, suppress(ValueError):
                self._listeners.remove(callback)

        return unsubscribe

    def _notify(self, added: Sequence[AclBinding], removed: Sequence[AclBinding]) -> None:
        for listener in list(self._listeners):
            try:
                listener(added, removed)
            except Exception:
                log.exception("ACL change listener %r failed", listener)


class AclSink(Protocol):
    """What ``attach`` feeds: StandardAuthorizer fits."""

    def load(self, bindings: Iterable[AclBinding]) -> None: ...

    def apply(self, added: Iterable[AclBinding], removed: Iterable[AclBinding]) -> None: ...


def attach(store: AclStore, authorizer: AclSink) -> Callable[[], None]:
    """Load ``store`` into ``authorizer`` (making it ready), then keep it in step; returns unsubscribe.

    Call it before anything else changes the store: a change between the two steps would be missed.
    """
    authorizer.load(store.load())
    return store.subscribe(authorizer.apply)
