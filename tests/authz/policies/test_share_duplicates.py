"""ShareFetch and ShareAcknowledge (KIP-932) naming a topic-partition twice under partial authorization, answered
as Kafka 4.4 answers them (measured on the wire: tests/conformance, the ``share_fetch.dup_*`` cases).

Kafka refuses a ShareFetch that opens a share session (epoch 0) with a partition named twice, even a denied one,
with UNKNOWN_SERVER_ERROR and nothing else; otherwise it reads the partitions into a map, so each is answered once.
"""

from __future__ import annotations

from typing import Any

import pytest

from authz.model import AclOperation as Op
from authz.model import ResourceType as RT
from authz.policies.data import authorize_share_acknowledge, authorize_share_fetch
from authz.request_policy import Action, Body, Relay
from protocol.api_keys import ApiKey
from tests.authz.policies.test_duplicates import (
    DENIED,
    IDS,
    TWICE,
    answered,
    decoded,
    may,
    partitions,
    upstream,
    upstream_of,
    view,
)

UNKNOWN_SERVER_ERROR, GROUP_DENIED = -1, 30
GROUP = [Action(Op.READ, RT.GROUP, "g")]
ONLY_DENIED_TWICE = [("a", [0]), ("d", [0, 0])]
ACK = [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [1]}]


def share_fetch(version: int, epoch: int, items: list[tuple[str, list[int]]]) -> Body:
    return decoded(ApiKey.SHARE_FETCH, version, {
        "group_id": "g", "member_id": "m", "share_session_epoch": epoch, "max_wait_ms": 0, "min_bytes": 0,
        "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10, "forgotten_topics_data": [], "topics": [
            {"topic_id": IDS[n], "partitions": [{"partition_index": p, "acknowledgement_batches": []} for p in parts]}
            for n, parts in items]})


def share_acknowledge(version: int, items: list[tuple[str, list[int]]]) -> Body:
    return decoded(ApiKey.SHARE_ACKNOWLEDGE, version, {
        "group_id": "g", "member_id": "m", "share_session_epoch": 1, "topics": [
            {"topic_id": IDS[n], "partitions": [{"partition_index": p, "acknowledgement_batches": ACK} for p in parts]}
            for n, parts in items]})


def answered_partitions(key: ApiKey, version: int, answer: Body) -> list[tuple[Any, ...]]:
    return partitions(key, version, answer, "responses", "partitions", "partition_index")


@pytest.mark.parametrize("items", [TWICE, ONLY_DENIED_TWICE])
@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_opening_a_session_with_a_partition_named_twice_is_refused_whole(
        version: int, items: list[tuple[str, list[int]]]) -> None:
    answer = answered(authorize_share_fetch(share_fetch(version, 0, items), version, view(*GROUP, *may(Op.READ, "a"))))
    assert answer["error_code"] == UNKNOWN_SERVER_ERROR
    assert answer["responses"] == []


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_checks_the_group_before_the_repeated_partitions(version: int) -> None:
    answer = answered(authorize_share_fetch(share_fetch(version, 0, TWICE), version, view(*may(Op.READ, "a"))))
    assert answer["error_code"] == GROUP_DENIED


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_opening_a_session_with_partitions_named_once_is_relayed(version: int) -> None:
    request = share_fetch(version, 0, [("a", [0]), ("a", [1])])  # one topic in two entries: no partition twice
    assert isinstance(authorize_share_fetch(request, version, view(*GROUP, *may(Op.READ, "a"))), Relay)


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_in_a_session_answers_a_repeated_denied_partition_once(version: int) -> None:
    verdict = authorize_share_fetch(share_fetch(version, 1, ONLY_DENIED_TWICE), version,
                                    view(*GROUP, *may(Op.READ, "a")))
    answer = upstream(ApiKey.SHARE_FETCH, version, "responses", "partitions", "a", partition_index=0, records=b"")
    found = answered_partitions(ApiKey.SHARE_FETCH, version, upstream_of(verdict, answer))
    assert found == [("a", 0, 0), ("d", 0, DENIED)]


@pytest.mark.parametrize("items", [TWICE, ONLY_DENIED_TWICE])
@pytest.mark.parametrize("version", [1, 2])
def test_share_acknowledge_answers_a_repeated_denied_partition_once(
        version: int, items: list[tuple[str, list[int]]]) -> None:
    verdict = authorize_share_acknowledge(share_acknowledge(version, items), version, view(*GROUP, *may(Op.READ, "a")))
    answer = upstream(ApiKey.SHARE_ACKNOWLEDGE, version, "responses", "partitions", "a", partition_index=0)
    found = answered_partitions(ApiKey.SHARE_ACKNOWLEDGE, version, upstream_of(verdict, answer))
    assert found == [("a", 0, 0), ("d", 0, DENIED)]
