"""Where quotas live: the quota file (ksgate.quota.file) and the replicated store's quota records."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gateway.quotas.model import QuotaEntity
from gateway.quotas.state import QuotaState
from gateway.stores.file_quotas import FileQuotaStore, QuotaStoreError
from gateway.stores.security_records import SecuritySnapshot, StoreRecordError, apply_records, quota_record

ALICE = QuotaEntity.of([("user", "alice")])
ALICE_APP = QuotaEntity.of([("user", "alice"), ("client-id", "app")])
DEFAULT_CLIENT = QuotaEntity.of([("client-id", None)])


def test_changes_persist_and_a_fresh_store_reads_them_back(tmp_path: Path) -> None:
    path = tmp_path / "quotas.json"
    store = FileQuotaStore(path)
    store.load()
    store.alter([(ALICE, {"producer_byte_rate": 1048576.0}), (DEFAULT_CLIENT, {"consumer_byte_rate": 2000.0})])
    store.alter([(ALICE, {"request_percentage": 50.0})])
    assert os.stat(path).st_mode & 0o777 == 0o600
    again = FileQuotaStore(path)
    assert again.load() == {ALICE: {"producer_byte_rate": 1048576.0, "request_percentage": 50.0},
                            DEFAULT_CLIENT: {"consumer_byte_rate": 2000.0}}
    assert json.loads(path.read_text())["quotas"][0] == {"entity": {"client-id": None},
                                                         "values": {"consumer_byte_rate": 2000}}


def test_removing_an_entitys_last_key_removes_the_entity(tmp_path: Path) -> None:
    store = FileQuotaStore(tmp_path / "quotas.json")
    store.alter([(ALICE_APP, {"producer_byte_rate": 10.0})])
    store.alter([(ALICE_APP, {"producer_byte_rate": None, "consumer_byte_rate": None})])
    assert store.quotas() == {}
    assert FileQuotaStore(tmp_path / "quotas.json").load() == {}


def test_listeners_get_each_new_state(tmp_path: Path) -> None:
    store = FileQuotaStore(tmp_path / "quotas.json")
    seen: list[QuotaState] = []
    store.subscribe(seen.append)
    store.alter([(ALICE, {"producer_byte_rate": 10.0})])
    store.alter([(ALICE, {"producer_byte_rate": 10.0})])  # no change: no call
    store.alter([(ALICE, {"producer_byte_rate": None})])
    assert seen == [{ALICE: {"producer_byte_rate": 10.0}}, {}]


def test_an_external_edit_is_picked_up_and_a_bad_one_keeps_the_last_good_state(tmp_path: Path) -> None:
    path = tmp_path / "quotas.json"
    store = FileQuotaStore(path)
    store.alter([(ALICE, {"producer_byte_rate": 10.0})])
    path.write_text(json.dumps({"version": 1, "quotas": [{"entity": {"user": "bob"},
                                                           "values": {"consumer_byte_rate": 5}}]}))
    assert store.reload_if_changed()
    assert store.quotas() == {QuotaEntity.of([("user", "bob")]): {"consumer_byte_rate": 5.0}}
    path.write_text(json.dumps({"version": 1, "quotas": [{"entity": {"user": "bob"},
                                                           "values": {"producer_byte_rate": 1.5}}]}))
    assert not store.reload_if_changed()
    assert store.quotas() == {QuotaEntity.of([("user", "bob")]): {"consumer_byte_rate": 5.0}}
    with pytest.raises(QuotaStoreError, match="fix it before changing quotas"):
        store.alter([(ALICE, {"producer_byte_rate": 10.0})])


@pytest.mark.parametrize(("document", "problem"), [
    ("{", "not JSON"),
    ('{"version": 2, "quotas": []}', "expected"),
    ('{"version": 1, "quotas": [{"entity": {"user": "a", "ip": "1.2.3.4"}, "values": {"producer_byte_rate": 1}}]}',
     "IP entity shouldnot be combined"),
    ('{"version": 1, "quotas": [{"entity": {"ip": "1.2.3.4"}, "values": {"producer_byte_rate": 1}}]}',
     "Invalid configuration key producer_byte_rate"),
    ('{"version": 1, "quotas": [{"entity": {"user": "a"}, "values": {}}]}', "non-empty"),
    ('{"version": 1, "quotas": [{"entity": {"user": "a"}, "values": {"producer_byte_rate": true}}]}',
     "must be a number"),
    ('{"version": 1, "quotas": [{"entity": {"user": "a"}, "values": {"producer_byte_rate": 1}}, '
     '{"entity": {"user": "a"}, "values": {"consumer_byte_rate": 1}}]}', "listed twice"),
])
def test_a_file_kafka_would_refuse_does_not_load(tmp_path: Path, document: str, problem: str) -> None:
    path = tmp_path / "quotas.json"
    path.write_text(document)
    with pytest.raises(QuotaStoreError, match=problem):
        FileQuotaStore(path).load()


def test_quota_records_add_up_to_the_state_and_a_tombstone_deletes() -> None:
    records = [quota_record(ALICE, {"producer_byte_rate": 10.0}),
               quota_record(DEFAULT_CLIENT, {"consumer_byte_rate": 3.0}), quota_record(ALICE, None)]
    applied = apply_records(SecuritySnapshot(), [(r.key, r.value) for r in records])
    assert applied.state.quotas == {DEFAULT_CLIENT: {"consumer_byte_rate": 3.0}}
    assert applied.quotas_changed
    assert records[0].key == records[2].key  # compaction keeps only an entity's latest record
    assert records[2].value is None


def test_a_run_without_quota_records_says_quotas_did_not_change() -> None:
    applied = apply_records(SecuritySnapshot(), [])
    assert not applied.quotas_changed


def test_a_quota_record_kafka_would_refuse_stalls_rather_than_applies() -> None:
    bad = quota_record(ALICE, {"producer_byte_rate": 1.5})
    with pytest.raises(StoreRecordError, match="fractional"):
        apply_records(SecuritySnapshot(), [(bad.key, bad.value)])


def test_a_bad_quota_file_stops_the_start_and_a_good_one_fills_the_book(tmp_path: Path) -> None:
    from gateway.config import ConfigError, build_config
    from gateway.quotas.book import QuotaBook
    from gateway.stores.setup import follow_quotas, quota_store

    path = tmp_path / "quotas.json"
    config = build_config({"upstream.bootstrap.servers": "b:9092", "ksgate.quota.file": str(path)})
    path.write_text('{"version": 1, "quotas": [{"entity": {"user": "a"}, "values": {"producer_byte_rate": 0}}]}')
    with pytest.raises(ConfigError, match=r"ksgate\.quota\.file: .*must be greater than 0"):
        quota_store(config)
    path.write_text('{"version": 1, "quotas": [{"entity": {"user": "a"}, "values": {"producer_byte_rate": 5}}]}')
    store, book = quota_store(config), QuotaBook()
    assert store is not None
    follow_quotas(store, book)
    assert book.lookup("a", "", "producer_byte_rate") == (5.0, "user=a")
    store.alter([(ALICE, {"producer_byte_rate": 7.0})])
    assert book.lookup("alice", "", "producer_byte_rate") == (7.0, "user=alice")
    unset = quota_store(build_config({"upstream.bootstrap.servers": "b:9092"}))
    assert unset.quotas() == {}
    with pytest.raises(QuotaStoreError, match=r"ksgate\.quota\.file"):
        unset.alter([(ALICE, {"producer_byte_rate": 7.0})])
