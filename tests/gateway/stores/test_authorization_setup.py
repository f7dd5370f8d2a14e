"""The authorizer's set-up over an ACL file: a file that does not exist is warned about, since a misspelt
ksgate.acl.file otherwise looks exactly like a deployment without ACLs (everyone but super users denied)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.config import build_config
from gateway.stores.setup import build_authorization


def _authorization(acl_file: Path) -> None:
    config = build_config({"upstream.bootstrap.servers": "b:9092", "authorizer.class.name": "StandardAuthorizer",
                           "ksgate.acl.file": str(acl_file)})
    assert build_authorization(config) is not None


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
