"""The shadow ACL set in both stores, and its promotion: one rename (file) or one batch (security topic) that
every reader applies as one change, the replaced live set kept for a rollback."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from authz.acl_json import AclStoreError, encode_acl_file
from authz.authorizer import StandardAuthorizer
from authz.model import AclBinding, AclOperation
from gateway.stores.file_acls import FileAclStore, attach
from gateway.stores.security_records import (
    KIND_ROLLBACK_ACL,
    AppliedRecords,
    SecuritySnapshot,
    StoreRecord,
    acl_record,
    apply_records,
    shadow_acl_record,
)
from gateway.stores.shadow_acls import FileShadowAcls, FileShadowStore, TopicShadowAcls
from tests.authz.helpers import ALICE, HOST, TOPIC, acl

Op = AclOperation
ORDERS, AUDIT, PAYMENTS = acl("orders", Op.WRITE), acl("audit", Op.WRITE), acl("payments", Op.READ)


def _write(path: Path, *bindings: AclBinding) -> None:
    path.write_bytes(encode_acl_file(bindings))


class FakeTopic:
    """SecurityTopic's surface, sans-IO: each append is one batch applied by apply_records, as the tail does."""

    def __init__(self) -> None:
        self.snapshot = SecuritySnapshot()
        self.settings = SimpleNamespace(topic="_ksgate_security")
        self.lock = threading.RLock()
        self.batches: list[list[StoreRecord]] = []
        self._listeners: list[Callable[[AppliedRecords], None]] = []

    def subscribe(self, listener: Callable[[AppliedRecords], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener)

    def append(self, records: Sequence[StoreRecord]) -> int:
        if not records:
            return 0
        self.batches.append(list(records))
        applied = apply_records(self.snapshot, [(r.key, r.value) for r in records])
        self.snapshot = applied.state
        for listener in self._listeners:
            listener(applied)
        return len(self.batches)


# --- file store ------------------------------------------------------------------------------------------

def test_load_replaces_the_shadow_file_and_clear_removes_it(tmp_path: Path) -> None:
    sets = FileShadowAcls(tmp_path / "acls.json", tmp_path / "acls.shadow.json")
    change = sets.replace([ORDERS, AUDIT])
    assert change.added == [ORDERS, AUDIT] and sets.shadow_bindings() == [ORDERS, AUDIT]
    change = sets.replace([ORDERS, PAYMENTS])
    assert (change.added, change.removed) == ([PAYMENTS], [AUDIT])
    assert sets.clear().removed == [ORDERS, PAYMENTS]
    assert not (tmp_path / "acls.shadow.json").exists() and sets.shadow_bindings() == []


def test_promote_is_one_rename_that_a_polling_gateway_applies_as_one_change(tmp_path: Path) -> None:
    live_path, shadow_path = tmp_path / "acls.json", tmp_path / "acls.shadow.json"
    _write(live_path, ORDERS, AUDIT)
    gateway_store, authorizer = FileAclStore(live_path), StandardAuthorizer()
    attach(gateway_store, authorizer)
    applied: list[tuple[list[AclBinding], list[AclBinding]]] = []
    gateway_store.subscribe(lambda added, removed: applied.append((list(added), list(removed))))
    sets = FileShadowAcls(live_path, shadow_path)
    sets.replace([ORDERS, PAYMENTS])
    shadow_inode = os.stat(shadow_path).st_ino

    change = sets.promote()

    assert (change.added, change.removed) == ([PAYMENTS], [AUDIT])
    assert os.stat(live_path).st_ino == shadow_inode  # the shadow file itself became the live one
    assert not shadow_path.exists()
    assert sets.rollback_bindings() == [ORDERS, AUDIT]
    assert gateway_store.reload_if_changed()
    assert applied == [([PAYMENTS], [AUDIT])]  # one change, never a half-promoted set
    assert authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "payments").allowed
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, TOPIC, "audit").allowed


def test_rollback_restores_the_kept_set_and_keeps_the_one_it_replaces(tmp_path: Path) -> None:
    live_path = tmp_path / "acls.json"
    _write(live_path, ORDERS, AUDIT)
    sets = FileShadowAcls(live_path, tmp_path / "acls.shadow.json")
    sets.replace([ORDERS])
    sets.promote()
    change = sets.rollback()
    assert change.added == [AUDIT] and sets.live_bindings() == [ORDERS, AUDIT]
    assert sets.rollback_bindings() == [ORDERS]  # a second rollback undoes the first


def test_promote_without_a_shadow_set_refuses_and_changes_nothing(tmp_path: Path) -> None:
    live_path = tmp_path / "acls.json"
    _write(live_path, ORDERS)
    before = live_path.read_bytes()
    sets = FileShadowAcls(live_path, tmp_path / "acls.shadow.json")
    with pytest.raises(AclStoreError, match="no shadow ACL set"):
        sets.promote()
    with pytest.raises(AclStoreError, match="no kept ACL set"):
        sets.rollback()
    assert live_path.read_bytes() == before and not sets.rollback_path.exists()


def test_the_shadow_file_must_be_beside_the_live_one(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(AclStoreError, match="directory"):
        FileShadowAcls(tmp_path / "acls.json", tmp_path / "elsewhere" / "shadow.json")


def test_a_vanished_shadow_file_means_no_shadow_set(tmp_path: Path) -> None:
    path = tmp_path / "acls.shadow.json"
    _write(path, ORDERS)
    store = FileShadowStore(path)
    store.load()
    seen: list[Any] = []
    store.subscribe(lambda added, removed: seen.append((list(added), list(removed))))
    path.unlink()
    assert store.reload_if_changed() and store.bindings == [] and seen == [([], [ORDERS])]


# --- security topic --------------------------------------------------------------------------------------

def test_shadow_and_rollback_records_have_their_own_kinds_and_keys() -> None:
    shadow, live = shadow_acl_record(ORDERS), acl_record(ORDERS)
    kept = shadow_acl_record(ORDERS, True, KIND_ROLLBACK_ACL)
    assert len({shadow.key, kept.key, live.key}) == 3
    assert json.loads(shadow.key)["kind"] == "shadow_acl" and json.loads(kept.key)["kind"] == "rollback_acl"
    applied = apply_records(SecuritySnapshot(), [(shadow.key, shadow.value)])
    assert list(applied.state.shadow_acls) == [ORDERS] and not applied.state.acls
    assert applied.shadow_added == [ORDERS] and applied.acls_added == []


def test_topic_promote_is_one_batch_and_every_instance_applies_it_as_one_change() -> None:
    topic = FakeTopic()
    topic.append([acl_record(ORDERS), acl_record(AUDIT)])
    other_instance: list[tuple[list[AclBinding], list[AclBinding]]] = []
    topic.subscribe(lambda a: other_instance.append((a.acls_added, a.acls_removed))
                    if a.acls_added or a.acls_removed else None)
    sets = TopicShadowAcls(topic)  # type: ignore[arg-type]
    sets.replace([ORDERS, PAYMENTS])
    before = len(topic.batches)

    change = sets.promote()

    assert len(topic.batches) == before + 1  # one record batch: all of it or none of it
    assert (change.added, change.removed) == ([PAYMENTS], [AUDIT])
    assert other_instance == [([PAYMENTS], [AUDIT])]
    assert list(topic.snapshot.acls) == [ORDERS, PAYMENTS]
    assert not topic.snapshot.shadow_acls and set(topic.snapshot.rollback_acls) == {ORDERS, AUDIT}

    sets.rollback()
    assert set(topic.snapshot.acls) == {ORDERS, AUDIT} and set(topic.snapshot.rollback_acls) == {ORDERS, PAYMENTS}


def test_topic_rollback_of_a_promotion_from_no_acls_restores_no_acls() -> None:
    topic = FakeTopic()
    sets = TopicShadowAcls(topic)  # type: ignore[arg-type]
    with pytest.raises(AclStoreError, match="no kept ACL set"):
        sets.rollback()  # never promoted: nothing to return to (not "no ACLs")
    sets.replace([ORDERS])
    sets.promote()
    assert sets.rollback().removed == [ORDERS] and not topic.snapshot.acls


def test_topic_shadow_store_follows_the_records() -> None:
    topic = FakeTopic()
    sets = TopicShadowAcls(topic)  # type: ignore[arg-type]
    seen: list[Any] = []
    sets.shadow.subscribe(lambda added, removed: seen.append((list(added), list(removed))))
    sets.shadow.add([ORDERS, AUDIT])
    sets.shadow.remove_matching([AUDIT.to_filter()])
    assert sets.shadow_bindings() == [ORDERS]
    assert seen == [([ORDERS, AUDIT], []), ([], [AUDIT])]
    with pytest.raises(AclStoreError):
        TopicShadowAcls(FakeTopic()).promote()  # type: ignore[arg-type]


# --- the gateway's set-up ----------------------------------------------------------------------------------

def _gateway_authorization(tmp_path: Path, **extra: Any) -> Any:
    from gateway.config import build_config
    from gateway.stores.setup import build_authorization

    config = build_config({"upstream.bootstrap.servers": "b:9092", "authorizer.class.name": "StandardAuthorizer",
                           "ksgate.acl.file": str(tmp_path / "acls.json"), **extra})
    return build_authorization(config, lambda: None)


def test_without_ksgate_acl_shadow_file_a_file_store_gateway_has_no_shadow(tmp_path: Path) -> None:
    assert _gateway_authorization(tmp_path).shadow is None


def test_the_gateway_follows_its_shadow_file(tmp_path: Path) -> None:
    shadow_path = tmp_path / "acls.shadow.json"
    _write(shadow_path, ORDERS)
    shadow = _gateway_authorization(tmp_path, **{"ksgate.acl.shadow.file": str(shadow_path)}).shadow
    assert shadow.active and shadow.authorizer.authorize(ALICE, HOST, Op.WRITE, TOPIC, "orders").allowed
    _write(shadow_path, ORDERS, AUDIT)
    os.utime(shadow_path, ns=(1, 1))  # a changed signature even within the file system's time resolution
    shadow.refresh()
    assert shadow.authorizer.authorize(ALICE, HOST, Op.WRITE, TOPIC, "audit").allowed
    shadow_path.unlink()
    shadow.refresh()
    assert not shadow.active


def test_a_bad_shadow_file_does_not_stop_the_gateway(tmp_path: Path) -> None:
    shadow_path = tmp_path / "acls.shadow.json"
    shadow_path.write_text("not json")
    shadow = _gateway_authorization(tmp_path, **{"ksgate.acl.shadow.file": str(shadow_path)}).shadow
    assert shadow is not None and not shadow.active
    _write(shadow_path, ORDERS)  # fixed: picked up on the next poll
    shadow.refresh()
    assert shadow.active


def test_a_shadow_file_with_the_replicated_store_is_a_configuration_error(tmp_path: Path) -> None:
    from gateway.config import ConfigError, build_config

    with pytest.raises(ConfigError, match=r"ksgate\.acl\.shadow\.file"):
        build_config({"upstream.bootstrap.servers": "b:9092", "authorizer.class.name": "StandardAuthorizer",
                      "ksgate.security.store": "KAFKA", "ksgate.acl.shadow.file": str(tmp_path / "s.json")})
