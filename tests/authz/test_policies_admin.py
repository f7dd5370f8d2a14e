"""The admin policies: configs, log dirs, reassignments, quotas, SCRAM, features, cluster, tokens, ACLs."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from authz.model import AclOperation, ResourceType
from authz.policies import admin
from authz.policies.admin import POLICIES, TABLE
from authz.request_policy import CLUSTER_NAME, Action, Answer, Body, Relay, Rewrite, Verdict
from authz.response_defaults import default_item, default_response
from protocol.api_keys import ApiKey
from protocol.codec import default_value
from protocol.kafka_errors import KafkaError
from protocol.registry import api
from protocol.schema import FieldSpec
from tests.authz.fake_view import FakeView

Op = AclOperation
CLUSTER = ResourceType.CLUSTER
MIN_INT = -2147483648


def cluster(operation: AclOperation) -> Action:
    return Action(operation, CLUSTER, CLUSTER_NAME)


def versions(key: ApiKey) -> list[int]:
    schema = api(key)
    assert schema is not None
    return list(range(schema.min_version, schema.max_version + 1))


def _request_fields(key: ApiKey, path: tuple[str, ...]) -> list[FieldSpec]:
    schema = api(key)
    assert schema is not None
    fields = schema.request.fields
    for name in path:
        fields = next(f for f in fields if f.name == name).fields
    return fields


def item(key: ApiKey, version: int, path: tuple[str, ...], /, **values: Any) -> Body:
    """A request struct of ``version``: its fields at their defaults, overridden by those it has of ``values``."""
    out = {f.name: default_value(f, version) for f in _request_fields(key, path) if version in f.versions}
    out.update((name, value) for name, value in values.items() if name in out)
    return out


def request(key: ApiKey, version: int, /, **values: Any) -> Body:
    """A request exactly as the gateway would decode it from the wire."""
    schema = api(key)
    assert schema is not None
    codec = schema.request_codec(version)
    return codec.decode(codec.encode(item(key, version, (), **values)))


def response_item(key: ApiKey, version: int, /, *path: str, **values: Any) -> Body:
    out = default_item(key, version, *path)
    out.update((name, value) for name, value in values.items() if name in out)
    return out


def encodes_response(key: ApiKey, version: int, body: Body) -> Body:
    schema = api(key)
    assert schema is not None
    schema.response_codec(version).encode(body)
    return body


def answered(key: ApiKey, version: int, verdict: Verdict) -> Body:
    assert isinstance(verdict, Answer), verdict
    return encodes_response(key, version, verdict.response)


def rewritten(key: ApiKey, version: int, verdict: Verdict) -> Rewrite:
    assert isinstance(verdict, Rewrite), verdict
    schema = api(key)
    assert schema is not None
    schema.request_codec(version).encode(verdict.request)
    return verdict


def decide(key: ApiKey, version: int, body: Body, view: FakeView) -> Verdict:
    return POLICIES[key](body, version, view)


# --- the module's tables ----------------------------------------------------------------------

GROUP_KEYS = {ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
              ApiKey.ALTER_REPLICA_LOG_DIRS, ApiKey.DESCRIBE_LOG_DIRS, ApiKey.ELECT_LEADERS,
              ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
              ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.DESCRIBE_CLUSTER,
              ApiKey.UPDATE_FEATURES, ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY,
              ApiKey.LIST_CLIENT_METRICS_RESOURCES, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
              ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN,
              ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN, ApiKey.DESCRIBE_ACLS,
              ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS}


def test_every_api_of_the_group_has_a_policy_and_table_rows() -> None:
    assert set(POLICIES) == GROUP_KEYS
    assert {row[0] for row in TABLE} == GROUP_KEYS


# --- APIs that need one CLUSTER action and answer with the request's error response ---------

CLUSTER_ONLY: dict[ApiKey, AclOperation] = {
    ApiKey.ALTER_REPLICA_LOG_DIRS: Op.ALTER,
    ApiKey.DESCRIBE_LOG_DIRS: Op.DESCRIBE,
    ApiKey.ELECT_LEADERS: Op.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: Op.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: Op.DESCRIBE,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: Op.DESCRIBE_CONFIGS,
    ApiKey.ALTER_CLIENT_QUOTAS: Op.ALTER_CONFIGS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Op.DESCRIBE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Op.ALTER,
    ApiKey.UPDATE_FEATURES: Op.ALTER,
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: Op.DESCRIBE_CONFIGS,
    ApiKey.DESCRIBE_ACLS: Op.DESCRIBE,
    ApiKey.CREATE_ACLS: Op.ALTER,
    ApiKey.DELETE_ACLS: Op.ALTER,
}


def sample(key: ApiKey, version: int) -> Body:
    """A representative request of each cluster-only API, naming several items where it can."""
    if key == ApiKey.ALTER_REPLICA_LOG_DIRS:
        topics = [item(key, version, ("dirs", "topics"), name="t1", partitions=[0, 1]),
                  item(key, version, ("dirs", "topics"), name="t2", partitions=[3])]
        return request(key, version, dirs=[item(key, version, ("dirs",), path="/d1", topics=topics),
                                           item(key, version, ("dirs",), path="/d2", topics=topics[:1])])
    if key == ApiKey.DESCRIBE_LOG_DIRS:
        return request(key, version, topics=[item(key, version, ("topics",), topic="t1", partitions=[0])])
    if key == ApiKey.ELECT_LEADERS:
        return request(key, version, topic_partitions=[
            item(key, version, ("topic_partitions",), topic="t1", partitions=[0, 2]),
            item(key, version, ("topic_partitions",), topic="t2", partitions=[1])])
    if key == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        part = item(key, version, ("topics", "partitions"), partition_index=4, replicas=[1, 2])
        revert = item(key, version, ("topics", "partitions"), partition_index=5, replicas=None)
        return request(key, version, allow_replication_factor_change=False,
                       topics=[item(key, version, ("topics",), name="t1", partitions=[part, revert])])
    if key == ApiKey.LIST_PARTITION_REASSIGNMENTS:
        return request(key, version, topics=[item(key, version, ("topics",), name="t1", partition_indexes=[0, 7])])
    if key == ApiKey.DESCRIBE_CLIENT_QUOTAS:
        return request(key, version, components=[item(key, version, ("components",), entity_type="user")])
    if key == ApiKey.ALTER_CLIENT_QUOTAS:
        entity = [item(key, version, ("entries", "entity"), entity_type="user", entity_name="bob"),
                  item(key, version, ("entries", "entity"), entity_type="client-id", entity_name=None)]
        op = item(key, version, ("entries", "ops"), key="producer_byte_rate", value=1024.0)
        return request(key, version, entries=[item(key, version, ("entries",), entity=entity, ops=[op])])
    if key == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
        return request(key, version, users=[item(key, version, ("users",), name=n) for n in ("bob", "carol")])
    if key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        return request(key, version,
                       deletions=[item(key, version, ("deletions",), name=n, mechanism=1) for n in ("zed", "bob")],
                       upsertions=[item(key, version, ("upsertions",), name="bob", mechanism=2, iterations=8192,
                                        salt=b"s", salted_password=b"p")])
    if key == ApiKey.UPDATE_FEATURES:
        return request(key, version, feature_updates=[
            item(key, version, ("feature_updates",), feature="metadata.version", max_version_level=21)])
    if key == ApiKey.DESCRIBE_ACLS:
        return request(key, version, resource_type_filter=1, operation=1, permission_type=1)
    if key == ApiKey.CREATE_ACLS:
        return request(key, version, creations=[
            item(key, version, ("creations",), resource_type=2, resource_name=n, principal="User:bob", host="*",
                 operation=3, permission_type=3) for n in ("t1", "t2")])
    if key == ApiKey.DELETE_ACLS:
        return request(key, version, filters=[
            item(key, version, ("filters",), resource_type_filter=2, operation=1, permission_type=1)] * 3)
    return request(key, version)


CLUSTER_CASES = [(key, version) for key in CLUSTER_ONLY for version in versions(key)]


@pytest.mark.parametrize(("key", "version"), CLUSTER_CASES)
def test_cluster_api_with_its_cluster_action_relays(key: ApiKey, version: int) -> None:
    view = FakeView([cluster(CLUSTER_ONLY[key])])
    assert decide(key, version, sample(key, version), view) == Relay()
    assert view.asked == [cluster(CLUSTER_ONLY[key])]


@pytest.mark.parametrize(("key", "version"), CLUSTER_CASES)
def test_cluster_api_with_only_other_cluster_actions_is_answered_with_an_encodable_error(
        key: ApiKey, version: int) -> None:
    others = [cluster(op) for op in admin.CLUSTER_OPERATIONS if op != CLUSTER_ONLY[key]]
    answered(key, version, decide(key, version, sample(key, version), FakeView(others)))


@pytest.mark.parametrize("version", versions(ApiKey.ALTER_REPLICA_LOG_DIRS))
def test_denied_alter_replica_log_dirs_fails_every_partition_per_dir_and_topic(version: int) -> None:
    key = ApiKey.ALTER_REPLICA_LOG_DIRS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert [(r["topic_name"], [(p["partition_index"], p["error_code"]) for p in r["partitions"]])
            for r in body["results"]] == [("t1", [(0, 31), (1, 31)]), ("t2", [(3, 31)]), ("t1", [(0, 31), (1, 31)])]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_LOG_DIRS))
def test_denied_describe_log_dirs_lists_no_dirs_with_the_error_from_v3(version: int) -> None:
    key = ApiKey.DESCRIBE_LOG_DIRS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert body["results"] == []
    assert body.get("error_code") == (31 if version >= 3 else None)


@pytest.mark.parametrize("version", versions(ApiKey.ELECT_LEADERS))
def test_denied_elect_leaders_fails_each_named_partition(version: int) -> None:
    key = ApiKey.ELECT_LEADERS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert body.get("error_code") == (31 if version >= 1 else None)
    assert [(r["topic"], [(p["partition_id"], p["error_code"]) for p in r["partition_result"]])
            for r in body["replica_election_results"]] == [("t1", [(0, 31), (2, 31)]), ("t2", [(1, 31)])]


@pytest.mark.parametrize("version", versions(ApiKey.ELECT_LEADERS))
def test_denied_elect_leaders_for_all_partitions_has_no_results(version: int) -> None:
    key = ApiKey.ELECT_LEADERS
    body = answered(key, version, decide(key, version, request(key, version, topic_partitions=None), FakeView()))
    assert body["replica_election_results"] == []


@pytest.mark.parametrize("version", versions(ApiKey.ALTER_PARTITION_REASSIGNMENTS))
def test_denied_alter_partition_reassignments_fails_top_level_and_each_partition(version: int) -> None:
    key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert body["error_code"] == 31
    assert [(t["name"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
            for t in body["responses"]] == [("t1", [(4, 31), (5, 31)])]
    if version >= 1:
        assert body["allow_replication_factor_change"] is False


@pytest.mark.parametrize("version", versions(ApiKey.LIST_PARTITION_REASSIGNMENTS))
def test_denied_list_partition_reassignments_echoes_the_asked_partitions(version: int) -> None:
    key = ApiKey.LIST_PARTITION_REASSIGNMENTS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert body["error_code"] == 31
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in body["topics"]] == [("t1", [0, 7])]
    everything = answered(key, version, decide(key, version, request(key, version, topics=None), FakeView()))
    assert everything["topics"] == []


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CLIENT_QUOTAS))
def test_denied_describe_client_quotas_has_a_null_entry_list(version: int) -> None:
    key = ApiKey.DESCRIBE_CLIENT_QUOTAS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert (body["error_code"], body["error_message"], body["entries"]) == (31, None, None)


@pytest.mark.parametrize("version", versions(ApiKey.ALTER_CLIENT_QUOTAS))
def test_denied_alter_client_quotas_fails_each_entry_with_its_entity(version: int) -> None:
    key = ApiKey.ALTER_CLIENT_QUOTAS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    [entry] = body["entries"]
    assert (entry["error_code"], entry["error_message"]) == (31, "Cluster authorization failed.")
    assert [(e["entity_type"], e["entity_name"]) for e in entry["entity"]] == [("user", "bob"), ("client-id", None)]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS))
def test_denied_describe_user_scram_credentials_fails_each_asked_user_without_naming_it(version: int) -> None:
    key = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert body["error_code"] == 31
    assert [(r["user"], r["error_code"]) for r in body["results"]] == [("", 31), ("", 31)]
    every_user = answered(key, version, decide(key, version, request(key, version, users=None), FakeView()))
    assert every_user["results"] == []


@pytest.mark.parametrize("version", versions(ApiKey.ALTER_USER_SCRAM_CREDENTIALS))
def test_denied_alter_user_scram_credentials_fails_each_distinct_user_sorted(version: int) -> None:
    key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert [(r["user"], r["error_code"]) for r in body["results"]] == [("bob", 31), ("zed", 31)]


@pytest.mark.parametrize("version", versions(ApiKey.UPDATE_FEATURES))
def test_denied_update_features_fails_at_the_top_level_only(version: int) -> None:
    key = ApiKey.UPDATE_FEATURES
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert body["error_code"] == 31
    assert body.get("results", []) == []


@pytest.mark.parametrize("version", versions(ApiKey.LIST_CLIENT_METRICS_RESOURCES))
def test_denied_list_client_metrics_resources_lists_nothing(version: int) -> None:
    key = ApiKey.LIST_CLIENT_METRICS_RESOURCES
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert (body["error_code"], body["config_resources"]) == (31, [])


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_ACLS))
def test_denied_describe_acls_fails_at_the_top_level(version: int) -> None:
    key = ApiKey.DESCRIBE_ACLS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert (body["error_code"], body["resources"]) == (31, [])


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_ACLS))
def test_denied_create_acls_fails_every_creation(version: int) -> None:
    key = ApiKey.CREATE_ACLS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert [r["error_code"] for r in body["results"]] == [31, 31]


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_ACLS))
def test_denied_delete_acls_fails_every_filter_matching_nothing(version: int) -> None:
    key = ApiKey.DELETE_ACLS
    body = answered(key, version, decide(key, version, sample(key, version), FakeView()))
    assert [(r["error_code"], r["matching_acls"]) for r in body["filter_results"]] == [(31, [])] * 3


# --- configs ---------------------------------------------------------------------------------

def describe_resources(version: int, *resources: tuple[int, str]) -> Body:
    key = ApiKey.DESCRIBE_CONFIGS
    return request(key, version, resources=[
        item(key, version, ("resources",), resource_type=t, resource_name=n, configuration_keys=None)
        for t, n in resources])


MIXED = ((2, "t1"), (32, "g1"), (4, "1"), (8, "1"), (16, "metrics"), (2, "t2"))


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs_with_every_describe_configs_relays(version: int) -> None:
    view = FakeView(everything=True)
    assert decide(ApiKey.DESCRIBE_CONFIGS, version, describe_resources(version, *MIXED), view) == Relay()
    assert set(view.asked) == {Action(Op.DESCRIBE_CONFIGS, ResourceType.TOPIC, "t1"),
                               Action(Op.DESCRIBE_CONFIGS, ResourceType.GROUP, "g1"),
                               cluster(Op.DESCRIBE_CONFIGS),
                               Action(Op.DESCRIBE_CONFIGS, ResourceType.TOPIC, "t2")}


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs_denied_fails_each_resource_with_its_resource_types_error(version: int) -> None:
    key = ApiKey.DESCRIBE_CONFIGS
    body = answered(key, version, decide(key, version, describe_resources(version, *MIXED), FakeView()))
    assert [(r["resource_type"], r["resource_name"], r["error_code"], r["error_message"], r["configs"])
            for r in body["results"]] == [
        (2, "t1", 29, "Topic authorization failed.", []), (32, "g1", 30, "Group authorization failed.", []),
        (4, "1", 31, "Cluster authorization failed.", []), (8, "1", 31, "Cluster authorization failed.", []),
        (16, "metrics", 31, "Cluster authorization failed.", []), (2, "t2", 29, "Topic authorization failed.", [])]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs_partly_allowed_relays_the_allowed_and_appends_the_denied_after_them(version: int) -> None:
    key = ApiKey.DESCRIBE_CONFIGS
    view = FakeView([Action(Op.DESCRIBE_CONFIGS, ResourceType.TOPIC, "t2"), cluster(Op.DESCRIBE_CONFIGS)])
    verdict = rewritten(key, version, decide(key, version, describe_resources(version, *MIXED), view))
    assert [(r["resource_type"], r["resource_name"]) for r in verdict.request["resources"]] == [
        (4, "1"), (8, "1"), (16, "metrics"), (2, "t2")]
    upstream = default_response(key, version)
    upstream["results"] = [response_item(key, version, "results", resource_type=t, resource_name=n)
                           for t, n in ((4, "1"), (8, "1"), (16, "metrics"), (2, "t2"))]
    merged = encodes_response(key, version, verdict.on_response(upstream))
    # As ConfigHelper: the authorized results first, then the unauthorized ones in request order.
    assert [(r["resource_name"], r["error_code"]) for r in merged["results"]] == [
        ("1", 0), ("1", 0), ("metrics", 0), ("t2", 0), ("t1", 29), ("g1", 30)]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs_with_an_unknown_resource_type_fails_every_resource_with_invalid_request(
        version: int) -> None:
    key = ApiKey.DESCRIBE_CONFIGS
    body = answered(key, version, decide(key, version, describe_resources(version, (2, "t1"), (64, "x")),
                                         FakeView(everything=True)))
    assert [(r["resource_name"], r["error_code"]) for r in body["results"]] == [("t1", 42), ("x", 42)]
    assert body["results"][0]["error_message"] == KafkaError.INVALID_REQUEST.message


ALTER_KEYS = (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)
ALTER_CASES = [(key, version) for key in ALTER_KEYS for version in versions(key)]


def alter_resources(key: ApiKey, version: int, *resources: tuple[int, str] | Body) -> Body:
    def build(resource: tuple[int, str] | Body) -> Body:
        if isinstance(resource, dict):
            return resource
        config = item(key, version, ("resources", "configs"), name="retention.ms", value="1000")
        return item(key, version, ("resources",), resource_type=resource[0], resource_name=resource[1],
                    configs=[config])
    return request(key, version, resources=[build(r) for r in resources], validate_only=True)


def outcome(body: Body) -> list[tuple[int, str, int, str | None]]:
    return [(r["resource_type"], r["resource_name"], r["error_code"], r["error_message"]) for r in body["responses"]]


@pytest.mark.parametrize(("key", "version"), ALTER_CASES)
def test_alter_configs_with_every_alter_configs_relays(key: ApiKey, version: int) -> None:
    resources = [r for r in MIXED if not (key == ApiKey.ALTER_CONFIGS and r[0] == 8)]
    view = FakeView(everything=True)
    assert decide(key, version, alter_resources(key, version, *resources), view) == Relay()
    assert {a.operation for a in view.asked} == {Op.ALTER_CONFIGS}


@pytest.mark.parametrize(("key", "version"), ALTER_CASES)
def test_alter_configs_denied_fails_each_resource_in_client_order(key: ApiKey, version: int) -> None:
    body = answered(key, version, decide(key, version, alter_resources(key, version, *MIXED), FakeView()))
    broker_logger = ((8, "1", 31, None) if key == ApiKey.INCREMENTAL_ALTER_CONFIGS
                     else (8, "1", 42, "Unknown resource type 8"))
    assert outcome(body) == [
        (2, "t1", 29, "Topic authorization failed."), (32, "g1", 30, "Group authorization failed."),
        (4, "1", 31, "Cluster authorization failed."), broker_logger,
        (16, "metrics", 31, "Cluster authorization failed."), (2, "t2", 29, "Topic authorization failed.")]


@pytest.mark.parametrize(("key", "version"), ALTER_CASES)
def test_alter_configs_partly_allowed_relays_the_allowed_and_merges_in_client_order(key: ApiKey, version: int) -> None:
    view = FakeView([Action(Op.ALTER_CONFIGS, ResourceType.GROUP, "g1"), cluster(Op.ALTER_CONFIGS)])
    resources = ((2, "t1"), (32, "g1"), (16, "metrics"), (2, "t2"), (4, "1"))
    verdict = rewritten(key, version, decide(key, version, alter_resources(key, version, *resources), view))
    assert verdict.request["validate_only"] is True
    assert [(r["resource_type"], r["resource_name"]) for r in verdict.request["resources"]] == [
        (32, "g1"), (16, "metrics"), (4, "1")]
    upstream = default_response(key, version)
    upstream["responses"] = [  # any order; the broker's answer for (4, "1") went missing
        response_item(key, version, "responses", resource_type=16, resource_name="metrics", error_code=40),
        response_item(key, version, "responses", resource_type=32, resource_name="g1")]
    merged = encodes_response(key, version, verdict.on_response(upstream))
    assert [(n, code) for _, n, code, _ in outcome(merged)] == [
        ("t1", 29), ("g1", 0), ("metrics", 40), ("t2", 29), ("1", -1)]


@pytest.mark.parametrize(("key", "version"), ALTER_CASES)
def test_alter_configs_duplicate_resources_are_invalid_before_any_authorization(key: ApiKey, version: int) -> None:
    view = FakeView([Action(Op.ALTER_CONFIGS, ResourceType.TOPIC, "t2")])
    verdict = decide(key, version, alter_resources(key, version, (2, "t1"), (2, "t2"), (2, "t1")), view)
    verdict = rewritten(key, version, verdict)
    assert [r["resource_name"] for r in verdict.request["resources"]] == ["t2"]
    assert view.asked == [Action(Op.ALTER_CONFIGS, ResourceType.TOPIC, "t2")]
    upstream = default_response(key, version)
    upstream["responses"] = [response_item(key, version, "responses", resource_type=2, resource_name="t2",
                                           error_message=None)]
    merged = encodes_response(key, version, verdict.on_response(upstream))
    duplicate = (2, "t1", 42, "Each resource must appear at most once.")
    assert outcome(merged) == [duplicate, (2, "t2", 0, None), duplicate]


@pytest.mark.parametrize(("key", "version"), ALTER_CASES)
def test_alter_configs_malformed_resources_are_invalid_rather_than_denied(key: ApiKey, version: int) -> None:
    def config(name: str, value: str | None) -> Body:
        return item(key, version, ("resources", "configs"), name=name, value=value, config_operation=0)

    def resource(name: str, *configs: Body, resource_type: int = 2) -> Body:
        return item(key, version, ("resources",), resource_type=resource_type, resource_name=name,
                    configs=list(configs))

    body = alter_resources(key, version,
                           resource("dup", config("a", "1"), config("a", "2")),
                           resource("nulls", config("a", None), config("b", "1"), config("c", None)),
                           resource("weird", config("a", "1"), resource_type=0))
    answer = answered(key, version, decide(key, version, body, FakeView()))
    assert outcome(answer) == [(2, "dup", 42, "Error due to duplicate config keys"),
                               (2, "nulls", 42, "Null value not supported for : a, c"),
                               (0, "weird", 42, "Unknown resource type 0")]


@pytest.mark.parametrize("version", versions(ApiKey.INCREMENTAL_ALTER_CONFIGS))
def test_incremental_alter_configs_delete_may_carry_a_null_value(version: int) -> None:
    key = ApiKey.INCREMENTAL_ALTER_CONFIGS
    delete = item(key, version, ("resources", "configs"), name="retention.ms", config_operation=1, value=None)
    body = alter_resources(key, version, item(key, version, ("resources",), resource_type=2, resource_name="t1",
                                              configs=[delete]))
    assert decide(key, version, body, FakeView(everything=True)) == Relay()


# --- DescribeCluster and telemetry: no ACL for the request itself --------------------------------

def describe_cluster_response(version: int, error: int = 0) -> Body:
    response = default_response(ApiKey.DESCRIBE_CLUSTER, version)
    response.update(error_code=error, cluster_authorized_operations=12345)  # what the upstream computed for itself
    return response


def cluster_hook(version: int, view: FakeView, include: bool, error: int = 0, endpoint_type: int = 1) -> int:
    key = ApiKey.DESCRIBE_CLUSTER
    verdict = decide(key, version, request(key, version, include_cluster_authorized_operations=include,
                                           endpoint_type=endpoint_type), view)
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    body = encodes_response(key, version, verdict.on_response(describe_cluster_response(version, error)))
    result = body["cluster_authorized_operations"]
    assert isinstance(result, int)
    return result


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CLUSTER))
def test_describe_cluster_reports_the_callers_cluster_operations_when_asked(version: int) -> None:
    view = FakeView([cluster(Op.DESCRIBE), cluster(Op.ALTER), Action(Op.READ, ResourceType.TOPIC, "t")])
    assert cluster_hook(version, view, include=True) == (1 << Op.DESCRIBE) | (1 << Op.ALTER)
    assert cluster_hook(version, FakeView(everything=True), include=True) == sum(
        1 << op for op in admin.CLUSTER_OPERATIONS)


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CLUSTER))
def test_describe_cluster_without_describe_is_relayed_with_no_operations(version: int) -> None:
    assert cluster_hook(version, FakeView([cluster(Op.ALTER)]), include=True) == 0


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CLUSTER))
def test_describe_cluster_not_asking_for_operations_gets_the_not_requested_value(version: int) -> None:
    view = FakeView(everything=True)
    assert cluster_hook(version, view, include=False) == MIN_INT
    assert view.asked == []


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CLUSTER))
def test_describe_cluster_error_answers_carry_no_operations(version: int) -> None:
    assert cluster_hook(version, FakeView(everything=True), include=True, error=35) == MIN_INT


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.DESCRIBE_CLUSTER) if v >= 1])
def test_describe_cluster_for_the_controller_endpoint_is_not_authorized_here(version: int) -> None:
    view = FakeView(everything=True)
    assert cluster_hook(version, view, include=True, error=114, endpoint_type=2) == MIN_INT
    assert view.asked == []


@pytest.mark.parametrize(("key", "version"), [(k, v) for k in (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
                                                                ApiKey.PUSH_TELEMETRY) for v in versions(k)])
def test_telemetry_needs_no_acl(key: ApiKey, version: int) -> None:
    view = FakeView()
    assert decide(key, version, request(key, version, client_instance_id=uuid.uuid4()), view) == Relay()
    assert view.asked == []


# --- delegation tokens --------------------------------------------------------------------------

def create_token(version: int, owner: tuple[str | None, str] | None = None) -> Body:
    key = ApiKey.CREATE_DELEGATION_TOKEN
    renewer = item(key, version, ("renewers",), principal_type="User", principal_name="carol")
    fields: dict[str, Any] = {"renewers": [renewer], "max_lifetime_ms": -1}
    if owner is not None:
        fields.update(owner_principal_type=owner[0], owner_principal_name=owner[1])
    return request(key, version, **fields)


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_DELEGATION_TOKEN))
def test_create_delegation_token_for_oneself_needs_no_acl(version: int) -> None:
    view = FakeView()
    assert decide(ApiKey.CREATE_DELEGATION_TOKEN, version, create_token(version), view) == Relay()
    assert view.asked == []


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.CREATE_DELEGATION_TOKEN) if v >= 3])
def test_create_delegation_token_naming_oneself_as_owner_needs_no_acl(version: int) -> None:
    body = create_token(version, ("User", "alice"))
    assert decide(ApiKey.CREATE_DELEGATION_TOKEN, version, body, FakeView()) == Relay()


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.CREATE_DELEGATION_TOKEN) if v >= 3])
def test_create_delegation_token_for_another_owner_needs_create_tokens_on_that_user(version: int) -> None:
    key = ApiKey.CREATE_DELEGATION_TOKEN
    body = create_token(version, ("User", "bob"))
    assert decide(key, version, body, FakeView([Action(Op.CREATE_TOKENS, ResourceType.USER, "User:bob")])) == Relay()
    answer = answered(key, version, decide(key, version, body, FakeView(
        [Action(Op.CREATE_TOKENS, ResourceType.USER, "User:carol")])))
    assert answer["error_code"] == 65
    assert (answer["principal_type"], answer["principal_name"]) == ("User", "bob")
    assert (answer["token_requester_principal_type"], answer["token_requester_principal_name"]) == ("User", "alice")
    assert (answer["issue_timestamp_ms"], answer["expiry_timestamp_ms"], answer["max_timestamp_ms"]) == (-1, -1, -1)
    assert (answer["token_id"], answer["hmac"]) == ("", b"")


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.CREATE_DELEGATION_TOKEN) if v >= 3])
def test_create_delegation_token_with_a_null_owner_type_is_an_unknown_server_error(version: int) -> None:
    key = ApiKey.CREATE_DELEGATION_TOKEN
    answer = answered(key, version, decide(key, version, create_token(version, (None, "bob")),
                                           FakeView(everything=True)))
    assert (answer["error_code"], answer["principal_type"], answer["principal_name"]) == (-1, "User", "ANONYMOUS")


@pytest.mark.parametrize(("key", "version"), [(k, v) for k in (ApiKey.RENEW_DELEGATION_TOKEN,
                                                                ApiKey.EXPIRE_DELEGATION_TOKEN) for v in versions(k)])
def test_renew_and_expire_delegation_token_need_no_acl(key: ApiKey, version: int) -> None:
    view = FakeView()
    assert decide(key, version, request(key, version, hmac=b"\x01\x02"), view) == Relay()
    assert view.asked == []


def token(version: int, token_id: str, owner: str, renewers: tuple[str, ...] = (), requester: str = "") -> Body:
    key = ApiKey.DESCRIBE_DELEGATION_TOKEN
    return response_item(
        key, version, "tokens", token_id=token_id, principal_type="User", principal_name=owner, hmac=b"h",
        token_requester_principal_type="User", token_requester_principal_name=requester or owner,
        renewers=[response_item(key, version, "tokens", "renewers", principal_type="User", principal_name=r)
                  for r in renewers])


def described(version: int, view: FakeView, tokens: list[Body], error: int = 0) -> list[str]:
    key = ApiKey.DESCRIBE_DELEGATION_TOKEN
    verdict = decide(key, version, request(key, version, owners=None), view)
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    upstream = default_response(key, version)
    upstream.update(error_code=error, tokens=tokens)
    return [t["token_id"] for t in encodes_response(key, version, verdict.on_response(upstream))["tokens"]]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_DELEGATION_TOKEN))
def test_describe_delegation_token_shows_owned_and_renewable_tokens_without_acls(version: int) -> None:
    tokens = [token(version, "own", "alice"), token(version, "renewable", "bob", ("alice",)),
              token(version, "foreign", "bob", ("carol",))]
    assert described(version, FakeView(), tokens) == ["own", "renewable"]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_DELEGATION_TOKEN))
def test_describe_delegation_token_shows_others_tokens_by_token_or_owner_acl(version: int) -> None:
    tokens = [token(version, "by-token", "bob"), token(version, "by-owner", "carol"), token(version, "hidden", "dan")]
    view = FakeView([Action(Op.DESCRIBE, ResourceType.DELEGATION_TOKEN, "by-token"),
                     Action(Op.DESCRIBE_TOKENS, ResourceType.USER, "User:carol")])
    assert described(version, view, tokens) == ["by-token", "by-owner"]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_DELEGATION_TOKEN))
def test_describe_delegation_token_shows_tokens_the_caller_requested_where_the_version_says_so(version: int) -> None:
    tokens = [token(version, "requested", "bob", requester="alice")]
    assert described(version, FakeView(), tokens) == (["requested"] if version >= 3 else [])


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_DELEGATION_TOKEN))
def test_describe_delegation_token_error_answers_pass_through(version: int) -> None:
    assert described(version, FakeView(), [], error=61) == []


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_DELEGATION_TOKEN))
def test_describe_delegation_token_for_no_owners_is_relayed_without_filtering(version: int) -> None:
    key = ApiKey.DESCRIBE_DELEGATION_TOKEN
    view = FakeView()
    assert decide(key, version, request(key, version, owners=[]), view) == Relay()
    assert view.asked == []


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_DELEGATION_TOKEN))
def test_describe_delegation_token_for_named_owners_still_filters(version: int) -> None:
    key = ApiKey.DESCRIBE_DELEGATION_TOKEN
    owner = item(key, version, ("owners",), principal_type="User", principal_name="bob")
    verdict = decide(key, version, request(key, version, owners=[owner]), FakeView(everything=True))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
