"""Where client quotas live between restarts: the QuotaStore protocol and a JSON-file implementation.

As the ACL file: atomic writes, external edits picked up by polling, a bad or vanished file
never partly applied (the last good state stays in force, and writes are refused until fixed).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Protocol

from gateway.quotas.model import QuotaError
from gateway.quotas.state import QuotaChange, QuotaState, apply_changes, state_from_json, state_to_json
from gateway.stores.file_acls import write_atomically

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


_Signature = tuple[int, int, int, int, int]


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FileQuotaStore:
    """Quotas in one JSON file (mode 0600), ``ksgate.quota.file``; thread-safe."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        self._state: QuotaState = {}
        self._seen: _Signature | None = None
        self._disk_ok = True
        self._listeners: list[QuotaListener] = []

    def quotas(self) -> QuotaState:
        return self._state

    def load(self) -> QuotaState:
        """Read the file (missing: no quotas yet); QuotaStoreError if it is unreadable or invalid."""
        with self._lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                self._adopt({}, None)
                return self._state
            self._adopt(self._read(), _signature(st))
            return self._state

    def _read(self) -> QuotaState:
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise QuotaStoreError(f"cannot read quota file {self.path}: {exc}") from exc
        try:
            return decode_quota_file(data)
        except QuotaStoreError as exc:
            raise QuotaStoreError(f"quota file {self.path}: {exc}") from None

    def _adopt(self, state: QuotaState, signature: _Signature | None) -> None:
        changed = state != self._state
        self._state, self._seen, self._disk_ok = state, signature, True
        if changed:
            self._notify()

    def reload_if_changed(self) -> bool:
        with self._lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                if self._seen is not None and self._disk_ok:
                    log.error("quota file %s disappeared; keeping the %d quota entities last loaded",
                              self.path, len(self._state))
                    self._disk_ok = False
                return False
            signature = _signature(st)
            if signature == self._seen:
                return False
            try:
                state = self._read()
            except QuotaStoreError as exc:
                log.error("%s; keeping the %d quota entities last loaded", exc, len(self._state))
                self._seen, self._disk_ok = signature, False
                return False
            self._adopt(state, signature)
            log.info("reloaded %d quota entities from %s", len(self._state), self.path)
            return True

    def alter(self, changes: Sequence[QuotaChange]) -> None:
        with self._lock:
            self.reload_if_changed()  # never clobber an operator's edit
            if not self._disk_ok:
                raise QuotaStoreError(f"quota file {self.path} is unreadable or missing; fix it before "
                                      "changing quotas")
            new = apply_changes(self._state, changes)
            if new == self._state:
                return
            try:
                write_atomically(self.path, encode_quota_file(new))
                self._seen = _signature(os.stat(self.path))
            except OSError as exc:
                raise QuotaStoreError(f"cannot write quota file {self.path}: {exc}") from exc
            self._state = new
            self._notify()

    def subscribe(self, callback: QuotaListener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(callback)

        def unsubscribe() -> None:
            with self._lock, suppress(ValueError):
                self._listeners.remove(callback)

        return unsubscribe

    def _notify(self) -> None:
        for listener in list(self._listeners):
            try:
                listener(self._state)
            except Exception:
                log.exception("quota change listener %r failed", listener)
