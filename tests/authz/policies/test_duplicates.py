"""Requests naming a topic or partition twice under partial authorization, answered as Kafka 4.4 answers them
(measured on the wire: tests/conformance, the ``*.dup_topics`` and ``*.dup_partition`` cases).

Produce, Fetch and DeleteRecords read their items into maps keyed by topic-partition, so each is answered once;
OffsetCommit, TxnOffsetCommit and OffsetDelete answer each partition asked, but in one entry per topic once
their response builder holds an error entry.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from authz.model import AclOperation as Op
from authz.model import ResourceType as RT
from authz.policies import rules
from authz.policies.data import authorize_fetch
from authz.policies.groups import authorize_offset_commit, authorize_offset_delete, authorize_txn_offset_commit
from authz.policies.produce import authorize_produce
from authz.request_policy import Action, Answer, Body, Rewrite, Verdict
from authz.response_defaults import default_item, default_response
from protocol.api_keys import ApiKey
from protocol.record_batch import encode_batch
from protocol.registry import api
from tests.authz.fake_view import FakeView
from tests.conformance.bodies import request_body

DENIED = 29  # TOPIC_AUTHORIZATION_FAILED
IDS = {"a": uuid.UUID(int=1), "d": uuid.UUID(int=2)}
NAMES = {topic_id: name for name, topic_id in IDS.items()}
RECORDS = encode_batch([(b"k", b"v")], timestamp_ms=1)
TWICE = [("a", [0]), ("d", [0]), ("a", [0]), ("d", [0, 0])]  # allowed, denied, both again; a partition twice


def view(*actions: Action) -> FakeView:
    return FakeView(actions, topics=NAMES)


def may(operation: Op, *names: str) -> list[Action]:
    return [Action(operation, RT.TOPIC, name) for name in names]


def decoded(key: ApiKey, version: int, body: Body, *, response: bool = False) -> Body:
    """``body`` through the version's codec, as the gateway would see it (and proof that it encodes)."""
    schema = api(key)
    assert schema is not None
    if response:
        codec = schema.response_codec(version)
    else:  # a template: the fields it leaves out at the version's defaults
        codec, body = schema.request_codec(version), request_body(key, version, body)
    return codec.decode(bytes(codec.encode(body)))


def partitions(key: ApiKey, version: int, answer: Body, topics: str, parts: str, index: str) -> list[tuple[Any, ...]]:
    """(topic, partition, error) per partition answered, the topic by name (by id from the versions naming ids)."""
    def name(topic: Body) -> Any:
        return topic.get("name") or topic.get("topic") or NAMES.get(topic.get("topic_id"))  # type: ignore[arg-type]
    body = decoded(key, version, answer, response=True)
    return [(name(t), p[index], p["error_code"]) for t in body[topics] for p in t[parts]]


def upstream(key: ApiKey, version: int, topics: str, parts: str, *names: str, **partition: Any) -> Body:
    """The upstream's answer: an entry per name, each with partition 0 (``partition``'s fields), at defaults."""
    body = default_response(key, version)
    body[topics] = [{**default_item(key, version, topics), "name": n, "topic": n, "topic_id": IDS[n],
                     parts: [{**default_item(key, version, topics, parts), **partition}]} for n in names]
    return body


def upstream_of(verdict: Verdict, answer: Body) -> Body:
    assert isinstance(verdict, Rewrite) and verdict.on_response is not None, verdict
    return verdict.on_response(answer)


def answered(verdict: Verdict) -> Body:
    assert isinstance(verdict, Answer), verdict
    return verdict.response


# --- Produce ------------------------------------------------------------------------------------------------

def produce(version: int, items: list[tuple[str, list[int]]]) -> Body:
    return decoded(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": n, "topic_id": IDS[n], "partition_data": [{"index": p, "records": RECORDS} for p in parts]}
        for n, parts in items]})


@pytest.mark.parametrize("version", [3, 12, 13])
def test_produce_answers_a_repeated_denied_topic_and_partition_once(version: int) -> None:
    verdict = authorize_produce(produce(version, TWICE), version, view(*may(Op.WRITE, "a")))
    assert isinstance(verdict, Rewrite)
    # Every copy of the allowed topic is relayed: the upstream reads them into the same map Kafka does.
    assert len(verdict.request["topic_data"]) == 2
    answer = upstream(ApiKey.PRODUCE, version, "responses", "partition_responses", "a", index=0, base_offset=5)
    merged = upstream_of(verdict, answer)  # Kafka answers the two copies of a/0 once
    found = partitions(ApiKey.PRODUCE, version, merged, "responses", "partition_responses", "index")
    assert found == [("a", 0, 0), ("d", 0, DENIED)]


@pytest.mark.parametrize("version", [3, 13])
def test_produce_with_every_topic_denied_answers_each_partition_once(version: int) -> None:
    answer = answered(authorize_produce(produce(version, TWICE), version, view()))
    found = partitions(ApiKey.PRODUCE, version, answer, "responses", "partition_responses", "index")
    assert found == [("a", 0, DENIED), ("d", 0, DENIED)]


# --- Fetch --------------------------------------------------------------------------------------------------

def fetch(version: int, items: list[tuple[str, list[int]]]) -> Body:
    return decoded(ApiKey.FETCH, version, {
        "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "", "replica_id": -1, "topics": [
            {"topic": n, "topic_id": IDS[n], "partitions": [{"partition": p, "fetch_offset": 0,
                                                             "partition_max_bytes": 1024} for p in parts]}
            for n, parts in items]})


@pytest.mark.parametrize("version", [4, 12, 13, 17])
def test_fetch_answers_a_repeated_denied_topic_and_partition_once(version: int) -> None:
    verdict = authorize_fetch(fetch(version, TWICE), version, view(*may(Op.READ, "a")))
    assert isinstance(verdict, Rewrite)
    answer = upstream(ApiKey.FETCH, version, "responses", "partitions", "a", partition_index=0, high_watermark=3)
    found = partitions(ApiKey.FETCH, version, upstream_of(verdict, answer), "responses", "partitions",
                       "partition_index")
    assert found == [("a", 0, 0), ("d", 0, DENIED)]


@pytest.mark.parametrize("version", [4, 13])
def test_fetch_with_every_topic_denied_answers_each_partition_once(version: int) -> None:
    answer = answered(authorize_fetch(fetch(version, TWICE), version, view()))
    assert partitions(ApiKey.FETCH, version, answer, "responses", "partitions", "partition_index") == [
        ("a", 0, DENIED), ("d", 0, DENIED)]


# --- DeleteRecords ------------------------------------------------------------------------------------------

def delete_records(version: int) -> Body:
    return decoded(ApiKey.DELETE_RECORDS, version, {"timeout_ms": 1000, "topics": [
        {"name": n, "partitions": [{"partition_index": p, "offset": 0} for p in parts]} for n, parts in TWICE]})


@pytest.mark.parametrize("version", [0, 2])
def test_delete_records_answers_a_repeated_denied_topic_and_partition_once(version: int) -> None:
    policy = rules.POLICIES[ApiKey.DELETE_RECORDS]
    verdict = policy(delete_records(version), version, view(*may(Op.DELETE, "a")))
    answer = upstream(ApiKey.DELETE_RECORDS, version, "topics", "partitions", "a", partition_index=0)
    found = partitions(ApiKey.DELETE_RECORDS, version, upstream_of(verdict, answer), "topics", "partitions",
                       "partition_index")
    assert found == [("a", 0, 0), ("d", 0, DENIED)]
    every = answered(policy(delete_records(version), version, view()))
    assert partitions(ApiKey.DELETE_RECORDS, version, every, "topics", "partitions", "partition_index") == [
        ("a", 0, DENIED), ("d", 0, DENIED)]


# --- OffsetCommit, TxnOffsetCommit, OffsetDelete ------------------------------------------------------------

GROUP_APIS = {
    ApiKey.OFFSET_COMMIT: (authorize_offset_commit, [2, 9, 10]),
    ApiKey.TXN_OFFSET_COMMIT: (authorize_txn_offset_commit, [0, 5, 6]),
    ApiKey.OFFSET_DELETE: (authorize_offset_delete, [0]),
}
GRANTS = [Action(Op.READ, RT.GROUP, "g"), Action(Op.DELETE, RT.GROUP, "g"),
          Action(Op.WRITE, RT.TRANSACTIONAL_ID, "t"), *may(Op.READ, "a")]


def group_request(key: ApiKey, version: int) -> Body:
    return decoded(key, version, {
        "group_id": "g", "transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "generation_id": -1,
        "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None, "retention_time_ms": -1,
        "topics": [{"name": n, "topic_id": IDS[n], "partitions": [
            {"partition_index": p, "committed_offset": 1, "committed_metadata": None} for p in parts]}
            for n, parts in TWICE]})


@pytest.mark.parametrize(("key", "version"), [(k, v) for k, (_, vs) in GROUP_APIS.items() for v in vs])
def test_group_offsets_answer_a_topic_named_twice_in_one_entry_once_an_error_is_listed(key: ApiKey,
                                                                                        version: int) -> None:
    policy, _ = GROUP_APIS[key]
    verdict = policy(group_request(key, version), version, view(*GRANTS))
    # The coordinator answers the relayed copies as it got them: one entry each.
    answer = upstream(key, version, "topics", "partitions", "a", "a", partition_index=0)
    found = partitions(key, version, upstream_of(verdict, answer), "topics", "partitions", "partition_index")
    assert found == [("d", 0, DENIED), ("d", 0, DENIED), ("d", 0, DENIED), ("a", 0, 0), ("a", 0, 0)]
    merged = decoded(key, version, upstream_of(policy(group_request(key, version), version, view(*GRANTS)), answer),
                     response=True)
    assert len(merged["topics"]) == 2  # d's entry, then a's with both copies
