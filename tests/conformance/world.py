"""The shared starting state of both sides, set up through the wire by the super user, identically.

Principals: ``cf-super`` (a super user), ``cf-full`` (ALL on the ``cf-`` prefixes and the cluster, but
DENY WRITE on ``cf-b``), ``cf-part`` (rights over one topic, group and transactional id: half of a mixed
request), ``cf-describe`` (DESCRIBE only) and ``cf-none`` (no ACL).  Users are created with
AlterUserScramCredentials and ACLs with CreateAcls on each side, so the set-up itself goes through the
APIs being compared.
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol.api_keys import ApiKey
from protocol.record_batch import encode_batch
from tests.conformance.bodies import request_body
from tests.conformance.cases import CLUSTER, GROUP, LITERAL, PREFIXED, TOPIC, TXN_ID, UNKNOWN_TOPIC_ID
from tests.conformance.wire import Connection, Endpoint

SUPER = "cf-super"
PRINCIPALS = (SUPER, "cf-full", "cf-part", "cf-describe", "cf-none")
ITERATIONS = 4096
SCRAM_SHA_512 = 2  # AlterUserScramCredentials' mechanism code
_ALL, _WRITE, _DESCRIBE, _ALLOW, _DENY = 2, 4, 8, 3, 2
TOPICS = {"cf-a": 2, "cf-b": 1, "other": 1}
_RETRIABLE = frozenset({5, 6, 7, 14, 15, 16, 51, 89})  # leader/coordinator not ready, timed out, concurrent txns


def password(user: str) -> str:
    return f"{user}-pw"


def _acl(resource_type: int, name: str, pattern: int, principal: str, operation: int, permission: int = _ALLOW
         ) -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": f"User:{principal}", "host": "*", "operation": operation, "permission_type": permission}


ACLS = [
    *(_acl(kind, "cf-", PREFIXED, "cf-full", _ALL) for kind in (TOPIC, GROUP, TXN_ID)),
    _acl(CLUSTER, "kafka-cluster", LITERAL, "cf-full", _ALL),
    _acl(TOPIC, "cf-b", LITERAL, "cf-full", _WRITE, _DENY),
    _acl(TOPIC, "cf-a", LITERAL, "cf-part", _ALL),
    _acl(GROUP, "cf-g", LITERAL, "cf-part", _ALL),
    _acl(TXN_ID, "cf-t", LITERAL, "cf-part", _ALL),
    *(_acl(kind, "cf-", PREFIXED, "cf-describe", _DESCRIBE) for kind in (TOPIC, GROUP, TXN_ID)),
    _acl(CLUSTER, "kafka-cluster", LITERAL, "cf-describe", _DESCRIBE),
]


class SetupFailed(Exception):
    pass


@dataclass(slots=True)
class Side:
    """One side of the comparison: where it listens, and the ids its cluster generated."""

    name: str  # "kafka" or "ksgate"
    endpoint: Endpoint
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    node: int = -1
    cluster: str = ""
    connections: dict[str, Connection] = field(default_factory=dict)

    def topic_id(self, name: str) -> uuid.UUID:
        return self.topic_ids.get(name, UNKNOWN_TOPIC_ID)

    @property
    def node_id(self) -> int:
        return self.node

    @property
    def cluster_id(self) -> str:
        return self.cluster

    def connection(self, principal: str) -> Connection:
        if principal not in self.connections:
            self.connections[principal] = Connection(self.endpoint, principal, password(principal))
        return self.connections[principal]

    def call(self, principal: str, api_key: int, template: dict[str, Any], version: int | None = None
             ) -> dict[str, Any]:
        """One request as ``principal`` at its newest version (retried while the cluster is not ready)."""
        connection = self.connection(principal)
        chosen = version if version is not None else _newest(connection, api_key)
        body = request_body(api_key, chosen, template)
        for _ in range(60):
            outcome = connection.exchange(api_key, chosen, body)
            if outcome.body is None:
                raise SetupFailed(f"{self.name}: api {api_key} v{chosen}: connection {outcome.kind}")
            if not retriable(outcome.body):
                return outcome.body
            time.sleep(0.25)
        raise SetupFailed(f"{self.name}: api {api_key} still not ready: {outcome.body}")

    def settle(self, topics: tuple[str, ...]) -> None:
        """Until each of ``topics`` is either absent or has a leader for every partition (bounded)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            metadata = self.call(SUPER, ApiKey.METADATA, {"topics": [{"name": n} for n in topics],
                                                        "allow_auto_topic_creation": False})
            if all(t["error_code"] == 3 or (t["error_code"] == 0 and all(p["leader_id"] >= 0 for p in t["partitions"]))
                   for t in metadata["topics"]):
                return
            time.sleep(0.1)
        raise SetupFailed(f"{self.name}: topics {topics} never settled")

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()


def _newest(connection: Connection, api_key: int) -> int:
    if not connection.versions:
        connection.exchange(ApiKey.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
    return connection.versions[api_key][1]


def retriable(body: Any) -> bool:
    """Whether any error code anywhere in ``body`` says "not ready yet, try again"."""
    if isinstance(body, dict):
        return any((k == "error_code" and v in _RETRIABLE) or retriable(v) for k, v in body.items())
    if isinstance(body, list):
        return any(retriable(item) for item in body)
    return False


def set_up(side: Side) -> None:
    """Users, ACLs, topics, records and warm coordinators, as the super user."""
    _users(side)
    _checked(side.call(SUPER, ApiKey.CREATE_ACLS, {"creations": ACLS}), "results", side)
    _topics(side)
    three = encode_batch([(b"k", b"v0"), (b"k", b"v1"), (b"k", b"v2")], timestamp_ms=1_700_000_000_000)
    one = encode_batch([(b"k", b"v")], timestamp_ms=1_700_000_000_000)
    for topic, batch in (("cf-a", three), ("cf-b", one)):
        side.call(SUPER, ApiKey.PRODUCE, {"acks": -1, "timeout_ms": 10000, "topic_data": [
            {"name": topic, "topic_id": side.topic_id(topic), "partition_data": [{"index": 0, "records": batch}]}]})
    side.call(SUPER, ApiKey.FIND_COORDINATOR, {"key": "cf-g", "key_type": 0, "coordinator_keys": ["cf-g"]})
    side.call(SUPER, ApiKey.OFFSET_FETCH, {"group_id": "cf-g", "topics": None,
                                          "groups": [{"group_id": "cf-g", "topics": None}]})
    side.call(SUPER, ApiKey.FIND_COORDINATOR, {"key": "cf-t", "key_type": 1, "coordinator_keys": ["cf-t"]})
    side.call(SUPER, ApiKey.INIT_PRODUCER_ID, {"transactional_id": "cf-t", "transaction_timeout_ms": 60000})


def _users(side: Side) -> None:
    upsertions = []
    for user in PRINCIPALS[1:]:
        salt = os.urandom(16)
        salted = hashlib.pbkdf2_hmac("sha512", password(user).encode(), salt, ITERATIONS)
        upsertions.append({"name": user, "mechanism": SCRAM_SHA_512, "iterations": ITERATIONS,
                           "salt": salt, "salted_password": salted})
    _checked(side.call(SUPER, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": [], "upsertions": upsertions}),
             "results", side)


def _topics(side: Side) -> None:
    answer = side.call(SUPER, ApiKey.CREATE_TOPICS, {"timeout_ms": 30000, "validate_only": False, "topics": [
        {"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [], "configs": []}
        for name, count in TOPICS.items()]})
    _checked(answer, "topics", side)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        metadata = side.call(SUPER, ApiKey.METADATA, {"topics": [{"name": n} for n in TOPICS],
                                                      "allow_auto_topic_creation": False})
        ready = all(t["error_code"] == 0 and t["partitions"] and all(p["leader_id"] >= 0 for p in t["partitions"])
                    for t in metadata["topics"])
        if ready:
            side.topic_ids = {t["name"]: t["topic_id"] for t in metadata["topics"]}
            side.node = metadata["brokers"][0]["node_id"]
            side.cluster = metadata["cluster_id"]
            return
        time.sleep(0.2)
    raise SetupFailed(f"{side.name}: topics never got leaders")


def _checked(answer: dict[str, Any], items: str, side: Side) -> None:
    errors = [item for item in answer[items] if item.get("error_code")]
    if errors:
        raise SetupFailed(f"{side.name}: set-up refused: {errors}")
