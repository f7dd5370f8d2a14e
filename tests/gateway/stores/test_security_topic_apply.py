"""SecurityTopic's tail logic fed Fetch answers directly (no broker): order, offsets, loading, stalling."""

from __future__ import annotations

import time
from typing import Any

import pytest

from authz.model import AclBinding
from gateway.config import UpstreamConfig
from gateway.stores.replicated import TopicAclStore
from gateway.stores.security_records import AppliedRecords, StoreRecord, acl_record
from gateway.stores.security_topic import (
    MAX_CHANGE_BYTES,
    SecurityTopic,
    StoreTopicSettings,
    StoreWriteError,
    encode_change,
)
from protocol.record_batch import decode_batches, encode_batch
from tests.authz.helpers import acl

OFFSET_OUT_OF_RANGE = 1


def _topic() -> SecurityTopic:
    return SecurityTopic(UpstreamConfig(bootstrap_servers=(("127.0.0.1", 9),)), None, StoreTopicSettings())


def _binding(name: str) -> AclBinding:
    return acl(name)


def _batch(base_offset: int, *records: StoreRecord) -> bytes:
    return encode_batch([(r.key, r.value) for r in records], timestamp_ms=1, base_offset=base_offset)


def _answer(records: bytes | None, high_watermark: int, error: int = 0) -> dict[str, Any]:
    return {"partition_index": 0, "error_code": error, "high_watermark": high_watermark, "records": records}


def test_records_apply_in_order_and_the_store_is_loaded_once_it_reaches_the_end() -> None:
    topic = _topic()
    seen: list[AppliedRecords] = []
    topic.subscribe(seen.append)
    topic._take(_answer(_batch(0, acl_record(_binding("a")), acl_record(_binding("b"))), high_watermark=3))
    assert list(topic.snapshot.acls) == [_binding("a"), _binding("b")]
    assert topic.next_offset == 2 and not topic.loaded and topic.lag_seconds() >= 0
    topic._take(_answer(_batch(2, acl_record(_binding("a"), present=False)), high_watermark=3))
    assert list(topic.snapshot.acls) == [_binding("b")]
    assert topic.next_offset == 3 and topic.loaded and topic.lag_seconds() == 0
    assert [(s.acls_added, s.acls_removed) for s in seen] == [([_binding("a"), _binding("b")], []),
                                                              ([], [_binding("a")])]


def test_a_batch_fetched_again_from_an_earlier_offset_is_not_applied_twice() -> None:
    topic = _topic()
    batch = _batch(0, acl_record(_binding("a")), acl_record(_binding("a"), present=False))
    topic._take(_answer(batch, high_watermark=2))
    assert topic.next_offset == 2 and not topic.snapshot.acls
    # A broker returns whole batches, so a fetch from offset 1 can repeat offset 0: skipped.
    topic.next_offset = 1
    topic._take(_answer(batch, high_watermark=2))
    assert not topic.snapshot.acls and topic.next_offset == 2


def test_an_empty_topic_is_loaded_at_once_and_a_silent_answer_changes_nothing() -> None:
    topic = _topic()
    topic._take(None)
    assert not topic.loaded
    topic._take(_answer(None, high_watermark=0))
    assert topic.loaded and topic.next_offset == 0


def test_a_record_that_cannot_be_read_stalls_the_store_on_its_last_good_state() -> None:
    topic = _topic()
    topic._take(_answer(_batch(0, acl_record(_binding("kept"))), high_watermark=1))
    bad = StoreRecord(b'{"kind":"acl","resourceType":"NOPE"}', b'{"v":1}')
    topic._take(_answer(_batch(1, acl_record(_binding("after")), bad), high_watermark=3))
    assert topic.stalled is not None and "after offset 1" in topic.stalled
    assert list(topic.snapshot.acls) == [_binding("kept")] and topic.next_offset == 1
    assert TopicAclStore(topic).load() == [_binding("kept")]
    # Nothing later is applied out of order while stalled.
    topic._take(_answer(_batch(3, acl_record(_binding("later"))), high_watermark=4))
    assert list(topic.snapshot.acls) == [_binding("kept")]


def test_a_truncated_or_recreated_topic_stalls_instead_of_dropping_rules() -> None:
    topic = _topic()
    topic._take(_answer(_batch(0, acl_record(_binding("deny-rule"))), high_watermark=1))
    topic._take(_answer(None, high_watermark=0, error=OFFSET_OUT_OF_RANGE))
    assert topic.stalled is not None and "out of range" in topic.stalled
    assert list(topic.snapshot.acls) == [_binding("deny-rule")]


def test_lag_counts_from_when_the_tail_fell_behind() -> None:
    topic = _topic()
    topic._take(_answer(_batch(0, acl_record(_binding("a"))), high_watermark=5))
    assert topic.behind_since is not None
    assert topic.lag_seconds(now=topic.behind_since + 1.5) == 1.5
    topic._take(_answer(_batch(1, acl_record(_binding("b"))), high_watermark=2))
    assert topic.lag_seconds(now=time.monotonic() + 100) == 0


def test_one_change_of_many_acls_is_one_compressed_batch_that_reads_back_whole() -> None:
    records = [acl_record(_binding(f"orders-eu-west-{i}")) for i in range(5000)]
    batch = encode_change(records, 1)
    assert [(r.key, r.value) for r in decode_batches(batch)] == [(r.key, r.value) for r in records]
    assert len(batch) < 100_000  # ~190 bytes an ACL before gzip: far under Kafka's 1 MiB default


def test_a_change_too_large_to_read_back_is_refused_before_anything_is_written() -> None:
    big = StoreRecord(b"k" * 1000, b"v" * 1000)
    with pytest.raises(StoreWriteError, match="split the request"):
        encode_change([big] * (MAX_CHANGE_BYTES // 2000 + 1), 1)
