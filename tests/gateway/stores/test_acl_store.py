"""FileAclStore: atomic writes that survive a crash, external edits picked up, bad files never applied."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest

from authz.acl_json import AclStoreError, decode_acl_file, encode_acl_file
from authz.authorizer import StandardAuthorizer
from authz.model import AclBinding, AclBindingFilter, AclValidationError, PatternType, ResourcePatternFilter
from gateway.stores.file_acls import FileAclStore, attach
from tests.authz.helpers import ALICE, DENY, HOST, PREFIXED, TOPIC, Op, acl

Change = tuple[list[AclBinding], list[AclBinding]]


class Recorder:
    def __init__(self) -> None:
        self.changes: list[Change] = []

    def __call__(self, added: Sequence[AclBinding], removed: Sequence[AclBinding]) -> None:
        self.changes.append((list(added), list(removed)))


def edit_externally(path: Path, bindings: list[AclBinding] | None = None, raw: bytes | None = None) -> None:
    """What an operator's editor does: write a new file and rename it over the old one."""
    data = raw if raw is not None else encode_acl_file(bindings or [])
    tmp = path.with_name("editor.swp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "acls.json"


def test_added_bindings_are_persisted_with_mode_0600(path: Path) -> None:
    store = FileAclStore(path)
    assert store.load() == []
    store.add([acl("orders"), acl("orders"), acl("pay", Op.WRITE, pattern=PREFIXED)])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert FileAclStore(path).load() == [acl("orders"), acl("pay", Op.WRITE, pattern=PREFIXED)]
    document = json.loads(path.read_text())
    assert document["version"] == 1
    assert document["acls"][0] == {"resourceType": "TOPIC", "resourceName": "orders", "patternType": "LITERAL",
                                   "principal": "User:alice", "host": "*", "operation": "READ",
                                   "permissionType": "ALLOW"}


def test_add_validates_every_binding_before_writing(path: Path) -> None:
    store = FileAclStore(path)
    with pytest.raises(AclValidationError):
        store.add([acl("ok"), acl("bad", principal="nocolon")])
    assert not path.exists()


def test_remove_matching_returns_what_it_removed(path: Path) -> None:
    store = FileAclStore(path)
    store.add([acl("orders"), acl("ord", pattern=PREFIXED), acl("payments"), acl("*", Op.WRITE)])
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH))
    assert set(store.remove_matching([match])) == {acl("orders"), acl("ord", pattern=PREFIXED), acl("*", Op.WRITE)}
    assert FileAclStore(path).load() == [acl("payments")]
    assert store.remove_matching([match]) == []


def test_a_crash_during_replace_leaves_the_previous_file_intact(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileAclStore(path)
    store.add([acl("orders")])
    before = path.read_bytes()
    recorder = Recorder()
    store.subscribe(recorder)

    def crash(src: str, dst: str) -> None:
        raise OSError("simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(AclStoreError, match="simulated crash"):
        store.add([acl("orders", Op.READ, DENY)])
    with pytest.raises(AclStoreError):
        store.remove_matching([AclBindingFilter.ANY])
    monkeypatch.undo()

    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["acls.json"]  # no temp file left behind
    assert store.bindings == [acl("orders")]  # the in-memory state did not move either
    assert recorder.changes == []
    assert FileAclStore(path).load() == [acl("orders")]


def test_write_is_fsynced_and_renamed(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        calls.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    FileAclStore(path).add([acl("orders")])
    assert calls == ["fsync", "replace", "fsync"]  # file data, rename, then the directory entry


def test_external_edits_are_picked_up_and_announced(path: Path) -> None:
    store = FileAclStore(path)
    store.add([acl("orders"), acl("payments")])
    recorder = Recorder()
    store.subscribe(recorder)
    assert store.reload_if_changed() is False  # our own write is not an external edit
    edit_externally(path, [acl("orders"), acl("shipments", Op.WRITE)])
    assert store.reload_if_changed() is True
    assert recorder.changes == [([acl("shipments", Op.WRITE)], [acl("payments")])]
    assert store.reload_if_changed() is False


def test_a_corrupt_file_keeps_the_last_good_state_and_is_logged_once(
        path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = FileAclStore(path)
    store.add([acl("orders", Op.READ, DENY)])
    recorder = Recorder()
    store.subscribe(recorder)
    caplog.set_level(logging.ERROR, logger="ksgate.authz")
    edit_externally(path, raw=b'{"version": 1, "acls": [{"resourceType": "TOPIC", ')
    assert store.reload_if_changed() is False
    assert store.reload_if_changed() is False
    assert store.bindings == [acl("orders", Op.READ, DENY)]
    errors = [r for r in caplog.records if r.name == "ksgate.authz"]
    assert len(errors) == 1 and "not valid JSON" in errors[0].getMessage()
    with pytest.raises(AclStoreError, match="fix it"):
        store.add([acl("x")])  # never overwrite an operator's half-finished edit
    edit_externally(path, [acl("orders")])
    assert store.reload_if_changed() is True
    assert recorder.changes == [([acl("orders")], [acl("orders", Op.READ, DENY)])]


def test_an_invalid_binding_rejects_the_whole_file(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = FileAclStore(path)
    store.add([acl("orders")])
    good = json.loads(path.read_text())
    good["acls"].append({**good["acls"][0], "resourceName": "other", "principal": "alice"})
    edit_externally(path, raw=json.dumps(good).encode())
    caplog.set_level(logging.ERROR, logger="ksgate.authz")
    assert store.reload_if_changed() is False
    assert store.bindings == [acl("orders")]
    assert "acls[1]: Could not parse principal" in caplog.text


def test_a_vanished_file_keeps_the_last_good_state(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = FileAclStore(path)
    store.add([acl("orders", Op.ALL, DENY, principal="User:*")])
    path.unlink()
    caplog.set_level(logging.ERROR, logger="ksgate.authz")
    assert store.reload_if_changed() is False
    assert store.bindings == [acl("orders", Op.ALL, DENY, principal="User:*")]
    assert "disappeared" in caplog.text


def test_loading_a_bad_file_fails_loudly(path: Path) -> None:
    path.write_text("[]")
    with pytest.raises(AclStoreError, match='"acls" list'):
        FileAclStore(path).load()


def test_the_file_accepts_any_case_names_and_wire_codes(path: Path) -> None:
    path.write_text(json.dumps({"acls": [
        {"resourceType": "topic", "resourceName": "t", "patternType": "Prefixed", "principal": "User:alice",
         "operation": "DescribeConfigs", "permissionType": "allow"},
        {"resourceType": 2, "resourceName": "t", "patternType": 3, "principal": "User:alice", "host": "*",
         "operation": 3, "permissionType": 3}]}))
    assert FileAclStore(path).load() == [acl("t", Op.DESCRIBE_CONFIGS, pattern=PREFIXED), acl("t")]


def test_decode_refuses_unknown_versions_and_codes() -> None:
    with pytest.raises(AclStoreError, match="unsupported version"):
        decode_acl_file(b'{"version": 2, "acls": []}')
    with pytest.raises(AclStoreError, match="unknown code 99"):
        decode_acl_file(b'{"acls": [{"resourceType": 99, "resourceName": "t", "principal": "User:a",'
                        b' "operation": "READ", "permissionType": "ALLOW"}]}')


def test_attach_keeps_an_authorizer_in_step_with_the_store(path: Path) -> None:
    store = FileAclStore(path)
    store.add([acl("orders")])
    authorizer = StandardAuthorizer(set(), False)
    unsubscribe = attach(store, authorizer)
    assert authorizer.ready and authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders").allowed
    store.add([acl("ord", Op.READ, DENY, pattern=PREFIXED)])
    assert not authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders").allowed
    edit_externally(path, [acl("orders")])
    store.reload_if_changed()
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders").allowed
    unsubscribe()
    store.add([acl("orders", Op.READ, DENY)])
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders").allowed


def test_a_failing_listener_does_not_stop_the_others(path: Path) -> None:
    store = FileAclStore(path)
    recorder = Recorder()

    def broken(added: Sequence[AclBinding], removed: Sequence[AclBinding]) -> None:
        raise RuntimeError("boom")

    store.subscribe(broken)
    store.subscribe(recorder)
    store.add([acl("orders")])
    assert recorder.changes == [([acl("orders")], [])]
