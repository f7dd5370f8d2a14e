"""The group, offset and transaction policies: every API of authz.policies.groups at every version."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import pytest

from authz.model import AclOperation, ResourceType
from authz.policies import groups, rules
from authz.request_policy import CLUSTER_NAME, Action, Answer, Body, Relay, Rewrite, Verdict
from authz.response_defaults import default_response
from protocol.api_keys import ApiKey
from protocol.codec import default_value
from protocol.registry import api
from protocol.schema import FieldSpec
from tests.authz.fake_view import FakeView as SharedFakeView

Op = AclOperation
MIN_INT = -2147483648
ZERO = uuid.UUID(int=0)
ID_A, ID_B, ID_C = uuid.UUID(int=0xA), uuid.UUID(int=0xB), uuid.UUID(int=0xC)
NAMES = {ID_A: "a", ID_B: "b"}  # ID_C names no topic


class FakeView(SharedFakeView):
    def __init__(self, granted: Iterable[Action] = (), *, everything: bool = False,
                 topics: dict[uuid.UUID, str] | None = None) -> None:
        super().__init__(granted, everything=everything, topics=NAMES if topics is None else topics)


def everything() -> FakeView:
    return FakeView(everything=True)


def grp(operation: AclOperation, name: str) -> Action:
    return Action(operation, ResourceType.GROUP, name)


def top(operation: AclOperation, name: str) -> Action:
    return Action(operation, ResourceType.TOPIC, name)


def txn(operation: AclOperation, name: str) -> Action:
    return Action(operation, ResourceType.TRANSACTIONAL_ID, name)


def cluster(operation: AclOperation) -> Action:
    return Action(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def versions(key: ApiKey) -> list[int]:
    schema = api(key)
    assert schema is not None
    return list(range(schema.min_version, schema.max_version + 1))


def cases(key: ApiKey, low: int = 0, high: int = 99) -> list[int]:
    return [v for v in versions(key) if low <= v <= high]


# --- building and checking bodies --------------------------------------------------------------------------------

def _fill(specs: list[FieldSpec], version: int, given: dict[str, Any]) -> Body:
    unknown = set(given) - {s.name for s in specs}
    assert not unknown, f"no such fields: {unknown}"
    out: Body = {}
    for spec in specs:
        if version not in spec.versions:
            continue
        if spec.name not in given:
            out[spec.name] = default_value(spec, version)
            continue
        value = given[spec.name]
        if spec.is_struct_array and value is not None:
            value = [_fill(spec.fields, version, v) for v in value]
        elif spec.is_struct and value is not None:
            value = _fill(spec.fields, version, value)
        out[spec.name] = value
    return out


def request(key: ApiKey, version: int, /, **fields: Any) -> Body:
    """A decoded request: ``fields`` the version has, everything else at its default, through the codec."""
    schema = api(key)
    assert schema is not None
    codec = schema.request_codec(version)
    return codec.decode(bytes(codec.encode(_fill(schema.request.fields, version, fields))))


def upstream(key: ApiKey, version: int, /, **fields: Any) -> Body:
    """A decoded response as the upstream would send it."""
    schema = api(key)
    assert schema is not None
    codec = schema.response_codec(version)
    return codec.decode(bytes(codec.encode(_fill(schema.response.fields, version, fields))))


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


def merged(key: ApiKey, version: int, verdict: Rewrite | Relay, response: Body) -> Body:
    assert verdict.on_response is not None
    return encodes_response(key, version, verdict.on_response(response))


def plain_relay(verdict: Verdict) -> None:
    assert verdict == Relay(), verdict


def policy(key: ApiKey, body: Body, version: int, view: FakeView) -> Verdict:
    return POLICIES[key](body, version, view)


def errors_of(entries: list[Body], field: str = "error_code") -> list[int]:
    return [e[field] for e in entries]


# --- the module's tables -----------------------------------------------------------------------------------------

# The group's APIs are code in groups.py or declarative rows in rules.py (DeleteGroups).
POLICIES = {**groups.POLICIES, **rules.POLICIES}
TABLE = [*groups.TABLE, *rules.TABLE]

GROUP_APIS = {
    ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
    ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.OFFSET_DELETE, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS,
    ApiKey.DELETE_GROUPS, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE,
    ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS, ApiKey.STREAMS_GROUP_HEARTBEAT,
    ApiKey.STREAMS_GROUP_DESCRIBE, ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, ApiKey.INIT_PRODUCER_ID,
    ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS,
}


def test_policies_cover_exactly_the_group_apis_and_the_table_names_each() -> None:
    assert set(groups.POLICIES) <= GROUP_APIS <= set(POLICIES)
    assert {row[0] for row in groups.TABLE} <= GROUP_APIS <= {row[0] for row in TABLE}
    assert all(len(row) == 4 and all(row[1:]) for row in TABLE)


# --- FindCoordinator (10) ---------------------------------------------------------------------------------------

FC = ApiKey.FIND_COORDINATOR


def coordinator_request(version: int, keys: list[str], key_type: int = 0) -> Body:
    return request(FC, version, key=keys[0], key_type=key_type, coordinator_keys=keys)


@pytest.mark.parametrize("version", versions(FC))
def test_find_coordinator_relays_keys_the_caller_may_describe(version: int) -> None:
    plain_relay(policy(FC, coordinator_request(version, ["g1", "g2"]), version, FakeView([grp(Op.DESCRIBE, "g1"),
                                                                                          grp(Op.DESCRIBE, "g2")])))
    if version >= 1:
        view = FakeView([txn(Op.DESCRIBE, "t1")])
        plain_relay(policy(FC, coordinator_request(version, ["t1"], key_type=1), version, view))
        assert view.asked == [txn(Op.DESCRIBE, "t1")]


@pytest.mark.parametrize("version", versions(FC))
def test_find_coordinator_denied_group_key_fails_like_kafka(version: int) -> None:
    body = answered(FC, version, policy(FC, coordinator_request(version, ["g1", "g2"]), version, FakeView()))
    if version < 4:  # the old single-key error response, with the message from v1
        assert body["error_code"] == 30 and (body["node_id"], body["host"], body["port"]) == (-1, "", -1)
        assert body.get("error_message", "Group authorization failed.") == "Group authorization failed."
    else:  # per key, and no message set (handleFindCoordinatorRequestV4AndAbove): the field's default ""
        assert [(c["key"], c["error_code"], c["error_message"], c["node_id"]) for c in body["coordinators"]] == \
            [("g1", 30, "", -1), ("g2", 30, "", -1)]


@pytest.mark.parametrize("version", cases(FC, low=1))
def test_find_coordinator_denied_transactional_id_key_fails_with_53(version: int) -> None:
    body = answered(FC, version, policy(FC, coordinator_request(version, ["t1"], key_type=1), version, FakeView()))
    codes = [body["error_code"]] if version < 4 else errors_of(body["coordinators"])
    assert codes == [53]


@pytest.mark.parametrize("version", cases(FC, low=4))
def test_find_coordinator_partial_batch_relays_allowed_keys_and_merges_in_client_order(version: int) -> None:
    view = FakeView([grp(Op.DESCRIBE, "g1"), grp(Op.DESCRIBE, "g3")])
    verdict = rewritten(FC, version, policy(FC, coordinator_request(version, ["g1", "g2", "g3"]), version, view))
    assert verdict.request["coordinator_keys"] == ["g1", "g3"]
    found = [{"key": k, "node_id": 1, "host": "h", "port": 9092} for k in ("g3", "g1")]
    body = merged(FC, version, verdict, upstream(FC, version, coordinators=found))
    assert [(c["key"], c["error_code"], c["node_id"]) for c in body["coordinators"]] == \
        [("g1", 0, 1), ("g2", 30, -1), ("g3", 0, 1)]


@pytest.mark.parametrize("version", cases(FC, low=1))
def test_find_coordinator_share_keys_need_cluster_action_from_v6_and_are_invalid_before(version: int) -> None:
    body_request = coordinator_request(version, ["g:t:0"], key_type=2)
    if version >= 6:
        plain_relay(policy(FC, body_request, version, FakeView([cluster(Op.CLUSTER_ACTION)])))
        body = answered(FC, version, policy(FC, body_request, version, FakeView([grp(Op.DESCRIBE, "g:t:0")])))
        assert [(c["error_code"], c["error_message"]) for c in body["coordinators"]] == \
            [(31, "Cluster authorization failed.")]
        return
    body = answered(FC, version, policy(FC, body_request, version, everything()))
    assert ([body["error_code"]] if version < 4 else errors_of(body["coordinators"])) == [42]


@pytest.mark.parametrize("version", cases(FC, low=1))
def test_find_coordinator_unknown_key_type_is_invalid_request(version: int) -> None:
    body = answered(FC, version, policy(FC, coordinator_request(version, ["x"], key_type=7), version, everything()))
    assert ([body["error_code"]] if version < 4 else errors_of(body["coordinators"])) == [42]


# --- JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13) --------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_join_group_needs_read_on_the_group(version: int) -> None:
    key = ApiKey.JOIN_GROUP
    body_request = request(key, version, group_id="g", protocol_type="consumer",
                           protocols=[{"name": "range", "metadata": b"m"}])
    plain_relay(policy(key, body_request, version, FakeView([grp(Op.READ, "g")])))
    body = answered(key, version, policy(key, body_request, version, FakeView([grp(Op.DESCRIBE, "g")])))
    assert (body["error_code"], body["generation_id"], body["member_id"], body["leader"], body["members"]) == \
        (30, -1, "", "", [])
    assert body["protocol_name"] == (None if version >= 7 else "")


@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
def test_sync_group_needs_read_on_the_group(version: int) -> None:
    key = ApiKey.SYNC_GROUP
    body_request = request(key, version, group_id="g", protocol_type="consumer", protocol_name="range")
    plain_relay(policy(key, body_request, version, FakeView([grp(Op.READ, "g")])))
    body = answered(key, version, policy(key, body_request, version, FakeView()))
    assert (body["error_code"], body["assignment"]) == (30, b"")


@pytest.mark.parametrize("version", cases(ApiKey.SYNC_GROUP, low=5))
def test_sync_group_v5_without_protocol_is_inconsistent_before_any_acl(version: int) -> None:
    key = ApiKey.SYNC_GROUP
    view = FakeView()
    body = answered(key, version, policy(key, request(key, version, group_id="g", protocol_type=None), version, view))
    assert body["error_code"] == 23 and view.asked == []


@pytest.mark.parametrize("version", versions(ApiKey.HEARTBEAT))
def test_heartbeat_needs_read_on_the_group(version: int) -> None:
    key = ApiKey.HEARTBEAT
    body_request = request(key, version, group_id="g", member_id="m")
    plain_relay(policy(key, body_request, version, FakeView([grp(Op.READ, "g")])))
    assert answered(key, version, policy(key, body_request, version, FakeView()))["error_code"] == 30


@pytest.mark.parametrize("version", versions(ApiKey.LEAVE_GROUP))
def test_leave_group_needs_read_on_the_group_and_fails_at_top_level(version: int) -> None:
    key = ApiKey.LEAVE_GROUP
    body_request = request(key, version, group_id="g", member_id="m", members=[{"member_id": "m"}])
    plain_relay(policy(key, body_request, version, FakeView([grp(Op.READ, "g")])))
    body = answered(key, version, policy(key, body_request, version, FakeView()))
    assert body["error_code"] == 30 and body.get("members", []) == []


# --- OffsetCommit (8) -------------------------------------------------------------------------------------------

OC = ApiKey.OFFSET_COMMIT


def commit_topics(version: int, *topics: tuple[str, uuid.UUID, list[int]]) -> list[Body]:
    return [{"name": name, "topic_id": topic_id,
             "partitions": [{"partition_index": p, "committed_offset": 5} for p in parts]}
            for name, topic_id, parts in topics]


def topic_key(version: int, entry: Body, by_id_from: int) -> Any:
    return NAMES.get(entry["topic_id"], "?") if version >= by_id_from else entry["name"]


@pytest.mark.parametrize("version", versions(OC))
def test_offset_commit_relays_with_read_on_group_and_topics(version: int) -> None:
    body_request = request(OC, version, group_id="g", topics=commit_topics(version, ("a", ID_A, [0, 1])))
    plain_relay(policy(OC, body_request, version, FakeView([grp(Op.READ, "g"), top(Op.READ, "a")])))


@pytest.mark.parametrize("version", versions(OC))
def test_offset_commit_denied_group_fails_every_partition(version: int) -> None:
    body_request = request(OC, version, group_id="g", topics=commit_topics(version, ("a", ID_A, [0, 1]),
                                                                            ("b", ID_B, [2])))
    body = answered(OC, version, policy(OC, body_request, version, FakeView([top(Op.READ, "a")])))
    assert [[(p["partition_index"], p["error_code"]) for p in t["partitions"]] for t in body["topics"]] == \
        [[(0, 30), (1, 30)], [(2, 30)]]
    if version >= 10:
        assert [t["topic_id"] for t in body["topics"]] == [ID_A, ID_B]


@pytest.mark.parametrize("version", versions(OC))
def test_offset_commit_partial_topics_put_errors_first_then_the_coordinators_answer(version: int) -> None:
    body_request = request(OC, version, group_id="g", topics=commit_topics(
        version, ("a", ID_A, [0]), ("b", ID_B, [1]), ("c", ID_C, [2])))
    view = FakeView([grp(Op.READ, "g"), top(Op.READ, "a"), top(Op.READ, "c")])
    verdict = rewritten(OC, version, policy(OC, body_request, version, view))
    relayed = verdict.request["topics"]
    answer = upstream(OC, version, topics=[{**{k: t[k] for k in ("name", "topic_id") if k in t},
                                            "partitions": [{"partition_index": p["partition_index"]}
                                                           for p in t["partitions"]]} for t in relayed])
    body = merged(OC, version, verdict, answer)
    got = [(t["topic_id"] if version >= 10 else t["name"], errors_of(t["partitions"])) for t in body["topics"]]
    if version >= 10:  # by id: c's id names no topic, b is denied
        assert [t["topic_id"] for t in relayed] == [ID_A]
        assert got == [(ID_B, [29]), (ID_C, [100]), (ID_A, [0])]
    else:
        assert [t["name"] for t in relayed] == ["a", "c"]
        assert got == [("b", [29]), ("a", [0]), ("c", [0])]


@pytest.mark.parametrize("version", versions(OC))
def test_offset_commit_all_topics_denied_is_answered_without_the_coordinator(version: int) -> None:
    body_request = request(OC, version, group_id="g", topics=commit_topics(version, ("a", ID_A, [0]),
                                                                            ("a", ID_A, [1])))
    body = answered(OC, version, policy(OC, body_request, version, FakeView([grp(Op.READ, "g")])))
    # the builder keeps one entry per topic
    assert [[(p["partition_index"], p["error_code"]) for p in t["partitions"]] for t in body["topics"]] == \
        [[(0, 29), (1, 29)]]


# --- OffsetFetch (9) --------------------------------------------------------------------------------------------

OF = ApiKey.OFFSET_FETCH


def fetch_topics(*topics: tuple[str, uuid.UUID, list[int]]) -> list[Body]:
    return [{"name": n, "topic_id": i, "partition_indexes": p} for n, i, p in topics]


def fetch_request(version: int, fetches: list[tuple[str, list[Body] | None]]) -> Body:
    if version < 8:  # one group, topics by name only
        group_id, topics = fetches[0]
        named = None if topics is None else [{k: v for k, v in t.items() if k != "topic_id"} for t in topics]
        return request(OF, version, group_id=group_id, topics=named)
    return request(OF, version, groups=[{"group_id": g, "topics": t} for g, t in fetches])


def fetch_answer_topics(version: int, topics: list[Body]) -> list[Body]:
    named = [{"name": t.get("name", ""), "partitions": [{"partition_index": i, "committed_offset": 7}
                                                        for i in t["partition_indexes"]]} for t in topics]
    if version >= 8:
        for entry, topic in zip(named, topics, strict=True):
            entry["topic_id"] = topic.get("topic_id", ZERO)
    return named


@pytest.mark.parametrize("version", versions(OF))
def test_offset_fetch_relays_with_describe_on_group_and_topics(version: int) -> None:
    body_request = fetch_request(version, [("g", fetch_topics(("a", ID_A, [0])))])
    plain_relay(policy(OF, body_request, version, FakeView([grp(Op.DESCRIBE, "g"), top(Op.DESCRIBE, "a")])))


@pytest.mark.parametrize("version", versions(OF))
def test_offset_fetch_denied_group_fails_where_each_version_can_say_it(version: int) -> None:
    body_request = fetch_request(version, [("g", fetch_topics(("a", ID_A, [0, 1])))])
    body = answered(OF, version, policy(OF, body_request, version, FakeView()))
    if version <= 1:  # no top-level error: Kafka 4.4 puts it on every partition (tests/conformance measured it)
        assert [(p["error_code"], p["committed_offset"]) for p in body["topics"][0]["partitions"]] == [(30, -1)] * 2
    elif version < 8:
        assert (body["error_code"], body["topics"]) == (30, [])
    else:
        assert [(g["group_id"], g["error_code"], g["topics"]) for g in body["groups"]] == [("g", 30, [])]


@pytest.mark.parametrize("version", cases(OF, high=7))
def test_offset_fetch_single_group_appends_unauthorized_topics_after_the_answer(version: int) -> None:
    body_request = fetch_request(version, [("g", fetch_topics(("b", ID_B, [3]), ("a", ID_A, [0])))])
    view = FakeView([grp(Op.DESCRIBE, "g"), top(Op.DESCRIBE, "a")])
    verdict = rewritten(OF, version, policy(OF, body_request, version, view))
    assert [t["name"] for t in verdict.request["topics"]] == ["a"]
    body = merged(OF, version, verdict, upstream(OF, version, topics=fetch_answer_topics(version, verdict.request[
        "topics"])))
    assert [(t["name"], [(p["error_code"], p["committed_offset"]) for p in t["partitions"]]) for t in body["topics"]] \
        == [("a", [(0, 7)]), ("b", [(29, -1)])]


@pytest.mark.parametrize("version", cases(OF, low=2, high=7))
def test_offset_fetch_single_group_error_from_upstream_is_not_extended(version: int) -> None:
    body_request = fetch_request(version, [("g", fetch_topics(("b", ID_B, [3])))])
    verdict = rewritten(OF, version, policy(OF, body_request, version, FakeView([grp(Op.DESCRIBE, "g")])))
    assert verdict.request["topics"] == []  # Kafka still asks the coordinator, with no topic
    body = merged(OF, version, verdict, upstream(OF, version, error_code=16))
    assert (body["error_code"], body["topics"]) == (16, [])


@pytest.mark.parametrize("version", cases(OF, low=2, high=7))
def test_offset_fetch_all_topics_of_a_group_hides_undescribable_topics(version: int) -> None:
    body_request = fetch_request(version, [("g", None)])
    verdict = policy(OF, body_request, version, FakeView([grp(Op.DESCRIBE, "g"), top(Op.DESCRIBE, "a")]))
    assert isinstance(verdict, Relay)
    stored = fetch_topics(("a", ID_A, [0]), ("b", ID_B, [0]))
    answer = upstream(OF, version, topics=fetch_answer_topics(version, stored))
    assert [t["name"] for t in merged(OF, version, verdict, answer)["topics"]] == ["a"]


@pytest.mark.parametrize("version", cases(OF, low=8))
def test_offset_fetch_batched_groups_split_per_group_and_merge_in_client_order(version: int) -> None:
    body_request = fetch_request(version, [
        ("g1", fetch_topics(("a", ID_A, [0]), ("b", ID_B, [1]), ("c", ID_C, [2]))),
        ("g2", fetch_topics(("a", ID_A, [0]))),
        ("g3", None),
    ])
    view = FakeView([grp(Op.DESCRIBE, "g1"), grp(Op.DESCRIBE, "g3"), top(Op.DESCRIBE, "a"), top(Op.DESCRIBE, "c")])
    verdict = rewritten(OF, version, policy(OF, body_request, version, view))
    relayed = verdict.request["groups"]
    assert [g["group_id"] for g in relayed] == ["g1", "g3"] and relayed[1]["topics"] is None
    by_id = version >= 10
    assert [t["topic_id"] if by_id else t["name"] for t in relayed[0]["topics"]] == ([ID_A] if by_id else ["a", "c"])
    answer = upstream(OF, version, groups=[
        {"group_id": "g3", "topics": fetch_answer_topics(version, fetch_topics(("a", ID_A, [0]), ("b", ID_B, [0])))},
        {"group_id": "g1", "topics": fetch_answer_topics(version, relayed[0]["topics"])},
    ])
    body = merged(OF, version, verdict, answer)
    assert [(g["group_id"], g["error_code"]) for g in body["groups"]] == [("g1", 0), ("g2", 30), ("g3", 0)]
    g1 = [(t["topic_id"] if by_id else t["name"], t["partitions"][0]["error_code"])
          for t in body["groups"][0]["topics"]]
    g3 = [t["topic_id"] if by_id else t["name"] for t in body["groups"][2]["topics"]]
    if by_id:
        assert g1 == [(ID_A, 0), (ID_B, 29), (ID_C, 100)] and g3 == [ID_A]
    else:
        assert g1 == [("a", 0), ("c", 0), ("b", 29)] and g3 == ["a"]


@pytest.mark.parametrize("version", cases(OF, low=8))
def test_offset_fetch_all_groups_describable_with_null_topics_relays_with_a_filter(version: int) -> None:
    verdict = policy(OF, fetch_request(version, [("g", None)]), version, FakeView([grp(Op.DESCRIBE, "g")]))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    answer = upstream(OF, version, groups=[{"group_id": "g", "topics": fetch_answer_topics(
        version, fetch_topics(("a", ID_A, [0])))}])
    assert merged(OF, version, verdict, answer)["groups"][0]["topics"] == []


# --- OffsetDelete (47) ------------------------------------------------------------------------------------------

OD = ApiKey.OFFSET_DELETE


def delete_request(version: int, *topics: tuple[str, list[int]]) -> Body:
    return request(OD, version, group_id="g", topics=[
        {"name": n, "partitions": [{"partition_index": p} for p in parts]} for n, parts in topics])


@pytest.mark.parametrize("version", versions(OD))
def test_offset_delete_needs_delete_on_group_and_read_on_topics(version: int) -> None:
    plain_relay(policy(OD, delete_request(version, ("a", [0])), version,
                       FakeView([grp(Op.DELETE, "g"), top(Op.READ, "a")])))
    denied = policy(OD, delete_request(version, ("a", [0])), version, FakeView([grp(Op.READ, "g")]))
    body = answered(OD, version, denied)
    assert (body["error_code"], body["topics"]) == (30, [])


@pytest.mark.parametrize("version", versions(OD))
def test_offset_delete_partial_topics_put_errors_first_unless_the_group_fails(version: int) -> None:
    view = FakeView([grp(Op.DELETE, "g"), top(Op.READ, "a")])
    verdict = rewritten(OD, version, policy(OD, delete_request(version, ("b", [1]), ("a", [0])), version, view))
    assert [t["name"] for t in verdict.request["topics"]] == ["a"]
    ok = upstream(OD, version, topics=[{"name": "a", "partitions": [{"partition_index": 0}]}])
    assert [(t["name"], errors_of(t["partitions"])) for t in merged(OD, version, verdict, ok)["topics"]] == \
        [("b", [29]), ("a", [0])]
    failed = upstream(OD, version, error_code=69)
    assert merged(OD, version, verdict, failed)["topics"] == []


@pytest.mark.parametrize("version", versions(OD))
def test_offset_delete_with_every_topic_denied_still_asks_the_coordinator(version: int) -> None:
    verdict = rewritten(OD, version, policy(OD, delete_request(version, ("b", [1])), version,
                                            FakeView([grp(Op.DELETE, "g")])))
    assert verdict.request["topics"] == []


# --- DescribeGroups (15) ----------------------------------------------------------------------------------------

DG = ApiKey.DESCRIBE_GROUPS


@pytest.mark.parametrize("version", versions(DG))
def test_describe_groups_sets_authorized_operations_only_when_asked(version: int) -> None:
    for wanted in (False, True):
        view = FakeView([grp(Op.DESCRIBE, "g"), grp(Op.READ, "g")])
        verdict = policy(DG, request(DG, version, groups=["g"], include_authorized_operations=wanted), version, view)
        if version < 3:
            plain_relay(verdict)
            continue
        assert isinstance(verdict, Relay)
        answer = upstream(DG, version, groups=[{"group_id": "g", "authorized_operations": 12345}])
        expected = (1 << Op.READ) | (1 << Op.DESCRIBE) if wanted else MIN_INT
        assert merged(DG, version, verdict, answer)["groups"][0]["authorized_operations"] == expected


@pytest.mark.parametrize("version", versions(DG))
def test_describe_groups_denied_groups_come_first_then_the_coordinators_answer(version: int) -> None:
    body_request = request(DG, version, groups=["g1", "g2", "g3"], include_authorized_operations=True)
    view = FakeView([grp(Op.DESCRIBE, "g2")])
    verdict = rewritten(DG, version, policy(DG, body_request, version, view))
    assert verdict.request["groups"] == ["g2"]
    body = merged(DG, version, verdict, upstream(DG, version, groups=[{"group_id": "g2", "group_state": "Stable"}]))
    assert [(g["group_id"], g["error_code"]) for g in body["groups"]] == [("g1", 30), ("g3", 30), ("g2", 0)]
    if version >= 6:
        assert body["groups"][0]["error_message"] == "Group authorization failed."
    if version >= 3:
        assert [g["authorized_operations"] for g in body["groups"]] == [MIN_INT, MIN_INT, 1 << Op.DESCRIBE]


@pytest.mark.parametrize("version", versions(DG))
def test_describe_groups_all_denied_is_answered(version: int) -> None:
    body = answered(DG, version, policy(DG, request(DG, version, groups=["g1"]), version, FakeView()))
    assert [(g["group_id"], g["error_code"], g["group_state"], g["members"]) for g in body["groups"]] == \
        [("g1", 30, "", [])]


# --- ListGroups (16) --------------------------------------------------------------------------------------------

LG = ApiKey.LIST_GROUPS


@pytest.mark.parametrize("version", versions(LG))
def test_list_groups_with_describe_on_the_cluster_lists_everything(version: int) -> None:
    plain_relay(policy(LG, request(LG, version), version, FakeView([cluster(Op.DESCRIBE)])))


@pytest.mark.parametrize("version", versions(LG))
def test_list_groups_otherwise_keeps_only_describable_groups_without_error(version: int) -> None:
    verdict = policy(LG, request(LG, version), version, FakeView([grp(Op.DESCRIBE, "g2")]))
    assert isinstance(verdict, Relay)
    answer = upstream(LG, version, groups=[{"group_id": g, "protocol_type": "consumer"} for g in ("g1", "g2")])
    body = merged(LG, version, verdict, answer)
    assert ([g["group_id"] for g in body["groups"]], body["error_code"]) == (["g2"], 0)


# --- DeleteGroups (42) ------------------------------------------------------------------------------------------

DLG = ApiKey.DELETE_GROUPS


@pytest.mark.parametrize("version", versions(DLG))
def test_delete_groups_relays_with_delete_on_every_group(version: int) -> None:
    plain_relay(policy(DLG, request(DLG, version, groups_names=["g1"]), version, FakeView([grp(Op.DELETE, "g1")])))


@pytest.mark.parametrize("version", versions(DLG))
def test_delete_groups_partial_appends_the_distinct_denied_groups_after_the_answer(version: int) -> None:
    body_request = request(DLG, version, groups_names=["g1", "g2", "g2", "g3"])
    verdict = rewritten(DLG, version, policy(DLG, body_request, version, FakeView([grp(Op.DELETE, "g3")])))
    assert verdict.request["groups_names"] == ["g3"]
    body = merged(DLG, version, verdict, upstream(DLG, version, results=[{"group_id": "g3"}]))
    assert [(r["group_id"], r["error_code"]) for r in body["results"]] == [("g3", 0), ("g1", 30), ("g2", 30)]


@pytest.mark.parametrize("version", versions(DLG))
def test_delete_groups_all_denied_is_answered(version: int) -> None:
    body = answered(DLG, version, policy(DLG, request(DLG, version, groups_names=["g1"]), version, FakeView()))
    assert [(r["group_id"], r["error_code"]) for r in body["results"]] == [("g1", 30)]


# --- ConsumerGroupHeartbeat (68) --------------------------------------------------------------------------------

CGH = ApiKey.CONSUMER_GROUP_HEARTBEAT


@pytest.mark.parametrize("version", versions(CGH))
def test_consumer_group_heartbeat_relays_and_hides_assigned_topics_the_member_may_not_describe(version: int) -> None:
    body_request = request(CGH, version, group_id="g", subscribed_topic_names=["a"], topic_partitions=None)
    verdict = policy(CGH, body_request, version, FakeView([grp(Op.READ, "g"), top(Op.DESCRIBE, "a")]))
    assert isinstance(verdict, Relay)
    assignment = {"topic_partitions": [{"topic_id": i, "partitions": [0]} for i in (ID_A, ID_B, ID_C)]}
    body = merged(CGH, version, verdict, upstream(CGH, version, assignment=assignment))
    assert [tp["topic_id"] for tp in body["assignment"]["topic_partitions"]] == [ID_A, ID_C]
    assert merged(CGH, version, verdict, upstream(CGH, version, assignment=None))["assignment"] is None


@pytest.mark.parametrize("version", versions(CGH))
def test_consumer_group_heartbeat_needs_read_on_the_group(version: int) -> None:
    body = answered(CGH, version, policy(CGH, request(CGH, version, group_id="g"), version, FakeView()))
    assert (body["error_code"], body["assignment"], body["member_id"]) == (30, None, None)


@pytest.mark.parametrize("version", versions(CGH))
def test_consumer_group_heartbeat_fails_when_a_subscribed_topic_is_not_describable(version: int) -> None:
    body_request = request(CGH, version, group_id="g", subscribed_topic_names=["a", "b", "a"])
    body = answered(CGH, version, policy(CGH, body_request, version, FakeView([grp(Op.READ, "g"),
                                                                                top(Op.DESCRIBE, "a")])))
    assert (body["error_code"], body["assignment"]) == (29, None)


@pytest.mark.parametrize("version", cases(CGH, low=1))
def test_consumer_group_heartbeat_regex_subscription_is_relayed(version: int) -> None:
    body_request = request(CGH, version, group_id="g", subscribed_topic_names=None, subscribed_topic_regex="a.*")
    assert isinstance(policy(CGH, body_request, version, FakeView([grp(Op.READ, "g")])), Relay)


# --- ConsumerGroupDescribe (69), ShareGroupDescribe (77), StreamsGroupDescribe (89) -----------------------------

def assigned(*names: str) -> Body:
    return {"topic_partitions": [{"topic_id": ID_A, "topic_name": n, "partitions": [0]} for n in names]}


def topology(*names: str) -> Body:
    return {"epoch": 1, "subtopologies": [{"subtopology_id": "0", "source_topics": list(names)}]}


DESCRIBES = [
    (ApiKey.CONSUMER_GROUP_DESCRIBE, lambda *n: {"members": [{"member_id": "m", "assignment": assigned(n[0]),
                                                              "target_assignment": assigned(*n[1:])}]}),
    (ApiKey.SHARE_GROUP_DESCRIBE, lambda *n: {"members": [{"member_id": "m", "assignment": assigned(*n)}]}),
    (ApiKey.STREAMS_GROUP_DESCRIBE, lambda *n: {"topology": topology(*n)}),
]
DESCRIBE_CASES = [(key, shape, v) for key, shape in DESCRIBES for v in versions(key)]
DESCRIBE_IDS = [f"{key.name}-v{v}" for key, _, v in DESCRIBE_CASES]


@pytest.mark.parametrize(("key", "shape", "version"), DESCRIBE_CASES, ids=DESCRIBE_IDS)
def test_new_group_describe_relays_and_computes_operations_only_when_asked(key: ApiKey, shape: Any,
                                                                          version: int) -> None:
    for wanted in (False, True):
        view = FakeView([grp(Op.DESCRIBE, "g"), top(Op.DESCRIBE, "a"), top(Op.DESCRIBE, "b")])
        verdict = policy(key, request(key, version, group_ids=["g"], include_authorized_operations=wanted),
                         version, view)
        assert isinstance(verdict, Relay)
        answer = upstream(key, version, groups=[{"group_id": "g", "authorized_operations": 7, **shape("a", "b")}])
        group = merged(key, version, verdict, answer)["groups"][0]
        assert group["authorized_operations"] == (1 << Op.DESCRIBE if wanted else MIN_INT)


@pytest.mark.parametrize(("key", "shape", "version"), DESCRIBE_CASES, ids=DESCRIBE_IDS)
def test_new_group_describe_denied_groups_come_first(key: ApiKey, shape: Any, version: int) -> None:
    body_request = request(key, version, group_ids=["g1", "g2"], include_authorized_operations=True)
    verdict = rewritten(key, version, policy(key, body_request, version, FakeView([grp(Op.DESCRIBE, "g2")])))
    assert verdict.request["group_ids"] == ["g2"]
    body = merged(key, version, verdict, upstream(key, version, groups=[{"group_id": "g2"}]))
    assert [(g["group_id"], g["error_code"], g["authorized_operations"]) for g in body["groups"]] == \
        [("g1", 30, MIN_INT), ("g2", 0, 1 << Op.DESCRIBE)]
    all_denied = answered(key, version, policy(key, body_request, version, FakeView()))
    assert errors_of(all_denied["groups"]) == [30, 30]


@pytest.mark.parametrize(("key", "shape", "version"), DESCRIBE_CASES, ids=DESCRIBE_IDS)
def test_new_group_describe_fails_a_group_that_names_an_undescribable_topic(key: ApiKey, shape: Any,
                                                                           version: int) -> None:
    view = FakeView([grp(Op.DESCRIBE, "g"), top(Op.DESCRIBE, "a")])
    verdict = policy(key, request(key, version, group_ids=["g"], include_authorized_operations=True), version, view)
    assert isinstance(verdict, Relay)
    answer = upstream(key, version, groups=[{"group_id": "g", "group_state": "Stable", **shape("a", "b")}])
    group = merged(key, version, verdict, answer)["groups"][0]
    assert (group["error_code"], group["members"], group["group_state"], group["authorized_operations"]) == \
        (29, [], "", MIN_INT)
    assert "not authorized to describe" in group["error_message"]
    assert group.get("topology") is None


# --- ShareGroupHeartbeat (76), StreamsGroupHeartbeat (88) -------------------------------------------------------

SGH, STH = ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.STREAMS_GROUP_HEARTBEAT


@pytest.mark.parametrize("version", versions(SGH))
def test_share_group_heartbeat_needs_read_on_group_and_describe_on_subscribed_topics(version: int) -> None:
    body_request = request(SGH, version, group_id="g", subscribed_topic_names=["a", "b"])
    plain_relay(policy(SGH, body_request, version, FakeView([grp(Op.READ, "g"), top(Op.DESCRIBE, "a"),
                                                             top(Op.DESCRIBE, "b")])))
    body = answered(SGH, version, policy(SGH, body_request, version, FakeView([grp(Op.READ, "g"),
                                                                                top(Op.DESCRIBE, "a")])))
    assert (body["error_code"], body["assignment"]) == (29, None)
    body = answered(SGH, version, policy(SGH, body_request, version, FakeView()))
    assert (body["error_code"], body["assignment"]) == (30, None)


@pytest.mark.parametrize("version", versions(STH))
def test_streams_group_heartbeat_needs_read_on_group_and_describe_on_topology_topics(version: int) -> None:
    body_request = request(STH, version, group_id="g", topology=topology("a", "b"))
    plain_relay(policy(STH, body_request, version, FakeView([grp(Op.READ, "g"), top(Op.DESCRIBE, "a"),
                                                             top(Op.DESCRIBE, "b")])))
    plain_relay(policy(STH, request(STH, version, group_id="g", topology=None), version, FakeView([grp(Op.READ, "g")])))
    body = answered(STH, version, policy(STH, body_request, version, FakeView([grp(Op.READ, "g"),
                                                                                top(Op.DESCRIBE, "a")])))
    assert (body["error_code"], body["active_tasks"]) == (29, None)
    assert answered(STH, version, policy(STH, body_request, version, FakeView()))["error_code"] == 30


@pytest.mark.parametrize("version", versions(STH))
def test_streams_group_heartbeat_refusal_has_an_empty_status_list_and_no_task_change(version: int) -> None:
    # StreamsGroupHeartbeatRequest.getErrorResponse: status defaults to an empty list, the task lists to null
    # (measured against Kafka 4.4: tests/conformance, streams_group_heartbeat.*).
    for view in (FakeView(), FakeView([grp(Op.READ, "g")])):
        body = answered(STH, version, policy(STH, request(STH, version, group_id="g", topology=topology("a")),
                                             version, view))
        assert body["status"] == []
        assert [body[k] for k in ("active_tasks", "standby_tasks", "warmup_tasks", "partitions_by_user_endpoint")] \
            == [None] * 4


# --- StreamsGroupTopologyDescriptionUpdate (93, KIP-1331) --------------------------------------------------------

STU = ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE


def description_update(version: int, *names: str) -> Body:
    def node(name: str, sources: list[str], sink: str | None) -> Body:
        return {"name": name, "node_type": 1 if sources else 3, "source_topics": sources, "sink_topic": sink}
    nodes = [node("source", list(names[:1]), None), node("sink", [], names[1] if len(names) > 1 else None)]
    return request(STU, version, group_id="g", member_id="m", topology_epoch=1, topology_description={
        "subtopologies": [{"subtopology_id": "0", "nodes": nodes}],
        "global_stores": [{"source": node("global-source", list(names[2:]), None), "processor": node("p", [], None)}]})


@pytest.mark.parametrize("version", versions(STU))
def test_streams_topology_description_update_needs_read_on_the_group_alone(version: int) -> None:
    # KafkaApis.handleStreamsGroupTopologyDescriptionUpdate authorizes READ on the group and no topic.
    view = FakeView([grp(Op.READ, "g")])
    plain_relay(policy(STU, description_update(version, "a", "b", "c"), version, view))
    assert view.asked == [grp(Op.READ, "g")]


@pytest.mark.parametrize("version", versions(STU))
def test_streams_topology_description_update_without_read_on_the_group_is_answered_30(version: int) -> None:
    for view in (FakeView(), FakeView([grp(Op.DESCRIBE, "g"), top(Op.ALL, "a")])):
        body = answered(STU, version, policy(STU, description_update(version, "a"), version, view))
        # getErrorResponse through ApiError.fromThrowable: the default message is left out (Kafka 4.4 sends null).
        assert (body["error_code"], body["error_message"]) == (30, None)


# --- DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92) ------------------

DSO, ASO, DLSO = (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.ALTER_SHARE_GROUP_OFFSETS,
                  ApiKey.DELETE_SHARE_GROUP_OFFSETS)


@pytest.mark.parametrize("version", versions(DSO))
def test_describe_share_group_offsets_relays_with_describe_on_group_and_topics(version: int) -> None:
    body_request = request(DSO, version, groups=[{"group_id": "g", "topics": [{"topic_name": "a", "partitions": [0]}]}])
    plain_relay(policy(DSO, body_request, version, FakeView([grp(Op.DESCRIBE, "g"), top(Op.DESCRIBE, "a")])))
    body = answered(DSO, version, policy(DSO, body_request, version, FakeView()))
    assert [(g["group_id"], g["error_code"], g["error_message"]) for g in body["groups"]] == \
        [("g", 30, "Group authorization failed.")]


@pytest.mark.parametrize("version", versions(DSO))
def test_describe_share_group_offsets_splits_groups_and_topics(version: int) -> None:
    body_request = request(DSO, version, groups=[
        {"group_id": "g1", "topics": [{"topic_name": "b", "partitions": [1]}, {"topic_name": "a", "partitions": [0]}]},
        {"group_id": "g2", "topics": None},
        {"group_id": "g3", "topics": None},
    ])
    view = FakeView([grp(Op.DESCRIBE, "g1"), grp(Op.DESCRIBE, "g3"), top(Op.DESCRIBE, "a")])
    verdict = rewritten(DSO, version, policy(DSO, body_request, version, view))
    assert [(g["group_id"], g["topics"]) for g in verdict.request["groups"]] == \
        [("g1", [{"topic_name": "a", "partitions": [0]}]), ("g3", None)]
    answer_topics = [{"topic_name": n, "topic_id": i, "partitions": [{"partition_index": 0}]}
                     for n, i in (("a", ID_A), ("b", ID_B))]
    answer = upstream(DSO, version, groups=[{"group_id": "g1", "topics": answer_topics[:1]},
                                            {"group_id": "g3", "topics": answer_topics}])
    body = merged(DSO, version, verdict, answer)
    assert [(g["group_id"], g["error_code"], [t["topic_name"] for t in g["topics"]]) for g in body["groups"]] == \
        [("g1", 0, ["a", "b"]), ("g2", 30, []), ("g3", 0, ["a"])]
    denied = body["groups"][0]["topics"][1]
    assert (denied["topic_id"], [(p["error_code"], p["start_offset"]) for p in denied["partitions"]]) == \
        (ZERO, [(29, -1)])


@pytest.mark.parametrize("version", versions(ASO))
def test_alter_share_group_offsets_needs_read_on_group_and_topics(version: int) -> None:
    body_request = request(ASO, version, group_id="g", topics=[
        {"topic_name": n, "partitions": [{"partition_index": 0, "start_offset": 3}]} for n in ("b", "a")])
    plain_relay(policy(ASO, body_request, version, FakeView([grp(Op.READ, "g"), top(Op.READ, "a"),
                                                             top(Op.READ, "b")])))
    body = answered(ASO, version, policy(ASO, body_request, version, FakeView([top(Op.READ, "a")])))
    assert (body["error_code"], body["error_message"], body["responses"]) == (30, "Group authorization failed.", [])
    verdict = rewritten(ASO, version, policy(ASO, body_request, version, FakeView([grp(Op.READ, "g"),
                                                                                    top(Op.READ, "a")])))
    assert [t["topic_name"] for t in verdict.request["topics"]] == ["a"]
    ok = upstream(ASO, version, responses=[{"topic_name": "a", "topic_id": ID_A, "partitions": [{}]}])
    body = merged(ASO, version, verdict, ok)
    assert [(t["topic_name"], [(p["error_code"], p["error_message"]) for p in t["partitions"]])
            for t in body["responses"]] == [("b", [(29, "Topic authorization failed.")]), ("a", [(0, None)])]
    assert merged(ASO, version, verdict, upstream(ASO, version, error_code=69))["responses"] == []


@pytest.mark.parametrize("version", versions(DLSO))
def test_delete_share_group_offsets_needs_delete_on_group_and_read_on_topics(version: int) -> None:
    body_request = request(DLSO, version, group_id="g", topics=[{"topic_name": "b"}, {"topic_name": "a"}])
    plain_relay(policy(DLSO, body_request, version, FakeView([grp(Op.DELETE, "g"), top(Op.READ, "a"),
                                                              top(Op.READ, "b")])))
    body = answered(DLSO, version, policy(DLSO, body_request, version, FakeView([grp(Op.READ, "g")])))
    assert (body["error_code"], body["responses"]) == (30, [])
    body = answered(DLSO, version, policy(DLSO, body_request, version, FakeView([grp(Op.DELETE, "g")])))
    assert [(t["topic_name"], t["error_code"]) for t in body["responses"]] == [("b", 29), ("a", 29)]
    verdict = rewritten(DLSO, version, policy(DLSO, body_request, version, FakeView([grp(Op.DELETE, "g"),
                                                                                      top(Op.READ, "a")])))
    assert verdict.request["topics"] == [{"topic_name": "a"}]
    body = merged(DLSO, version, verdict, upstream(DLSO, version, responses=[{"topic_name": "a", "topic_id": ID_A}]))
    assert [(t["topic_name"], t["error_code"]) for t in body["responses"]] == [("b", 29), ("a", 0)]


# --- InitProducerId (22) ----------------------------------------------------------------------------------------

IPI = ApiKey.INIT_PRODUCER_ID


@pytest.mark.parametrize("version", versions(IPI))
def test_init_producer_id_with_a_transactional_id_needs_write_on_it(version: int) -> None:
    body_request = request(IPI, version, transactional_id="t")
    plain_relay(policy(IPI, body_request, version, FakeView([txn(Op.WRITE, "t")])))
    body = answered(IPI, version, policy(IPI, body_request, version, FakeView([txn(Op.DESCRIBE, "t")])))
    assert (body["error_code"], body["producer_id"], body["producer_epoch"]) == (53, -1, -1)


@pytest.mark.parametrize("version", cases(IPI, low=6))
def test_init_producer_id_two_phase_commit_also_needs_two_phase_commit(version: int) -> None:
    body_request = request(IPI, version, transactional_id="t", enable2_pc=True)
    assert answered(IPI, version, policy(IPI, body_request, version, FakeView([txn(Op.WRITE, "t")])))[
        "error_code"] == 53
    plain_relay(policy(IPI, body_request, version, FakeView([txn(Op.WRITE, "t"), txn(Op.TWO_PHASE_COMMIT, "t")])))


@pytest.mark.parametrize("version", versions(IPI))
def test_init_producer_id_idempotent_needs_idempotent_write_or_write_on_any_topic(version: int) -> None:
    body_request = request(IPI, version, transactional_id=None)
    plain_relay(policy(IPI, body_request, version, FakeView([cluster(Op.IDEMPOTENT_WRITE)])))
    plain_relay(policy(IPI, body_request, version, FakeView([top(Op.WRITE, "any")])))
    body = answered(IPI, version, policy(IPI, body_request, version, FakeView([top(Op.READ, "any")])))
    assert (body["error_code"], body["producer_id"]) == (31, -1)


# --- AddPartitionsToTxn (24) ------------------------------------------------------------------------------------

APT = ApiKey.ADD_PARTITIONS_TO_TXN


def add_partitions_request(version: int, *topics: str) -> Body:
    listed = [{"name": n, "partitions": [0, 1]} for n in topics]
    return request(APT, version, v3_and_below_transactional_id="t", v3_and_below_topics=listed,
                   transactions=[{"transactional_id": "t", "verify_only": True, "topics": listed}])


def partition_errors(body: Body) -> list[tuple[str, list[int]]]:
    return [(t["name"], [p["partition_error_code"] for p in t["results_by_partition"]])
            for t in body["results_by_topic_v3_and_below"]]


@pytest.mark.parametrize("version", cases(APT, high=3))
def test_add_partitions_to_txn_needs_write_on_transactional_id_and_topics(version: int) -> None:
    body_request = add_partitions_request(version, "a", "b")
    plain_relay(policy(APT, body_request, version, FakeView([txn(Op.WRITE, "t"), top(Op.WRITE, "a"),
                                                             top(Op.WRITE, "b")])))
    body = answered(APT, version, policy(APT, body_request, version, FakeView([top(Op.WRITE, "a")])))
    assert partition_errors(body) == [("a", [53, 53]), ("b", [53, 53])]


@pytest.mark.parametrize("version", cases(APT, high=3))
def test_add_partitions_to_txn_one_denied_topic_fails_the_whole_transaction(version: int) -> None:
    body_request = add_partitions_request(version, "a", "b", "__consumer_offsets")
    view = FakeView([txn(Op.WRITE, "t"), top(Op.WRITE, "a"), top(Op.WRITE, "__consumer_offsets")])
    body = answered(APT, version, policy(APT, body_request, version, view))
    assert partition_errors(body) == [("a", [55, 55]), ("b", [29, 29]), ("__consumer_offsets", [29, 29])]


@pytest.mark.parametrize("version", cases(APT, low=4))
def test_add_partitions_to_txn_broker_batches_need_cluster_action(version: int) -> None:
    body_request = add_partitions_request(version, "a")
    plain_relay(policy(APT, body_request, version, FakeView([cluster(Op.CLUSTER_ACTION)])))
    body = answered(APT, version, policy(APT, body_request, version, FakeView([txn(Op.WRITE, "t"),
                                                                                top(Op.WRITE, "a")])))
    assert (body["error_code"], body["results_by_transaction"]) == (31, [])


# --- AddOffsetsToTxn (25), EndTxn (26) --------------------------------------------------------------------------

@pytest.mark.parametrize("version", versions(ApiKey.ADD_OFFSETS_TO_TXN))
def test_add_offsets_to_txn_checks_the_transactional_id_then_the_group(version: int) -> None:
    key = ApiKey.ADD_OFFSETS_TO_TXN
    body_request = request(key, version, transactional_id="t", group_id="g")
    plain_relay(policy(key, body_request, version, FakeView([txn(Op.WRITE, "t"), grp(Op.READ, "g")])))
    assert answered(key, version, policy(key, body_request, version, FakeView()))["error_code"] == 53
    assert answered(key, version, policy(key, body_request, version, FakeView([txn(Op.WRITE, "t")])))[
        "error_code"] == 30


@pytest.mark.parametrize("version", versions(ApiKey.END_TXN))
def test_end_txn_needs_write_on_the_transactional_id(version: int) -> None:
    key = ApiKey.END_TXN
    body_request = request(key, version, transactional_id="t")
    plain_relay(policy(key, body_request, version, FakeView([txn(Op.WRITE, "t")])))
    body = answered(key, version, policy(key, body_request, version, FakeView()))
    assert (body["error_code"], body.get("producer_id", -1), body.get("producer_epoch", -1)) == (53, -1, -1)


# --- TxnOffsetCommit (28) ---------------------------------------------------------------------------------------

TOC = ApiKey.TXN_OFFSET_COMMIT


_TXN_IDS = {"a": ID_A, "b": ID_B, "c": ID_C}  # c's id names no topic (NAMES)


def txn_commit_request(version: int, *topics: str) -> Body:
    return request(TOC, version, transactional_id="t", group_id="g", topics=[
        {"name": n, "topic_id": _TXN_IDS[n], "partitions": [{"partition_index": 0, "committed_offset": 9}]}
        for n in topics])


def txn_topic_key(version: int, entry: Body) -> Any:
    """What a v6+ entry names by id (KIP-1319), as the name it stands for; the name below v6."""
    return topic_key(version, entry, by_id_from=6)


@pytest.mark.parametrize("version", versions(TOC))
def test_txn_offset_commit_checks_transactional_id_then_group_on_every_partition(version: int) -> None:
    body_request = txn_commit_request(version, "a", "b")
    plain_relay(policy(TOC, body_request, version, FakeView([txn(Op.WRITE, "t"), grp(Op.READ, "g"),
                                                             top(Op.READ, "a"), top(Op.READ, "b")])))
    body = answered(TOC, version, policy(TOC, body_request, version, FakeView([grp(Op.READ, "g")])))
    assert [errors_of(t["partitions"]) for t in body["topics"]] == [[53], [53]]
    body = answered(TOC, version, policy(TOC, body_request, version, FakeView([txn(Op.WRITE, "t")])))
    assert [errors_of(t["partitions"]) for t in body["topics"]] == [[30], [30]]
    assert [txn_topic_key(version, t) for t in body["topics"]] == ["a", "b"]


@pytest.mark.parametrize("version", versions(TOC))
def test_txn_offset_commit_partial_topics_put_errors_first(version: int) -> None:
    view = FakeView([txn(Op.WRITE, "t"), grp(Op.READ, "g"), top(Op.READ, "a")])
    verdict = rewritten(TOC, version, policy(TOC, txn_commit_request(version, "a", "b"), version, view))
    assert [txn_topic_key(version, t) for t in verdict.request["topics"]] == ["a"]
    answer = {"topic_id": ID_A} if version >= 6 else {"name": "a"}
    body = merged(TOC, version, verdict, upstream(TOC, version, topics=[
        {**answer, "partitions": [{"partition_index": 0}]}]))
    assert [(txn_topic_key(version, t), errors_of(t["partitions"])) for t in body["topics"]] == \
        [("b", [29]), ("a", [0])]
    view = FakeView([txn(Op.WRITE, "t"), grp(Op.READ, "g")])
    body = answered(TOC, version, policy(TOC, txn_commit_request(version, "a"), version, view))
    assert [errors_of(t["partitions"]) for t in body["topics"]] == [[29]]


@pytest.mark.parametrize("version", [v for v in versions(TOC) if v >= 6])
def test_txn_offset_commit_by_id_reads_the_named_topic_and_an_unknown_id_is_unknown_topic_id(version: int) -> None:
    """v6 names topics by id: READ is checked on the topic the id names, never relayed for an id without one."""
    view = FakeView([txn(Op.WRITE, "t"), grp(Op.READ, "g"), top(Op.READ, "a"), top(Op.READ, "c")])
    verdict = rewritten(TOC, version, policy(TOC, txn_commit_request(version, "a", "b", "c"), version, view))
    assert [t["topic_id"] for t in verdict.request["topics"]] == [ID_A]
    body = merged(TOC, version, verdict, upstream(TOC, version, topics=[
        {"topic_id": ID_A, "partitions": [{"partition_index": 0}]}]))
    assert [(t["topic_id"], errors_of(t["partitions"])) for t in body["topics"]] == \
        [(ID_B, [29]), (ID_C, [100]), (ID_A, [0])]


# --- DescribeTransactions (65), ListTransactions (66) -----------------------------------------------------------

DT, LT = ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS


@pytest.mark.parametrize("version", versions(DT))
def test_describe_transactions_splits_ids_keeps_client_order_and_hides_topics(version: int) -> None:
    body_request = request(DT, version, transactional_ids=["t1", "t2", "t3"])
    view = FakeView([txn(Op.DESCRIBE, "t1"), txn(Op.DESCRIBE, "t3"), top(Op.DESCRIBE, "a")])
    verdict = rewritten(DT, version, policy(DT, body_request, version, view))
    assert verdict.request["transactional_ids"] == ["t1", "t3"]
    states = [{"transactional_id": t, "topics": [{"topic": "a", "partitions": [0]}, {"topic": "b", "partitions": [1]}]}
              for t in ("t3", "t1")]
    body = merged(DT, version, verdict, upstream(DT, version, transaction_states=states))
    assert [(s["transactional_id"], s["error_code"], [t["topic"] for t in s["topics"]])
            for s in body["transaction_states"]] == [("t1", 0, ["a"]), ("t2", 53, []), ("t3", 0, ["a"])]
    everything_allowed = policy(DT, body_request, version, FakeView([txn(Op.DESCRIBE, t) for t in ("t1", "t2", "t3")]))
    assert isinstance(everything_allowed, Relay) and everything_allowed.on_response is not None
    body = answered(DT, version, policy(DT, body_request, version, FakeView()))
    assert errors_of(body["transaction_states"]) == [53, 53, 53]


@pytest.mark.parametrize("version", versions(LT))
def test_list_transactions_keeps_only_describable_transactional_ids(version: int) -> None:
    verdict = policy(LT, request(LT, version), version, FakeView([txn(Op.DESCRIBE, "t2")]))
    assert isinstance(verdict, Relay)
    answer = upstream(LT, version, transaction_states=[{"transactional_id": t, "producer_id": 1,
                                                        "transaction_state": "Ongoing"} for t in ("t1", "t2")])
    assert [s["transactional_id"] for s in merged(LT, version, verdict, answer)["transaction_states"]] == ["t2"]


# --- every API, every version: everything allowed relays; nothing allowed never relays -------------------------

def sample_request(key: ApiKey, version: int) -> Body:
    """A request naming one group / transactional id / topic (by name and by id) wherever the API has one."""
    topic_partitions = [{"partition_index": 0}]
    common: dict[str, Any] = {
        "group_id": "g", "group_ids": ["g"], "groups": ["g"], "groups_names": ["g"], "transactional_id": "t",
        "transactional_ids": ["t"], "key": "g", "coordinator_keys": ["g"],
        "v3_and_below_transactional_id": "t", "v3_and_below_topics": [{"name": "a", "partitions": [0]}],
        "subscribed_topic_names": ["a"], "topology": topology("a"), "protocol_type": "consumer",
        "protocol_name": "range",
    }
    if key == OF:
        return fetch_request(version, [("g", fetch_topics(("a", ID_A, [0])))])
    shaped: dict[ApiKey, dict[str, Any]] = {
        OC: {"topics": [{"name": "a", "topic_id": ID_A, "partitions": topic_partitions}]},
        OD: {"topics": [{"name": "a", "partitions": topic_partitions}]},
        TOC: {"topics": [{"name": "a", "topic_id": ID_A, "partitions": topic_partitions}]},
        DSO: {"groups": [{"group_id": "g", "topics": [{"topic_name": "a", "partitions": [0]}]}]},
        ASO: {"topics": [{"topic_name": "a", "partitions": topic_partitions}]},
        DLSO: {"topics": [{"topic_name": "a"}]},
        APT: {"transactions": [{"transactional_id": "t", "topics": [{"name": "a", "partitions": [0]}]}]},
    }
    schema = api(key)
    assert schema is not None
    names = {f.name for f in schema.request.fields}
    fields = {k: v for k, v in {**common, **shaped.get(key, {})}.items() if k in names}
    return request(key, version, **fields)


EVERY = [(key, v) for key in sorted(GROUP_APIS) for v in versions(key)]
EVERY_IDS = [f"{key.name}-v{v}" for key, v in EVERY]
# Filtered, never refused: without any ACL the answer is simply empty.
ALWAYS_RELAYED = {ApiKey.LIST_GROUPS, ApiKey.LIST_TRANSACTIONS}


@pytest.mark.parametrize(("key", "version"), EVERY, ids=EVERY_IDS)
def test_every_api_relays_when_everything_is_allowed(key: ApiKey, version: int) -> None:
    verdict = policy(key, sample_request(key, version), version, everything())
    assert isinstance(verdict, Relay)
    if verdict.on_response is not None:  # the hook accepts the upstream's (empty) answer and keeps it encodable
        merged(key, version, verdict, default_response(key, version) | _nulls(key, version))


@pytest.mark.parametrize(("key", "version"), EVERY, ids=EVERY_IDS)
def test_every_api_denied_everything_is_answered_with_an_encodable_body(key: ApiKey, version: int) -> None:
    verdict = policy(key, sample_request(key, version), version, FakeView())
    if key in ALWAYS_RELAYED:
        assert isinstance(verdict, Relay) and verdict.on_response is not None
        return
    answered(key, version, verdict)


def _nulls(key: ApiKey, version: int) -> Body:
    """Nullable structs are null in an empty upstream answer (default_response would build them)."""
    schema = api(key)
    assert schema is not None
    return {f.name: None for f in schema.response.fields
            if version in f.versions and f.is_struct and version in f.nullable}

