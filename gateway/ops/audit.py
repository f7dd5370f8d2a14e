"""The audit log: one JSON line per authorization decision and per authentication attempt.

Written to its own rotating file, apart from the operational log; the schema is documented
in docs/audit-log.md and is what the PySpark pipeline reads.  Like Kafka's authorizer
logger, denials are recorded (not those of implicit checks) and allowed decisions only when
enabled.  Payloads and secrets are never recorded.
"""

from __future__ import annotations

import io
import json
import logging
import logging.handlers
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from authz.shadow import WOULD_DENY, DivergenceAggregate
from gateway.ops.logs import open_private_log

SCHEMA_VERSION = 1
# The most characters of one client-supplied string (a user, topic or group name, a client id)
# that the audit log, and the gateway's own log, keep.
NAME_CHARS = 256
# The most characters of a log line's free-text reason, which may quote such a string.
REASON_CHARS = 2 * NAME_CHARS
# Items named per admin change event (its ``count`` is exact).
ADMIN_SAMPLE_SIZE = 10
_OPS_LOG = logging.getLogger("ksgate.logs")  # the operational log's, where log files report trouble
_RECORD_NAME = "ksgate.audit"  # the name an audit line's LogRecord carries (no logger has it)


def bounded_name(text: str, limit: int = NAME_CHARS) -> str:
    """A client-supplied string as a log may hold it: at most ``limit`` characters, control and
    other unprintable characters escaped (``\\n``, ``\\x00``, ``\\u2028``) so that it cannot
    forge a line or hide text.  The one place both logs bound such strings."""
    head = text[:limit]  # escaping only lengthens: what is past the limit can never show
    if head.isprintable():
        return head
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in head)[:limit]


@dataclass(slots=True, frozen=True)
class AdminChange:
    """What one admin request changed in a store: the items that took effect and those refused."""

    changed: int
    failed: int
    sample: tuple[str, ...]  # the first changed items, at most ADMIN_SAMPLE_SIZE, each bounded

    @property
    def decision(self) -> str:
        """APPLIED (nothing refused), FAILED (nothing took effect) or PARTIAL."""
        if not self.failed:
            return "APPLIED"
        return "PARTIAL" if self.changed else "FAILED"

    @classmethod
    def of(cls, changed: Sequence[str], failed: int) -> AdminChange:
        return cls(len(changed), failed, tuple(bounded_name(item) for item in changed[:ADMIN_SAMPLE_SIZE]))


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """RotatingFileHandler whose files (the first and each one after a rollover) are mode 0600, whose
    failures reach the operational log as one line per outage, never with the record, and which once
    closed never opens its file again (logging's would, for a record emitted after close())."""

    lost = 0  # records not written since the file last failed (0: it is writable)
    shut = False  # close() has run: records are dropped and counted, never written
    dropped_after_close = 0

    def _open(self) -> io.TextIOWrapper:
        return open(open_private_log(self.baseFilename), "a", encoding=self.encoding,
                    errors=self.errors)

    def close(self) -> None:
        self.acquire()  # the lock handle() holds around emit(): a record is written before, or dropped after
        try:
            self.shut = True
            super().close()
        finally:
            self.release()

    def emit(self, record: logging.LogRecord) -> None:
        if self.shut:  # a writer that found the log open raced its close: the file stays closed
            self._drop_after_close()
            return
        lost = self.lost
        super().emit(record)  # a failure comes back through handleError
        if lost and self.lost == lost:
            _OPS_LOG.warning("audit log %s is written again; %d audit records were lost", self.baseFilename, lost)
            self.lost = 0

    def handleError(self, record: logging.LogRecord) -> None:
        """Not the standard library's: it prints the record (an audit line) and a traceback to stderr, which is
        the operational log, for every record the file cannot take (a full disk, a removed directory)."""
        self.lost += 1
        if self.lost == 1:  # once per outage, not once per record
            error = sys.exc_info()[1]
            _OPS_LOG.error("audit log %s cannot be written (%s: %s); audit records are lost until it can",
                           self.baseFilename, type(error).__name__, bounded_name(str(error), REASON_CHARS))

    def _drop_after_close(self) -> None:
        self.dropped_after_close += 1
        if self.dropped_after_close == 1:  # once: the count says how many followed
            _OPS_LOG.warning("audit log %s is closed; an audit record emitted after its close was dropped "
                             "(not written anywhere else)", self.baseFilename)


def _now_iso() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


@dataclass(slots=True)
class AuditLog:
    """Writes audit events; a disabled log (no file) drops them at the cost of one branch."""

    path: str | None = None
    record_allowed: bool = False
    max_bytes: int = 100 * 1024 * 1024
    backups: int = 10
    # Written through directly, with no Logger: a logger in logging's registry would outlive this log, and one
    # named after it could be handed, file handler and all, to a later log (never mixed into the ops log either).
    # Kept after close(), closed: an event written after it is counted and dropped by the handler, not ignored here.
    _file: _PrivateRotatingFileHandler | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.path is None:
            return
        handler = _PrivateRotatingFileHandler(self.path, maxBytes=self.max_bytes, backupCount=self.backups,
                                              encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._file = handler

    @property
    def enabled(self) -> bool:
        """Whether events are written (False without a file, and once closed)."""
        file = self._file
        return file is not None and not file.shut

    @property
    def dropped_after_close(self) -> int:
        """Events that reached this log after close(): dropped, never written to its file or elsewhere."""
        return 0 if self._file is None else self._file.dropped_after_close

    def _write(self, event: dict[str, Any]) -> None:
        file = self._file
        if file is None:
            return
        line = json.dumps(event, separators=(",", ":"), default=str)
        # handle(): under the handler's lock, as a logger would call it (decisions may come from worker threads).
        file.handle(logging.LogRecord(_RECORD_NAME, logging.INFO, __file__, 0, line, None, None))

    def authorization(self, *, principal: str, client_host: str, client_port: int, listener: str,
                      api_key: int, api_name: str, api_version: int, operation: str, resource_type: str,
                      resource_name: str, pattern_type: str | None, allowed: bool, rule: str,
                      count: int | None = None, sample: list[str] | None = None) -> None:
        """One decision, or (``count`` > 1) ``count`` decisions of one kind in one request, named by ``sample``."""
        if self._file is None or (allowed and not self.record_allowed):
            return
        event: dict[str, Any] = {
            "schema": SCHEMA_VERSION, "ts": _now_iso(), "event": "authorization", "principal": principal,
            "client_host": client_host, "client_port": client_port, "listener": listener, "api_key": api_key,
            "api_name": api_name, "api_version": api_version, "operation": operation, "resource_type": resource_type,
            "resource_name": resource_name, "pattern_type": pattern_type,
            "decision": "ALLOWED" if allowed else "DENIED", "rule": rule}
        if count is not None:
            event["count"] = count
            event["sample"] = sample or []
        self._write(event)

    def shadow(self, *, principal: str, client_host: str, client_port: int, listener: str, api_key: int,
               api_name: str, api_version: int, aggregate: DivergenceAggregate) -> None:
        """``count`` decisions of one request on which the shadow ACL set disagrees with the live one
        (authz/shadow.py): ``divergence`` is would_deny (live ALLOWED, shadow DENIED) or would_allow.
        Written whatever ksgate.audit.log.allowed says: it is what an operator must see before a promotion."""
        if self._file is None:
            return
        divergence, operation, resource_type, pattern_type, shadow_rule, implicit = aggregate.kind
        resource_names, count = aggregate.sample, aggregate.count
        live_allowed = divergence == WOULD_DENY
        event: dict[str, Any] = {
            "schema": SCHEMA_VERSION, "ts": _now_iso(), "event": "shadow", "principal": principal,
            "client_host": client_host, "client_port": client_port, "listener": listener, "api_key": api_key,
            "api_name": api_name, "api_version": api_version, "operation": operation, "resource_type": resource_type,
            "resource_name": bounded_name(resource_names[0]) if resource_names else "",
            "pattern_type": pattern_type, "decision": divergence.upper(),
            "live": "ALLOWED" if live_allowed else "DENIED", "shadow": "DENIED" if live_allowed else "ALLOWED",
            "rule": shadow_rule, "implicit": implicit}
        if count != 1:
            event["count"] = count
            event["sample"] = [bounded_name(name) for name in resource_names]
        self._write(event)

    def acl_set_change(self, *, operator: str, action: str, target: str, added: Sequence[str],
                       removed: Sequence[str], added_count: int, removed_count: int) -> None:
        """An operator's change of the live or shadow ACL set (``ksgate acls --shadow``): always recorded."""
        if self._file is None:
            return
        self._write({"schema": SCHEMA_VERSION, "ts": _now_iso(), "event": "acl_change", "principal": operator,
                     "action": action, "target": target, "decision": "APPLIED",
                     "added": added_count, "removed": removed_count,
                     "sample_added": [bounded_name(b) for b in added[:ADMIN_SAMPLE_SIZE]],
                     "sample_removed": [bounded_name(b) for b in removed[:ADMIN_SAMPLE_SIZE]]})

    def authentication(self, *, principal: str | None, attempted_user: str | None, client_host: str,
                       client_port: int, listener: str, mechanism: str | None, succeeded: bool,
                       failure: str | None = None) -> None:
        if self._file is None:
            return
        self._write({"schema": SCHEMA_VERSION, "ts": _now_iso(), "event": "authentication",
                     "principal": principal,
                     "attempted_user": None if attempted_user is None else bounded_name(attempted_user),
                     "client_host": client_host,
                     "client_port": client_port, "listener": listener, "mechanism": mechanism,
                     "decision": "SUCCEEDED" if succeeded else "FAILED", "failure": failure})

    def admin_change(self, *, principal: str, client_host: str, client_port: int, listener: str, api_key: int,
                     api_name: str, api_version: int, change: AdminChange) -> None:
        """An ACL, credential or token change the gateway made for a request (always recorded)."""
        if self._file is None:
            return
        self._write({"schema": SCHEMA_VERSION, "ts": _now_iso(), "event": "admin_change", "principal": principal,
                     "client_host": client_host, "client_port": client_port, "listener": listener,
                     "api_key": api_key, "api_name": api_name, "api_version": api_version,
                     "decision": change.decision, "count": change.changed, "failed": change.failed,
                     "sample": list(change.sample)})

    def connection_refused(self, *, client_host: str, client_port: int, listener: str, limit_key: str,
                           limit: int, suppressed: int) -> None:
        """A connection closed at accept by a connection limit (``suppressed``: refusals since
        the previous such event that were counted but not written, to bound the log's growth)."""
        if self._file is None:
            return
        self._write({"schema": SCHEMA_VERSION, "ts": _now_iso(), "event": "connection",
                     "client_host": client_host, "client_port": client_port, "listener": listener,
                     "decision": "REFUSED", "reason": limit_key, "limit": limit, "suppressed": suppressed})

    def quota_throttled(self, *, entity: str, client: str, quota: str, bound: float, throttle_ms: int,
                        count: int) -> None:
        """A client over its quota was throttled: at most one event per configured entity per
        interval (gateway/quotas/sensors.py); ``count`` throttles of that entity since the previous one."""
        if self._file is None:
            return
        self._write({"schema": SCHEMA_VERSION, "ts": _now_iso(), "event": "quota", "decision": "THROTTLED",
                     "entity": bounded_name(entity), "client": bounded_name(client), "quota": quota, "bound": bound,
                     "throttle_time_ms": throttle_ms, "count": count})

    def close(self) -> None:
        """Closes the file, once; later events, and those racing the close on another thread, are dropped
        and counted (``dropped_after_close``; the operational log says so at the first)."""
        if self._file is not None and not self._file.shut:
            self._file.close()
