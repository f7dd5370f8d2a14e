"""What a topic-mutating request counts against controller_mutation_rate, and the gateway's own
answer when the quota refuses it (THROTTLING_QUOTA_EXCEEDED on every topic, KIP-599).

Counted as Kafka counts, from the request as it is relayed (topics the authorizer denied are gone),
with the partition counts the latest Metadata responses showed (the cluster view):
- CreateTopics: each topic's num_partitions, or its number of assignments; -1 with no
  assignments (the broker's default num.partitions, which the gateway does not know) counts 1;
- CreatePartitions: the new count minus the known one; unknown, the number of assignments (Kafka
  requires one per new partition), and without assignments 1;
- DeleteTopics: the topic's known partition count, by name or by id; unknown, 1.
The unknown cases count low on purpose: a guess must not refuse an honest client. validate_only
requests are not counted (KIP-599: only mutations that happen are).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.quotas.mutation import Admission, MutationBuckets
from gateway.session.response_queue import WireBytes
from protocol.api_keys import ApiKey
from protocol.header import decode_request_header
from protocol.kafka_errors import KafkaError

Body = dict[str, Any]
# The first version of each API that knows THROTTLING_QUOTA_EXCEEDED: older ones are throttled only.
STRICT_SINCE: dict[int, int] = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
_REFUSED = int(KafkaError.THROTTLING_QUOTA_EXCEEDED)
_ZERO_ID = uuid.UUID(int=0)


@dataclass(slots=True, frozen=True)
class PartitionCounts:
    """The partitions of each topic as Metadata last showed them, and topic ids' names (snapshots)."""

    by_name: Mapping[str, int]
    names: Mapping[uuid.UUID, str]

    def of(self, name: str | None, topic_id: uuid.UUID | None = None) -> int | None:
        if name is None and topic_id is not None:
            name = self.names.get(topic_id)
        return None if name is None else self.by_name.get(name)


NO_COUNTS = PartitionCounts({}, {})


@dataclass(slots=True, frozen=True)
class MutationVerdict:
    """The bucket's word on one request: its throttle, and the answer to send instead of relaying it."""

    throttle_ms: int
    refusal: Body | None  # None: relay it


def judge(buckets: MutationBuckets, sensor: str, rate: float, key: int, version: int,
          wire: WireBytes, known: PartitionCounts = NO_COUNTS) -> MutationVerdict | None:
    """None when ``key`` mutates nothing the quota counts (or only validates); else the verdict."""
    strict_since = STRICT_SINCE.get(key)
    if strict_since is None:
        return None
    body = _body(wire)
    if body.get("validate_only"):
        return None
    count = mutations(key, body, known)
    if count == 0:
        return None
    admission: Admission = buckets.admit(sensor, rate, count, strict=version >= strict_since)
    refusal = None if admission.accepted else refused(key, body, admission.throttle_ms)
    return MutationVerdict(admission.throttle_ms, refusal)


def mutations(key: int, body: Body, known: PartitionCounts = NO_COUNTS) -> int:
    """The partition mutations a request asks for (see the module docstring for what is unknown)."""
    if key == ApiKey.CREATE_TOPICS:
        return sum(_created(topic) for topic in body["topics"])
    if key == ApiKey.CREATE_PARTITIONS:
        return sum(_added(topic, known.of(topic["name"])) for topic in body["topics"])
    return sum(known.of(name, topic_id) or 1 for name, topic_id in _deleted(body))


def refused(key: int, body: Body, throttle_ms: int) -> Body:
    """The answer Kafka gives a request over the quota: every topic THROTTLING_QUOTA_EXCEEDED, no message."""
    if key == ApiKey.CREATE_TOPICS:
        return {"throttle_time_ms": throttle_ms, "topics": [
            {"name": t["name"], "topic_id": _ZERO_ID, "error_code": _REFUSED, "error_message": None,
             "num_partitions": -1, "replication_factor": -1, "configs": None} for t in body["topics"]]}
    if key == ApiKey.CREATE_PARTITIONS:
        return {"throttle_time_ms": throttle_ms, "results": [
            {"name": t["name"], "error_code": _REFUSED, "error_message": None} for t in body["topics"]]}
    return {"throttle_time_ms": throttle_ms, "responses": [
        {"name": name, "topic_id": topic_id or _ZERO_ID, "error_code": _REFUSED, "error_message": None}
        for name, topic_id in _deleted(body)]}


def _created(topic: Body) -> int:
    if topic["num_partitions"] > 0:
        return int(topic["num_partitions"])
    return len(topic["assignments"] or ()) or 1


def _deleted(body: Body) -> list[tuple[str | None, uuid.UUID | None]]:
    """DeleteTopics' topics: by name before v6 (``topic_names``), by name or id since (``topics``); the
    decoded body has both fields, the one its version lacks empty."""
    if body.get("topic_names"):
        return [(name, None) for name in body["topic_names"]]
    return [(t["name"], t["topic_id"]) for t in body["topics"]]


def _added(topic: Body, current: int | None) -> int:
    if current is not None:
        return max(int(topic["count"]) - current, 0)  # not more: Kafka refuses it (INVALID_PARTITIONS)
    return len(topic["assignments"] or ()) or 1


def _body(wire: WireBytes) -> Body:
    """The request as relayed (size prefix included): decoded again, as these admin requests are rare."""
    payload = (wire if isinstance(wire, memoryview) else memoryview(wire))[4:]
    header, schema = decode_request_header(payload)
    body, _ = schema.request_codec(header.api_version).decode_prefix(payload[header.size :])
    return body
