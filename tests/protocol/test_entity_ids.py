"""Group, transactional, producer and broker ids found through the schemas' entity= annotations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from protocol.api_keys import ApiKey
from protocol.entities.ids import (
    Entity,
    broker_ids,
    entity_paths,
    group_ids,
    names_entity,
    producer_ids,
    transactional_ids,
)
from protocol.registry import all_apis, api
from protocol.schema import FieldSpec, MessageSpec, SchemaError, parse_schema_text


def _spec(key: ApiKey, kind: str = "request") -> MessageSpec:
    schema = api(key)
    assert schema is not None
    return schema.request if kind == "request" else schema.response


def test_offset_fetch_names_its_group_at_the_top_then_per_batch() -> None:
    spec = _spec(ApiKey.OFFSET_FETCH)
    assert [p.fields for p in entity_paths(spec, 7, "groupId")] == [("group_id",)]
    assert [p.fields for p in entity_paths(spec, 8, "groupId")] == [("groups", "group_id")]
    assert group_ids(spec, 7, {"group_id": "g", "topics": None}) == ["g"]
    assert group_ids(spec, 8, {"groups": [{"group_id": "a"}, {"group_id": "b"}]}) == ["a", "b"]


def test_describe_groups_lists_group_ids_as_strings() -> None:
    spec = _spec(ApiKey.DESCRIBE_GROUPS)
    assert entity_paths(spec, 5, "groupId")[0].many
    assert group_ids(spec, 5, {"groups": ["a", "b", "a"]}) == ["a", "b", "a"]
    assert group_ids(_spec(ApiKey.DESCRIBE_GROUPS, "response"), 5,
                     {"groups": [{"group_id": "a"}, {"group_id": "c"}]}) == ["a", "c"]


def test_add_partitions_to_txn_old_and_batched_transactional_ids() -> None:
    spec = _spec(ApiKey.ADD_PARTITIONS_TO_TXN)
    assert transactional_ids(spec, 3, {"v3_and_below_transactional_id": "t", "v3_and_below_producer_id": 7}) == ["t"]
    assert producer_ids(spec, 3, {"v3_and_below_transactional_id": "t", "v3_and_below_producer_id": 7}) == [7]
    body = {"transactions": [{"transactional_id": "x", "producer_id": 1}, {"transactional_id": "y", "producer_id": 2}]}
    assert transactional_ids(spec, 4, body) == ["x", "y"]
    assert producer_ids(spec, 4, body) == [1, 2]


def test_a_null_transactional_id_is_not_named() -> None:
    assert names_entity(_spec(ApiKey.PRODUCE), 3, "transactionalId")
    assert not names_entity(_spec(ApiKey.PRODUCE), 2, "transactionalId")
    assert transactional_ids(_spec(ApiKey.PRODUCE), 3, {"transactional_id": None, "topic_data": []}) == []


def test_metadata_broker_ids_include_leaders_and_replicas() -> None:
    body = {"brokers": [{"node_id": 1}], "controller_id": 2,
            "topics": [{"partitions": [{"leader_id": 3, "replica_nodes": [3, 4], "isr_nodes": [3],
                                        "offline_replicas": [5]}]}]}
    assert broker_ids(_spec(ApiKey.METADATA, "response"), 12, body) == [1, 2, 3, 3, 4, 3, 5]
    # v0 has neither a controller id nor offline replicas
    assert broker_ids(_spec(ApiKey.METADATA, "response"), 0, body) == [1, 3, 3, 4, 3]


def _fields(spec: MessageSpec) -> Iterator[FieldSpec]:
    def walk(fields: list[FieldSpec]) -> Iterator[FieldSpec]:
        for f in fields:
            yield f
            yield from walk(f.fields)
    return walk(spec.fields)


# Field names that always name the entity in Kafka's protocol.
_NAMED: dict[str, Entity] = {
    "group_id": "groupId", "group_ids": "groupId", "groups_names": "groupId",
    "transactional_id": "transactionalId", "transactional_ids": "transactionalId",
    "v3_and_below_transactional_id": "transactionalId",
    "producer_id": "producerId", "v3_and_below_producer_id": "producerId",
    "node_id": "brokerId", "broker_id": "brokerId", "leader_id": "brokerId", "controller_id": "brokerId",
}


@pytest.mark.parametrize("kind", ["request", "response"])
def test_every_field_named_like_an_entity_is_annotated(kind: str) -> None:
    """A new schema cannot slip a group, transactional, producer or broker id past the annotations."""
    missing = [(schema.name, f.name) for schema in all_apis().values()
               for f in _fields(schema.request if kind == "request" else schema.response)
               if f.name in _NAMED and f.entity != _NAMED[f.name]]
    assert missing == []


@pytest.mark.parametrize("bad", [
    "  group_id int32 entity=groupId",
    "  producer_id int32 entity=producerId",
    "  node_id string entity=brokerId",
    "  port int64 entity=brokerPort",
])
def test_an_annotation_must_fit_its_field_type(bad: str) -> None:
    with pytest.raises(SchemaError):
        parse_schema_text("response X key=998 versions=0\n" + bad + "\n")


@pytest.mark.parametrize("fields", [
    ["host string entity=brokerHost", "port int32 entity=brokerPort"],  # no node id
    ["id int32 entity=brokerId", "host string entity=brokerHost"],  # no port
    ["id int32 entity=brokerId", "leader int32 entity=brokerId", "host string entity=brokerHost",
     "port int32 entity=brokerPort"],  # which id?
    ["id int32 entity=brokerId", "host string entity=brokerHost v=1+", "port int32 entity=brokerPort"],
])
def test_an_endpoint_needs_one_id_host_and_port_in_the_same_versions(fields: list[str]) -> None:
    text = "response X key=998 versions=0-1\n  nodes []\n" + "".join(f"    {f}\n" for f in fields)
    with pytest.raises(SchemaError):
        parse_schema_text(text)
