"""One Produce naming a topic alice may write, one she may only describe and names no topic has (with WRITE,
with DESCRIBE only, with no ACL), sent as the same raw request to Apache Kafka 4.4 as a secured broker and to ksgate
in front of it: the same answer for every partition (error code and message; written or not) and the same records
in the log afterwards, at old and new Produce versions (by topic id from v13), with acks=1 and acks=-1."""

from __future__ import annotations

import pytest

from protocol.kafka_errors import KafkaError
from tests.conformance.wire import Pipelined
from tests.gateway.upstream.produce_vs_kafka.kit import Sides, Topics, errors, produced, run, value

VERSIONS = (3, 9, 13)  # the oldest Kafka 4 serves, the first flexible one, the newest (topics by id)


def _parts(topics: Topics, version: int) -> list[tuple[str, list[int]]]:
    # Partition 7 of the allowed topic does not exist.  By id, a name no topic has is an id no topic has: its ACLs
    # cannot matter, so one stands for all three.
    missing = topics.missing if version < 13 else topics.missing[:1]
    return [(topics.allowed, [0, 1, 7]), (topics.denied, [0]), *((name, [0]) for name in missing)]


def _expected_errors(topics: Topics, version: int, request: Pipelined) -> dict[tuple[str, int], int]:
    denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
    if version < 13:
        missing = {(topics.missing_writable, 0): KafkaError.UNKNOWN_TOPIC_OR_PARTITION,
                   (topics.missing_describable, 0): denied, (topics.missing_unlisted, 0): denied}
    else:  # the answer names an id no topic has by that id
        missing = {(f"id {request.body['topic_data'][-1]['topic_id']}", 0): KafkaError.UNKNOWN_TOPIC_ID}
    return {(topics.allowed, 0): KafkaError.NONE, (topics.allowed, 1): KafkaError.NONE,
            (topics.allowed, 7): KafkaError.UNKNOWN_TOPIC_OR_PARTITION, (topics.denied, 0): denied, **missing}


@pytest.mark.parametrize("acks", [1, -1])
@pytest.mark.parametrize("version", VERSIONS)
def test_a_partly_allowed_produce_is_answered_and_written_as_kafka_does(
        sides: Sides, topics: Topics, version: int, acks: int) -> None:
    request = produced(version, acks, topics, _parts(topics, version))
    landing = frozenset({(topics.allowed, 0), (topics.allowed, 1)})
    kafka = run(sides, sides.reference, topics, [request], landing)
    ksgate = run(sides, sides.ksgate, topics, [request], landing)

    assert ksgate == kafka
    assert errors(kafka) == _expected_errors(topics, version, request) and kafka.still_open
    # The allowed partitions hold their record, nothing else does; the missing topics were not created.
    assert kafka.written == {
        (topics.allowed, 0): [value(topics.allowed, 0)], (topics.allowed, 1): [value(topics.allowed, 1)],
        (topics.denied, 0): [], **{(name, 0): None for name in topics.missing}}


def _twice(topics: Topics) -> list[tuple[str, list[int]]]:
    """Each topic named twice, interleaved, and partition 0 of each named twice within one entry."""
    return [(topics.allowed, [0]), (topics.denied, [0]), (topics.allowed, [0, 1, 0]), (topics.denied, [0, 0])]


@pytest.mark.parametrize("acks", [1, -1])
@pytest.mark.parametrize("version", (3, 13))
def test_a_topic_and_a_partition_named_twice_are_answered_and_written_once_as_kafka_does(
        sides: Sides, topics: Topics, version: int, acks: int) -> None:
    # Kafka reads the request into a map keyed by topic-partition: one answer and one batch per partition.
    request = produced(version, acks, topics, _twice(topics))
    landing = frozenset({(topics.allowed, 0), (topics.allowed, 1)})
    kafka = run(sides, sides.reference, topics, [request], landing)
    ksgate = run(sides, sides.ksgate, topics, [request], landing)

    assert ksgate == kafka
    assert errors(kafka) == {(topics.allowed, 0): KafkaError.NONE, (topics.allowed, 1): KafkaError.NONE,
                             (topics.denied, 0): KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert kafka.written == {
        (topics.allowed, 0): [value(topics.allowed, 0)], (topics.allowed, 1): [value(topics.allowed, 1)],
        (topics.denied, 0): [], **{(name, 0): None for name in topics.missing}}
