"""acks=0 Produce against Apache Kafka 4.4 as a secured broker and ksgate in front of it, the same raw requests
pipelined in one write.  Kafka has no answer to carry an error in, so once it has handled an acks=0 Produce with
one (a topic alice may not write, a topic no one has) it closes the connection: the requests before it are
answered, none after it is, and the partitions she may write are appended all the same.  An acks=0 Produce without
an error keeps the connection open."""

from __future__ import annotations

import pytest

from tests.gateway.upstream.produce_vs_kafka.kit import API_VERSIONS, Sides, Topics, metadata, produced, run, value
from tests.gateway.upstream.walked_produce.kit import relayed_produces

VERSIONS = (3, 13)  # by name, by id


def _nothing_written(topics: Topics) -> dict[tuple[str, int], list[bytes | None] | None]:
    return {(topics.allowed, 0): [], (topics.allowed, 1): [], (topics.denied, 0): [],
            **{(name, 0): None for name in topics.missing}}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_denied_acks0_produce_closes_the_connection_after_the_requests_before_it_are_answered(
        sides: Sides, topics: Topics, version: int) -> None:
    requests = [API_VERSIONS, metadata(topics), produced(version, 0, topics, [(topics.denied, [0])]), metadata(topics)]
    kafka = run(sides, sides.reference, topics, requests)
    relayed = relayed_produces(sides.gateway)
    ksgate = run(sides, sides.ksgate, topics, requests)

    assert ksgate == kafka
    # ApiVersions (ksgate's own answer) and Metadata (relayed) answered, the Metadata after the Produce not.
    assert kafka.outcomes == ["response", "response", "closed"] and not kafka.still_open
    assert kafka.written == _nothing_written(topics)
    assert relayed_produces(sides.gateway) == relayed  # nothing relayed that could land after the read-back


@pytest.mark.parametrize("version", VERSIONS)
def test_a_partly_allowed_acks0_produce_writes_the_allowed_partitions_then_closes_the_connection(
        sides: Sides, topics: Topics, version: int) -> None:
    requests = [produced(version, 0, topics, [(topics.allowed, [0, 1]), (topics.denied, [0])]), metadata(topics)]
    landing = frozenset({(topics.allowed, 0), (topics.allowed, 1)})
    kafka = run(sides, sides.reference, topics, requests, landing)
    ksgate = run(sides, sides.ksgate, topics, requests, landing)

    assert ksgate == kafka
    assert kafka.outcomes == ["closed"] and not kafka.still_open
    assert kafka.written == {**_nothing_written(topics), (topics.allowed, 0): [value(topics.allowed, 0)],
                             (topics.allowed, 1): [value(topics.allowed, 1)]}


def test_an_acks0_produce_to_a_missing_topic_alice_may_write_closes_the_connection(
        sides: Sides, topics: Topics) -> None:
    requests = [produced(9, 0, topics, [(topics.missing_writable, [0])]), metadata(topics)]
    kafka = run(sides, sides.reference, topics, requests)
    ksgate = run(sides, sides.ksgate, topics, requests)  # relayed: the broker closes, and the gateway follows

    assert ksgate == kafka
    assert kafka.outcomes == ["closed"] and not kafka.still_open and kafka.written == _nothing_written(topics)


@pytest.mark.parametrize("version", VERSIONS)
def test_an_allowed_acks0_produce_keeps_the_connection_open(sides: Sides, topics: Topics, version: int) -> None:
    requests = [produced(version, 0, topics, [(topics.allowed, [0, 1])]), metadata(topics)]
    landing = frozenset({(topics.allowed, 0), (topics.allowed, 1)})
    kafka = run(sides, sides.reference, topics, requests, landing)
    ksgate = run(sides, sides.ksgate, topics, requests, landing)

    assert ksgate == kafka
    assert kafka.outcomes == ["response"] and kafka.still_open  # the same connection answers what comes next
    assert kafka.written == {**_nothing_written(topics), (topics.allowed, 0): [value(topics.allowed, 0)],
                             (topics.allowed, 1): [value(topics.allowed, 1)]}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_partly_allowed_acks0_produce_naming_topics_twice_writes_once_then_closes_the_connection(
        sides: Sides, topics: Topics, version: int) -> None:
    parts = [(topics.allowed, [0]), (topics.denied, [0]), (topics.allowed, [0, 1, 0]), (topics.denied, [0, 0])]
    requests = [produced(version, 0, topics, parts), metadata(topics)]
    landing = frozenset({(topics.allowed, 0), (topics.allowed, 1)})
    kafka = run(sides, sides.reference, topics, requests, landing)
    ksgate = run(sides, sides.ksgate, topics, requests, landing)

    assert ksgate == kafka
    assert kafka.outcomes == ["closed"] and not kafka.still_open
    assert kafka.written == {**_nothing_written(topics), (topics.allowed, 0): [value(topics.allowed, 0)],
                             (topics.allowed, 1): [value(topics.allowed, 1)]}
