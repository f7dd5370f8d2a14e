"""The audit event of an admin change says what changed: an exact count, the refused items, a bounded sample."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from authz.model import AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern
from authz.model import ResourceType as RT
from gateway.ops.audit import ADMIN_SAMPLE_SIZE, NAME_CHARS, bounded_name
from gateway.server import Gateway
from gateway.session import actions as act
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from protocol.messages import request_frame
from tests.gateway.admin.test_admin_batching import creation, exact_filter
from tests.gateway.session.session_driver import Driver, gateway_for


@pytest.fixture
def admin_gateway(tmp_path: Path) -> Gateway:
    FileCredentialStore(tmp_path / "users.json").upsert_user("alice", "alice-secret")
    return gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer",
                                    "ksgate.acl.file": str(tmp_path / "acls.json"),
                                    "ksgate.credentials.file": str(tmp_path / "users.json"),
                                    "super.users": "User:ANONYMOUS"})


def _ask(gateway: Gateway, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    driver = Driver.connect(gateway)
    driver.send(request_frame(api_key, version, 1, body))
    driver.run_job(act.JobKind.STORE)
    [(_, answer)] = driver.responses(api_key, version, count=1)
    return answer


def _changes(tmp_path: Path) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (tmp_path / "audit.log").read_text("utf-8").splitlines()]
    return [e for e in events if e["event"] == "admin_change"]


def test_create_acls_records_the_count_the_refused_items_and_a_sample_of_ten(admin_gateway: Gateway,
                                                                             tmp_path: Path) -> None:
    long_name = "t" * 5000
    creations = [creation(long_name)] + [creation(f"t{i}") for i in range(49)] + [{**creation("x"), "host": ""}]
    answer = _ask(admin_gateway, ApiKey.CREATE_ACLS, 3, {"creations": creations})
    assert sum(r["error_code"] == KafkaError.NONE for r in answer["results"]) == 50
    [event] = _changes(tmp_path)
    assert (event["api_name"], event["principal"], event["decision"], event["count"], event["failed"]) == \
        ("CreateAcls", "User:ANONYMOUS", "PARTIAL", 50, 1)
    assert len(event["sample"]) == ADMIN_SAMPLE_SIZE
    assert all(len(item) <= NAME_CHARS for item in event["sample"])
    assert event["sample"][1] == str(AclBinding(ResourcePattern(RT.TOPIC, "t0", PatternType.LITERAL),
                                                AccessControlEntry("User:bench", "*", AclOperation.READ,
                                                                   AclPermissionType.ALLOW)))


def test_delete_acls_records_each_removed_acl_once(admin_gateway: Gateway, tmp_path: Path) -> None:
    _ask(admin_gateway, ApiKey.CREATE_ACLS, 3, {"creations": [creation(f"t{i}") for i in range(3)]})
    # t0 is named twice: Kafka lists it under both filters, the audit counts the one ACL removed once.
    _ask(admin_gateway, ApiKey.DELETE_ACLS, 3, {"filters": [exact_filter("t0"), exact_filter("t0"),
                                                            exact_filter("t1"), exact_filter("absent")]})
    created, deleted = _changes(tmp_path)
    assert created["count"] == 3
    assert (deleted["api_name"], deleted["decision"], deleted["count"], deleted["failed"]) == \
        ("DeleteAcls", "APPLIED", 2, 0)
    assert [s.split("name=")[1].split(",")[0] for s in deleted["sample"]] == ["t0", "t1"]


def test_alter_scram_records_users_and_mechanisms_never_the_salted_password(admin_gateway: Gateway,
                                                                           tmp_path: Path) -> None:
    salt, salted = b"s" * 16, b"secret-salted-password-bytes-32b"
    upsert = {"name": "bob", "mechanism": 2, "iterations": 8192, "salt": salt, "salted_password": salted}
    answer = _ask(admin_gateway, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {
        "deletions": [{"name": "nobody", "mechanism": 1}], "upsertions": [upsert]})
    assert [(r["user"], r["error_code"]) for r in answer["results"]] == \
        [("nobody", KafkaError.RESOURCE_NOT_FOUND), ("bob", KafkaError.NONE)]
    [event] = _changes(tmp_path)
    assert (event["count"], event["failed"], event["sample"]) == (1, 1, ["upsert bob SCRAM-SHA-512"])
    text = (tmp_path / "audit.log").read_text("utf-8")
    assert base64.b64encode(salted).decode() not in text and salted.decode() not in text


def test_bounded_name_cuts_and_escapes() -> None:
    assert bounded_name("alice") == "alice"
    assert bounded_name("a" * 1000) == "a" * NAME_CHARS
    assert bounded_name("evil\nUser:admin\x00\u2028") == "evil\\nUser:admin\\x00\\u2028"
    assert len(bounded_name("\x00" * 1000)) == NAME_CHARS


def test_a_refused_token_creation_is_recorded_as_one_failed_item(tmp_path: Path) -> None:
    gateway = gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer",
                                       "ksgate.acl.file": str(tmp_path / "acls.json"),
                                       "delegation.token.secret.key": "k", "super.users": "User:ANONYMOUS",
                                       "ksgate.delegation.token.file": str(tmp_path / "tokens.json")})
    answer = _ask(gateway, ApiKey.CREATE_DELEGATION_TOKEN, 3, {
        "owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1})
    assert answer["error_code"] == KafkaError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED  # PLAINTEXT: no tokens
    [event] = _changes(tmp_path)
    assert (event["api_name"], event["decision"], event["count"], event["failed"], event["sample"]) == \
        ("CreateDelegationToken", "FAILED", 0, 1, [])
