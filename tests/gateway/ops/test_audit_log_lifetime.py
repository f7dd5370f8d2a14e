"""Each AuditLog writes its own file only, and leaves nothing behind in the logging module once closed:
not a file handler a later log could inherit, not an entry in logging's registry."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from gateway.ops import audit as audit_module
from gateway.ops.audit import AuditLog

# AuditLogs made and dropped, looking for one whose address (id) an earlier one had. CPython reuses a freed
# object's memory at once, so the first few do; the bound only keeps a runtime that never reuses from looping.
ATTEMPTS = 200


def _login(audit: AuditLog, user: str) -> None:
    audit.authentication(principal=None, attempted_user=user, client_host="10.0.0.1", client_port=1,
                         listener="SASL_SSL", mechanism="PLAIN", succeeded=False, failure="bad_credentials")


def _log_at_a_dropped_logs_address(directory: Path) -> tuple[AuditLog, Path, Path]:
    """A new AuditLog whose id an earlier one had, dropped unclosed (as by a gateway whose start failed):
    the new log, its file and the earlier one's."""
    dropped: dict[int, Path] = {}
    for attempt in range(ATTEMPTS):
        path = directory / f"audit-{attempt}.log"
        audit = AuditLog(str(path))
        if id(audit) in dropped:
            return audit, path, dropped[id(audit)]
        dropped[id(audit)] = path
    pytest.skip(f"no AuditLog reused an earlier one's id in {ATTEMPTS} attempts")


def test_a_log_at_a_dropped_unclosed_logs_address_writes_only_its_own_file(tmp_path: Path) -> None:
    audit, path, earlier = _log_at_a_dropped_logs_address(tmp_path)
    try:
        _login(audit, "alice")
    finally:
        audit.close()
    assert '"attempted_user":"alice"' in path.read_text()
    assert earlier.read_text() == ""  # the earlier log at this address got none of its records


def test_two_logs_on_one_file_write_each_record_once(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    first, second = AuditLog(str(path)), AuditLog(str(path))
    try:
        _login(first, "alice")
        _login(second, "bob")
    finally:
        first.close()
        second.close()
    lines = path.read_text().splitlines()
    assert [('"alice"' in line, '"bob"' in line) for line in lines] == [(True, False), (False, True)]


def test_a_closed_log_leaves_no_logger_behind(tmp_path: Path) -> None:
    loggers_before = set(logging.Logger.manager.loggerDict)
    audit = AuditLog(str(tmp_path / "audit.log"))
    _login(audit, "alice")
    audit.close()
    assert set(logging.Logger.manager.loggerDict) - loggers_before == set()


def test_a_closed_log_writes_nothing_and_does_not_reopen_its_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    audit = AuditLog(str(path))
    _login(audit, "alice")
    audit.close()
    path.unlink()
    _login(audit, "after-close")
    assert (path.exists(), audit.enabled, audit.dropped_after_close) == (False, False, 1)


class _ClosingWhileEncoding:
    """json as the audit log sees it, closing the log between the writer's look at it and its write:
    the interleaving of a decision on a worker thread with the gateway's shutdown, made deterministic."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    def dumps(self, obj: object, **kwargs: Any) -> str:
        self.audit.close()
        return json.dumps(obj, **kwargs)


def test_a_write_racing_close_neither_reopens_the_file_nor_is_lost_silently(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "audit.log"
    audit = AuditLog(str(path))
    _login(audit, "alice")
    path.unlink()  # a reopened file would appear again
    monkeypatch.setattr(audit_module, "json", _ClosingWhileEncoding(audit))
    with caplog.at_level(logging.WARNING, logger="ksgate.logs"):
        _login(audit, "bob-racing-close")
        _login(audit, "after-close")
    reports = [r.getMessage() for r in caplog.records if r.name == "ksgate.logs"]
    assert (path.exists(), audit.dropped_after_close) == (False, 2)
    assert len(reports) == 1 and "dropped" in reports[0] and "bob" not in reports[0]  # never the record
