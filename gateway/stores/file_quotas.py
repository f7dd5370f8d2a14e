"""Where client quotas live between restarts: the QuotaStore protocol and a JSON-file implementation.

As the ACL file (gateway/stores/json_file.py): atomic writes, external edits picked up by polling, a bad
or vanished file never partly applied (the last good state stays in force, and writes are refused until fixed).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from gateway.quotas.model import QuotaError
from gateway.quotas.state import QuotaChange, QuotaState, apply_changes, state_from_json, state_to_json
from gateway.stores.json_file import StoreFile
from gateway.stores.listeners import Listeners

log = logging.getLogger("ksgate.quotas")
FILE_VERSION = 1

QuotaListener = Callable[[QuotaState], None]
"""Called with the whole new state after each change, in change order."""


class QuotaStoreError(OSError):
    """The store cannot be read or written; says what an operator must fix."""


class QuotaStore(Protocol):
    def quotas(self) -> QuotaState:
        """The current state, without I/O."""
        ...

    def alter(self, changes: Sequence[QuotaChange]) -> None:
        """Apply validated ``changes`` in one write (all or none); QuotaStoreError when it cannot."""
        ...

    def subscribe(self, callback: QuotaListener) -> Callable[[], None]:
        """Call ``callback(state)`` after every change; returns an unsubscribe function."""
        ...

    def reload_if_changed(self) -> bool:
        """Pick up changes made outside this process; True when something changed."""
        ...


class NoQuotaStore:
    """Where quotas live when no store is configured (FILE store without ksgate.quota.file): none are set,
    and a change is refused with a message naming the key. The quota APIs are still answered, so that
    Kafka's tools keep working: kafka-configs --describe --entity-type users asks DescribeClientQuotas
    before it lists a user's SCRAM credentials, and would fail on an API the gateway did not offer."""

    def quotas(self) -> QuotaState:
        return {}

    def alter(self, changes: Sequence[QuotaChange]) -> None:
        raise QuotaStoreError("no quota store is configured: set ksgate.quota.file (or use the KAFKA security store)")

    def subscribe(self, callback: QuotaListener) -> Callable[[], None]:
        return lambda: None

    def reload_if_changed(self) -> bool:
        return False


def encode_quota_file(state: QuotaState) -> bytes:
    """One entity a line (readable, diffable), each line by the C JSON encoder: ``indent`` would take the
    pure-Python one, ten times slower on a file of 10,000 entities."""
    lines = ",\n".join(json.dumps(item) for item in state_to_json(state))
    return f'{{"version": {FILE_VERSION}, "quotas": [\n{lines}\n]}}\n'.encode()


def decode_quota_file(data: bytes) -> QuotaState:
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise QuotaStoreError(f"not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != FILE_VERSION \
            or not isinstance(document.get("quotas"), list):
        raise QuotaStoreError(f'expected {{"version": {FILE_VERSION}, "quotas": [...]}}')
    try:
        return state_from_json(document["quotas"])
    except QuotaError as exc:
        raise QuotaStoreError(exc.message) from None


class FileQuotaStore:
    """Quotas in one JSON file (mode 0600), ``ksgate.quota.file``; thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._state: QuotaState = {}
        self._file = StoreFile(self.path, decode_quota_file, error=QuotaStoreError, what="quota file",
                               held="quota entities", changing="quotas", log=log)
        self._listeners: Listeners[[QuotaState]] = Listeners(self._lock, "quota change listener", log)

    def quotas(self) -> QuotaState:
        return self._state

    def load(self) -> QuotaState:
        """Read the file (missing: no quotas yet); QuotaStoreError if it is unreadable or invalid."""
        with self._lock:
            state = self._file.load()
            self._adopt({} if state is None else state)
            return self._state

    def _adopt(self, state: QuotaState) -> None:
        changed = state != self._state
        self._state = state
        if changed:
            self._notify()

    def reload_if_changed(self) -> bool:
        with self._lock:
            state = self._file.poll(len(self._state))
            if state is None:
                return False
            self._adopt(state)
            log.info("reloaded %d quota entities from %s", len(self._state), self.path)
            return True

    def alter(self, changes: Sequence[QuotaChange]) -> None:
        with self._lock:
            self.reload_if_changed()  # never clobber an operator's edit
            self._file.ensure_writable()
            new = apply_changes(self._state, changes)
            if new == self._state:
                return
            self._file.write(encode_quota_file(new))
            self._state = new
            self._notify()

    def subscribe(self, callback: QuotaListener) -> Callable[[], None]:
        return self._listeners.subscribe(callback)

    def _notify(self) -> None:
        self._listeners.notify(self._state)
