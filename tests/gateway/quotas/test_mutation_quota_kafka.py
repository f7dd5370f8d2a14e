"""controller_mutation_rate (KIP-599): the same requests against Apache Kafka 4.4 directly (the quota
set on Kafka) and through ksgate in front of it (the quota set in ksgate; ksgate's own principal on
Kafka has none) get the same error codes, and throttle_time_ms within a tolerance (both printed).

Kafka's facts this pins (controller_mutation_rate=1: a bucket of 1 × 11 windows = 11 partition
mutations, refilled at 1 per second): a strict request (CreateTopics v6+, CreatePartitions v3+,
DeleteTopics v5+) passes with throttle_time_ms 0 while the bucket is not negative, even when it
takes it far below 0; while it is negative, every topic is refused with THROTTLING_QUOTA_EXCEEDED (89),
throttle_time_ms the time to refill to 0 and the connection muted that long; older versions are
accepted and throttled after the fact; DeleteTopics counts the deleted topic's partitions; the
topics of one request are taken in order (the one that finds the bucket negative is refused, those
before it created); validate_only requests are counted as if they created their topics, and a
topic refused for another reason (TOPIC_ALREADY_EXISTS) is not counted.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from protocol.api_keys import ApiKey
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.broker import GATEWAY_USER
from tests.conformance.wire import Connection, Endpoint
from tests.gateway.clients.quota_chain import alter_quota, gateway_on_kafka

pytestmark = pytest.mark.kafka
CMR = "controller_mutation_rate"
MUTED_S = 40.0  # a muted connection's next request is read only after the throttle (seconds here)
TOLERANCE_MS = 1000  # both sides measure their own clocks; the mute between requests adds some

Result = tuple[int, list[int]]  # (throttle_time_ms, the topics' error codes)
Step = tuple[str, Callable[[Connection, str], Result]]


def _answer(connection: Connection, key: int, version: int, body: dict[str, Any], items: str) -> Result:
    outcome = connection.exchange(key, version, body)
    answer: dict[str, Any] | None = outcome.body
    assert outcome.kind == "response" and answer is not None, outcome
    return answer.get("throttle_time_ms", 0), [t["error_code"] for t in answer[items]]


def create(version: int, names: str, partitions: int) -> Step:
    return f"CreateTopics v{version} {names}×{partitions}", lambda c, p: _answer(c, ApiKey.CREATE_TOPICS, version, {
        "topics": [{"name": p + n, "num_partitions": partitions, "replication_factor": 1, "assignments": [],
                    "configs": []} for n in names], "timeout_ms": 15000, "validate_only": False}, "topics")


def grow(version: int, name: str, count: int) -> Step:
    return f"CreatePartitions v{version} {name}→{count}", lambda c, p: _answer(c, ApiKey.CREATE_PARTITIONS, version, {
        "topics": [{"name": p + name, "count": count, "assignments": None}], "timeout_ms": 15000,
        "validate_only": False}, "results")


def metadata(name: str) -> Step:
    return f"Metadata {name}", lambda c, p: _answer(c, ApiKey.METADATA, 12, {
        "topics": [{"topic_id": uuid.UUID(int=0), "name": p + name}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}, "topics")


def delete(version: int, name: str) -> Step:
    return f"DeleteTopics v{version} {name}", lambda c, p: _answer(c, ApiKey.DELETE_TOPICS, version, {
        "topic_names": [p + name], "timeout_ms": 15000}, "responses")


# Each sequence runs on a fresh bucket (its own user). A request after a throttled one is read once the
# mute is over, when the bucket is back near 0: only old (permissive) versions follow a mute, as the
# outcome of a strict one would hang on a few milliseconds.
SEQUENCES: dict[str, list[Step]] = {
    "creates": [
        create(7, "a", 12),  # 11 → −1: passes, not throttled
        create(7, "bc", 1),  # negative: 89 on both topics, ~1 s
        create(5, "d", 3),  # old version: accepted, ~3 s
        metadata("a"),  # (teaches ksgate that a has 12 partitions; Kafka counts them itself)
        delete(4, "a"),  # old version: accepted, 12 partitions counted, ~12 s
    ],
    "partitions": [
        create(7, "x", 12),
        metadata("x"),
        grow(3, "x", 17),  # negative: 89, ~1 s
        grow(2, "x", 15),  # old version: accepted, 3 partitions counted, ~3 s
    ],
    "one request across 0": [
        create(7, "mnop", 4),  # 11 → 7 → 3 → −1 → the fourth topic finds the bucket negative
    ],
    "a topic that exists costs nothing": [
        create(7, "e", 1),
        create(7, "e", 20),  # TOPIC_ALREADY_EXISTS: not counted
        create(7, "f", 1),  # 10 → 9: passes
        create(7, "g", 12),  # 9 → −3: passes
        create(7, "h", 1),  # refused, ~3 s
    ],
    "validate_only counts": [
        ("CreateTopics v7 validate_only v×30", lambda c, p: _answer(c, ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": p + "v", "num_partitions": 30, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 15000, "validate_only": True}, "topics")),
        create(7, "w", 1),  # counted all the same (11 − 30 = −19): refused, ~19 s
    ],
}


def _run(connection: Connection, prefix: str, steps: list[Step]) -> list[Result]:
    try:
        return [step(connection, prefix) for _, step in steps]
    finally:
        connection.close()


def _on_kafka(kafka: KafkaBroker, steps: list[Step]) -> list[Result]:
    user, prefix = f"mutator-{uuid.uuid4().hex[:6]}", f"kip599-{uuid.uuid4().hex[:6]}-"
    kafka.set_scram_password(user, f"{user}-secret")
    kafka.create_acls([AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, f"User:{user}", "*",
                                  AclOperation.ALL, AclPermissionType.ALLOW)])
    endpoint = Endpoint(kafka.bootstrap("SASL_SSL"), ssl.create_default_context(cafile=str(kafka.ca)))
    admin = Connection(endpoint, GATEWAY_USER, kafka.users[GATEWAY_USER])
    try:
        set_quota = admin.exchange(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [
            {"entity": [{"entity_type": "user", "entity_name": user}],
             "ops": [{"key": CMR, "value": 1.0, "remove": False}]}]})
        assert set_quota.body is not None and set_quota.body["entries"][0]["error_code"] == 0, set_quota
    finally:
        admin.close()
    return _run(Connection(endpoint, user, f"{user}-secret", timeout_s=MUTED_S), prefix, steps)


@pytest.mark.parametrize("name", SEQUENCES)
def test_ksgate_enforces_controller_mutation_rate_as_kafka_does(kafka: KafkaBroker, tmp_path: Path,
                                                                name: str) -> None:
    steps = SEQUENCES[name]
    direct = _on_kafka(kafka, steps)
    gateway = gateway_on_kafka(kafka, tmp_path)
    try:
        alter_quota(gateway, {"user": "alice"}, CMR, 1.0)
        alice = Connection(Endpoint(gateway.bootstrap, None), "alice", "alice-secret", timeout_s=MUTED_S)
        through = _run(alice, f"kip599-gw-{uuid.uuid4().hex[:6]}-", steps)
    finally:
        gateway.stop()
    for (label, _), (k_ms, k_codes), (g_ms, g_codes) in zip(steps, direct, through, strict=True):
        print(f"{label:28} kafka {k_codes} {k_ms:6} ms   ksgate {g_codes} {g_ms:6} ms")
    assert [codes for _, codes in through] == [codes for _, codes in direct]
    for (label, _), (k_ms, _), (g_ms, _) in zip(steps, direct, through, strict=True):
        assert abs(k_ms - g_ms) <= TOLERANCE_MS, (label, k_ms, g_ms)
    assert any(89 in codes for _, codes in direct)  # each sequence reaches the refusal
