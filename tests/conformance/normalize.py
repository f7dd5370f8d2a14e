"""What legitimately differs between two servers' answers, taken out before they are compared.

Only these are normalised (docs/kafka-differences.md says why each may differ):
- where the broker is: node ids, hosts, ports (fields annotated ``entity=brokerId/brokerHost/brokerPort``),
  the cluster id, and the epoch of its finalized features (its metadata log's offset when they were read);
- throttle times, and timestamps the servers take from their clocks;
- ids the servers generate: topic ids, producer ids, member ids, delegation token ids and HMACs, other UUIDs.
  Each side's ids become placeholders in order of first appearance, so an id that recurs (a topic id in
  Metadata, then in Fetch) must recur on both sides in the same places;
- error messages, text and presence: error codes are what clients act on; Kafka's texts change between releases
  and, for refusals it forwards to its controller, carry a dump of its internal request object;
- where each broker keeps its data (log dirs, their sizes);
- item order, only in the per-item result lists named in ``UNORDERED``;
- a ShareFetch's partitions that carry nothing (no error, no records, none acquired): whether a share
  partition was ready to answer when a session opened is the broker's timing (its share state loads
  asynchronously), and ksgate relays an allowed partition's answer as the broker gave it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from protocol.api_keys import ApiKey
from protocol.registry import api
from protocol.schema import FieldSpec

ZERO_UUID = uuid.UUID(int=0)
NODE, HOST, PORT, CLUSTER, TIME, MESSAGE = "<node>", "<host>", "<port>", "<cluster>", "<time>", "<message>"
FEATURES_EPOCH = "<features-epoch>"

_GENERATED_STRINGS = frozenset({"member_id", "leader", "token_id", "group_instance_id_generated"})
_GENERATED_BYTES = frozenset({"hmac"})
_TIME_SUFFIXES = ("_timestamp", "_timestamp_ms", "_time_ms", "_timestamp_ms_", "_ms_since_epoch")
_NOT_TIMES = frozenset({"throttle_time_ms", "retention_time_ms", "session_timeout_ms", "rebalance_timeout_ms",
                        "transaction_timeout_ms", "timeout_ms", "max_wait_ms", "time_ms"})
_MESSAGES = frozenset({"error_message", "batch_index_error_message"})

# Lists of per-item results, compared as multisets.  Kafka's message specs do not fix their order and
# Kafka's own follows its internal maps (refusals first for some APIs, hash order for others); ksgate
# answers in the order the client asked (docs/kafka-differences.md, `item-order`).
UNORDERED: dict[int, frozenset[str]] = {
    ApiKey.PRODUCE: frozenset({"responses", "responses.partition_responses"}),
    ApiKey.FETCH: frozenset({"responses", "responses.partitions"}),
    ApiKey.LIST_OFFSETS: frozenset({"topics", "topics.partitions"}),
    ApiKey.METADATA: frozenset({"brokers", "topics"}),
    ApiKey.OFFSET_COMMIT: frozenset({"topics", "topics.partitions"}),
    ApiKey.TXN_OFFSET_COMMIT: frozenset({"topics", "topics.partitions"}),
    ApiKey.OFFSET_FETCH: frozenset({"topics", "groups", "groups.topics"}),
    ApiKey.DESCRIBE_GROUPS: frozenset({"groups"}),
    ApiKey.LIST_GROUPS: frozenset({"groups"}),
    ApiKey.CREATE_TOPICS: frozenset({"topics"}),
    ApiKey.DELETE_TOPICS: frozenset({"responses"}),
    ApiKey.DELETE_RECORDS: frozenset({"topics", "topics.partitions"}),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: frozenset({"topics", "topics.partitions"}),
    ApiKey.DESCRIBE_ACLS: frozenset({"resources", "resources.acls"}),
    ApiKey.DELETE_ACLS: frozenset({"filter_results.matching_acls"}),
    ApiKey.DESCRIBE_CONFIGS: frozenset({"results"}),
    ApiKey.ALTER_CONFIGS: frozenset({"responses"}),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: frozenset({"responses"}),
    ApiKey.CREATE_PARTITIONS: frozenset({"results"}),
    ApiKey.DELETE_GROUPS: frozenset({"results"}),
    ApiKey.ELECT_LEADERS: frozenset({"replica_election_results"}),
    ApiKey.OFFSET_DELETE: frozenset({"topics", "topics.partitions"}),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: frozenset({"results", "results.credential_infos"}),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: frozenset({"tokens", "tokens.renewers"}),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: frozenset({"entries", "entries.entity", "entries.values"}),
    ApiKey.ALTER_CLIENT_QUOTAS: frozenset({"entries"}),  # Kafka's: a hash map's order of the entities
    ApiKey.DESCRIBE_PRODUCERS: frozenset({"topics"}),
    ApiKey.DESCRIBE_TRANSACTIONS: frozenset({"transaction_states"}),
    ApiKey.LIST_TRANSACTIONS: frozenset({"transaction_states"}),
    ApiKey.DESCRIBE_CLUSTER: frozenset({"brokers"}),
    ApiKey.DESCRIBE_LOG_DIRS: frozenset({"results", "results.topics", "results.topics.partitions"}),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: frozenset({"topics"}),
    ApiKey.CONSUMER_GROUP_DESCRIBE: frozenset({"groups"}),
    ApiKey.SHARE_GROUP_DESCRIBE: frozenset({"groups"}),
    # Kafka's: refusals first, then a hash map's order of the topic ids (which differ between the two clusters).
    ApiKey.SHARE_FETCH: frozenset({"responses", "responses.partitions"}),
    ApiKey.SHARE_ACKNOWLEDGE: frozenset({"responses", "responses.partitions"}),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: frozenset({"responses", "responses.partitions"}),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: frozenset({"responses"}),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: frozenset({"groups", "groups.topics", "groups.topics.partitions"}),
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: frozenset({"client_metrics_resources"}),
    ApiKey.API_VERSIONS: frozenset({"supported_features", "finalized_features"}),  # Kafka's: a map's order
}
# Where each side's broker keeps its data, and how full that disk is: the two Kafkas differ there.
_HOST_FACTS = {"log_dir": "<dir>", "total_bytes": "<bytes>", "usable_bytes": "<bytes>"}


@dataclass(slots=True)
class Placeholders:
    """One side's generated ids → stable names, in order of first appearance."""

    seen: dict[tuple[str, Any], str] = field(default_factory=dict)

    def name(self, kind: str, value: Any) -> str:
        key = (kind, value)
        if key not in self.seen:
            self.seen[key] = f"<{kind}{sum(1 for k, _ in self.seen if k == kind) + 1}>"
        return self.seen[key]


def normalize_response(api_key: int, version: int, body: dict[str, Any], ids: Placeholders) -> dict[str, Any]:
    schema = api(api_key)
    assert schema is not None
    unordered = UNORDERED.get(api_key, frozenset())
    if api_key == ApiKey.SHARE_FETCH:
        body = _without_idle_share_partitions(body)
    return _struct(schema.response.fields, version, body, ids, "", unordered)


def _without_idle_share_partitions(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` without the partitions that answered nothing, and without topics left with none."""
    def idle(partition: dict[str, Any]) -> bool:
        return (partition.get("error_code", 0) == 0 and partition.get("acknowledge_error_code", 0) == 0
                and not partition.get("records") and not partition.get("acquired_records"))

    topics = []
    for topic in body.get("responses") or []:
        partitions = [p for p in topic.get("partitions") or [] if not idle(p)]
        if partitions:
            topics.append({**topic, "partitions": partitions})
    return {**body, "responses": topics} if "responses" in body else body


def _struct(fields: list[FieldSpec], version: int, body: dict[str, Any], ids: Placeholders, path: str,
            unordered: frozenset[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in fields:
        if version not in spec.versions or spec.name not in body:
            continue
        where = f"{path}.{spec.name}" if path else spec.name
        out[spec.name] = _value(spec, version, body[spec.name], ids, where, unordered)
    return out


def _value(spec: FieldSpec, version: int, value: Any, ids: Placeholders, where: str,
           unordered: frozenset[str]) -> Any:
    if spec.name in _MESSAGES:
        return MESSAGE
    if value is None:
        return None
    if spec.is_struct_array:
        items = [_struct(spec.fields, version, item, ids, where, unordered) for item in value]
        return sorted(items, key=_canonical) if where in unordered else items
    if spec.is_struct:
        return _struct(spec.fields, version, value, ids, where, unordered)
    if spec.element_type is not None:
        items = [_scalar(spec, item, ids) for item in value]
        return sorted(items, key=_canonical) if where in unordered else items
    return _scalar(spec, value, ids)


def _scalar(spec: FieldSpec, value: Any, ids: Placeholders) -> Any:
    name, entity = spec.name, spec.entity
    if entity == "brokerId":
        return NODE if isinstance(value, int) and value >= 0 else value
    if entity == "brokerHost":
        return HOST
    if entity == "brokerPort":
        return PORT
    if name == "throttle_time_ms":
        return 0
    if name == "cluster_id":
        return CLUSTER
    if name == "finalized_features_epoch":  # -1 (unknown) stays: a side that knows none differs
        return FEATURES_EPOCH if isinstance(value, int) and value >= 0 else value
    if name in _HOST_FACTS:
        return _HOST_FACTS[name]
    if isinstance(value, uuid.UUID):
        return value if value == ZERO_UUID else ids.name("uuid", value)
    if entity == "producerId" or name == "producer_id":
        return ids.name("pid", value) if isinstance(value, int) and value >= 0 else value
    if name in _GENERATED_STRINGS and isinstance(value, str) and value:
        return ids.name(name, value)
    if name in _GENERATED_BYTES:
        return ids.name(name, bytes(value)) if value else value
    if isinstance(value, int) and _is_time(name) and value > 0:
        return TIME
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


def _is_time(name: str) -> bool:
    return name not in _NOT_TIMES and (name.endswith(_TIME_SUFFIXES) or name in {"timestamp", "max_timestamp"})


def _canonical(item: Any) -> str:
    return json.dumps(item, sort_keys=True, default=str)
