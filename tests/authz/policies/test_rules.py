"""The declarative per-item rules, row by row and version by version: all allowed, all denied, mixed, unknown.

Each row's expectations restate Kafka (KafkaApis / ControllerApis and the "Operations and Resources on Protocols"
page) independently of the engine: which ACL is asked, which error a refused item gets and where it goes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from authz.model import AclOperation as Op
from authz.model import ResourceType as RT
from authz.model import display_name, parse_operation, parse_resource_type
from authz.policies import all_policies, rules, table
from authz.policies.per_item import PerItemRule, RuleError, layout
from authz.request_policy import CLUSTER_NAME, Action, Answer, Body, Relay, Rewrite, Verdict
from authz.response_defaults import default_item, default_response
from protocol.api_keys import ApiKey
from protocol.registry import api
from tests.authz.fake_view import FakeView
from tests.authz.test_policies_data import item, request

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
INVALID_REQUEST = 42
INVALID_TOPIC_EXCEPTION = 17
NEVER_CREATED = "no-such-topic"  # a name no topic has: the ACL decides, as for any other name


@dataclass(frozen=True)
class Row:
    """What Kafka does for one API: the ACL, the error of a refused item, and where the error goes."""

    operation: Op
    resource: RT
    error: int
    message: str | None  # the refused item's error_message, where the response has one
    per_partition: bool  # the error is on each partition the item asked for (else on the item)
    build: Callable[[int, list[str]], Body]  # a request naming these items
    answers: str  # the response array
    answer_name: str
    refused_last: bool = False
    once_per_name: bool = False
    extra: tuple[tuple[str, Any], ...] = ()  # other fields a refused partition carries


def _topics(key: ApiKey, name_field: str, partitions: Callable[[int], Any]) -> Callable[[int, list[str]], Body]:
    def build(version: int, names: list[str]) -> Body:
        return request(key, version, topics=[item(key, version, "topics", **{name_field: n}, **partitions(version))
                                             for n in names])
    return build


def _partition_structs(key: ApiKey, index: str) -> Callable[[int], Any]:
    return lambda v: {"partitions": [item(key, v, "topics", "partitions", **{index: i}) for i in (0, 1)]}


ROWS: dict[ApiKey, Row] = {
    ApiKey.LIST_OFFSETS: Row(Op.DESCRIBE, RT.TOPIC, TOPIC_AUTHORIZATION_FAILED, None, True,
                             _topics(ApiKey.LIST_OFFSETS, "name", _partition_structs(ApiKey.LIST_OFFSETS,
                                                                                     "partition_index")),
                             "topics", "name"),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Row(Op.DESCRIBE, RT.TOPIC, TOPIC_AUTHORIZATION_FAILED, None, True,
                                        _topics(ApiKey.OFFSET_FOR_LEADER_EPOCH, "topic",
                                                _partition_structs(ApiKey.OFFSET_FOR_LEADER_EPOCH, "partition")),
                                        "topics", "topic"),
    ApiKey.DELETE_RECORDS: Row(Op.DELETE, RT.TOPIC, TOPIC_AUTHORIZATION_FAILED, None, True,
                               _topics(ApiKey.DELETE_RECORDS, "name", _partition_structs(ApiKey.DELETE_RECORDS,
                                                                                         "partition_index")),
                               # Kafka keys the answer by topic-partition: a repeated topic is answered once.
                               "topics", "name", once_per_name=True, extra=(("low_watermark", -1),)),
    ApiKey.DESCRIBE_PRODUCERS: Row(Op.READ, RT.TOPIC, TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.",
                                   True, _topics(ApiKey.DESCRIBE_PRODUCERS, "name",
                                                 lambda v: {"partition_indexes": [0, 1]}), "topics", "name"),
    ApiKey.CREATE_PARTITIONS: Row(Op.ALTER, RT.TOPIC, TOPIC_AUTHORIZATION_FAILED, None, False,
                                  _topics(ApiKey.CREATE_PARTITIONS, "name", lambda v: {"count": 3}),
                                  "results", "name", once_per_name=True),
    ApiKey.DELETE_GROUPS: Row(Op.DELETE, RT.GROUP, GROUP_AUTHORIZATION_FAILED, None, False,
                              lambda v, names: request(ApiKey.DELETE_GROUPS, v, groups_names=names),
                              "results", "group_id", refused_last=True, once_per_name=True),
}



def _versions(key: ApiKey) -> range:
    schema = api(key)
    assert schema is not None
    return range(schema.min_version, schema.max_version + 1)


CASES = [(key, version) for key in ROWS for version in _versions(key)]


def _view(row: Row, *allowed: str) -> FakeView:
    return FakeView([Action(row.operation, row.resource, name) for name in allowed])


def _decide(key: ApiKey, version: int, names: list[str], view: FakeView) -> Verdict:
    policy = all_policies()[key]
    return policy(ROWS[key].build(version, names), version, view)


def _encodes(key: ApiKey, version: int, body: Body, *, kind: str = "response") -> Body:
    schema = api(key)
    assert schema is not None
    codec = schema.response_codec(version) if kind == "response" else schema.request_codec(version)
    codec.encode(body)
    return body


def _refusals(row: Row, answers: list[Body]) -> list[tuple[str, int, str | None]]:
    """(name, error code, message) of each refused item, or of each of its partitions."""
    out = []
    for answer in answers:
        parts = answer["partitions"] if row.per_partition else [answer]
        for part in parts:
            out.append((answer[row.answer_name], part["error_code"], part.get("error_message")))
            for field, value in row.extra:
                assert part[field] == value
    return out


def _upstream(key: ApiKey, version: int, row: Row, names: list[str]) -> Body:
    """An upstream's answer to ``names`` in its own order, plus an item nobody asked for."""
    response = default_response(key, version)
    answers = []
    for name in [*reversed(names), "unasked"]:
        answer = {**default_item(key, version, row.answers), row.answer_name: name}
        if row.per_partition:
            answer["partitions"] = []
        answers.append(answer)
    response[row.answers] = answers
    return response


# --- the table --------------------------------------------------------------------------------------------------

def test_every_rule_row_reads_as_kafkas_operations_and_resources_page() -> None:
    rows = {(api_key, op, resource) for api_key, op, resource, _ in table()}
    for key, row in ROWS.items():
        assert (key, display_name(row.operation), display_name(row.resource)) in rows
    assert (ApiKey.OFFSET_FOR_LEADER_EPOCH, "ClusterAction", "Cluster") in rows
    assert set(rules.POLICIES) == set(ROWS)


def test_the_table_names_operations_and_resources_as_kafkas_page_does() -> None:
    rows = table()
    assert (ApiKey.PRODUCE, "Write", "TransactionalId") in {row[:3] for row in rows}
    for _, operation, resource, _ in rows:
        assert (operation, resource) == ("", "") or (
            operation == display_name(parse_operation(operation)) and resource == display_name(parse_resource_type(
                resource))), (operation, resource)


def test_each_rule_is_the_policy_of_its_api() -> None:
    policies = all_policies()
    assert all(policies[rule.api_key] is rule for rule in rules.RULES)


def test_an_api_without_a_per_item_shape_cannot_be_a_rule() -> None:
    with pytest.raises(RuleError):
        PerItemRule(ApiKey.HEARTBEAT, Op.READ, "the group")  # one group, no items
    with pytest.raises(RuleError):
        layout(ApiKey.PRODUCE, 9)  # its partitions are "index": no partition list the engine knows
    with pytest.raises(RuleError):
        layout(ApiKey.METADATA, 4)  # a null topic list means every topic: not one ACL per named item


# --- every row at every version ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "version"), CASES)
def test_all_allowed_is_relayed_untouched(key: ApiKey, version: int) -> None:
    row = ROWS[key]
    view = _view(row, "alpha", "beta")
    assert _decide(key, version, ["alpha", "beta"], view) == Relay()
    # (OffsetForLeaderEpoch first asks its cluster shortcut, see below.)
    assert [(a.operation, a.name) for a in view.asked if a.resource_type == row.resource] == [
        (row.operation, "alpha"), (row.operation, "beta")]


@pytest.mark.parametrize(("key", "version"), CASES)
def test_all_denied_is_answered_with_kafkas_error_per_item(key: ApiKey, version: int) -> None:
    row = ROWS[key]
    verdict = _decide(key, version, ["alpha", "beta"], _view(row))
    assert isinstance(verdict, Answer), verdict
    answers = _encodes(key, version, verdict.response)[row.answers]
    message = row.message if "error_message" in default_item(key, version, row.answers, *(
        ("partitions",) if row.per_partition else ())) else None
    per_item = 2 if row.per_partition else 1
    assert _refusals(row, answers) == [(n, row.error, message) for n in ("alpha", "beta") for _ in range(per_item)]
    if row.per_partition:
        index = layout(key, version).answer_partition_index
        assert [[p[index] for p in a["partitions"]] for a in answers] == [[0, 1], [0, 1]]


@pytest.mark.parametrize(("key", "version"), CASES)
def test_mixed_relays_the_allowed_and_merges_the_refused_in_kafkas_order(key: ApiKey, version: int) -> None:
    row = ROWS[key]
    names = ["alpha", "beta", "gamma"]
    verdict = _decide(key, version, names, _view(row, "beta"))
    assert isinstance(verdict, Rewrite), verdict
    sent = _encodes(key, version, verdict.request, kind="request")
    field = "groups_names" if key == ApiKey.DELETE_GROUPS else "topics"
    sent_names = sent[field] if key == ApiKey.DELETE_GROUPS else [t[layout(key, version).name or ""]
                                                                   for t in sent[field]]
    assert sent_names == ["beta"]
    merged = _encodes(key, version, verdict.on_response(_upstream(key, version, row, ["beta"])))[row.answers]
    order = ["beta", "alpha", "gamma"] if row.refused_last else names
    assert [a[row.answer_name] for a in merged] == order  # the unasked item is dropped
    refused = [a for a in merged if a[row.answer_name] != "beta"]
    assert {code for _, code, _ in _refusals(row, refused)} == {row.error}


@pytest.mark.parametrize(("key", "version"), CASES)
def test_a_never_created_name_is_decided_by_its_acl_alone(key: ApiKey, version: int) -> None:
    # Kafka authorizes before it looks the item up: an unknown name without the ACL is refused like any other
    # (its existence is not revealed), and with the ACL it goes to the upstream, which answers it.
    row = ROWS[key]
    denied = _decide(key, version, [NEVER_CREATED], _view(row))
    assert isinstance(denied, Answer)
    assert {code for _, code, _ in _refusals(row, denied.response[row.answers])} == {row.error}
    assert _decide(key, version, [NEVER_CREATED], _view(row, NEVER_CREATED)) == Relay()


@pytest.mark.parametrize(("key", "version"), CASES)
def test_a_repeated_name_is_asked_once(key: ApiKey, version: int) -> None:
    row = ROWS[key]
    view = _view(row)
    verdict = _decide(key, version, ["alpha", "beta", "alpha"], view)
    assert [a.name for a in view.asked if a.resource_type == row.resource] == (
        ["alpha", "beta"] if key != ApiKey.CREATE_PARTITIONS else ["beta"])  # CreatePartitions: see the precheck
    assert isinstance(verdict, Answer)
    answered = [a[row.answer_name] for a in verdict.response[row.answers]]
    assert answered == (["alpha", "beta"] if row.once_per_name else ["alpha", "beta", "alpha"])


# --- what some rows add -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", _versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch_cluster_action_authorizes_every_topic_without_a_logged_denial(version: int) -> None:
    row = ROWS[ApiKey.OFFSET_FOR_LEADER_EPOCH]
    broker = FakeView([Action(Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)])
    assert _decide(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, ["alpha", "beta"], broker) == Relay()
    assert [a.resource_type for a in broker.asked] == [RT.CLUSTER]
    client = _view(row, "alpha")
    _decide(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, ["alpha"], client)
    assert client.asked[0].resource_type == RT.CLUSTER and client.asked[0].log_if_denied is False
    assert [a.log_if_denied for a in client.asked[1:]] == [True]


def test_describe_producers_refuses_an_illegal_name_before_asking_its_acl() -> None:
    view = FakeView(everything=True)
    verdict = _decide(ApiKey.DESCRIBE_PRODUCERS, 0, ["bad name!", "alpha"], view)
    assert isinstance(verdict, Rewrite)
    assert [a.name for a in view.asked] == ["alpha"]
    merged = verdict.on_response(_upstream(ApiKey.DESCRIBE_PRODUCERS, 0, ROWS[ApiKey.DESCRIBE_PRODUCERS], ["alpha"]))
    refused = merged["topics"][0]
    assert [(p["error_code"], p["error_message"].startswith("Topic name is invalid: ")) for p in refused["partitions"]
            ] == [(INVALID_TOPIC_EXCEPTION, True)] * 2


@pytest.mark.parametrize("version", _versions(ApiKey.CREATE_PARTITIONS))
def test_create_partitions_refuses_a_repeated_name_as_a_whole_before_asking_its_acl(version: int) -> None:
    view = FakeView(everything=True)
    verdict = _decide(ApiKey.CREATE_PARTITIONS, version, ["alpha", "beta", "alpha"], view)
    assert isinstance(verdict, Rewrite)
    assert [a.name for a in view.asked] == ["beta"]
    assert [t["name"] for t in verdict.request["topics"]] == ["beta"]
    merged = verdict.on_response(_upstream(ApiKey.CREATE_PARTITIONS, version, ROWS[ApiKey.CREATE_PARTITIONS],
                                           ["beta"]))
    assert [(r["name"], r["error_code"], r["error_message"]) for r in merged["results"]] == [
        ("alpha", INVALID_REQUEST, "Duplicate topic name."), ("beta", 0, None)]
