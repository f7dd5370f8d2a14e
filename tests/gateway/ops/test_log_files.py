"""Log files the gateway creates hold user names: mode 0600 whatever the umask, rotations included."""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.ops.audit import AuditLog


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o000], ids=["umask-022", "umask-000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _login(audit: AuditLog, user: str) -> None:
    audit.authentication(principal=None, attempted_user=user, client_host="10.0.0.1", client_port=1,
                         listener="SASL_SSL", mechanism="PLAIN", succeeded=False, failure="bad_credentials")


def test_a_fresh_audit_log_is_mode_0600(tmp_path: Path, umask: int) -> None:
    audit = AuditLog(str(tmp_path / "audit.log"))
    _login(audit, "alice")
    audit.close()
    assert mode(tmp_path / "audit.log") == 0o600


def test_every_rotated_audit_file_is_mode_0600(tmp_path: Path, umask: int) -> None:
    audit = AuditLog(str(tmp_path / "audit.log"), max_bytes=300, backups=2)
    for i in range(10):
        _login(audit, f"user-{i}")
    audit.close()
    files = sorted(tmp_path.glob("audit.log*"))
    assert [f.name for f in files] == ["audit.log", "audit.log.1", "audit.log.2"]
    assert [mode(f) for f in files] == [0o600] * 3


def test_an_existing_world_readable_audit_log_is_narrowed_with_a_warning(tmp_path: Path,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "audit.log"
    path.write_text("earlier line\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="ksgate.logs"):
        audit = AuditLog(str(path))
    _login(audit, "alice")
    audit.close()
    assert mode(path) == 0o600
    assert path.read_text().startswith("earlier line\n")  # appended to, not replaced
    assert any("0644" in r.getMessage() and "0600" in r.getMessage() for r in caplog.records)


def test_an_audit_file_that_cannot_be_written_is_reported_once_without_its_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "audit"
    directory.mkdir()
    audit = AuditLog(str(directory / "audit.log"), max_bytes=300, backups=1)  # the second record rolls over
    try:
        _login(audit, "kept")
        shutil.rmtree(directory)  # the rollover cannot open a new file: these records are lost
        with caplog.at_level(logging.INFO, logger="ksgate.logs"):
            _login(audit, "lost-one")
            _login(audit, "lost-two")
            directory.mkdir()
            _login(audit, "back")
    finally:
        audit.close()
    out, err = capsys.readouterr()
    assert '"attempted_user":"lost-' not in out + err  # no audit record on stdout or stderr, the operational log
    assert "Traceback" not in err
    reports = [r for r in caplog.records if r.name == "ksgate.logs"]
    assert [r.levelname for r in reports] == ["ERROR", "WARNING"]  # one line per outage, one when it ends
    assert "cannot be written (FileNotFoundError" in reports[0].getMessage()
    assert "2 audit records were lost" in reports[1].getMessage()
    assert not any("lost-" in r.getMessage() for r in reports)
    assert '"attempted_user":"back"' in (directory / "audit.log").read_text()
