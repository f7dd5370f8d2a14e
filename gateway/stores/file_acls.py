"""Where ACL bindings live between restarts: the AclStore protocol and a JSON-file implementation.

Writes are atomic (temp file, fsync, rename, fsync dir); external edits are picked up by polling
(gateway/stores/json_file.py, shared with the quota file).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Protocol

from authz.acl_json import AclStoreError, decode_acl_file, encode_acl_file
from authz.model import AclBinding, AclBindingFilter, validate_binding, validate_filter
from gateway.stores.json_file import StoreFile
from gateway.stores.listeners import Listeners

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
        self._file = StoreFile(self.path, decode_acl_file, error=AclStoreError, what="ACL file", held="ACLs",
                               changing="ACLs", log=log)
        self._listeners: Listeners[[Sequence[AclBinding], Sequence[AclBinding]]] = Listeners(
            self._lock, "ACL change listener", log)

    @property
    def bindings(self) -> list[AclBinding]:
        """The last good state, without touching the disk."""
        with self._lock:
            return list(self._bindings)

    def load(self) -> list[AclBinding]:
        """Read the file (missing = no ACLs yet); AclStoreError if it is unreadable or invalid."""
        with self._lock:
            bindings = self._file.load()
            if bindings is None:
                log.info("ACL file %s does not exist yet: no ACLs", self.path)
                bindings = []
            self._replace_state(bindings)
            return list(self._bindings)

    def _replace_state(self, bindings: list[AclBinding]) -> None:
        new = dict.fromkeys(bindings)
        added = [b for b in new if b not in self._bindings]
        removed = [b for b in self._bindings if b not in new]
        self._bindings = new
        if added or removed:
            self._notify(added, removed)

    def reload_if_changed(self) -> bool:
        """Pick up an external edit if the file changed (inode, size, mtime or ctime).

        Returns True when a new good state was adopted.  A bad file keeps the last good
        state; it is logged once per version of the file.
        """
        with self._lock:
            bindings = self._file.poll(len(self._bindings))
            if bindings is None:
                return False
            self._replace_state(bindings)
            log.info("reloaded %d ACLs from %s", len(self._bindings), self.path)
            return True

    def _ensure_current(self) -> None:
        """Adopt external edits before a write, so a write never clobbers them."""
        self.reload_if_changed()
        self._file.ensure_writable()

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
            self._file.write(encode_acl_file(new))
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
            self._file.write(encode_acl_file(new))
            self._bindings = new
            self._notify([], removed)
            return matched

    def subscribe(self, callback: AclChangeListener) -> Callable[[], None]:
        return self._listeners.subscribe(callback)

    def _notify(self, added: Sequence[AclBinding], removed: Sequence[AclBinding]) -> None:
        self._listeners.notify(added, removed)


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
