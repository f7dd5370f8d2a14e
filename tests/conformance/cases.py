"""The requests the conformance suite sends: one template per case, written once for every version.

Each case runs at every version both sides offer, from every principal (``world.PRINCIPALS``), in the
order listed here, on both sides in lockstep; so a case that changes state (a commit, a created ACL)
leaves both clusters in the same state for the cases after it.  Names the world defines:
topics ``cf-a`` (2 partitions, 3 records in partition 0), ``cf-b`` (1 partition, 1 record) and
``other`` (outside every principal's prefix); groups ``cf-g``, ``cf-h``, ``other-g``; transactional
ids ``cf-t``, ``other-t``.  Edges in nearly every family: an unknown name, an illegal name, a
duplicate item, an empty list and, where the schema allows, a null list.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.api_keys import ApiKey
from protocol.record_batch import encode_batch

Body = dict[str, Any]
UNKNOWN_TOPIC_ID = uuid.UUID("0a0b0c0d-0000-4000-8000-00000000cafe")
ILLEGAL = "bad name!"  # a space and '!' are outside Kafka's legal topic characters
RECORDS = encode_batch([(b"k", b"v")], timestamp_ms=1_700_000_000_000)

# Resource types, pattern types, operations, permissions (Kafka's codes).
RESOURCE_ANY, TOPIC, GROUP, CLUSTER, TXN_ID = 1, 2, 3, 4, 5
BROKER = 4  # DescribeConfigs' resource type (ConfigResource.Type), not an ACL's
PATTERN_ANY, PATTERN_MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
OP_ANY, OP_ALL, OP_READ, OP_WRITE, OP_DESCRIBE = 1, 2, 3, 4, 8
ALLOW, DENY, PERM_ANY = 3, 2, 1


class Names(Protocol):
    """What differs between the two sides and a request must name: ids the cluster generated."""

    def topic_id(self, name: str) -> uuid.UUID:
        """The topic's id on this side; an unknown topic's is a fixed id no cluster has."""

    @property
    def node_id(self) -> int: ...

    @property
    def cluster_id(self) -> str: ...


@dataclass(slots=True, frozen=True)
class Case:
    name: str
    api_key: int
    template: Callable[[Names], Body]
    # Below this version the request would block on other members (JoinGroup v0-3 waits out the rebalance).
    min_version: int = 0
    # Topics the case may create (auto-creation): each comparison waits until both clusters show them settled,
    # since Kafka creates them asynchronously and the next principal would otherwise race the creation.
    settles: tuple[str, ...] = ()
    # Kafka answers from state its controller publishes asynchronously (delegation tokens; a topic whose
    # auto-creation is still in flight reads as UNKNOWN_TOPIC_OR_PARTITION, not retriable, until the broker's
    # metadata image has it): a pair that differs is asked again, on both sides, until they agree or a bound
    # runs out.
    eventual: bool = False
    # Sent as the first request of a fresh connection, before any login (Kafka's SASL authenticator answers it).
    before_login: bool = False
    # The top-level response fields compared, where the rest is what each side offers and is compared elsewhere
    # (a successful ApiVersions: its ranges are the run's version gaps); empty: every field.
    compared: tuple[str, ...] = ()


def _topics_by_name(*names: str) -> Callable[[Names], list[Body]]:
    def build(ids: Names) -> list[Body]:
        return [{"name": n, "topic_id": ids.topic_id(n)} for n in names]
    return build


def _fetch_topics(ids: Names, *names: str) -> list[Body]:
    return [{"topic": n, "topic_id": ids.topic_id(n),
             "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 65536}]} for n in names]


def _produce(*names: str, acks: int = 1) -> Callable[[Names], Body]:
    def build(ids: Names) -> Body:
        return {"acks": acks, "timeout_ms": 5000, "topic_data": [
            {"name": n, "topic_id": ids.topic_id(n), "partition_data": [{"index": 0, "records": RECORDS}]}
            for n in names]}
    return build


def _offsets(*names: str, timestamp: int = -1) -> Callable[[Names], Body]:
    def build(ids: Names) -> Body:
        return {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000, "topics": [
            {"name": n, "partitions": [{"partition_index": 0, "timestamp": timestamp}]} for n in names]}
    return build


def _configs(*resources: tuple[int, str], keys: list[str] | None = None) -> Callable[[Names], Body]:
    def build(ids: Names) -> Body:
        return {"resources": [{"resource_type": t, "resource_name": str(ids.node_id) if n == "<node>" else n,
                               "configuration_keys": keys} for t, n in resources]}
    return build


def _acl_filter(resource_type: int = RESOURCE_ANY, name: str | None = None, pattern: int = PATTERN_ANY,
                principal: str | None = None) -> Body:
    return {"resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": None, "operation": OP_ANY, "permission_type": PERM_ANY}


def _static(body: Body) -> Callable[[Names], Body]:
    return lambda ids: body


def _software(name: str, version: str = "1") -> Callable[[Names], Body]:
    return _static({"client_software_name": name, "client_software_version": version})


_API_VERSIONS_COMPARED = ("error_code", "supported_features", "finalized_features_epoch", "finalized_features",
                          "zk_migration_ready")


def _api_versions_cases() -> list[Case]:
    """ApiVersions v3+ naming the client's software (KIP-511), after and before login (Kafka's SASL authenticator
    checks it too), and v5 (KIP-1242) naming the cluster and node the client means to reach. Of a successful
    answer the error code and the features are compared (as Kafka lists them for each version: from v4 also
    those whose lowest level is 0); the API ranges list what each side offers (the version gaps, known.py)."""
    software = [("valid", _software("apache-kafka-java", "4.4.0")), ("invalid_name", _software("bad name!")),
                ("empty_name", _software("")), ("invalid_version", _software("x", "4.4.0 beta")),
                ("empty_version", _software("x", ""))]
    return [
        *(Case(f"api_versions.software_{name}{when}", ApiKey.API_VERSIONS, template, min_version=3,
               before_login=bool(when), compared=_API_VERSIONS_COMPARED if name == "valid" else ())
          for name, template in software for when in ("", ".before_login")),
        # Kafka checks the software name (isValid) before the node named: INVALID_REQUEST, not REBOOTSTRAP_REQUIRED.
        Case("api_versions.invalid_name_other_cluster", ApiKey.API_VERSIONS, lambda ids: {
            "client_software_name": "", "client_software_version": "1",
            "cluster_id": "cf-not-this-cluster", "node_id": ids.node_id}, min_version=5),
        Case("api_versions.node_without_cluster", ApiKey.API_VERSIONS, lambda ids: {
            "client_software_name": "ksgate-conformance", "client_software_version": "1",
            "cluster_id": None, "node_id": ids.node_id}, min_version=5),
        Case("api_versions.other_cluster", ApiKey.API_VERSIONS, lambda ids: {
            "client_software_name": "ksgate-conformance", "client_software_version": "1",
            "cluster_id": "cf-not-this-cluster", "node_id": ids.node_id}, min_version=5),
        Case("api_versions.other_node", ApiKey.API_VERSIONS, lambda ids: {
            "client_software_name": "ksgate-conformance", "client_software_version": "1",
            "cluster_id": ids.cluster_id, "node_id": ids.node_id + 1000}, min_version=5),
    ]


def _metadata_cases() -> list[Case]:
    named = _topics_by_name("cf-a", "cf-b", "other", "cf-missing", ILLEGAL, "cf-a")
    return [
        Case("metadata.all", ApiKey.METADATA, _static({"topics": None, "allow_auto_topic_creation": False,
                                                       "include_topic_authorized_operations": True})),
        # From v4 a request can ask for no auto-creation; before, every missing name is created (next case).
        Case("metadata.mixed", ApiKey.METADATA, lambda ids: {
            "topics": named(ids), "allow_auto_topic_creation": False, "include_topic_authorized_operations": True},
            min_version=4),
        Case("metadata.auto_create", ApiKey.METADATA, _static({
            "topics": [{"name": n} for n in ("cf-auto", "other-auto", "cf-a")], "allow_auto_topic_creation": True}),
            settles=("cf-auto", "other-auto"), eventual=True),
        Case("metadata.empty", ApiKey.METADATA, _static({"topics": [], "allow_auto_topic_creation": False})),
        Case("metadata.by_id", ApiKey.METADATA, lambda ids: {"topics": [
            {"topic_id": ids.topic_id("cf-a"), "name": None}, {"topic_id": UNKNOWN_TOPIC_ID, "name": None}],
            "allow_auto_topic_creation": False}),
        Case("metadata.cluster_ops", ApiKey.METADATA, _static({
            "topics": [], "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True})),
    ]


def _data_cases() -> list[Case]:
    return [
        Case("produce.mixed", ApiKey.PRODUCE, _produce("cf-a", "cf-b", "other", "cf-missing")),
        Case("produce.acks_all", ApiKey.PRODUCE, _produce("cf-b", acks=-1)),
        Case("fetch.mixed", ApiKey.FETCH, lambda ids: {
            "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": _fetch_topics(ids, "cf-a", "cf-b", "other", "cf-missing"),
            "forgotten_topics_data": [], "rack_id": ""}),
        Case("list_offsets.latest", ApiKey.LIST_OFFSETS, _offsets("cf-a", "cf-b", "other", "cf-missing")),
        Case("list_offsets.earliest", ApiKey.LIST_OFFSETS, _offsets("cf-a", timestamp=-2)),
        Case("offset_for_leader_epoch", ApiKey.OFFSET_FOR_LEADER_EPOCH, _static({"replica_id": -2, "topics": [
            {"topic": n, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}
            for n in ("cf-a", "other", "cf-missing")]})),
        Case("delete_records", ApiKey.DELETE_RECORDS, _static({"timeout_ms": 5000, "topics": [
            {"name": n, "partitions": [{"partition_index": 0, "offset": 0}]}
            for n in ("cf-a", "other", "cf-missing")]})),
        Case("describe_producers", ApiKey.DESCRIBE_PRODUCERS, _static({"topics": [
            {"name": n, "partition_indexes": [0]} for n in ("cf-a", "other", "cf-missing")]})),
        Case("describe_topic_partitions", ApiKey.DESCRIBE_TOPIC_PARTITIONS, _static({
            "topics": [{"name": n} for n in ("cf-a", "cf-b", "other", "cf-missing")],
            "response_partition_limit": 2000, "cursor": None})),
    ]


def _topic_admin_cases() -> list[Case]:
    def create(validate_only: bool, *names: str) -> Callable[[Names], Body]:
        return _static({"timeout_ms": 10000, "validate_only": validate_only, "topics": [
            {"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
            for n in names]})
    return [
        Case("create_topics.validate", ApiKey.CREATE_TOPICS,
             create(True, "cf-new", "other-new", ILLEGAL, "cf-a", "cf-dup", "cf-dup")),
        Case("create_topics.bad_config", ApiKey.CREATE_TOPICS, _static({"timeout_ms": 10000, "validate_only": True,
             "topics": [{"name": "cf-cfg", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                         "configs": [{"name": "no.such.config", "value": "1"}]}]})),
        Case("create_topics.empty", ApiKey.CREATE_TOPICS, create(True)),
        Case("create_partitions.validate", ApiKey.CREATE_PARTITIONS, _static({
            "timeout_ms": 10000, "validate_only": True, "topics": [
                {"name": n, "count": 3, "assignments": None} for n in ("cf-a", "other", "cf-missing")]})),
        Case("delete_topics.unknown", ApiKey.DELETE_TOPICS, lambda ids: {"timeout_ms": 5000,
             "topic_names": ["cf-missing", "other-missing"],
             "topics": [{"name": "cf-missing", "topic_id": uuid.UUID(int=0)},
                        {"name": None, "topic_id": UNKNOWN_TOPIC_ID}]}),
        Case("describe_configs", ApiKey.DESCRIBE_CONFIGS, _configs(
            (TOPIC, "cf-a"), (TOPIC, "other"), (TOPIC, "cf-missing"), keys=["retention.ms", "cleanup.policy"])),
        Case("describe_configs.broker", ApiKey.DESCRIBE_CONFIGS,
             _configs((BROKER, "<node>"), keys=["log.retention.hours"])),
        Case("alter_configs.validate", ApiKey.ALTER_CONFIGS, _static({"validate_only": True, "resources": [
            {"resource_type": TOPIC, "resource_name": n, "configs": [{"name": "retention.ms", "value": "3600000"}]}
            for n in ("cf-a", "other", "cf-missing")]})),
        Case("incremental_alter_configs.validate", ApiKey.INCREMENTAL_ALTER_CONFIGS, _static({
            "validate_only": True, "resources": [
                {"resource_type": TOPIC, "resource_name": n,
                 "configs": [{"name": "retention.ms", "config_operation": 0, "value": "3600000"}]}
                for n in ("cf-a", "other", "cf-missing")]})),
        Case("describe_log_dirs", ApiKey.DESCRIBE_LOG_DIRS, _static({"topics": [
            {"topic": n, "partitions": [0]} for n in ("cf-a", "other")]})),
        Case("list_partition_reassignments", ApiKey.LIST_PARTITION_REASSIGNMENTS, _static({
            "timeout_ms": 5000, "topics": None})),
        Case("elect_leaders", ApiKey.ELECT_LEADERS, _static({"election_type": 0, "timeout_ms": 5000,
             "topic_partitions": [{"topic": n, "partitions": [0]} for n in ("cf-a", "other")]})),
        Case("describe_cluster", ApiKey.DESCRIBE_CLUSTER, _static({
            "include_cluster_authorized_operations": True, "endpoint_type": 1})),
        Case("alter_partition_reassignments.cancel_none", ApiKey.ALTER_PARTITION_REASSIGNMENTS, _static({
            "timeout_ms": 5000, "allow_replication_factor_change": True, "topics": [
                {"name": n, "partitions": [{"partition_index": 0, "replicas": None}]} for n in ("cf-a", "other")]})),
        Case("alter_replica_log_dirs.unknown_dir", ApiKey.ALTER_REPLICA_LOG_DIRS, _static({"dirs": [
            {"path": "/nonexistent", "topics": [{"name": n, "partitions": [0]} for n in ("cf-a", "other")]}]})),
        Case("update_features.validate", ApiKey.UPDATE_FEATURES, _static({
            "timeout_ms": 5000, "validate_only": True, "feature_updates": [
                {"feature": "no.such.feature", "max_version_level": 1, "allow_downgrade": False, "upgrade_type": 1}]})),
        Case("list_client_metrics_resources", ApiKey.LIST_CLIENT_METRICS_RESOURCES, _static({"resource_types": []})),
    ]


def _topology_description(group: str) -> Callable[[Names], Body]:
    def node(name: str, node_type: int, sources: list[str], sink: str | None) -> Body:
        return {"name": name, "node_type": node_type, "source_topics": sources, "sink_topic": sink,
                "stores": [], "successors": []}
    return _static({"group_id": group, "member_id": "nobody", "topology_epoch": 1, "topology_description": {
        "subtopologies": [{"subtopology_id": "0", "nodes": [
            node("KSTREAM-SOURCE-0000000000", 1, ["cf-a", "other"], None),
            node("KSTREAM-SINK-0000000001", 3, [], "other-out")]}],
        "global_stores": [{"source": node("KSTREAM-SOURCE-0000000002", 1, ["cf-b"], None),
                           "processor": node("KTABLE-SOURCE-0000000003", 2, [], None)}]}})


def _group_cases() -> list[Case]:
    return [
        Case("find_coordinator.group", ApiKey.FIND_COORDINATOR, _static({
            "key": "cf-g", "key_type": 0, "coordinator_keys": ["cf-g", "other-g", "cf-g"]})),
        Case("find_coordinator.txn", ApiKey.FIND_COORDINATOR, _static({
            "key": "cf-t", "key_type": 1, "coordinator_keys": ["cf-t", "other-t"]})),
        Case("offset_commit.simple", ApiKey.OFFSET_COMMIT, lambda ids: {
            "group_id": "cf-g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "retention_time_ms": -1, "topics": [
                {"name": n, "topic_id": ids.topic_id(n), "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": "m"}]}
                for n in ("cf-a", "other", "cf-missing")]}),
        Case("offset_commit.other_group", ApiKey.OFFSET_COMMIT, lambda ids: {
            "group_id": "other-g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
                {"name": "cf-a", "topic_id": ids.topic_id("cf-a"),
                 "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": None}]}]}),
        Case("offset_fetch", ApiKey.OFFSET_FETCH, lambda ids: {
            "group_id": "cf-g", "topics": [{"name": n, "partition_indexes": [0]} for n in ("cf-a", "other")],
            "groups": [{"group_id": g, "topics": [
                {"name": n, "topic_id": ids.topic_id(n), "partition_indexes": [0]} for n in ("cf-a", "other")]}
                for g in ("cf-g", "other-g")], "require_stable": False}),
        Case("offset_fetch.all_topics", ApiKey.OFFSET_FETCH, _static({
            "group_id": "cf-g", "topics": None, "groups": [{"group_id": "cf-g", "topics": None}]})),
        Case("describe_groups", ApiKey.DESCRIBE_GROUPS, _static({
            "groups": ["cf-g", "cf-h", "other-g", "cf-g"], "include_authorized_operations": True})),
        Case("list_groups", ApiKey.LIST_GROUPS, _static({"states_filter": [], "types_filter": []})),
        Case("join_group.new_member", ApiKey.JOIN_GROUP, _static({
            "group_id": "cf-h", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}], "reason": None}), min_version=4),
        Case("heartbeat.unknown_member", ApiKey.HEARTBEAT, _static({
            "group_id": "cf-g", "generation_id": 1, "member_id": "nobody", "group_instance_id": None})),
        Case("sync_group.unknown_member", ApiKey.SYNC_GROUP, _static({
            "group_id": "cf-g", "generation_id": 1, "member_id": "nobody", "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": "range", "assignments": []})),
        Case("leave_group.unknown_member", ApiKey.LEAVE_GROUP, _static({
            "group_id": "cf-g", "member_id": "nobody",
            "members": [{"member_id": "nobody", "group_instance_id": None, "reason": None}]})),
        Case("offset_delete", ApiKey.OFFSET_DELETE, _static({"group_id": "cf-g", "topics": [
            {"name": n, "partitions": [{"partition_index": 0}]} for n in ("cf-a", "other")]})),
        Case("consumer_group_describe", ApiKey.CONSUMER_GROUP_DESCRIBE, _static({
            "group_ids": ["cf-g", "other-g", "cf-missing-g"], "include_authorized_operations": True})),
        Case("share_group_describe", ApiKey.SHARE_GROUP_DESCRIBE, _static({
            "group_ids": ["cf-s", "other-s"], "include_authorized_operations": True})),
        Case("streams_group_describe", ApiKey.STREAMS_GROUP_DESCRIBE, _static({
            "group_ids": ["cf-st", "other-st"], "include_authorized_operations": True})),
        Case("streams_group_describe.topology_description", ApiKey.STREAMS_GROUP_DESCRIBE, _static({
            "group_ids": ["cf-st", "other-st"], "include_authorized_operations": True,
            "include_topology_description": True}), min_version=1),
        Case("streams_group_heartbeat.unknown_member", ApiKey.STREAMS_GROUP_HEARTBEAT, _static({
            "group_id": "cf-st", "member_id": "nobody", "member_epoch": 3, "endpoint_information_epoch": 0})),
        # A join whose topology reads a topic outside every prefix: only the super user may describe both.
        Case("streams_group_heartbeat.join_other_topic", ApiKey.STREAMS_GROUP_HEARTBEAT, _static({
            "group_id": "cf-st-join", "member_id": "cf-member", "member_epoch": 0, "endpoint_information_epoch": 0,
            "rebalance_timeout_ms": 30000, "process_id": "cf-process", "active_tasks": [], "standby_tasks": [],
            "warmup_tasks": [], "client_tags": [], "task_offsets": [], "task_end_offsets": [],
            "topology": {"epoch": 1, "subtopologies": [{
                "subtopology_id": "0", "source_topics": ["cf-a", "other"], "source_topic_regex": [],
                "state_changelog_topics": [], "repartition_sink_topics": [], "repartition_source_topics": [],
                "copartition_groups": []}]}})),
        # KIP-1331: READ on the group alone authorizes it, whatever topics the description names.
        *(Case(f"streams_group_topology_description_update.{group}", ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE,
               _topology_description(group)) for group in ("cf-st", "cf-g", "other-st")),
        Case("describe_share_group_offsets", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, _static({"groups": [
            {"group_id": g, "topics": [{"topic_name": "cf-a", "partitions": [0]}]} for g in ("cf-s", "other-s")]})),
        Case("delete_groups", ApiKey.DELETE_GROUPS, _static({"groups_names": ["cf-empty-g", "other-g", "cf-g"]})),
    ]


def _transaction_cases() -> list[Case]:
    return [
        Case("init_producer_id.idempotent", ApiKey.INIT_PRODUCER_ID, _static({
            "transactional_id": None, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})),
        Case("init_producer_id.other_txn", ApiKey.INIT_PRODUCER_ID, _static({
            "transactional_id": "other-t", "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1})),
        Case("add_partitions_to_txn.unknown_producer", ApiKey.ADD_PARTITIONS_TO_TXN, _static({
            "v3_and_below_transactional_id": "cf-t", "v3_and_below_producer_id": 999999,
            "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": "cf-a", "partitions": [0]}],
            "transactions": [{"transactional_id": "cf-t", "producer_id": 999999, "producer_epoch": 0,
                              "verify_only": False, "topics": [{"name": "cf-a", "partitions": [0]}]}]})),
        Case("add_offsets_to_txn.unknown_producer", ApiKey.ADD_OFFSETS_TO_TXN, _static({
            "transactional_id": "cf-t", "producer_id": 999999, "producer_epoch": 0, "group_id": "cf-g"})),
        Case("end_txn.unknown_producer", ApiKey.END_TXN, _static({
            "transactional_id": "cf-t", "producer_id": 999999, "producer_epoch": 0, "committed": True})),
        Case("txn_offset_commit.unknown_producer", ApiKey.TXN_OFFSET_COMMIT, lambda ids: {
            "transactional_id": "cf-t", "group_id": "cf-g", "producer_id": 999999, "producer_epoch": 0,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                {"name": "cf-a", "topic_id": ids.topic_id("cf-a"), "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}]}]}),
        # v6 names topics by id (KIP-1319): a readable topic, one outside every prefix and an id no topic has.
        Case("txn_offset_commit.mixed_topics", ApiKey.TXN_OFFSET_COMMIT, lambda ids: {
            "transactional_id": "cf-t", "group_id": "cf-g", "producer_id": 999999, "producer_epoch": 0,
            "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
                {"name": n, "topic_id": ids.topic_id(n), "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}]}
                for n in ("cf-a", "other", "cf-missing")]}),
        Case("describe_transactions", ApiKey.DESCRIBE_TRANSACTIONS, _static({
            "transactional_ids": ["cf-t", "other-t", "cf-never"]})),
        Case("list_transactions", ApiKey.LIST_TRANSACTIONS, _static({
            "state_filters": [], "producer_id_filters": [], "duration_filter": -1, "transactional_id_pattern": None})),
    ]


def _security_cases() -> list[Case]:
    binding = {"resource_type": TOPIC, "resource_name": "cf-acl", "resource_pattern_type": LITERAL,
               "principal": "User:cf-none", "host": "*", "operation": OP_READ, "permission_type": ALLOW}
    return [
        Case("describe_acls.all", ApiKey.DESCRIBE_ACLS, _static(_acl_filter())),
        Case("describe_acls.topic_match", ApiKey.DESCRIBE_ACLS, _static(_acl_filter(TOPIC, "cf-a", PATTERN_MATCH))),
        Case("create_acls", ApiKey.CREATE_ACLS, _static({"creations": [
            binding, {**binding, "resource_name": "", "operation": OP_WRITE},
            {**binding, "principal": "not-a-principal"}]})),
        Case("delete_acls", ApiKey.DELETE_ACLS, _static({"filters": [
            _acl_filter(TOPIC, "cf-acl", LITERAL, "User:cf-none"), _acl_filter(TOPIC, "cf-nothing", LITERAL)]})),
        Case("describe_user_scram_credentials.all", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, _static({"users": None})),
        Case("describe_user_scram_credentials.named", ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, _static({
            "users": [{"name": "cf-full"}, {"name": "cf-nobody"}, {"name": "cf-full"}]})),
        Case("alter_user_scram_credentials.delete_unknown", ApiKey.ALTER_USER_SCRAM_CREDENTIALS, _static({
            "deletions": [{"name": "cf-nobody", "mechanism": 2}], "upsertions": []})),
        Case("create_delegation_token", ApiKey.CREATE_DELEGATION_TOKEN, _static({
            "owner_principal_type": None, "owner_principal_name": None,
            "renewers": [{"principal_type": "User", "principal_name": "cf-full"}], "max_lifetime_ms": -1})),
        Case("create_delegation_token.for_other", ApiKey.CREATE_DELEGATION_TOKEN, _static({
            "owner_principal_type": "User", "owner_principal_name": "cf-none", "renewers": [],
            "max_lifetime_ms": 3_600_000})),
        Case("describe_delegation_token", ApiKey.DESCRIBE_DELEGATION_TOKEN, _static({"owners": None}), eventual=True),
        Case("describe_delegation_token.owner", ApiKey.DESCRIBE_DELEGATION_TOKEN, _static({
            "owners": [{"principal_type": "User", "principal_name": "cf-full"}]}), eventual=True),
        Case("renew_delegation_token.unknown", ApiKey.RENEW_DELEGATION_TOKEN, _static({
            "hmac": b"\x01" * 32, "renew_period_ms": -1})),
        Case("expire_delegation_token.unknown", ApiKey.EXPIRE_DELEGATION_TOKEN, _static({
            "hmac": b"\x01" * 32, "expiry_time_period_ms": -1})),
        Case("describe_client_quotas", ApiKey.DESCRIBE_CLIENT_QUOTAS, _static({"components": [], "strict": False})),
        Case("alter_client_quotas.validate", ApiKey.ALTER_CLIENT_QUOTAS, _static({"validate_only": True, "entries": [
            {"entity": [{"entity_type": "user", "entity_name": "cf-full"}],
             "ops": [{"key": "producer_byte_rate", "value": 1048576.0, "remove": False}]}]})),
        *_quota_cases(),
    ]


def _quota(parts: tuple[tuple[str, str | None], ...], *ops: tuple[str, float | None]) -> Body:
    """One AlterClientQuotas entry: ``(key, value)`` sets, ``(key, None)`` removes."""
    return {"entity": [{"entity_type": t, "entity_name": n} for t, n in parts],
            "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in ops]}


def _quota_filter(*components: tuple[str, int, str | None], strict: bool = False) -> Callable[[Names], Body]:
    return _static({"components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
                    "strict": strict})


_USER, _CLIENT, _IP = "user", "client-id", "ip"
_EXACT, _DEFAULT, _ANY = 0, 1, 2
_QUOTA_ENTITIES: tuple[tuple[tuple[str, str | None], ...], ...] = (
    ((_USER, "cf-q"),), ((_CLIENT, "cf-c"),), ((_USER, "cf-q"), (_CLIENT, "cf-c")), ((_USER, None),),
    ((_USER, "cf-q"), (_CLIENT, None)), ((_CLIENT, None),), ((_IP, "127.0.0.2"),), ((_IP, None),))


def _quota_cases() -> list[Case]:
    """Client quotas (KIP-546, KIP-612): set on every kind of entity, described through each filter, refused
    as Kafka refuses, then removed again so the cases after these see no quota."""
    describe = [
        ("all", _quota_filter()), ("all_strict", _quota_filter(strict=True)),
        ("user_exact", _quota_filter((_USER, _EXACT, "cf-q"))),
        ("user_exact_strict", _quota_filter((_USER, _EXACT, "cf-q"), strict=True)),
        ("user_default", _quota_filter((_USER, _DEFAULT, None))),
        ("user_any_strict", _quota_filter((_USER, _ANY, None), strict=True)),
        ("user_client", _quota_filter((_USER, _EXACT, "cf-q"), (_CLIENT, _ANY, None), strict=True)),
        ("client_exact", _quota_filter((_CLIENT, _EXACT, "cf-c"))),
        ("ip_any", _quota_filter((_IP, _ANY, None))),
        ("bad_filters", _quota_filter((_USER, 3, None))),
        ("exact_without_name", _quota_filter((_USER, _EXACT, None))),
        ("default_with_name", _quota_filter((_USER, _DEFAULT, "x"))),
        ("repeated_type", _quota_filter((_USER, _EXACT, "a"), (_USER, _ANY, None))),
        ("unknown_type", _quota_filter(("topic", _ANY, None))),
        ("ip_with_user", _quota_filter((_IP, _ANY, None), (_USER, _ANY, None))),
    ]
    return [
        Case("alter_client_quotas.set", ApiKey.ALTER_CLIENT_QUOTAS, _static({"validate_only": False, "entries": [
            _quota(((_USER, "cf-q"),), ("producer_byte_rate", 1048576.0), ("request_percentage", 50.5)),
            _quota(((_CLIENT, "cf-c"),), ("consumer_byte_rate", 2048.0)),
            _quota(((_USER, "cf-q"), (_CLIENT, "cf-c")), ("producer_byte_rate", 4096.0)),
            _quota(((_USER, None),), ("controller_mutation_rate", 1.5)),
            _quota(((_USER, "cf-q"), (_CLIENT, None)), ("consumer_byte_rate", 8192.0)),
            _quota(((_CLIENT, None),), ("producer_byte_rate", 100000.0)),
            _quota(((_IP, "127.0.0.2"),), ("connection_creation_rate", 10.0)),
            _quota(((_IP, None),), ("connection_creation_rate", 100.0))]})),
        Case("alter_client_quotas.refused", ApiKey.ALTER_CLIENT_QUOTAS, _static({"validate_only": False, "entries": [
            _quota(((_USER, "cf-r1"),), ("producer_byte_rate", 1.5)),
            _quota(((_USER, "cf-r2"),), ("consumer_byte_rate", 0.0)),
            _quota(((_USER, "cf-r3"),), ("consumer_byte_rate", 1e30)),
            _quota(((_USER, "cf-r4"),), ("connection_creation_rate", 10.0)),
            _quota(((_USER, "cf-r5"),), ("no_such_quota", 10.0)),
            _quota(((_USER, "cf-r6"),), ("request_percentage", -1.0)),
            _quota(((_IP, "127.0.0.3"),), ("producer_byte_rate", 10.0)),
            _quota(((_IP, "127.0.0.4"),), ("connection_creation_rate", 1e30)),
            _quota(((_IP, "127.0.0.5"), (_USER, "cf-r7")), ("connection_creation_rate", 10.0)),
            _quota(((_IP, "not-an-ip!"),), ("connection_creation_rate", 10.0)),
            _quota((("topic", "cf-a"),), ("producer_byte_rate", 10.0)),
            _quota((), ("producer_byte_rate", 10.0)),
            _quota(((_USER, ""),), ("producer_byte_rate", 10.0)),
            _quota(((_USER, "cf-r8"),), ("producer_byte_rate", 10.0), ("producer_byte_rate", 20.0)),
            _quota(((_USER, "cf-r9"),), ("no_such_quota", None))]})),
        # Kafka also takes a host name it can resolve; ksgate only addresses (docs/kafka-differences.md).
        Case("alter_client_quotas.ip_host_name", ApiKey.ALTER_CLIENT_QUOTAS, _static({"validate_only": True,
             "entries": [_quota(((_IP, "localhost"),), ("connection_creation_rate", 10.0))]})),
        *(Case(f"describe_client_quotas.{name}", ApiKey.DESCRIBE_CLIENT_QUOTAS, template, eventual=True)
          for name, template in describe),
        Case("alter_client_quotas.remove", ApiKey.ALTER_CLIENT_QUOTAS, _static({"validate_only": False, "entries": [
            _quota(parts, *((key, None) for key in (
                "producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
                "connection_creation_rate") if (key == "connection_creation_rate") == (parts[0][0] == _IP)))
            for parts in _QUOTA_ENTITIES]})),
        Case("describe_client_quotas.after_removal", ApiKey.DESCRIBE_CLIENT_QUOTAS, _quota_filter(), eventual=True),
    ]


# Duplicates under partial authorization: cf-a is cf-part's (allowed), other is not (denied); each named twice,
# interleaved, or the same partition twice within one entry.  Kafka collapses some into a map, refuses others.
_TWICE = ("cf-a", "other", "cf-a", "other")


def _duplicate_cases() -> list[Case]:
    def parts(count: int) -> list[Body]:
        return [{"partition_index": 0, "partition": 0, "fetch_offset": 0, "partition_max_bytes": 65536,
                 "timestamp": -1, "current_leader_epoch": -1, "leader_epoch": 0, "offset": 0, "index": 0,
                 "records": RECORDS, "committed_offset": 1, "committed_metadata": None}] * count

    def topics(ids: Names, names: tuple[str, ...], count: int, key: str = "name", sub: str = "partitions"
               ) -> list[Body]:
        return [{key: n, "topic_id": ids.topic_id(n), sub: parts(count)} for n in names]

    def shapes(make: Callable[[Names, tuple[str, ...], int], Body]) -> list[tuple[str, Callable[[Names], Body]]]:
        return [("dup_topics", lambda ids: make(ids, _TWICE, 1)),
                ("dup_partition", lambda ids: make(ids, ("cf-a", "other"), 2))]

    def produce(acks: int) -> Callable[[Names, tuple[str, ...], int], Body]:
        return lambda ids, names, count: {"acks": acks, "timeout_ms": 5000,
                                          "topic_data": topics(ids, names, count, sub="partition_data")}

    group = {"group_id": "cf-g", "generation_id_or_member_epoch": -1, "generation_id": -1, "member_id": "",
             "group_instance_id": None, "retention_time_ms": -1}
    makers: list[tuple[str, int, Callable[[Names, tuple[str, ...], int], Body]]] = [
        ("produce", ApiKey.PRODUCE, produce(1)),
        ("produce.acks_all", ApiKey.PRODUCE, produce(-1)),
        ("fetch", ApiKey.FETCH, lambda ids, names, count: {
            "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
            "session_epoch": -1, "topics": topics(ids, names, count, key="topic"), "forgotten_topics_data": [],
            "rack_id": ""}),
        ("list_offsets", ApiKey.LIST_OFFSETS, lambda ids, names, count: {
            "replica_id": -1, "isolation_level": 0, "timeout_ms": 5000, "topics": topics(ids, names, count)}),
        ("offset_for_leader_epoch", ApiKey.OFFSET_FOR_LEADER_EPOCH, lambda ids, names, count: {
            "replica_id": -2, "topics": topics(ids, names, count, key="topic")}),
        ("delete_records", ApiKey.DELETE_RECORDS, lambda ids, names, count: {
            "timeout_ms": 5000, "topics": topics(ids, names, count)}),
        ("offset_commit", ApiKey.OFFSET_COMMIT, lambda ids, names, count: {
            **group, "topics": topics(ids, names, count)}),
        ("txn_offset_commit", ApiKey.TXN_OFFSET_COMMIT, lambda ids, names, count: {
            **group, "transactional_id": "cf-t", "producer_id": 999999, "producer_epoch": 0,
            "topics": topics(ids, names, count)}),
        ("offset_fetch", ApiKey.OFFSET_FETCH, lambda ids, names, count: {
            "group_id": "cf-g", "topics": [{"name": n, "partition_indexes": [0] * count} for n in names],
            "groups": [{"group_id": "cf-g", "topics": [
                {"name": n, "topic_id": ids.topic_id(n), "partition_indexes": [0] * count} for n in names]}],
            "require_stable": False}),
        ("offset_delete", ApiKey.OFFSET_DELETE, lambda ids, names, count: {
            "group_id": "cf-g", "topics": topics(ids, names, count)}),
        ("describe_producers", ApiKey.DESCRIBE_PRODUCERS, lambda ids, names, count: {
            "topics": [{"name": n, "partition_indexes": [0] * count} for n in names]}),
        ("elect_leaders", ApiKey.ELECT_LEADERS, lambda ids, names, count: {
            "election_type": 0, "timeout_ms": 5000,
            "topic_partitions": [{"topic": n, "partitions": [0] * count} for n in names]}),
        ("alter_partition_reassignments", ApiKey.ALTER_PARTITION_REASSIGNMENTS, lambda ids, names, count: {
            "timeout_ms": 5000, "allow_replication_factor_change": True, "topics": [
                {"name": n, "partitions": [{"partition_index": 0, "replicas": None}] * count} for n in names]}),
    ]
    whole = [
        # Topic-level items (no partitions): the same name twice, interleaved with a denied one.
        Case("create_partitions.dup_topics", ApiKey.CREATE_PARTITIONS, _static({
            "timeout_ms": 10000, "validate_only": True, "topics": [
                {"name": n, "count": 3, "assignments": None} for n in _TWICE]})),
        # cf-part may delete no missing topic; cf-full may delete cf-missing, not other-missing.
        Case("delete_topics.dup_topics", ApiKey.DELETE_TOPICS, lambda ids: {"timeout_ms": 5000,
             "topic_names": ["cf-missing", "other-missing", "cf-missing", "other-missing"],
             "topics": [{"name": n, "topic_id": uuid.UUID(int=0)}
                        for n in ("cf-missing", "other-missing", "cf-missing", "other-missing")]}),
        Case("describe_configs.dup_topics", ApiKey.DESCRIBE_CONFIGS,
             _configs(*((TOPIC, n) for n in _TWICE), keys=["retention.ms"])),
    ]
    return [*(Case(f"{name}.{shape}", key, template) for name, key, make in makers
              for shape, template in shapes(make)), *whole]


# A share-group member both sides know by the same id (KIP-932 members choose their own).
SHARE_MEMBER = "cf-share-member-000001"


def _share_duplicate_cases() -> list[Case]:
    """The share-group APIs (KIP-932) with a topic or partition named twice, cf-a allowed and other denied to
    cf-full (cf-part holds no right on the share groups cf-s, cf-s2: refused at the group)."""
    def fetch(*topics: tuple[str, int]) -> Callable[[Names], Body]:
        # Epoch 0 opens the member's share session, anew each time.
        return lambda ids: {"group_id": "cf-s", "member_id": SHARE_MEMBER, "share_session_epoch": 0,
                            "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "max_records": 10,
                            "batch_size": 10, "forgotten_topics_data": [], "topics": [
                                {"topic_id": ids.topic_id(n), "partitions": [
                                    {"partition_index": 0, "partition_max_bytes": 65536}] * count}
                                for n, count in topics]}

    def alter(names: tuple[str, ...], count: int) -> Callable[[Names], Body]:
        return _static({"group_id": "cf-s2", "topics": [
            {"topic_name": n, "partitions": [{"partition_index": 0, "start_offset": 0}] * count} for n in names]})

    def describe(names: tuple[str, ...], count: int) -> Callable[[Names], Body]:
        return _static({"groups": [{"group_id": "cf-s2", "topics": [
            {"topic_name": n, "partitions": [0] * count} for n in names]}]})

    return [
        Case("share_group_heartbeat.join", ApiKey.SHARE_GROUP_HEARTBEAT, _static({
            "group_id": "cf-s", "member_id": SHARE_MEMBER, "member_epoch": 0, "rack_id": None,
            "subscribed_topic_names": ["cf-a"]})),
        Case("share_fetch.mixed", ApiKey.SHARE_FETCH, fetch(("cf-a", 1), ("other", 1))),
        Case("share_fetch.dup_topics", ApiKey.SHARE_FETCH, fetch(*((n, 1) for n in _TWICE))),
        Case("share_fetch.dup_partition", ApiKey.SHARE_FETCH, fetch(("cf-a", 2), ("other", 2))),
        # Only the denied topic repeated: Kafka still refuses the whole request (ksgate must not relay the rest).
        Case("share_fetch.dup_denied_partition", ApiKey.SHARE_FETCH, fetch(("cf-a", 1), ("other", 2))),
        Case("share_fetch.dup_denied_topics", ApiKey.SHARE_FETCH, fetch(("cf-a", 1), ("other", 1), ("other", 1))),
        Case("alter_share_group_offsets.dup_topics", ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter(_TWICE, 1)),
        Case("alter_share_group_offsets.dup_partition", ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter(("cf-a", "other"), 2)),
        Case("describe_share_group_offsets.dup_topics", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, describe(_TWICE, 1)),
        Case("describe_share_group_offsets.dup_partition", ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
             describe(("cf-a", "other"), 2)),
        Case("delete_share_group_offsets.dup_topics", ApiKey.DELETE_SHARE_GROUP_OFFSETS, _static({
            "group_id": "cf-s2", "topics": [{"topic_name": n} for n in _TWICE]})),
    ]


def all_cases() -> list[Case]:
    return [*_api_versions_cases(), *_metadata_cases(), *_data_cases(), *_topic_admin_cases(), *_group_cases(),
            *_transaction_cases(), *_security_cases(), *_duplicate_cases(),
            *_share_duplicate_cases()]
