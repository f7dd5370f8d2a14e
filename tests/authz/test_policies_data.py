"""The data-group policies, every API at every version: all allowed, nothing allowed, partly allowed."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import pytest

from authz.model import AclOperation as Op
from authz.model import ResourceType as RT
from authz.policies import data, rules
from authz.policies.data import authorize_metadata
from authz.request_policy import CLUSTER_NAME, Action, Answer, Body, Refuse, Relay, Rewrite, Verdict
from authz.response_defaults import default_item, default_response
from protocol.api_keys import ApiKey
from protocol.codec import default_value
from protocol.registry import api
from protocol.schema import FieldSpec
from tests.authz.fake_view import FakeView as SharedFakeView

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
INVALID_REQUEST = 42
UNKNOWN_TOPIC_ID = 100
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_TOPIC_EXCEPTION = 17
NOT_REQUESTED = -2147483648
ZERO = uuid.UUID(int=0)
IDS = {name: uuid.UUID(int=i + 1) for i, name in enumerate(["alpha", "beta", "gamma", "delta"])}
GHOST = uuid.UUID(int=99)  # a topic id no topic has


# --- the fake view ----------------------------------------------------------------------------------

class FakeView(SharedFakeView):
    def __init__(self, allowed: Iterable[Action] = (), *, everything: bool = False) -> None:
        super().__init__(allowed, everything=everything, topics={topic_id: name for name, topic_id in IDS.items()})


def topic(op: Op, *names: str) -> list[Action]:
    return [Action(op, RT.TOPIC, name) for name in names]


def cluster(op: Op) -> Action:
    return Action(op, RT.CLUSTER, CLUSTER_NAME)


def group(op: Op, name: str) -> Action:
    return Action(op, RT.GROUP, name)


EVERYTHING = FakeView(everything=True)
NOTHING = FakeView()


# --- building and checking bodies -------------------------------------------------------------------

def versions(key: ApiKey) -> list[int]:
    schema = api(key)
    assert schema is not None
    return list(range(schema.min_version, schema.max_version + 1))


def _fields(key: ApiKey, path: tuple[str, ...]) -> list[FieldSpec]:
    schema = api(key)
    assert schema is not None
    fields = schema.request.fields
    for name in path:
        fields = next(f for f in fields if f.name == name).fields
    return fields


def item(key: ApiKey, version: int, *path: str, **values: Any) -> Body:
    """A request struct (the top level when path is empty) at its defaults, with values."""
    body = {f.name: default_value(f, version) for f in _fields(key, path) if version in f.versions}
    body.update(values)
    return body


def request(key: ApiKey, version: int, **values: Any) -> Body:
    """A request as the gateway sees it: encoded by a client, decoded."""
    schema = api(key)
    assert schema is not None
    codec = schema.request_codec(version)
    return codec.decode(bytes(codec.encode(item(key, version, **values))))


def response(key: ApiKey, version: int, field: str, entries: list[Body], **values: Any) -> Body:
    body = default_response(key, version)
    body.update(values)
    body[field] = entries
    return body


def entry(key: ApiKey, version: int, *path: str, **values: Any) -> Body:
    return {**default_item(key, version, *path), **values}


def encodes_response(key: ApiKey, version: int, body: Body) -> None:
    schema = api(key)
    assert schema is not None
    schema.response_codec(version).encode(body)


def encodes_request(key: ApiKey, version: int, body: Body) -> None:
    schema = api(key)
    assert schema is not None
    schema.request_codec(version).encode(body)


def decide(key: ApiKey, body: Body, version: int, view: FakeView) -> Verdict:
    return POLICIES[key](body, version, view)


def answered(verdict: Verdict, key: ApiKey, version: int) -> Body:
    assert isinstance(verdict, Answer), verdict
    encodes_response(key, version, verdict.response)
    return verdict.response


def rewritten(verdict: Verdict, key: ApiKey, version: int) -> Rewrite:
    assert isinstance(verdict, Rewrite), verdict
    encodes_request(key, version, verdict.request)
    return verdict


# --- the group's table ------------------------------------------------------------------------------

# The group's APIs are code in data.py or declarative rows in rules.py (ListOffsets, DeleteRecords, ...).
POLICIES = {**data.POLICIES, **rules.POLICIES}
TABLE = [*data.TABLE, *rules.TABLE]

GROUP_APIS = [ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.OFFSET_FOR_LEADER_EPOCH,
              ApiKey.DELETE_RECORDS, ApiKey.DESCRIBE_TOPIC_PARTITIONS, ApiKey.SHARE_FETCH,
              ApiKey.SHARE_ACKNOWLEDGE, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
              ApiKey.DESCRIBE_PRODUCERS]


def test_every_api_of_the_group_has_a_policy_and_table_rows() -> None:
    assert set(data.POLICIES) <= set(GROUP_APIS) <= set(POLICIES)
    assert {row[0] for row in data.TABLE} <= set(GROUP_APIS) <= {row[0] for row in TABLE}
    for _, operation, resource_type, _ in TABLE:
        assert operation in Op.__members__ and resource_type in RT.__members__


# --- Fetch (1) --------------------------------------------------------------------------------------

def fetch_topic(version: int, name: str, partitions: Iterable[int] = (0, 1), topic_id: uuid.UUID | None = None
                ) -> Body:
    parts = [item(ApiKey.FETCH, version, "topics", "partitions", partition=p) for p in partitions]
    key = {"topic_id": topic_id or IDS.get(name, GHOST)} if version >= 13 else {"topic": name}
    return item(ApiKey.FETCH, version, "topics", partitions=parts, **key)


def fetch_key(version: int, name: str) -> Any:
    return IDS[name] if version >= 13 else name


def fetch_response_topic(version: int, name: str, partitions: Iterable[int] = (0, 1)) -> Body:
    parts = [entry(ApiKey.FETCH, version, "responses", "partitions", partition_index=p, records=b"data")
             for p in partitions]
    key = {"topic_id": IDS[name]} if version >= 13 else {"topic": name}
    return entry(ApiKey.FETCH, version, "responses", partitions=parts, **key)


def fetch_errors(body: Body, version: int) -> list[tuple[Any, int, int]]:
    key = "topic_id" if version >= 13 else "topic"
    return [(t[key], p["partition_index"], p["error_code"]) for t in body["responses"] for p in t["partitions"]]


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_fetch_of_readable_topics_is_relayed(version: int) -> None:
    body = request(ApiKey.FETCH, version, topics=[fetch_topic(version, "alpha"), fetch_topic(version, "beta")])
    assert decide(ApiKey.FETCH, body, version, FakeView(topic(Op.READ, "alpha", "beta"))) == Relay()


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_fetch_without_read_answers_topic_authorization_failed_per_partition(version: int) -> None:
    body = request(ApiKey.FETCH, version, topics=[fetch_topic(version, "alpha"), fetch_topic(version, "beta", [3])])
    out = answered(decide(ApiKey.FETCH, body, version, NOTHING), ApiKey.FETCH, version)
    assert fetch_errors(out, version) == [(fetch_key(version, "alpha"), 0, 29), (fetch_key(version, "alpha"), 1, 29),
                                          (fetch_key(version, "beta"), 3, 29)]
    assert all(p["high_watermark"] == -1 and p["records"] == b"" for t in out["responses"] for p in t["partitions"])
    assert out.get("error_code", 0) == 0 and out.get("session_id", 0) == 0


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_fetch_partly_readable_relays_the_readable_topics_and_merges_in_client_order(version: int) -> None:
    topics = [fetch_topic(version, "alpha"), fetch_topic(version, "beta"), fetch_topic(version, "gamma", [7])]
    body = request(ApiKey.FETCH, version, topics=topics)
    verdict = rewritten(decide(ApiKey.FETCH, body, version, FakeView(topic(Op.READ, "beta"))), ApiKey.FETCH, version)
    assert [fetch_key(version, "beta")] == [t.get("topic_id") if version >= 13 else t["topic"]
                                            for t in verdict.request["topics"]]
    merged = verdict.on_response(response(ApiKey.FETCH, version, "responses", [fetch_response_topic(version, "beta")]))
    encodes_response(ApiKey.FETCH, version, merged)
    assert fetch_errors(merged, version) == [
        (fetch_key(version, "alpha"), 0, 29), (fetch_key(version, "alpha"), 1, 29),
        (fetch_key(version, "beta"), 0, 0), (fetch_key(version, "beta"), 1, 0), (fetch_key(version, "gamma"), 7, 29)]


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.FETCH) if v >= 13])
def test_fetch_by_unknown_topic_id_is_unknown_topic_id_and_ids_never_bypass_name_acls(version: int) -> None:
    body = request(ApiKey.FETCH, version, topics=[fetch_topic(version, "ghost", [0], GHOST),
                                                  fetch_topic(version, "alpha", [0])])
    out = answered(decide(ApiKey.FETCH, body, version, FakeView(topic(Op.READ, "beta"))), ApiKey.FETCH, version)
    assert fetch_errors(out, version) == [(GHOST, 0, UNKNOWN_TOPIC_ID), (IDS["alpha"], 0, 29)]


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_follower_fetch_is_refused_even_with_cluster_action_and_topic_read(version: int) -> None:
    # Brokers never replicate through the gateway (#10: a follower Fetch read the security store's topic).
    replica = {"replica_state": {"replica_id": 1, "replica_epoch": 5}} if version >= 15 else {"replica_id": 1}
    body = request(ApiKey.FETCH, version, topics=[fetch_topic(version, "alpha", [0])], **replica)
    view = FakeView([cluster(Op.CLUSTER_ACTION), *topic(Op.READ, "alpha")])
    assert isinstance(decide(ApiKey.FETCH, body, version, view), Refuse)


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.FETCH) if v >= 7])
def test_fetch_in_a_session_is_relayed_even_when_nothing_is_readable(version: int) -> None:
    body = request(ApiKey.FETCH, version, session_id=5, session_epoch=3, topics=[fetch_topic(version, "alpha", [0])])
    verdict = rewritten(decide(ApiKey.FETCH, body, version, NOTHING), ApiKey.FETCH, version)
    assert verdict.request["topics"] == [] and verdict.request["session_epoch"] == 3
    merged = verdict.on_response(response(ApiKey.FETCH, version, "responses", [], session_id=5))
    assert fetch_errors(merged, version) == [(fetch_key(version, "alpha"), 0, 29)]
    encodes_response(ApiKey.FETCH, version, merged)


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.FETCH) if v >= 7])
def test_incremental_fetch_response_withholds_session_partitions_no_longer_readable(version: int) -> None:
    body = request(ApiKey.FETCH, version, session_id=5, session_epoch=3, topics=[fetch_topic(version, "alpha", [0])])
    verdict = decide(ApiKey.FETCH, body, version, FakeView(topic(Op.READ, "alpha")))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    upstream = [fetch_response_topic(version, "beta", [2]), fetch_response_topic(version, "alpha", [0])]
    out = verdict.on_response(response(ApiKey.FETCH, version, "responses", upstream, session_id=5))
    assert fetch_errors(out, version) == [(fetch_key(version, "alpha"), 0, 0), (fetch_key(version, "beta"), 2, 29)]
    assert out["responses"][1]["partitions"][0]["records"] == b""
    encodes_response(ApiKey.FETCH, version, out)


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.FETCH) if v >= 7])
def test_fetch_session_errors_pass_through_without_partitions(version: int) -> None:
    body = request(ApiKey.FETCH, version, session_id=5, session_epoch=3,
                   topics=[fetch_topic(version, "alpha", [0]), fetch_topic(version, "beta", [0])])
    verdict = rewritten(decide(ApiKey.FETCH, body, version, FakeView(topic(Op.READ, "beta"))), ApiKey.FETCH, version)
    out = verdict.on_response(response(ApiKey.FETCH, version, "responses", [], error_code=71))
    assert out["responses"] == [] and out["error_code"] == 71


# --- ListOffsets (2), OffsetForLeaderEpoch (23), DeleteRecords (21), DescribeProducers (61) ----------

def list_offsets_topic(version: int, name: str, partitions: Iterable[int] = (0,)) -> Body:
    parts = [item(ApiKey.LIST_OFFSETS, version, "topics", "partitions", partition_index=p, timestamp=-1)
             for p in partitions]
    return item(ApiKey.LIST_OFFSETS, version, "topics", name=name, partitions=parts)


def partition_errors(body: Body, field: str, name_field: str = "name", index: str = "partition_index"
                     ) -> list[tuple[str, int, int]]:
    return [(t[name_field], p[index], p["error_code"]) for t in body[field] for p in t["partitions"]]


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
def test_list_offsets_needs_describe_on_each_topic(version: int) -> None:
    body = request(ApiKey.LIST_OFFSETS, version, topics=[list_offsets_topic(version, "alpha")])
    assert decide(ApiKey.LIST_OFFSETS, body, version, FakeView(topic(Op.DESCRIBE, "alpha"))) == Relay()
    out = answered(decide(ApiKey.LIST_OFFSETS, body, version, NOTHING), ApiKey.LIST_OFFSETS, version)
    assert partition_errors(out, "topics") == [("alpha", 0, 29)]
    if version >= 1:
        assert out["topics"][0]["partitions"][0]["offset"] == -1
        assert out["topics"][0]["partitions"][0]["timestamp"] == -1


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
def test_list_offsets_partly_allowed_merges_in_client_order(version: int) -> None:
    topics = [list_offsets_topic(version, n) for n in ("alpha", "beta", "gamma")]
    body = request(ApiKey.LIST_OFFSETS, version, topics=topics)
    verdict = rewritten(decide(ApiKey.LIST_OFFSETS, body, version, FakeView(topic(Op.DESCRIBE, "beta"))),
                        ApiKey.LIST_OFFSETS, version)
    assert [t["name"] for t in verdict.request["topics"]] == ["beta"]
    relayed = entry(ApiKey.LIST_OFFSETS, version, "topics", name="beta",
                    partitions=[entry(ApiKey.LIST_OFFSETS, version, "topics", "partitions", partition_index=0)])
    merged = verdict.on_response(response(ApiKey.LIST_OFFSETS, version, "topics", [relayed]))
    encodes_response(ApiKey.LIST_OFFSETS, version, merged)
    assert partition_errors(merged, "topics") == [("alpha", 0, 29), ("beta", 0, 0), ("gamma", 0, 29)]


def leader_epoch_topic(version: int, name: str) -> Body:
    parts = [item(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, "topics", "partitions", partition=0, leader_epoch=4)]
    return item(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, "topics", topic=name, partitions=parts)


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch_cluster_action_or_describe_per_topic(version: int) -> None:
    key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    body = request(key, version, topics=[leader_epoch_topic(version, n) for n in ("alpha", "beta")])
    assert decide(key, body, version, FakeView([cluster(Op.CLUSTER_ACTION)])) == Relay()
    assert decide(key, body, version, FakeView(topic(Op.DESCRIBE, "alpha", "beta"))) == Relay()
    out = answered(decide(key, body, version, NOTHING), key, version)
    assert partition_errors(out, "topics", "topic", "partition") == [("alpha", 0, 29), ("beta", 0, 29)]
    assert out["topics"][0]["partitions"][0]["end_offset"] == -1


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch_partly_allowed_merges_in_client_order(version: int) -> None:
    key = ApiKey.OFFSET_FOR_LEADER_EPOCH
    body = request(key, version, topics=[leader_epoch_topic(version, n) for n in ("alpha", "beta")])
    verdict = rewritten(decide(key, body, version, FakeView(topic(Op.DESCRIBE, "beta"))), key, version)
    assert [t["topic"] for t in verdict.request["topics"]] == ["beta"]
    relayed = entry(key, version, "topics", topic="beta",
                    partitions=[entry(key, version, "topics", "partitions", partition=0, end_offset=9)])
    merged = verdict.on_response(response(key, version, "topics", [relayed]))
    encodes_response(key, version, merged)
    assert partition_errors(merged, "topics", "topic", "partition") == [("alpha", 0, 29), ("beta", 0, 0)]


def delete_records_topic(version: int, name: str) -> Body:
    parts = [item(ApiKey.DELETE_RECORDS, version, "topics", "partitions", partition_index=p, offset=10)
             for p in (0, 1)]
    return item(ApiKey.DELETE_RECORDS, version, "topics", name=name, partitions=parts)


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_RECORDS))
def test_delete_records_needs_delete_on_each_topic(version: int) -> None:
    key = ApiKey.DELETE_RECORDS
    body = request(key, version, topics=[delete_records_topic(version, n) for n in ("alpha", "beta")])
    assert decide(key, body, version, FakeView(topic(Op.DELETE, "alpha", "beta"))) == Relay()
    out = answered(decide(key, body, version, FakeView(topic(Op.DESCRIBE, "alpha", "beta"))), key, version)
    assert partition_errors(out, "topics") == [("alpha", 0, 29), ("alpha", 1, 29), ("beta", 0, 29), ("beta", 1, 29)]
    assert {p["low_watermark"] for t in out["topics"] for p in t["partitions"]} == {-1}
    verdict = rewritten(decide(key, body, version, FakeView(topic(Op.DELETE, "beta"))), key, version)
    relayed = entry(key, version, "topics", name="beta", partitions=[
        entry(key, version, "topics", "partitions", partition_index=p, low_watermark=10) for p in (0, 1)])
    merged = verdict.on_response(response(key, version, "topics", [relayed]))
    encodes_response(key, version, merged)
    assert partition_errors(merged, "topics") == [("alpha", 0, 29), ("alpha", 1, 29), ("beta", 0, 0), ("beta", 1, 0)]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_PRODUCERS))
def test_describe_producers_needs_read_and_refuses_illegal_names_first(version: int) -> None:
    key = ApiKey.DESCRIBE_PRODUCERS
    topics = [item(key, version, "topics", name=n, partition_indexes=[0]) for n in ("alpha", "bad name", "beta")]
    body = request(key, version, topics=topics)
    out = answered(decide(key, body, version, NOTHING), key, version)
    assert partition_errors(out, "topics") == [("alpha", 0, 29), ("bad name", 0, 17), ("beta", 0, 29)]
    assert out["topics"][0]["partitions"][0]["error_message"] == "Topic authorization failed."
    assert out["topics"][1]["partitions"][0]["error_message"] == (
        "Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, "
        "'.', '_' and '-'")
    ok = request(key, version, topics=topics[:1])
    assert decide(key, ok, version, FakeView(topic(Op.READ, "alpha"))) == Relay()
    verdict = rewritten(decide(key, body, version, FakeView(topic(Op.READ, "beta"))), key, version)
    assert [t["name"] for t in verdict.request["topics"]] == ["beta"]
    relayed = entry(key, version, "topics", name="beta",
                    partitions=[entry(key, version, "topics", "partitions", partition_index=0)])
    merged = verdict.on_response(response(key, version, "topics", [relayed]))
    encodes_response(key, version, merged)
    assert partition_errors(merged, "topics") == [("alpha", 0, 29), ("bad name", 0, 17), ("beta", 0, 0)]


# --- Metadata (3) -----------------------------------------------------------------------------------

def md_topic(version: int, name: str | None, topic_id: uuid.UUID = ZERO) -> Body:
    return item(ApiKey.METADATA, version, "topics", name=name, topic_id=topic_id)


def md_request(version: int, names: list[str] | None, **values: Any) -> Body:
    topics = None if names is None else [md_topic(version, n) for n in names]
    return request(ApiKey.METADATA, version, topics=topics, **values)


def md_entry(version: int, name: str, error: int = 0) -> Body:
    return entry(ApiKey.METADATA, version, "topics", name=name, error_code=error, topic_id=IDS.get(name, ZERO),
                 topic_authorized_operations=12345)


def md_view(*names: str, create: bool = True) -> FakeView:
    return FakeView(topic(Op.DESCRIBE, *names) + ([cluster(Op.CREATE)] if create else []))


def errors_by_name(body: Body) -> list[tuple[Any, int]]:
    return [(t["name"], t["error_code"]) for t in body["topics"]]


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata_all_topics_silently_omits_topics_without_describe(version: int) -> None:
    body = md_request(version, [] if version == 0 else None)
    verdict = decide(ApiKey.METADATA, body, version, md_view("alpha", "gamma"))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    upstream = response(ApiKey.METADATA, version, "topics", [md_entry(version, n) for n in ("alpha", "beta", "gamma")])
    out = verdict.on_response(upstream)
    encodes_response(ApiKey.METADATA, version, out)
    assert errors_by_name(out) == [("alpha", 0), ("gamma", 0)]
    if version >= 8:  # not requested: the upstream's bit field never passes
        assert {t["topic_authorized_operations"] for t in out["topics"]} == {NOT_REQUESTED}


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata_of_describable_topics_is_relayed(version: int) -> None:
    body = md_request(version, ["alpha", "beta"])
    verdict = decide(ApiKey.METADATA, body, version, md_view("alpha", "beta"))
    assert isinstance(verdict, Relay)
    assert verdict.on_response is not None  # always: it drops topics nobody asked for


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata_without_describe_answers_topic_authorization_failed_without_topic_id(version: int) -> None:
    body = md_request(version, ["alpha", "beta", "alpha"])
    out = all_denied_metadata(decide(ApiKey.METADATA, body, version, NOTHING), version)
    assert errors_by_name(out) == [("alpha", 29), ("beta", 29)]  # Kafka answers each name once
    assert all(t.get("topic_id", ZERO) == ZERO and not t.get("is_internal", False) for t in out["topics"])


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata_partly_describable_merges_in_client_order(version: int) -> None:
    body = md_request(version, ["alpha", "beta", "gamma"])
    verdict = rewritten(decide(ApiKey.METADATA, body, version, md_view("beta")), ApiKey.METADATA, version)
    assert [t["name"] for t in verdict.request["topics"]] == ["beta"]
    merged = verdict.on_response(response(ApiKey.METADATA, version, "topics", [md_entry(version, "beta")]))
    encodes_response(ApiKey.METADATA, version, merged)
    assert errors_by_name(merged) == [("alpha", 29), ("beta", 0), ("gamma", 29)]


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.METADATA) if v >= 4])
def test_metadata_never_lets_the_upstream_auto_create_a_topic_without_create(version: int) -> None:
    body = md_request(version, ["alpha", "beta"], allow_auto_topic_creation=True)
    verdict = rewritten(decide(ApiKey.METADATA, body, version, md_view("alpha", "beta", create=False)),
                        ApiKey.METADATA, version)
    assert verdict.request["allow_auto_topic_creation"] is False
    upstream = [md_entry(version, "alpha"), md_entry(version, "beta", UNKNOWN_TOPIC_OR_PARTITION)]
    out = verdict.on_response(response(ApiKey.METADATA, version, "topics", upstream))
    encodes_response(ApiKey.METADATA, version, out)
    # an existing topic is described; a missing one is TOPIC_AUTHORIZATION_FAILED, as Kafka's CREATE check
    assert errors_by_name(out) == [("alpha", 0), ("beta", 29)]


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.METADATA) if v >= 4])
def test_metadata_with_create_on_the_topic_keeps_auto_creation(version: int) -> None:
    body = md_request(version, ["alpha"], allow_auto_topic_creation=True)
    view = FakeView(topic(Op.DESCRIBE, "alpha") + topic(Op.CREATE, "alpha"))
    assert isinstance(decide(ApiKey.METADATA, body, version, view), Relay)


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.METADATA) if v >= 4])
def test_metadata_with_auto_creation_off_upstream_keeps_unknown_topic(version: int) -> None:
    body = md_request(version, ["beta"], allow_auto_topic_creation=True)
    verdict = rewritten(authorize_metadata(body, version, md_view("beta", create=False),
                                           auto_create_topics_enable=False), ApiKey.METADATA, version)
    out = verdict.on_response(response(ApiKey.METADATA, version, "topics", [md_entry(version, "beta", 3)]))
    assert errors_by_name(out) == [("beta", 3)]


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.METADATA) if v < 4])
def test_metadata_before_v4_asks_for_all_topics_instead_of_auto_creating(version: int) -> None:
    body = md_request(version, ["alpha", "beta", "gamma"])
    verdict = rewritten(decide(ApiKey.METADATA, body, version, md_view("alpha", "beta", create=False)),
                        ApiKey.METADATA, version)
    assert verdict.request["topics"] == ([] if version == 0 else None)
    upstream = [md_entry(version, n) for n in ("alpha", "delta", "gamma")]
    out = verdict.on_response(response(ApiKey.METADATA, version, "topics", upstream))
    encodes_response(ApiKey.METADATA, version, out)
    assert errors_by_name(out) == [("alpha", 0), ("beta", 29), ("gamma", 29)]


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.METADATA) if v >= 8])
def test_metadata_topic_authorized_operations_are_the_clients_own(version: int) -> None:
    body = md_request(version, ["alpha"], include_topic_authorized_operations=True)
    view = FakeView(topic(Op.DESCRIBE, "alpha") + topic(Op.READ, "alpha") + [cluster(Op.CREATE)])
    verdict = decide(ApiKey.METADATA, body, version, view)
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    out = verdict.on_response(response(ApiKey.METADATA, version, "topics", [md_entry(version, "alpha")]))
    assert out["topics"][0]["topic_authorized_operations"] == (1 << Op.READ) | (1 << Op.DESCRIBE)


@pytest.mark.parametrize("version", [8, 9, 10])
def test_metadata_cluster_authorized_operations_need_describe_on_the_cluster(version: int) -> None:
    body = md_request(version, None, include_cluster_authorized_operations=True)
    upstream = response(ApiKey.METADATA, version, "topics", [], cluster_authorized_operations=777)
    verdict = decide(ApiKey.METADATA, body, version, NOTHING)
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    assert verdict.on_response(dict(upstream))["cluster_authorized_operations"] == 0
    view = FakeView([cluster(Op.DESCRIBE), cluster(Op.ALTER)])
    verdict = decide(ApiKey.METADATA, body, version, view)
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    assert verdict.on_response(dict(upstream))["cluster_authorized_operations"] == (1 << Op.DESCRIBE) | (1 << Op.ALTER)


@pytest.mark.parametrize("version", [8, 9, 10])
def test_metadata_answered_by_the_gateway_still_carries_cluster_authorized_operations(version: int) -> None:
    body = md_request(version, ["alpha"], include_cluster_authorized_operations=True)
    out = all_denied_metadata(decide(ApiKey.METADATA, body, version, FakeView([cluster(Op.DESCRIBE)])), version)
    assert errors_by_name(out) == [("alpha", 29)]
    assert out["cluster_authorized_operations"] == 1 << Op.DESCRIBE


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.METADATA) if v >= 12])
def test_metadata_by_topic_id_resolves_names_and_hides_them_when_not_describable(version: int) -> None:
    topics = [md_topic(version, None, IDS["alpha"]), md_topic(version, None, GHOST),
              md_topic(version, None, IDS["beta"]), md_topic(version, "gamma")]
    body = request(ApiKey.METADATA, version, topics=topics)
    verdict = rewritten(decide(ApiKey.METADATA, body, version, md_view("beta", "gamma")), ApiKey.METADATA, version)
    # the name-only entry is ignored, as Kafka does once ids are present: it must not reach the upstream
    assert [t["topic_id"] for t in verdict.request["topics"]] == [IDS["beta"]]
    out = verdict.on_response(response(ApiKey.METADATA, version, "topics", [md_entry(version, "beta")]))
    encodes_response(ApiKey.METADATA, version, out)
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in out["topics"]] == [
        (None, IDS["alpha"], 29), (None, GHOST, UNKNOWN_TOPIC_ID), ("beta", IDS["beta"], 0)]
    nothing = all_denied_metadata(decide(ApiKey.METADATA, body, version, NOTHING), version)
    assert [t["error_code"] for t in nothing["topics"]] == [29, UNKNOWN_TOPIC_ID, 29]


def all_denied_metadata(verdict: Verdict, version: int) -> Body:
    """Kafka still returns brokers when every named topic is denied: the gateway relays a request for no
    topics and its hook discards whatever topics the upstream sends (Tansu sends all for an empty list)."""
    relay = rewritten(verdict, ApiKey.METADATA, version)
    assert relay.request["topics"] == [] and relay.request.get("allow_auto_topic_creation", False) is False
    upstream = response(ApiKey.METADATA, version, "topics", [md_entry(version, "leaked")])
    upstream["brokers"] = [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}]
    out = relay.on_response(upstream)
    encodes_response(ApiKey.METADATA, version, out)
    assert "leaked" not in [t["name"] for t in out["topics"]]
    assert [b["node_id"] for b in out["brokers"]] == [1]
    return out


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.METADATA) if v >= 1])
def test_metadata_for_an_empty_topic_list_never_returns_topics(version: int) -> None:
    # Kafka: an empty list (v1+) means "no topics". Tansu answers it with every topic: dropped here.
    verdict = decide(ApiKey.METADATA, md_request(version, []), version, NOTHING)
    hook = verdict.on_response if isinstance(verdict, (Relay, Rewrite)) else None
    assert hook is not None
    out = hook(response(ApiKey.METADATA, version, "topics", [md_entry(version, "secret")]))
    assert out["topics"] == []


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_v10_v11_with_topic_ids_is_an_invalid_request(version: int) -> None:
    body = request(ApiKey.METADATA, version, topics=[md_topic(version, "alpha", IDS["alpha"])])
    out = answered(decide(ApiKey.METADATA, body, version, EVERYTHING), ApiKey.METADATA, version)
    assert errors_by_name(out) == [("alpha", INVALID_REQUEST)]


# --- DescribeTopicPartitions (75) -------------------------------------------------------------------

def dtp_request(version: int, names: list[str], cursor: tuple[str, int] | None = None) -> Body:
    topics = [item(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version, "topics", name=n) for n in names]
    at = None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}
    return request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version, topics=topics, cursor=at)


def dtp_entry(version: int, name: str) -> Body:
    return entry(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version, "topics", name=name, topic_id=IDS.get(name, ZERO),
                 topic_authorized_operations=12345)


def dtp_response(version: int, names: list[str], cursor: tuple[str, int] | None = None) -> Body:
    at = None if cursor is None else {"topic_name": cursor[0], "partition_index": cursor[1]}
    return response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version, "topics", [dtp_entry(version, n) for n in names],
                    next_cursor=at)


DTP_VERSIONS = versions(ApiKey.DESCRIBE_TOPIC_PARTITIONS)


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_describe_topic_partitions_of_describable_topics_relays_and_sets_the_clients_operations(version: int) -> None:
    verdict = decide(ApiKey.DESCRIBE_TOPIC_PARTITIONS, dtp_request(version, ["alpha"]), version,
                     md_view("alpha"))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    out = verdict.on_response(dtp_response(version, ["alpha"]))
    assert out["topics"][0]["topic_authorized_operations"] == 1 << Op.DESCRIBE


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_describe_topic_partitions_without_describe_answers_sorted_errors(version: int) -> None:
    out = answered(decide(ApiKey.DESCRIBE_TOPIC_PARTITIONS, dtp_request(version, ["beta", "alpha"]), version,
                          NOTHING), ApiKey.DESCRIBE_TOPIC_PARTITIONS, version)
    assert errors_by_name(out) == [("alpha", 29), ("beta", 29)]
    assert out["next_cursor"] is None
    assert {t["topic_authorized_operations"] for t in out["topics"]} == {NOT_REQUESTED}


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_describe_topic_partitions_reports_denied_topics_up_to_the_page_end(version: int) -> None:
    body = dtp_request(version, ["alpha", "beta", "gamma", "zeta"])
    verdict = rewritten(decide(ApiKey.DESCRIBE_TOPIC_PARTITIONS, body, version, md_view("alpha", "gamma")),
                        ApiKey.DESCRIBE_TOPIC_PARTITIONS, version)
    assert [t["name"] for t in verdict.request["topics"]] == ["alpha", "gamma"]
    # the page ends inside gamma: beta (before it) is reported now, zeta (after it) on the next page
    out = verdict.on_response(dtp_response(version, ["alpha", "gamma"], ("gamma", 5)))
    encodes_response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version, out)
    assert errors_by_name(out) == [("alpha", 0), ("gamma", 0), ("beta", 29)]
    last = verdict.on_response(dtp_response(version, ["alpha", "gamma"]))
    assert errors_by_name(last) == [("alpha", 0), ("gamma", 0), ("beta", 29), ("zeta", 29)]


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_describe_topic_partitions_cursor_on_a_denied_topic_is_not_relayed(version: int) -> None:
    body = dtp_request(version, ["alpha", "beta", "gamma"], ("beta", 3))
    verdict = rewritten(decide(ApiKey.DESCRIBE_TOPIC_PARTITIONS, body, version, md_view("alpha", "gamma")),
                        ApiKey.DESCRIBE_TOPIC_PARTITIONS, version)
    assert verdict.request["cursor"] is None and [t["name"] for t in verdict.request["topics"]] == ["gamma"]
    out = verdict.on_response(dtp_response(version, ["gamma"]))
    assert errors_by_name(out) == [("gamma", 0), ("beta", 29)]  # alpha sorts before the cursor


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_describe_topic_partitions_cursor_outside_the_list_is_an_invalid_request(version: int) -> None:
    body = dtp_request(version, ["alpha"], ("beta", 0))
    out = answered(decide(ApiKey.DESCRIBE_TOPIC_PARTITIONS, body, version, EVERYTHING),
                   ApiKey.DESCRIBE_TOPIC_PARTITIONS, version)
    assert errors_by_name(out) == [("alpha", INVALID_REQUEST)]


@pytest.mark.parametrize("version", DTP_VERSIONS)
def test_describe_topic_partitions_all_topics_filters_and_never_names_a_hidden_topic(version: int) -> None:
    verdict = decide(ApiKey.DESCRIBE_TOPIC_PARTITIONS, dtp_request(version, []), version, md_view("alpha"))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    out = verdict.on_response(dtp_response(version, ["alpha", "beta"], ("gamma", 0)))
    encodes_response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version, out)
    assert errors_by_name(out) == [("alpha", 0)]
    assert out["next_cursor"] == {"topic_name": "alpha\x00", "partition_index": 0}


# --- ShareFetch (78), ShareAcknowledge (79) ---------------------------------------------------------

def share_topic(key: ApiKey, version: int, name: str, acks: bool = False) -> Body:
    batches = [item(key, version, "topics", "partitions", "acknowledgement_batches", first_offset=0, last_offset=0,
                    acknowledge_types=[1])] if acks else []
    parts = [item(key, version, "topics", "partitions", partition_index=0, acknowledgement_batches=batches)]
    return item(key, version, "topics", topic_id=IDS.get(name, GHOST), partitions=parts)


def share_request(key: ApiKey, version: int, names: list[str], acks: tuple[str, ...] = (), **values: Any) -> Body:
    values.setdefault("group_id", "g")
    values.setdefault("member_id", str(uuid.UUID(int=7)))
    return request(key, version, topics=[share_topic(key, version, n, n in acks) for n in names], **values)


def share_entry(key: ApiKey, version: int, name: str) -> Body:
    part = entry(key, version, "responses", "partitions", partition_index=0)
    if "records" in part:
        part["records"] = b"data"
    return entry(key, version, "responses", topic_id=IDS[name], partitions=[part])


def share_errors(body: Body) -> list[tuple[uuid.UUID, int, int]]:
    return [(t["topic_id"], p["error_code"], p.get("acknowledge_error_code", p["error_code"]))
            for t in body["responses"] for p in t["partitions"]]


SHARE_APIS = [(k, v) for k in (ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE) for v in versions(k)]


@pytest.mark.parametrize(("key", "version"), SHARE_APIS)
def test_share_requests_need_read_on_the_group_first(key: ApiKey, version: int) -> None:
    body = share_request(key, version, ["alpha"])
    out = answered(decide(key, body, version, FakeView(topic(Op.READ, "alpha"))), key, version)
    assert out["error_code"] == GROUP_AUTHORIZATION_FAILED and out["responses"] == []
    nameless = share_request(key, version, ["alpha"], group_id=None)
    assert answered(decide(key, nameless, version, EVERYTHING), key, version)["error_code"] == -1


@pytest.mark.parametrize(("key", "version"), SHARE_APIS)
def test_share_requests_with_group_and_topic_read_are_relayed(key: ApiKey, version: int) -> None:
    body = share_request(key, version, ["alpha", "beta"])
    view = FakeView([group(Op.READ, "g"), *topic(Op.READ, "alpha", "beta")])
    assert decide(key, body, version, view) == Relay()


@pytest.mark.parametrize(("key", "version"), SHARE_APIS)
def test_share_requests_partly_readable_merge_in_client_order(key: ApiKey, version: int) -> None:
    body = share_request(key, version, ["alpha", "beta", "ghost"], acks=("beta",))
    view = FakeView([group(Op.READ, "g"), *topic(Op.READ, "beta")])
    verdict = rewritten(decide(key, body, version, view), key, version)
    assert [t["topic_id"] for t in verdict.request["topics"]] == [IDS["beta"]]
    merged = verdict.on_response(response(key, version, "responses", [share_entry(key, version, "beta")]))
    encodes_response(key, version, merged)
    # ShareFetch: with acknowledgements in the request, denied partitions fail their acknowledgement too
    assert share_errors(merged) == [(IDS["alpha"], 29, 29), (IDS["beta"], 0, 0), (GHOST, 100, 100)]


@pytest.mark.parametrize(("key", "version"), SHARE_APIS)
def test_share_requests_with_no_readable_topic_still_reach_the_share_session(key: ApiKey, version: int) -> None:
    body = share_request(key, version, ["alpha"], share_session_epoch=2)
    verdict = rewritten(decide(key, body, version, FakeView([group(Op.READ, "g")])), key, version)
    assert verdict.request["topics"] == [] and verdict.request["share_session_epoch"] == 2
    merged = verdict.on_response(response(key, version, "responses", []))
    encodes_response(key, version, merged)
    assert share_errors(merged) == [(IDS["alpha"], 29, 0 if key == ApiKey.SHARE_FETCH else 29)]
    failed = verdict.on_response(response(key, version, "responses", [], error_code=122))
    assert failed["responses"] == []  # a request-level error carries no partitions


@pytest.mark.parametrize("version", versions(ApiKey.SHARE_FETCH))
def test_share_fetch_withholds_session_partitions_no_longer_readable(version: int) -> None:
    body = share_request(ApiKey.SHARE_FETCH, version, ["alpha"], share_session_epoch=3)
    verdict = decide(ApiKey.SHARE_FETCH, body, version, FakeView([group(Op.READ, "g"), *topic(Op.READ, "alpha")]))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    upstream = [share_entry(ApiKey.SHARE_FETCH, version, "alpha"), share_entry(ApiKey.SHARE_FETCH, version, "beta")]
    out = verdict.on_response(response(ApiKey.SHARE_FETCH, version, "responses", upstream))
    encodes_response(ApiKey.SHARE_FETCH, version, out)
    assert share_errors(out) == [(IDS["alpha"], 0, 0), (IDS["beta"], 29, 0)]


# --- CreateTopics (19), CreatePartitions (37), DeleteTopics (20) ------------------------------------

def create_request(version: int, names: list[str]) -> Body:
    topics = [item(ApiKey.CREATE_TOPICS, version, "topics", name=n, num_partitions=1, replication_factor=1)
              for n in names]
    return request(ApiKey.CREATE_TOPICS, version, topics=topics)


def create_result(version: int, name: str) -> Body:
    config = {"name": "retention.ms", "value": "1", "read_only": False, "config_source": 5, "is_sensitive": False}
    return {**entry(ApiKey.CREATE_TOPICS, version, "topics", name=name, num_partitions=1, replication_factor=1),
            **({"configs": [config]} if version >= 5 else {})}


def results(body: Body, field: str) -> list[tuple[Any, int, Any]]:
    return [(r["name"], r["error_code"], r.get("error_message")) for r in body[field]]


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
def test_create_topics_with_create_on_the_cluster_or_each_topic_is_relayed(version: int) -> None:
    body = create_request(version, ["alpha", "beta"])
    configs = topic(Op.DESCRIBE_CONFIGS, "alpha", "beta")
    assert decide(ApiKey.CREATE_TOPICS, body, version, FakeView([cluster(Op.CREATE), *configs])) == Relay()
    assert decide(ApiKey.CREATE_TOPICS, body, version, FakeView(topic(Op.CREATE, "alpha", "beta") + configs)) \
        == Relay()


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
def test_create_topics_without_create_answers_authorization_failed(version: int) -> None:
    body = create_request(version, ["alpha", "beta", "beta", "__cluster_metadata"])
    out = answered(decide(ApiKey.CREATE_TOPICS, body, version, NOTHING), ApiKey.CREATE_TOPICS, version)
    def message(text: str) -> str | None:
        return text if version >= 1 else None

    assert results(out, "topics") == [
        ("alpha", 29, message("Authorization failed.")), ("beta", 42, message("Duplicate topic name.")),
        ("__cluster_metadata", 42, message("Creation of internal topic __cluster_metadata is prohibited."))]


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
def test_create_topics_partly_allowed_merges_and_hides_configs_without_describe_configs(version: int) -> None:
    body = create_request(version, ["alpha", "beta", "gamma"])
    view = FakeView(topic(Op.CREATE, "beta", "gamma") + topic(Op.DESCRIBE_CONFIGS, "gamma"))
    verdict = rewritten(decide(ApiKey.CREATE_TOPICS, body, version, view), ApiKey.CREATE_TOPICS, version)
    assert [t["name"] for t in verdict.request["topics"]] == ["beta", "gamma"]
    upstream = [create_result(version, "gamma"), create_result(version, "beta")]
    out = verdict.on_response(response(ApiKey.CREATE_TOPICS, version, "topics", upstream))
    encodes_response(ApiKey.CREATE_TOPICS, version, out)
    assert [(r["name"], r["error_code"]) for r in out["topics"]] == [("alpha", 29), ("beta", 0), ("gamma", 0)]
    if version >= 5:
        beta, gamma = out["topics"][1], out["topics"][2]
        assert (beta["configs"], beta["num_partitions"], beta["topic_config_error_code"]) == ([], -1, 29)
        assert (len(gamma["configs"]), gamma["num_partitions"], gamma["topic_config_error_code"]) == (1, 1, 0)


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_PARTITIONS))
def test_create_partitions_needs_alter_on_each_topic(version: int) -> None:
    key = ApiKey.CREATE_PARTITIONS
    topics = [item(key, version, "topics", name=n, count=3, assignments=None) for n in ("alpha", "beta", "alpha")]
    body = request(key, version, topics=topics[:2])
    assert decide(key, body, version, FakeView(topic(Op.ALTER, "alpha", "beta"))) == Relay()
    out = answered(decide(key, request(key, version, topics=topics), version, NOTHING), key, version)
    assert results(out, "results") == [("alpha", 42, "Duplicate topic name."), ("beta", 29, None)]
    three = request(key, version, topics=[*topics[:2], item(key, version, "topics", name="gamma", count=2)])
    verdict = rewritten(decide(key, three, version, FakeView(topic(Op.ALTER, "beta"))), key, version)
    assert [t["name"] for t in verdict.request["topics"]] == ["beta"]
    merged = verdict.on_response(response(key, version, "results", [entry(key, version, "results", name="beta")]))
    encodes_response(key, version, merged)
    assert results(merged, "results") == [("alpha", 29, None), ("beta", 0, None), ("gamma", 29, None)]


def delete_request(version: int, refs: list[tuple[str | None, uuid.UUID]]) -> Body:
    if version >= 6:
        topics = [item(ApiKey.DELETE_TOPICS, version, "topics", name=n, topic_id=i) for n, i in refs]
        return request(ApiKey.DELETE_TOPICS, version, topics=topics)
    return request(ApiKey.DELETE_TOPICS, version, topic_names=[n for n, _ in refs])


def deleted(version: int, name: str) -> Body:
    return entry(ApiKey.DELETE_TOPICS, version, "responses", name=name, topic_id=IDS[name])


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_TOPICS))
def test_delete_topics_needs_delete_on_each_topic_or_the_cluster(version: int) -> None:
    body = delete_request(version, [("alpha", ZERO), ("beta", ZERO)])
    # by name, Kafka asks DESCRIBE first (which an ALLOW of DELETE implies in the authorizer)
    both = topic(Op.DESCRIBE, "alpha", "beta") + topic(Op.DELETE, "alpha", "beta")
    assert decide(ApiKey.DELETE_TOPICS, body, version, FakeView(both)) == Relay()
    assert decide(ApiKey.DELETE_TOPICS, body, version, FakeView([cluster(Op.DELETE)])) == Relay()
    out = answered(decide(ApiKey.DELETE_TOPICS, body, version, NOTHING), ApiKey.DELETE_TOPICS, version)
    message = "Topic authorization failed." if version >= 5 else None
    assert [(r["name"], r["error_code"], r.get("error_message")) for r in out["responses"]] == [
        ("alpha", 29, message), ("beta", 29, message)]


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_TOPICS))
def test_delete_topics_partly_allowed_merges_in_client_order(version: int) -> None:
    body = delete_request(version, [("alpha", ZERO), ("beta", ZERO), ("gamma", ZERO), ("gamma", ZERO)])
    view = FakeView(topic(Op.DESCRIBE, "alpha", "beta") + topic(Op.DELETE, "beta"))
    verdict = rewritten(decide(ApiKey.DELETE_TOPICS, body, version, view), ApiKey.DELETE_TOPICS, version)
    relayed = verdict.request["topics"] if version >= 6 else verdict.request["topic_names"]
    assert ([t["name"] for t in relayed] if version >= 6 else relayed) == ["beta"]
    out = verdict.on_response(response(ApiKey.DELETE_TOPICS, version, "responses", [deleted(version, "beta")]))
    encodes_response(ApiKey.DELETE_TOPICS, version, out)
    assert [(r["name"], r["error_code"]) for r in out["responses"]] == [("alpha", 29), ("beta", 0), ("gamma", 42)]


@pytest.mark.parametrize("version", [v for v in versions(ApiKey.DELETE_TOPICS) if v >= 6])
def test_delete_topics_by_id_reveals_names_only_to_describers(version: int) -> None:
    refs = [(None, IDS["alpha"]), (None, IDS["beta"]), (None, GHOST), (None, IDS["gamma"]), (None, ZERO),
            ("delta", IDS["delta"])]
    view = FakeView(topic(Op.DESCRIBE, "beta") + topic(Op.DELETE, "gamma"))
    verdict = rewritten(decide(ApiKey.DELETE_TOPICS, delete_request(version, refs), version, view),
                        ApiKey.DELETE_TOPICS, version)
    assert [t["topic_id"] for t in verdict.request["topics"]] == [IDS["gamma"]]
    out = verdict.on_response(response(ApiKey.DELETE_TOPICS, version, "responses", [deleted(version, "gamma")]))
    encodes_response(ApiKey.DELETE_TOPICS, version, out)
    assert [(r["name"], r["topic_id"], r["error_code"], r["error_message"]) for r in out["responses"]] == [
        (None, IDS["alpha"], 29, "Topic authorization failed."),
        ("beta", IDS["beta"], 29, "Topic authorization failed."),
        (None, GHOST, UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        ("gamma", IDS["gamma"], 0, None),
        (None, ZERO, 42, "Neither topic name nor id were specified."),
        ("delta", IDS["delta"], 42, "You may not specify both topic name and topic id.")]
