"""The authorizer's set-up over an ACL file: a file that does not exist is warned about, since a misspelt
ksgate.acl.file otherwise looks exactly like a deployment without ACLs (everyone but super users denied).
The audit log is opened only when authorization is on, and then before build_authorization returns."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from authz.acl_json import AclStoreError
from gateway.config import build_config
from gateway.stores.setup import build_authorization


def _authorization(acl_file: Path) -> None:
    config = build_config({"upstream.bootstrap.servers": "b:9092", "authorizer.class.name": "StandardAuthorizer",
                           "ksgate.acl.file": str(acl_file)})
    assert build_authorization(config) is not None


def _descriptors_on(path: Path) -> list[str]:
    """This process's open descriptors that name ``path`` (Linux's /proc)."""
    fds = "/proc/self/fd"
    if not os.path.isdir(fds):
        pytest.skip("needs /proc/self/fd")
    named = []
    for fd in os.listdir(fds):
        try:
            target = os.readlink(os.path.join(fds, fd))
        except OSError:  # the descriptor listdir itself used, closed since
            continue
        if target == str(path):
            named.append(fd)
    return named


def _audited_config(tmp_path: Path, authorizer: str) -> dict[str, str]:
    return {"upstream.bootstrap.servers": "b:9092", "authorizer.class.name": authorizer,
            "ksgate.acl.file": str(tmp_path / "acls.json"), "ksgate.audit.log.file": str(tmp_path / "audit.log")}


def test_without_authorization_no_audit_file_is_created_or_held_open(tmp_path: Path) -> None:
    assert build_authorization(build_config(_audited_config(tmp_path, ""))) is None
    audit_file = tmp_path / "audit.log"
    assert (audit_file.exists(), _descriptors_on(audit_file)) == (False, [])


def test_with_authorization_the_audit_file_is_open_when_set_up_returns(tmp_path: Path) -> None:
    authorization = build_authorization(build_config(_audited_config(tmp_path, "StandardAuthorizer")))
    assert authorization is not None
    audit_file = tmp_path / "audit.log"
    try:
        assert authorization.audit.enabled and len(_descriptors_on(audit_file)) == 1
    finally:
        authorization.audit.close()
    assert _descriptors_on(audit_file) == []


def test_an_audit_file_that_cannot_be_opened_stops_the_set_up(tmp_path: Path) -> None:
    settings = _audited_config(tmp_path, "StandardAuthorizer")
    settings["ksgate.audit.log.file"] = str(tmp_path / "missing-directory" / "audit.log")
    with pytest.raises(OSError):
        build_authorization(build_config(settings))


def test_a_refused_acl_file_leaves_no_audit_file_open(tmp_path: Path) -> None:
    (tmp_path / "acls.json").write_text("{not json", "utf-8")
    with pytest.raises(AclStoreError):
        build_authorization(build_config(_audited_config(tmp_path, "StandardAuthorizer")))
    assert _descriptors_on(tmp_path / "audit.log") == []


def test_an_acl_file_that_does_not_exist_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "acl.json"  # say, a typo for acls.json
    with caplog.at_level(logging.INFO, logger="ksgate.authz"):
        _authorization(missing)
    warnings = [r.getMessage() for r in caplog.records if r.name == "ksgate.authz" and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(missing) in warnings[0] and "denied" in warnings[0]


def test_an_existing_acl_file_without_acls_is_not(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    present = tmp_path / "acls.json"
    present.write_text('{"version": 1, "acls": []}', "utf-8")
    with caplog.at_level(logging.INFO, logger="ksgate.authz"):
        _authorization(present)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
