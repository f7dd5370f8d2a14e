"""The topic guard (#10): generated over every API, version and annotated topic field, a request naming the
reserved topic there (by name, or by id) is never relayed with it, for a super user and for a principal with
every cluster-level right; and every topic-like field of every schema is annotated."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from auth.principal import KafkaPrincipal
from authz.authorizer import StandardAuthorizer
from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from authz.request_policy import Answer, Refuse, Relay, Rewrite
from authz.topic_guard import NOTHING_FOUND, TopicFindings, TopicGuard, inspect_topics, topic_name_problem
from gateway.authorization import GatewayAuthorization
from gateway.ops.audit import AuditLog
from gateway.session.policy_check import authorize, check_topics
from protocol.api_keys import ApiKey
from protocol.codec import default_value
from protocol.entities.topics import CannotDrop, TopicRef, drop_topics, names_and_ids, topic_refs
from protocol.registry import all_apis
from protocol.schema import FieldSpec, MessageSpec, parse_schema_text
from tests.gateway.session.session_driver import ROUTES, requester

RESERVED = "_ksgate_security"
RESERVED_ID = uuid.UUID("5e5e5e5e-0000-4000-8000-000000000001")
OTHER = "orders"
OTHER_ID = uuid.UUID("5e5e5e5e-0000-4000-8000-000000000002")
TOPIC_NAMES = {RESERVED_ID: RESERVED, OTHER_ID: OTHER}


# --- building a request that names the reserved topic in exactly one field ----------------------------------

def _leaf_paths(fields: list[FieldSpec], version: int, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for spec in fields:
        if version not in spec.versions:
            continue
        if spec.entity in ("topicName", "topicId", "configResourceName"):
            paths.append((*prefix, spec.name))
        elif spec.is_struct or spec.is_struct_array:
            paths.extend(_leaf_paths(spec.fields, version, (*prefix, spec.name)))
    return paths


def _build(fields: list[FieldSpec], version: int, target: tuple[str, ...] | None, by_id: bool) -> dict[str, Any]:
    body: dict[str, Any] = {}
    config_resource = any(f.entity == "configResourceName" for f in fields if version in f.versions)
    for spec in fields:
        if version not in spec.versions:
            continue
        hit = target is not None and target[0] == spec.name
        rest = target[1:] if hit and target is not None else None
        if spec.is_struct_array or spec.is_struct:
            child = _build(spec.fields, version, rest if hit else None, by_id)
            body[spec.name] = [child] if spec.is_struct_array else child
        elif spec.entity in ("topicName", "configResourceName"):
            name = RESERVED if hit and not by_id else OTHER
            body[spec.name] = [name] if spec.type.startswith("[]") else name
        elif spec.entity == "topicId":
            topic_id = RESERVED_ID if hit and by_id else OTHER_ID
            body[spec.name] = [topic_id] if spec.type.startswith("[]") else topic_id
        elif config_resource and spec.name == "resource_type":
            body[spec.name] = 2  # a TOPIC config resource
        else:
            body[spec.name] = default_value(spec, version)
    return body


def _request(key: int, version: int, path: tuple[str, ...] | None, by_id: bool) -> dict[str, Any]:
    """The request as the gateway sees it: encoded, then decoded (absent fields carry their defaults)."""
    codec = all_apis()[key].request_codec(version)
    return codec.decode(codec.encode(_build(all_apis()[key].request.fields, version, path, by_id)))


def _cases() -> list[Any]:
    cases = []
    for key, schema in sorted(all_apis().items()):
        for version in range(schema.min_version, schema.max_version + 1):
            for path in _leaf_paths(schema.request.fields, version):
                leaf = _field(schema.request, path)
                by_id_options = [True] if leaf.entity == "topicId" else [False]
                for by_id in by_id_options:
                    cases.append(pytest.param(key, version, path, by_id,
                                              id=f"{schema.name}-v{version}-{'.'.join(path)}"))
    return cases


def _field(spec: MessageSpec, path: tuple[str, ...]) -> FieldSpec:
    fields = spec.fields
    found: FieldSpec | None = None
    for name in path:
        found = next(f for f in fields if f.name == name)
        fields = found.fields
    assert found is not None
    return found


class _Conn(SimpleNamespace):
    pass


def _shared(authorizer: StandardAuthorizer) -> GatewayAuthorization:
    return GatewayAuthorization(authorizer, store=None, audit=AuditLog(None),  # type: ignore[arg-type]
                                reserved_topics=frozenset({RESERVED}))


def _super_user() -> GatewayAuthorization:
    authorizer = StandardAuthorizer(["User:root"], False)
    authorizer.load([])
    return _shared(authorizer)


def _cluster_admin() -> GatewayAuthorization:
    """Every cluster-level operation allowed, nothing on topics: the shortcuts that once skipped the reservation."""
    authorizer = StandardAuthorizer([], False)
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL)
    entry = AccessControlEntry("User:root", "*", AclOperation.ALL, AclPermissionType.ALLOW)
    authorizer.load([AclBinding(cluster, entry)])
    return _shared(authorizer)


def _conn() -> Any:
    return requester(KafkaPrincipal("User", "root"), "SASL_SSL", TOPIC_NAMES)


def _names_reserved(spec: MessageSpec, version: int, body: dict[str, Any]) -> bool:
    return any((ref.name if ref.topic_id is None else TOPIC_NAMES.get(ref.topic_id)) == RESERVED
               for ref in topic_refs(spec, version, body))


CASES = _cases()


def test_the_generated_cases_cover_the_apis_that_once_leaked() -> None:
    names = {case.id.split("-v")[0] for case in CASES}
    assert {"Fetch", "DeleteTopics", "CreateTopics", "AddPartitionsToTxn", "Produce", "Metadata"} <= names
    assert len(CASES) > 150


@pytest.mark.parametrize("shared_factory", [_super_user, _cluster_admin], ids=["super-user", "cluster-admin"])
@pytest.mark.parametrize(("key", "version", "path", "by_id"), CASES)
def test_a_request_naming_the_reserved_topic_is_never_relayed_with_it(
        shared_factory: Any, key: int, version: int, path: tuple[str, ...], by_id: bool) -> None:
    schema = all_apis()[key]
    body = _request(key, version, path, by_id)
    assert _names_reserved(schema.request, version, body), "the generated request must name the reserved topic"
    shared = shared_factory()
    verdict = authorize(_conn(), shared, ROUTES[key], version, body)
    if isinstance(verdict, Refuse | Answer):
        if isinstance(verdict, Answer):
            schema.response_codec(version).encode(verdict.response)  # a well-formed answer
        return
    assert not isinstance(verdict, Relay), f"relayed as is: {path}"
    assert isinstance(verdict, Rewrite)
    assert not _names_reserved(schema.request, version, verdict.request), f"rewritten but still names it: {path}"
    # the rewritten request is well-formed
    schema.request_codec(version).encode(verdict.request)


def test_a_follower_fetch_is_refused_for_a_super_user_whatever_the_topic() -> None:
    for version, field in ((12, "replica_id"), (15, "replica_state")):
        body = _request(1, version, None, False)
        if field == "replica_id":
            body["replica_id"] = 111
        else:
            body["replica_state"] = {"replica_id": 111, "replica_epoch": 3}
        verdict = authorize(_conn(), _super_user(), ROUTES[1], version, body)
        assert isinstance(verdict, Refuse), version


def test_a_request_without_reserved_topics_keeps_its_cluster_shortcuts() -> None:
    # DeleteTopics: DELETE on the cluster authorizes every topic, as in Kafka
    body = _request(20, 5, None, False)
    assert isinstance(authorize(_conn(), _cluster_admin(), ROUTES[20], 5, body), Relay)


# --- every topic-like field is annotated ---------------------------------------------------------------------

def unannotated_topic_fields(spec: MessageSpec) -> list[str]:
    """Fields that look like a topic (a ``*topic*`` field, or ``name`` inside a ``*topic*`` array) but carry no
    ``entity=``: a protection would not see them."""
    missing: list[str] = []

    def walk(fields: list[FieldSpec], parent: str, where: str) -> None:
        for spec_field in fields:
            path = f"{where}.{spec_field.name}"
            if spec_field.is_struct or spec_field.is_struct_array:
                walk(spec_field.fields, spec_field.name, path)
                continue
            base = spec_field.type.removeprefix("[]")
            if base not in ("string", "uuid"):
                continue
            looks_like_topic = "topic" in spec_field.name or (spec_field.name == "name" and "topic" in parent)
            if looks_like_topic and spec_field.entity is None:
                missing.append(path)

    walk(spec.fields, "", spec.name)
    return missing


@pytest.mark.parametrize("key", sorted(all_apis()))
def test_every_topic_like_field_is_annotated(key: int) -> None:
    schema = all_apis()[key]
    assert unannotated_topic_fields(schema.request) == []
    assert unannotated_topic_fields(schema.response) == []


def test_a_new_schema_with_an_unannotated_topic_field_is_caught() -> None:
    (request, _) = parse_schema_text(
        "request NewApi key=999 versions=0\n"
        "  topics []\n"
        "    name string\n"
        "    partitions []int32\n"
        "  source_topic string\n"
        "response NewApi key=999 versions=0\n"
        "  error_code int16\n", "new.ks")
    assert unannotated_topic_fields(request) == ["NewApi.topics.name", "NewApi.source_topic"]


def test_topic_refs_finds_names_ids_and_topic_config_resources_only() -> None:
    schema = all_apis()[32]  # DescribeConfigs
    body = {"resources": [{"resource_type": 2, "resource_name": "t1", "configuration_keys": None},
                          {"resource_type": 4, "resource_name": "1", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}
    assert list(topic_refs(schema.request, 4, body)) == [TopicRef(name="t1")]


def _split_refs(spec: MessageSpec, version: int, body: dict[str, Any]) -> tuple[list[str], list[uuid.UUID]]:
    refs = list(topic_refs(spec, version, body))
    return ([ref.name for ref in refs if ref.name is not None],
            [ref.topic_id for ref in refs if ref.topic_id is not None])


@pytest.mark.parametrize(("key", "version", "path", "by_id"), CASES)
def test_the_generated_collector_finds_what_topic_refs_finds(key: int, version: int, path: tuple[str, ...],
                                                             by_id: bool) -> None:
    """The guard's fast pre-pass (names_and_ids) and the reference walk agree on every annotated field."""
    spec = all_apis()[key].request
    body = _request(key, version, path, by_id)
    names, ids = names_and_ids(spec, version, body)
    assert (names, ids) == _split_refs(spec, version, body)
    assert RESERVED in names or RESERVED_ID in ids


def test_the_collector_keeps_field_order_and_skips_nulls_and_other_config_resources() -> None:
    describe_configs = all_apis()[32].request
    body = {"resources": [{"resource_type": 2, "resource_name": "t1", "configuration_keys": None},
                          {"resource_type": 4, "resource_name": "1", "configuration_keys": None},
                          {"resource_type": 2, "resource_name": "t0", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": False}
    assert names_and_ids(describe_configs, 4, body) == (["t1", "t0"], [])
    produce = all_apis()[0].request
    body = {"topic_data": [{"name": "b", "partition_data": []}, {"name": "a", "partition_data": []},
                           {"name": "b", "partition_data": []}]}
    assert names_and_ids(produce, 11, body) == (["b", "a", "b"], []) == _split_refs(produce, 11, body)
    metadata = all_apis()[3].request  # v10+: topics by name or by id, either may be null
    body = {"topics": [{"topic_id": OTHER_ID, "name": None}, {"topic_id": None, "name": "x"}]}
    assert names_and_ids(metadata, 12, body) == (["x"], [OTHER_ID]) == _split_refs(metadata, 12, body)


def test_the_pre_pass_finds_reserved_names_and_ids_and_illegal_names_only() -> None:
    metadata = all_apis()[ApiKey.METADATA].request
    unknown_id = uuid.UUID("5e5e5e5e-0000-4000-8000-00000000ffff")

    def found(*topics: dict[str, Any]) -> TopicFindings:
        return inspect_topics(metadata, 12, {"topics": list(topics)}, frozenset({RESERVED}), TOPIC_NAMES)

    assert found({"topic_id": None, "name": OTHER}, {"topic_id": OTHER_ID, "name": None}) is NOTHING_FOUND
    assert found({"topic_id": None, "name": RESERVED}) == TopicFindings(reserved=frozenset({RESERVED}))
    assert found({"topic_id": RESERVED_ID, "name": None}) == TopicFindings(reserved=frozenset({RESERVED}))
    assert found({"topic_id": unknown_id, "name": None}) is NOTHING_FOUND  # answered UNKNOWN_TOPIC_ID later
    assert found({"topic_id": None, "name": "a/b"}, {"topic_id": None, "name": ".."},
                 {"topic_id": None, "name": "ok"}) == TopicFindings(illegal=frozenset({"a/b", ".."}))
    assert inspect_topics(metadata, 12, {"topics": [{"topic_id": None, "name": RESERVED}]}, frozenset(),
                          TOPIC_NAMES) is NOTHING_FOUND  # nothing reserved without an authorizer


def test_without_an_authorizer_a_produce_to_an_illegal_topic_is_answered_not_relayed() -> None:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "bad/name", "partition_data": [{"index": 0, "records": None}]}]}
    verdict = check_topics(_conn(), ROUTES[ApiKey.PRODUCE], 11, body)
    assert isinstance(verdict, Answer)
    [topic] = verdict.response["responses"]
    assert topic["name"] == "bad/name"
    assert topic["partition_responses"][0]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers
    body["topic_data"][0]["name"] = "good.name"
    assert check_topics(_conn(), ROUTES[ApiKey.PRODUCE], 11, body) == Relay()


@pytest.mark.parametrize(("name", "legal"), [
    ("orders", True), ("a.b_c-D9", True), ("x" * 249, True), ("x" * 250, False), ("", False), (".", False),
    ("..", False), ("a/../b", False), ("nul\x00", False), ("sp ace", False), ("co:lon", False), ("ünï", False),
    ("new\nline", False)])
def test_topic_names_follow_kafkas_rules(name: str, legal: bool) -> None:
    assert (topic_name_problem(name) is None) == legal


# --- answers that list topics nobody asked for ----------------------------------------------------------------

def _guard(key: int, version: int) -> TopicGuard:
    schema = all_apis()[key]
    return TopicGuard(key, version, schema.request, schema.response, frozenset({RESERVED}), TOPIC_NAMES,
                      ROUTES[key].topic_rules)


def test_a_listing_answer_loses_the_reserved_topic_on_the_way_back() -> None:
    guard = _guard(ApiKey.DESCRIBE_LOG_DIRS, 1)
    verdict = guard.seal(Relay(), guard.inspect({"topics": None}))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    response = {"throttle_time_ms": 0, "results": [{"error_code": 0, "log_dir": "/d", "topics": [
        {"name": RESERVED, "partitions": []}, {"name": OTHER, "partitions": []}]}]}
    assert [t["name"] for t in verdict.on_response(response)["results"][0]["topics"]] == [OTHER]


def test_a_streams_topology_description_loses_the_nodes_that_name_the_reserved_topic() -> None:
    # StreamsGroupDescribe v1 (KIP-1331): the description's sink topics are not the topology's, so Kafka's own
    # topic check does not cover them; the annotations let the guard drop a node naming the reserved topic.
    guard = _guard(ApiKey.STREAMS_GROUP_DESCRIBE, 1)
    verdict = guard.seal(Relay(), guard.inspect({"group_ids": ["g"], "include_authorized_operations": False,
                                                 "include_topology_description": True}))
    assert isinstance(verdict, Relay) and verdict.on_response is not None

    def node(name: str, sink: str | None) -> dict[str, object]:
        return {"name": name, "node_type": 3, "source_topics": [], "sink_topic": sink, "stores": [], "successors": []}

    nodes = [node("to-reserved", RESERVED), node("to-other", OTHER), node("dynamic", None)]
    response = {"groups": [{"group_id": "g", "topology_description": {
        "subtopologies": [{"subtopology_id": "0", "nodes": nodes}], "global_stores": []}}]}
    nodes = verdict.on_response(response)["groups"][0]["topology_description"]["subtopologies"][0]["nodes"]
    assert [n["name"] for n in nodes] == ["to-other", "dynamic"]


def test_a_paging_cursor_at_the_reserved_topic_ends_the_listing() -> None:
    guard = _guard(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0)
    verdict = guard.seal(Relay(), guard.inspect({"topics": [], "cursor": None}))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    response = {"topics": [], "next_cursor": {"topic_name": RESERVED, "partition_index": 0}}
    assert verdict.on_response(response)["next_cursor"] is None


def test_the_data_apis_keep_their_fast_path() -> None:
    guard = _guard(ApiKey.FETCH, 12)
    assert guard.seal(Relay(), guard.inspect({"topics": []})) == Relay()


def test_a_required_field_naming_a_hidden_topic_cannot_be_dropped() -> None:
    spec = parse_schema_text("request X key=998 versions=0\n  topic string entity=topicName\n"
                             "response X key=998 versions=0\n  error_code int16\n", "x.ks")[0]
    with pytest.raises(CannotDrop):
        drop_topics(spec, 0, {"topic": RESERVED}, lambda ref: ref.name == RESERVED)
