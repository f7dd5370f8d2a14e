"""Produce: WRITE on each topic; WRITE on the transactional id when batches are transactional.

As Kafka's handleProduceRequest: a transactional batch without WRITE on the transactional
id fails every partition with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; otherwise partitions
of topics without WRITE fail with TOPIC_AUTHORIZATION_FAILED and the rest is relayed.  With
acks=0 there is no answer to carry an error, so Kafka closes the connection after handling the
request: the allowed partitions are appended all the same, and the close comes in turn, after
the answers owed for earlier requests (measured against Kafka 4.4:
tests/gateway/upstream/produce_vs_kafka/).
WALKED_PRODUCE is the same rule for the common case, everything allowed, over a walked body.
"""

from __future__ import annotations

from typing import Any

from authz.field_presence import request_has
from authz.model import AclOperation, ResourceType
from authz.policies.merge import Slot, merge_items, once_per_partition
from authz.request_policy import Action, Answer, AuthzView, Body, MayDo, Refuse, Relay, Rewrite, Verdict, WalkedPolicy
from authz.response_defaults import default_item, default_response
from protocol.api_keys import ApiKey
from protocol.entities.topic_prepass import ANY_TRANSACTIONAL
from protocol.kafka_errors import KafkaError
from protocol.record_batch import is_transactional


def _by_id(version: int) -> bool:
    """Whether topics are named by id (requests and responses switch together)."""
    return request_has(ApiKey.PRODUCE, version, "topic_data", "topic_id")


def _topic_key(topic: Body, version: int) -> Any:
    return topic["topic_id"] if _by_id(version) else topic["name"]


def _topic_name(topic: Body, version: int, view: AuthzView) -> str | None:
    return view.topic_name(topic["topic_id"]) if _by_id(version) else topic["name"]


def _error_entry(topic: Body, version: int, error: int) -> Body:
    entry = default_item(ApiKey.PRODUCE, version, "responses")
    if _by_id(version):
        entry["topic_id"] = topic["topic_id"]
    else:
        entry["name"] = topic["name"]
    partition = default_item(ApiKey.PRODUCE, version, "responses", "partition_responses")
    entry["partition_responses"] = [{**partition, "index": p["index"], "error_code": error,
                                     "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1}
                                    for p in topic["partition_data"]]
    return entry


def _slots(topics: list[Body], errors: list[int | None], version: int) -> list[Slot]:
    """One slot per topic, as handleProduceRequest answers: it reads the request into maps keyed by topic-partition,
    so a repeated topic or partition is answered once."""
    slots = [(_error_entry(t, version, error) if error is not None else None, _topic_key(t, version))
             for t, error in zip(topics, errors, strict=True)]
    return once_per_partition(slots, "partition_responses", "index")


def _all_failed(request: Body, version: int, error: int | list[int]) -> Verdict:
    """Every topic refused: with one error for all, or one per topic (in the request's order)."""
    if request["acks"] == 0:
        return Refuse("denied Produce with acks=0 (Kafka closes the connection)", in_turn=True)
    topics = request["topic_data"]
    errors: list[int | None] = list(error) if isinstance(error, list) else [error] * len(topics)
    response = default_response(ApiKey.PRODUCE, version)
    response["responses"] = [entry for entry, _ in _slots(topics, errors, version)]
    return Answer(response)


def _topic_error(topic: Body, version: int, view: AuthzView) -> int | None:
    """None when the topic may be written; else Kafka's error for it.  A topic id no topic has is
    UNKNOWN_TOPIC_ID, as on Kafka (checked before authorization): the client then refreshes its metadata,
    where TOPIC_AUTHORIZATION_FAILED would stop it for good."""
    name = _topic_name(topic, version, view)
    if name is None:
        return KafkaError.UNKNOWN_TOPIC_ID
    if view.allowed(Action(AclOperation.WRITE, ResourceType.TOPIC, name)):
        return None
    return KafkaError.TOPIC_AUTHORIZATION_FAILED


def _unanswered(response: Body) -> Body:
    """The hook of a relayed acks=0 Produce, which no answer reaches."""
    return response


def authorize_produce(request: Body, version: int, view: AuthzView) -> Verdict:
    topics = request["topic_data"]
    transactional = any(is_transactional(p["records"]) for t in topics for p in t["partition_data"])
    if transactional:
        txn_id = request["transactional_id"]
        if txn_id is None or not view.allowed(Action(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)):
            return _all_failed(request, version, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    errors = [_topic_error(topic, version, view) for topic in topics]
    allowed = [topic for topic, error in zip(topics, errors, strict=True) if error is None]
    if len(allowed) == len(topics):
        return Relay()
    if not allowed:
        return _all_failed(request, version, [e for e in errors if e is not None])
    if request["acks"] == 0:  # nothing to merge into: Kafka appends the allowed topics, then closes
        return Rewrite({**request, "topic_data": allowed}, _unanswered,
                       then_close="partly denied Produce with acks=0 (Kafka closes the connection)")

    slots = _slots(topics, errors, version)

    def merge(response: Body) -> Body:
        response["responses"] = merge_items(slots, response["responses"], lambda r: (_topic_key(r, version),))
        return response

    return Rewrite({**request, "topic_data": allowed}, merge)


def _relays_walked(kept: Body, topics: list[str], may: MayDo) -> bool:
    """authorize_produce's questions when it relays: WRITE on the transactional id (transactional batches only),
    then WRITE on each topic in the request's order; True only if every answer is yes."""
    if kept[ANY_TRANSACTIONAL]:
        txn_id = kept["transactional_id"]
        if txn_id is None or not may(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            return False
    return all(may(AclOperation.WRITE, ResourceType.TOPIC, name) for name in topics)


# acks for fire_and_forget; the transactional id and bit for the policy's first question.
WALKED_PRODUCE = WalkedPolicy(("acks", "transactional_id", ANY_TRANSACTIONAL), _relays_walked)
