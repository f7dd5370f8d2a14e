"""Fixtures shared by the session tests (tests/gateway/session/ and its state/ folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from authz.model import AclOperation
from gateway.server import Gateway
from gateway.stores.file_acls import FileAclStore
from gateway.stores.file_users import FileCredentialStore
from tests.authz.helpers import acl
from tests.gateway.session.session_driver import gateway_for


@pytest.fixture
def alice_sees_a(tmp_path: Path) -> Gateway:
    """SASL/PLAIN with ACLs: alice may describe topic a, nothing else; bob may do nothing."""
    users = FileCredentialStore(tmp_path / "users.json")
    users.upsert_user("alice", "alice-secret")
    users.upsert_user("bob", "bob-secret")
    FileAclStore(tmp_path / "acls.json").add([acl("a", AclOperation.DESCRIBE)])
    return gateway_for(tmp_path, "SASL_PLAINTEXT", **{
        "authorizer.class.name": "StandardAuthorizer", "ksgate.acl.file": str(tmp_path / "acls.json"),
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(tmp_path / "users.json"),
        "ksgate.sasl.plain.allow.insecure": True, "connections.max.reauth.ms": 60_000,
        "connection.failed.authentication.delay.ms": 100})
