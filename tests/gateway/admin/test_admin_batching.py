"""One admin request, one store write: CreateAcls/DeleteAcls of many ACLs through a session, on the
file store and on the replicated store, and AlterUserScramCredentials of many users; the request
lands whole or each item says it did not."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import gateway.stores.file_acls as file_acls
import gateway.stores.file_users as file_users
import gateway.stores.json_file as json_file
from auth.sasl.scram import MIN_ITERATIONS
from authz.acl_json import AclStoreError
from authz.authorizer import StandardAuthorizer
from authz.model import (
    AccessControlEntryFilter,
    AclBindingFilter,
    AclOperation,
    PatternType,
    ResourcePatternFilter,
)
from gateway.admin.acls import create_acls, delete_acls
from gateway.admin.scram_credentials import alter_user_scram_credentials
from gateway.server import Gateway
from gateway.session import actions as act
from gateway.stores.file_acls import FileAclStore, attach
from gateway.stores.file_users import FileCredentialStore
from gateway.stores.replicated import TopicAclStore
from gateway.stores.security_records import AppliedRecords, SecuritySnapshot, StoreRecord, apply_records
from gateway.stores.security_topic import StoreTopicSettings
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from protocol.messages import request_frame
from tests.authz.helpers import acl
from tests.gateway.session.session_driver import Driver, gateway_for

TOPIC, LITERAL, PREFIXED, ANY, ALLOW, READ, WRITE = 2, 3, 4, 1, 3, 3, 4
MANY = 300


def creation(name: str, operation: int = READ, pattern: int = LITERAL) -> dict[str, Any]:
    return {"resource_type": TOPIC, "resource_name": name, "resource_pattern_type": pattern,
            "principal": "User:bench", "host": "*", "operation": operation, "permission_type": ALLOW}


def exact_filter(name: str) -> dict[str, Any]:
    return {"resource_type_filter": TOPIC, "resource_name_filter": name, "pattern_type_filter": LITERAL,
            "principal_filter": "User:bench", "host_filter": "*", "operation": READ, "permission_type": ALLOW}


def counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every ACL file write, by path."""
    writes: list[Path] = []
    real = json_file.write_atomically

    def write(path: Path, data: bytes, mode: int = 0o600) -> None:
        writes.append(path)
        real(path, data, mode)

    monkeypatch.setattr(json_file, "write_atomically", write)
    return writes


@pytest.fixture
def admin_gateway(tmp_path: Path) -> Gateway:
    return gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer",
                                    "ksgate.acl.file": str(tmp_path / "acls.json"),
                                    "super.users": "User:ANONYMOUS"})


def _ask(gateway: Gateway, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
    driver = Driver.connect(gateway)
    driver.send(request_frame(api_key, 3, 1, body))
    driver.run_job(act.JobKind.STORE)
    [(_, answer)] = driver.responses(api_key, 3, count=1)
    return answer


def test_create_acls_of_many_bindings_is_one_file_write_and_one_authorizer_change(
        admin_gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    writes = counting(monkeypatch)
    assert admin_gateway.ctx.authorization is not None
    changes: list[int] = []
    admin_gateway.ctx.authorization.store.subscribe(lambda added, removed: changes.append(len(added)))
    answer = _ask(admin_gateway, ApiKey.CREATE_ACLS, {"creations": [creation(f"t{i}") for i in range(MANY)]})
    assert [r["error_code"] for r in answer["results"]] == [KafkaError.NONE] * MANY
    assert len(writes) == 1
    assert changes == [MANY]  # the index takes the request as one change, not MANY
    assert admin_gateway.ctx.authorization.authorizer.acl_count == MANY


def test_delete_acls_of_many_filters_is_one_file_write(admin_gateway: Gateway,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _ask(admin_gateway, ApiKey.CREATE_ACLS, {"creations": [creation(f"t{i}") for i in range(MANY)]})
    writes = counting(monkeypatch)
    answer = _ask(admin_gateway, ApiKey.DELETE_ACLS, {"filters": [exact_filter(f"t{i}") for i in range(MANY)]})
    assert [[m["resource_name"] for m in r["matching_acls"]] for r in answer["filter_results"]] == \
        [[f"t{i}"] for i in range(MANY)]
    assert len(writes) == 1
    assert admin_gateway.ctx.authorization is not None
    assert admin_gateway.ctx.authorization.authorizer.acl_count == 0


def test_an_invalid_creation_fails_alone_and_the_rest_land_in_one_write(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileAclStore(tmp_path / "acls.json")
    writes = counting(monkeypatch)
    bad = {**creation("x"), "principal": "no-colon"}
    answer = create_acls(store, {"creations": [creation("a"), bad, creation("b")]}, 3)
    assert [r["error_code"] for r in answer["results"]] == [KafkaError.NONE, KafkaError.INVALID_REQUEST,
                                                           KafkaError.NONE]
    assert len(writes) == 1 and {b.pattern.name for b in store.bindings} == {"a", "b"}


def test_a_failed_write_fails_every_valid_item_and_changes_nothing(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileAclStore(tmp_path / "acls.json")
    authorizer = StandardAuthorizer()
    attach(store, authorizer)

    def refuse(path: Path, data: bytes, mode: int = 0o600) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(json_file, "write_atomically", refuse)
    bad = {**creation("x"), "host": ""}
    answer = create_acls(store, {"creations": [creation("a"), bad, creation("b")]}, 3)
    codes = [r["error_code"] for r in answer["results"]]
    assert codes == [KafkaError.UNKNOWN_SERVER_ERROR, KafkaError.INVALID_REQUEST, KafkaError.UNKNOWN_SERVER_ERROR]
    assert "disk full" in answer["results"][0]["error_message"]
    assert store.bindings == [] and authorizer.acl_count == 0


def test_each_delete_filter_matches_the_acls_as_they_were_before_the_request(tmp_path: Path) -> None:
    store = FileAclStore(tmp_path / "acls.json")
    store.add([acl("orders"), acl("orders", AclOperation.WRITE), acl("other")])
    by_name = {"resource_type_filter": TOPIC, "resource_name_filter": "orders", "pattern_type_filter": LITERAL,
               "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY}
    answer = delete_acls(store, {"filters": [by_name, by_name, {**by_name, "pattern_type_filter": 0}]}, 3)
    first, second, unknown = answer["filter_results"]
    # As Kafka's controller: an ACL two filters match is listed under both.
    assert len(first["matching_acls"]) == 2 and second["matching_acls"] == first["matching_acls"]
    assert unknown["error_code"] == KafkaError.INVALID_REQUEST
    assert [b.pattern.name for b in store.bindings] == ["other"]


def test_an_exact_filter_and_a_scanning_filter_find_the_same_acls(tmp_path: Path) -> None:
    bindings = [acl("orders"), acl("orders", AclOperation.WRITE), acl("ord", pattern=PatternType.PREFIXED), acl("*")]
    exact = [b.to_filter() for b in bindings]
    scanning = [AclBindingFilter(ResourcePatternFilter(f.pattern_filter.resource_type, f.pattern_filter.name),
                                 AccessControlEntryFilter(f.entry_filter.principal, None, f.entry_filter.operation,
                                                          f.entry_filter.permission_type)) for f in exact]
    assert all(f.exact_binding() is not None for f in exact) and all(f.exact_binding() is None for f in scanning)
    assert file_acls.matches_per_filter(bindings, exact) == [[b] for b in bindings]
    assert file_acls.matches_per_filter(bindings, scanning) == [[b] for b in bindings]
    assert file_acls.matches_per_filter(bindings[:1], [bindings[1].to_filter()]) == [[]]


# --- the replicated store: one batch of records per request -----------------------------------

class FakeTopic:
    """SecurityTopic's part TopicAclStore uses: ``append`` applies at once, and counts."""

    def __init__(self) -> None:
        self.settings = StoreTopicSettings(topic="_ksgate_security_test")
        self.snapshot = SecuritySnapshot()
        self.appends: list[int] = []
        self._listeners: list[Callable[[AppliedRecords], None]] = []

    def append(self, records: Sequence[StoreRecord]) -> int:
        if records:
            self.appends.append(len(records))
            applied = apply_records(self.snapshot, [(r.key, r.value) for r in records])
            self.snapshot = applied.state
            for listener in self._listeners:
                listener(applied)
        return 0

    def subscribe(self, listener: Callable[[AppliedRecords], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: None


def test_the_replicated_store_writes_one_batch_per_request() -> None:
    topic = FakeTopic()
    store = TopicAclStore(topic)  # type: ignore[arg-type]
    authorizer = StandardAuthorizer()
    attach(store, authorizer)
    created = create_acls(store, {"creations": [creation(f"t{i}") for i in range(MANY)]}, 3)
    assert all(r["error_code"] == KafkaError.NONE for r in created["results"])
    deleted = delete_acls(store, {"filters": [exact_filter(f"t{i}") for i in range(0, MANY, 2)]}, 3)
    assert all(len(r["matching_acls"]) == 1 for r in deleted["filter_results"])
    assert topic.appends == [MANY, MANY // 2]
    assert authorizer.acl_count == MANY // 2


def test_a_refused_batch_fails_every_valid_item_of_the_request() -> None:
    topic = FakeTopic()
    store = TopicAclStore(topic)  # type: ignore[arg-type]

    def refuse(records: Sequence[StoreRecord]) -> int:
        from gateway.stores.security_topic import StoreWriteError
        raise StoreWriteError("the security topic did not acknowledge the write in time")

    topic.append = refuse  # type: ignore[method-assign]
    answer = create_acls(store, {"creations": [creation("a"), creation("b")]}, 3)
    assert [r["error_code"] for r in answer["results"]] == [KafkaError.UNKNOWN_SERVER_ERROR] * 2
    assert topic.snapshot.acls == {}


def test_the_acl_file_holds_the_whole_request_after_its_one_write(admin_gateway: Gateway, tmp_path: Path) -> None:
    _ask(admin_gateway, ApiKey.CREATE_ACLS, {"creations": [creation(f"t{i}") for i in range(MANY)]
                                             + [creation("p-", WRITE, PREFIXED)]})
    saved = json.loads((tmp_path / "acls.json").read_text())["acls"]
    assert len(saved) == MANY + 1


def test_store_errors_are_acl_store_errors() -> None:
    # The handlers turn exactly this type into per-item errors: the replicated store must raise it.
    topic = FakeTopic()
    store = TopicAclStore(topic)  # type: ignore[arg-type]

    def refuse(records: Sequence[StoreRecord]) -> int:
        from gateway.stores.security_topic import StoreWriteError
        raise StoreWriteError("down")

    topic.append = refuse  # type: ignore[method-assign]
    with pytest.raises(AclStoreError):
        store.add([acl("a")])


# --- SCRAM credentials: one write per AlterUserScramCredentials -------------------------------

def upsertion(name: str) -> dict[str, Any]:
    return {"name": name, "mechanism": 2, "iterations": MIN_ITERATIONS, "salt": b"s" * 16,
            "salted_password": b"p" * 64}


def test_alter_scram_of_many_users_is_one_credential_file_write(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileCredentialStore(tmp_path / "users.json")
    writes: list[Path] = []
    real = file_users._write_atomic
    monkeypatch.setattr(file_users, "_write_atomic", lambda path, data: (writes.append(path), real(path, data)))
    answer = alter_user_scram_credentials(store, {"deletions": [], "upsertions": [upsertion(f"u{i}")
                                                                                 for i in range(MANY)]}, 0)
    assert [r["error_code"] for r in answer["results"]] == [KafkaError.NONE] * MANY
    assert len(writes) == 1 and len(store.users()) == MANY


def test_a_user_name_the_store_refuses_fails_alone(tmp_path: Path) -> None:
    store = FileCredentialStore(tmp_path / "users.json")
    answer = alter_user_scram_credentials(store, {"deletions": [], "upsertions": [
        upsertion("alice"), upsertion("bad\nname"), upsertion("bob")]}, 0)
    assert [(r["user"], r["error_code"]) for r in answer["results"]] == [
        ("alice", KafkaError.NONE), ("bad\nname", KafkaError.UNACCEPTABLE_CREDENTIAL), ("bob", KafkaError.NONE)]
    assert store.users() == ["alice", "bob"]
