"""The same raw Produce requests to Apache Kafka 4.4 as a secured broker (the reference) and to ksgate in front of
it, and what a client sees of each: per-partition answers, a closed connection, the records written.

The reference is the ``kafka`` fixture's SASL_SSL listener, where Kafka's StandardAuthorizer decides for alice.
ksgate is a secured gateway (its own authorizer, the same ACLs for alice) relaying to that broker's PLAINTEXT
listener as a super user.  Both sides write to the same topics of the one broker, one side after the other; each
side's records are told apart by the offsets before and after it.  Requests are built with ksgate's codec and sent
over tests/conformance/wire.py's raw connection, identical on both sides but for their correlation ids.
"""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from protocol.record_batch import decode_batches, encode_batch
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.broker import CLIENT_USER
from tests.apache_kafka.clients import TIMEOUT_S, create_topic
from tests.conformance.bodies import request_body
from tests.conformance.wire import Connection, Endpoint, Outcome, Pipelined
from tests.harness import GatewayThread, secured_gateway
from tests.wire_client import WireClient, request_frame

USER = CLIENT_USER  # alice, an ordinary user on both sides
WRITABLE = "cmp-w-"  # alice may WRITE topics named so (and DESCRIBE them, through the prefix below)
DESCRIBABLE = "cmp-"  # alice may DESCRIBE these; WRITE only on WRITABLE ones
ACLS = [AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, f"User:{USER}", "*", operation,
                   AclPermissionType.ALLOW)
        for prefix, operation in ((WRITABLE, AclOperation.WRITE), (DESCRIBABLE, AclOperation.DESCRIBE))]
METADATA_V = 12  # by name, with topic ids in the answer
FETCH_V = 12
# Per partition, the answer's fields compared as they are.  base_offset is compared only as "written or not": both
# sides append to the same log one after the other, so their offsets differ by construction.  Top-level fields
# are not compared: throttle_time_ms is each side's own quota state, and node_endpoints name the broker, which
# ksgate rewrites to its own address (docs/kafka-differences.md, where-the-broker-is).
NOT_COMPARED = frozenset({"base_offset"})


@dataclass(slots=True, frozen=True)
class Side:
    """Where a client reaches one side, and alice's password there."""

    name: str
    endpoint: Endpoint
    password: str

    def connect(self) -> Connection:
        return Connection(self.endpoint, USER, self.password)


@dataclass(slots=True)
class Sides:
    kafka: KafkaBroker
    gateway: GatewayThread
    reference: Side
    ksgate: Side

    def both(self) -> tuple[Side, Side]:
        return self.reference, self.ksgate


@dataclass(slots=True, frozen=True)
class Topics:
    """Topics of one module: ``allowed`` (WRITE, two partitions), ``denied`` (DESCRIBE only, one partition), and
    names no topic has: with WRITE, with DESCRIBE only, with no ACL at all."""

    allowed: str
    denied: str
    missing_writable: str
    missing_describable: str
    missing_unlisted: str
    ids: dict[str, uuid.UUID] = field(default_factory=dict)  # the existing topics' ids (one broker: one id)

    @property
    def missing(self) -> tuple[str, str, str]:
        return self.missing_writable, self.missing_describable, self.missing_unlisted


@dataclass(slots=True, frozen=True)
class Seen:
    """What a client saw of one side: each answered request's outcome, whether the connection then answered one
    more request, and the records each partition gained."""

    outcomes: list[Any]
    still_open: bool
    written: dict[tuple[str, int], list[bytes | None] | None]


def started(kafka: KafkaBroker, directory: Path) -> Iterator[Sides]:
    """The two sides with alice's ACLS on each (a generator for a fixture: the gateway stops after)."""
    directory.mkdir(parents=True, exist_ok=True)
    gateway = secured_gateway(kafka.bootstrap("PLAINTEXT"), directory, ("admin", USER))
    try:
        admin = AdminClient({"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                             "sasl.password": "admin-secret"})
        for future in admin.create_acls(ACLS).values():
            future.result(timeout=TIMEOUT_S)
        kafka.create_acls(ACLS)
        tls = ssl.create_default_context(cafile=str(kafka.ca))
        yield Sides(kafka, gateway, Side("kafka", Endpoint(kafka.bootstrap("SASL_SSL"), tls), kafka.users[USER]),
                    Side("ksgate", Endpoint(gateway.bootstrap, None), f"{USER}-secret"))
    finally:
        gateway.stop()


def new_topics(kafka: KafkaBroker) -> Topics:
    tag = uuid.uuid4().hex[:6]
    topics = Topics(f"{WRITABLE}{tag}", f"{DESCRIBABLE}d-{tag}", f"{WRITABLE}gone-{tag}", f"{DESCRIBABLE}gone-{tag}",
                    f"other-gone-{tag}")
    for name, partitions in ((topics.allowed, 2), (topics.denied, 1)):
        create_topic(kafka.client_config(), name, partitions)
        for partition in range(partitions):
            _wait_for_leader(kafka, name, partition)
    ids = {t["name"]: t["topic_id"] for t in _super(kafka, ApiKey.METADATA, METADATA_V, _metadata_body(
        [topics.allowed, topics.denied]))["topics"]}
    return replace(topics, ids=ids)


# -- requests ------------------------------------------------------------------------------------------------------

def value(topic: str, partition: int) -> bytes:
    return f"{topic}/{partition}".encode()


def produce(version: int, acks: int, topics: Topics, parts: list[tuple[str, list[int]]]) -> dict[str, Any]:
    """A Produce of one record per partition (its value names the partition); by id from v13, where a name no
    topic has gets an id no topic has."""
    stamp = int(time.time() * 1000)

    def records(name: str, partition: int) -> bytes:
        return encode_batch([(None, value(name, partition))], timestamp_ms=stamp)

    topic_data = [{"name": name, "topic_id": topics.ids.get(name) or uuid.uuid5(uuid.NAMESPACE_URL, name),
                   "partition_data": [{"index": p, "records": records(name, p)} for p in partitions]}
                  for name, partitions in parts]
    return request_body(ApiKey.PRODUCE, version, {"transactional_id": None, "acks": acks, "timeout_ms": 10_000,
                                                  "topic_data": topic_data})


def produced(version: int, acks: int, topics: Topics, parts: list[tuple[str, list[int]]]) -> Pipelined:
    return Pipelined(ApiKey.PRODUCE, version, produce(version, acks, topics, parts), answered=acks != 0)


def metadata(topics: Topics) -> Pipelined:
    """What a producer asks before it produces (and how ksgate learns the topics' ids)."""
    return Pipelined(ApiKey.METADATA, METADATA_V, _metadata_body([topics.allowed, topics.denied]))


API_VERSIONS = Pipelined(ApiKey.API_VERSIONS, 3, {"client_software_name": "cmp", "client_software_version": "1"})


def _metadata_body(names: list[str]) -> dict[str, Any]:
    return request_body(ApiKey.METADATA, METADATA_V, {"topics": [{"name": n} for n in names],
                                                      "allow_auto_topic_creation": False})


# -- running one side ----------------------------------------------------------------------------------------------

def run(sides: Sides, side: Side, topics: Topics, requests: list[Pipelined],
        landing: frozenset[tuple[str, int]] = frozenset()) -> Seen:
    """``requests`` in one write on a fresh connection of ``side`` (after the Metadata a producer asks first);
    what the client saw, with the records each partition of ``topics`` gained once each of ``landing`` has one (an
    acks=0 Produce is appended after the client has seen all it will see)."""
    connection = side.connect()
    try:
        warm = connection.pipeline([metadata(topics)])
        assert warm[0].kind == "response", warm
        before = _ends(sides.kafka, topics)
        outcomes = connection.pipeline(requests)
        # A closed connection is not opened again: exchange() would log in anew.
        still_open = connection.connected and connection.pipeline([API_VERSIONS])[0].kind == "response"
    finally:
        connection.close()
    answered = [request for request in requests if request.answered]
    return Seen([_normalized(o, r, topics) for o, r in zip(outcomes, answered, strict=True)], still_open,
                _written(sides.kafka, topics, before, landing))


def _normalized(outcome: Outcome, request: Pipelined, topics: Topics) -> Any:
    """A Produce answer as {(topic, partition): fields}; another answer as its kind (its content is not ours)."""
    if outcome.body is None or request.api_key != ApiKey.PRODUCE:
        return outcome.kind
    names = {topic_id: name for name, topic_id in topics.ids.items()}
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for topic in outcome.body["responses"]:
        name = topic["name"] if request.version < 13 else names.get(topic["topic_id"], f"id {topic['topic_id']}")
        for partition in topic["partition_responses"]:
            assert (name, partition["index"]) not in results, f"{name}/{partition['index']} answered twice"
            fields = {k: v for k, v in partition.items() if k not in NOT_COMPARED}
            results[(name, partition["index"])] = {**fields, "written": partition["base_offset"] >= 0}
    return results


def errors(seen: Seen) -> dict[tuple[str, int], int]:
    """The error code of each partition of the (one) Produce answer."""
    [answer] = [o for o in seen.outcomes if isinstance(o, dict)]
    return {key: fields["error_code"] for key, fields in answer.items()}


# -- the broker's logs, read directly (PLAINTEXT, a super user) ------------------------------------------------------

def _super(kafka: KafkaBroker, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
    client = WireClient(kafka.bootstrap("PLAINTEXT"))
    try:
        client.send(request_frame(api_key, version, 1, body, "cmp-reader"))
        return client.read_response(api_key, version)[1]
    finally:
        client.close()


def _log(kafka: KafkaBroker, topic: str, partition: int, offset: int = 0) -> tuple[int, list[bytes | None]]:
    """The partition's error code, and the values of its records from ``offset`` (what a consumer reads)."""
    answer = _super(kafka, ApiKey.FETCH, FETCH_V, request_body(ApiKey.FETCH, FETCH_V, {
        "max_wait_ms": 0, "min_bytes": 0, "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}]}))
    [data] = answer["responses"][0]["partitions"]
    records = [r for r in decode_batches(data["records"]) if r.offset >= offset]
    return data["error_code"], [r.value for r in records]


def _wait_for_leader(kafka: KafkaBroker, topic: str, partition: int) -> None:
    """A new topic's partition is led a moment after CreateTopics answers; until then a Fetch is refused."""
    deadline = time.monotonic() + TIMEOUT_S
    while _log(kafka, topic, partition)[0] != KafkaError.NONE:
        assert time.monotonic() < deadline, f"{topic}/{partition} never got a leader"
        time.sleep(0.05)  # polling the broker's state: there is no event to wait for


def _partitions(topics: Topics) -> list[tuple[str, int]]:
    return [(topics.allowed, 0), (topics.allowed, 1), (topics.denied, 0), *((name, 0) for name in topics.missing)]


def _ends(kafka: KafkaBroker, topics: Topics) -> dict[tuple[str, int], int | None]:
    """Each partition's record count (None: no such topic)."""
    ends: dict[tuple[str, int], int | None] = {}
    for topic, partition in _partitions(topics):
        error, values = _log(kafka, topic, partition)
        ends[(topic, partition)] = len(values) if error == KafkaError.NONE else None
    return ends


def _written(kafka: KafkaBroker, topics: Topics, before: dict[tuple[str, int], int | None],
             landing: frozenset[tuple[str, int]]) -> dict[tuple[str, int], list[bytes | None] | None]:
    """The values each partition gained since ``before`` (None: no such topic), once each of ``landing`` has one."""
    deadline = time.monotonic() + TIMEOUT_S
    gained: dict[tuple[str, int], list[bytes | None] | None] = {}
    for key in _partitions(topics):
        start = before[key]
        while True:
            error, values = _log(kafka, *key, offset=start or 0)
            if start is None or key not in landing or values or time.monotonic() > deadline:
                break
            time.sleep(0.05)  # an acks=0 record is appended after the client's last word: poll the broker
        gained[key] = values if start is not None and error == KafkaError.NONE else None
    return gained
