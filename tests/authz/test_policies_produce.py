"""The Produce policy where the differential suite (tests/conformance) found ksgate unlike Kafka 4.4."""

from __future__ import annotations

import uuid

from authz.model import AclOperation, ResourceType
from authz.policies.produce import authorize_produce
from authz.request_policy import Action, Answer, Refuse, Rewrite
from protocol.kafka_errors import KafkaError
from protocol.record_batch import encode_batch
from tests.authz.fake_view import FakeView

KNOWN, UNKNOWN = uuid.UUID(int=0xA), uuid.UUID(int=0xF)
RECORDS = encode_batch([(b"k", b"v")], timestamp_ms=1)


def produce_v13(*topic_ids: uuid.UUID, acks: int = 1) -> dict[str, object]:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 1000, "topic_data": [
        {"topic_id": topic_id, "partition_data": [{"index": 0, "records": RECORDS}]} for topic_id in topic_ids]}


def writes(name: str) -> Action:
    return Action(AclOperation.WRITE, ResourceType.TOPIC, name)


def errors(body: dict[str, object]) -> list[tuple[uuid.UUID, int]]:
    return [(t["topic_id"], p["error_code"]) for t in body["responses"]  # type: ignore[attr-defined]
            for p in t["partition_responses"]]


def test_a_topic_id_no_topic_has_is_unknown_topic_id_not_an_authorization_failure() -> None:
    # Kafka resolves ids before authorizing; UNKNOWN_TOPIC_ID makes a client refresh its metadata, where
    # TOPIC_AUTHORIZATION_FAILED would stop a producer whose ids the gateway has not learned yet.
    view = FakeView([writes("a")], topics={KNOWN: "a"})
    verdict = authorize_produce(produce_v13(UNKNOWN), 13, view)
    assert isinstance(verdict, Answer)
    assert errors(verdict.response) == [(UNKNOWN, KafkaError.UNKNOWN_TOPIC_ID)]


def test_an_unknown_id_beside_a_writable_topic_is_merged_back_with_its_own_error() -> None:
    view = FakeView([writes("a")], topics={KNOWN: "a"})
    verdict = authorize_produce(produce_v13(KNOWN, UNKNOWN), 13, view)
    assert isinstance(verdict, Rewrite)
    assert [t["topic_id"] for t in verdict.request["topic_data"]] == [KNOWN]
    upstream = {"responses": [{"topic_id": KNOWN, "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0}
    assert verdict.on_response is not None
    merged = verdict.on_response(upstream)
    assert errors(merged) == [(KNOWN, 0), (UNKNOWN, KafkaError.UNKNOWN_TOPIC_ID)]


def test_unknown_and_denied_topics_each_keep_their_own_error() -> None:
    view = FakeView([], topics={KNOWN: "a"})
    verdict = authorize_produce(produce_v13(KNOWN, UNKNOWN), 13, view)
    assert isinstance(verdict, Answer)
    assert errors(verdict.response) == [(KNOWN, KafkaError.TOPIC_AUTHORIZATION_FAILED),
                                        (UNKNOWN, KafkaError.UNKNOWN_TOPIC_ID)]


def test_acks_zero_with_an_unknown_id_still_closes_the_connection() -> None:
    verdict = authorize_produce(produce_v13(UNKNOWN, acks=0), 13, FakeView(everything=True))
    assert isinstance(verdict, Refuse)
    assert verdict.in_turn  # Kafka's close: after the answers owed for earlier requests


def test_a_denied_acks_zero_produce_is_refused_in_turn_as_kafka_closes_once_it_has_handled_it() -> None:
    verdict = authorize_produce(produce_v13(KNOWN, acks=0), 13, FakeView([], topics={KNOWN: "a"}))
    assert isinstance(verdict, Refuse) and verdict.in_turn


def test_a_partly_allowed_acks_zero_produce_relays_the_writable_topics_then_closes() -> None:
    # Kafka appends the partitions it may before it closes the connection (measured against Kafka 4.4:
    # tests/gateway/upstream/produce_vs_kafka/test_acks_zero_produce_kafka.py).
    denied = uuid.UUID(int=0xB)
    view = FakeView([writes("a")], topics={KNOWN: "a", denied: "b"})
    verdict = authorize_produce(produce_v13(KNOWN, denied, acks=0), 13, view)
    assert isinstance(verdict, Rewrite) and verdict.then_close is not None
    assert [t["topic_id"] for t in verdict.request["topic_data"]] == [KNOWN] and verdict.request["acks"] == 0
