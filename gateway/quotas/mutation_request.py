"""What a topic-mutating request counts against controller_mutation_rate, and what becomes of the
topics the quota refuses (THROTTLING_QUOTA_EXCEEDED, no message, KIP-599).

Counted as Kafka counts, topic by topic, from the request as it is relayed (topics the authorizer
denied are gone), with the partition counts the latest Metadata responses showed (the cluster view):
- CreateTopics: each topic's num_partitions, or its number of assignments; -1 with no
  assignments (the broker's default num.partitions, which the gateway does not know) counts 1;
- CreatePartitions: the new count minus the known one; unknown, the number of assignments (Kafka
  requires one per new partition), and without assignments 1;
- DeleteTopics: the topic's known partition count, by name or by id; unknown, 1.
The unknown cases count low on purpose: a guess must not refuse an honest client. As Kafka 4.4 does
(measured), validate_only requests are counted too.

Every topic refused: the gateway answers itself. Some: they are dropped from the relayed request,
and their refusals merged back into the upstream's answer, in the request's order. The topics the
upstream then refuses (e.g. TOPIC_ALREADY_EXISTS) are given back (a Settlement): Kafka 4.4 counts
only the topics it goes on to create (measured).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gateway.quotas.mutation import MutationBuckets
from gateway.session.response_queue import WireBytes
from protocol.api_keys import ApiKey
from protocol.framing import frame as framed
from protocol.header import decode_request_header
from protocol.kafka_errors import KafkaError

Body = dict[str, Any]
# The first version of each API that knows THROTTLING_QUOTA_EXCEEDED: older ones are throttled only.
STRICT_SINCE: dict[int, int] = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
_ANSWERS: dict[int, str] = {ApiKey.CREATE_TOPICS: "topics", ApiKey.CREATE_PARTITIONS: "results",
                            ApiKey.DELETE_TOPICS: "responses"}
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


@dataclass(slots=True)
class Settlement:
    """The topics a relayed request was counted for; its answer tells which of them the upstream refused.

    The answer's hook fills ``refused`` (maybe in the worker thread: it writes this object only); the
    connection gives their mutations back on the event loop before it counts its next request.
    """

    sensor: str
    rate: float
    counted: dict[object, int]  # topic name (or id) → mutations counted for it
    refused: list[object] | None = None  # None until the answer came

    def watch(self, field: str) -> Callable[[Body], Body]:
        def watched(answer: Body) -> Body:
            self.refused = [key for entry in answer[field] if entry["error_code"] for key in _names(entry)]
            return answer

        return watched

    def refunded(self) -> int:
        refused = set(self.refused or ())
        return sum(n for name, n in self.counted.items() if name in refused)


@dataclass(slots=True, frozen=True)
class MutationVerdict:
    """The bucket's word on one request: its throttle, and what to send instead of the request as it is."""

    throttle_ms: int
    refusal: Body | None = None  # every topic refused: the answer, nothing is relayed
    wire: bytes | None = None  # some refused: the request without them, to relay instead
    merge: Callable[[Body], Body] | None = None  # ... and how their refusals go into the upstream's answer
    settlement: Settlement | None = None  # what was counted for the relayed topics
    answers: str = "topics"  # the answer's list of topics

    def hook_before(self, then: Callable[[Body], Body] | None) -> Callable[[Body], Body] | None:
        """What the upstream's answer goes through: its refusals noted (the settlement), the quota's
        refusals merged in, then ``then`` (the authorization's merge of the topics it denied, which sees the
        answer as if the upstream had been asked everything)."""
        watch = self.settlement.watch(self.answers) if self.settlement is not None else None
        steps = [step for step in (watch, self.merge, then) if step is not None]
        if len(steps) <= 1:
            return steps[0] if steps else None

        def hook(answer: Body) -> Body:
            for step in steps:
                answer = step(answer)
            return answer

        return hook


def judge(buckets: MutationBuckets, sensor: str, rate: float, key: int, version: int,
          wire: WireBytes, known: PartitionCounts = NO_COUNTS) -> MutationVerdict | None:
    """None when ``key`` mutates nothing the quota counts; else the verdict."""
    strict_since = STRICT_SINCE.get(key)
    if strict_since is None:
        return None
    payload = (wire if isinstance(wire, memoryview) else memoryview(wire))[4:]  # past the size
    header, schema = decode_request_header(payload)
    codec = schema.request_codec(version)
    body, _ = codec.decode_prefix(payload[header.size :])
    field, items = _topics(key, body)
    if not items:
        return None
    counts = [_mutations(key, item, known) for item in items]
    admission = buckets.admit(sensor, rate, counts, strict=version >= strict_since)
    accepted, answers = admission.accepted, _ANSWERS[key]
    if not any(accepted):
        every = [_refusal(key, item) for item in items]
        return MutationVerdict(admission.throttle_ms, {"throttle_time_ms": admission.throttle_ms, answers: every})
    counted: dict[object, int] = {}
    for item, n, ok in zip(items, counts, accepted, strict=True):
        if ok:
            counted[_name(item)] = counted.get(_name(item), 0) + n
    settlement = Settlement(sensor, rate, counted)
    if all(accepted):
        return MutationVerdict(admission.throttle_ms, settlement=settlement, answers=answers)
    refusals = [None if ok else _refusal(key, item) for item, ok in zip(items, accepted, strict=True)]
    kept = {**body, field: [item for item, ok in zip(items, accepted, strict=True) if ok]}
    relayed = framed(bytes(payload[: header.size]) + codec.encode(kept))
    return MutationVerdict(admission.throttle_ms, None, relayed,
                           _merger(key, [_name(item) for item in items], refusals), settlement, answers)


def _topics(key: int, body: Body) -> tuple[str, list[Any]]:
    """The request's list of topics: its field and items. DeleteTopics names topics in topic_names
    before v6, in topics since; the decoded body has both, the one its version lacks empty."""
    if key == ApiKey.DELETE_TOPICS and body.get("topic_names"):
        return "topic_names", body["topic_names"]
    return "topics", body["topics"]


def _mutations(key: int, item: Any, known: PartitionCounts) -> int:
    """The partitions one topic of the request mutates (see the module docstring for what is unknown)."""
    if key == ApiKey.CREATE_TOPICS:
        return int(item["num_partitions"]) if item["num_partitions"] > 0 else len(item["assignments"] or ()) or 1
    if key == ApiKey.CREATE_PARTITIONS:
        current = known.of(item["name"])
        if current is not None:
            return max(int(item["count"]) - current, 0)  # not less: Kafka refuses it (INVALID_PARTITIONS)
        return len(item["assignments"] or ()) or 1
    if isinstance(item, str):  # DeleteTopics before v6: a name
        return known.of(item) or 1
    return known.of(item["name"], item["topic_id"]) or 1


def _refusal(key: int, item: Any) -> Body:
    """Kafka's answer for one topic over the quota: THROTTLING_QUOTA_EXCEEDED, no message."""
    if key == ApiKey.CREATE_TOPICS:
        return {"name": item["name"], "topic_id": _ZERO_ID, "error_code": _REFUSED, "error_message": None,
                "num_partitions": -1, "replication_factor": -1, "configs": None}
    if key == ApiKey.CREATE_PARTITIONS:
        return {"name": item["name"], "error_code": _REFUSED, "error_message": None}
    name, topic_id = (item, _ZERO_ID) if isinstance(item, str) else (item["name"], item["topic_id"])
    return {"name": name, "topic_id": topic_id, "error_code": _REFUSED, "error_message": None}


def _name(item: Any) -> object:
    """What names a topic in the request and its answer: the name, or the id when only the id is given."""
    if isinstance(item, str):
        return item
    return item["name"] if item.get("name") is not None else item.get("topic_id")


def _names(entry: Body) -> tuple[object, ...]:
    """What an answer's entry may be asked by: its name, and its topic id (DeleteTopics v6 asks by either)."""
    topic_id = entry.get("topic_id")
    return (entry.get("name"),) if topic_id is None or not topic_id.int else (entry.get("name"), topic_id)


def _merger(key: int, names: list[object], refusals: list[Body | None]) -> Callable[[Body], Body]:
    """Put the refused topics back into the upstream's answer, in the request's order (the upstream's
    entries found by name; any it added unasked go last, for the authorization merge to judge)."""
    field = _ANSWERS[key]

    def merge(answer: Body) -> Body:
        upstream: list[Body | None] = list(answer[field])  # a few topics: found by a walk, taken out as used
        merged: list[Body] = []
        for name, refusal in zip(names, refusals, strict=True):
            if refusal is not None:
                merged.append(refusal)
                continue
            at = next((i for i, entry in enumerate(upstream) if entry is not None and name in _names(entry)), None)
            if at is not None:
                found, upstream[at] = upstream[at], None
                assert found is not None
                merged.append(found)
        answer[field] = merged + [entry for entry in upstream if entry is not None]
        return answer

    return merge
