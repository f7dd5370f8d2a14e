"""The one merge rule of partial answers: an upstream item nobody asked for never reaches the client.

One case per API that merges (every ``Rewrite`` of authz/policies/), and the rule itself on merge_items.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import pytest

from authz.model import AclOperation, ResourceType
from authz.policies import all_policies
from authz.policies.merge import merge_items
from authz.request_policy import Action, Body, Relay, Rewrite
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from tests.authz.fake_view import FakeView
from tests.authz.test_policies_groups import encodes_response, request, upstream

K = ApiKey
ID = {name: uuid.UUID(int=n) for n, name in enumerate(("a", "b", "x", "s"), start=1)}
NAME_OF_ID = {i: name for name, i in ID.items()}
TOPIC_CONFIG = 2
# The client asks for b, x and a; x is refused. The upstream answers a, b and s, which nobody asked for.
ASKED = ("b", "x", "a")
ANSWERED = ("s", "a", "b")
IN_CLIENT_ORDER = ["b", "x", "a"]
REFUSALS_FIRST = ["x", "b", "a"]  # Kafka's builders put the gateway's errors ahead of the coordinator's answer
REFUSALS_LAST = ["b", "a", "x"]   # Kafka's handlers append the unauthorized items


def _grants() -> list[Action]:
    """Everything on a, b, the group g and the transactional id t; nothing on x or s."""
    return [Action(op, resource, name) for op in AclOperation
            for resource, names in ((ResourceType.TOPIC, "ab"), (ResourceType.GROUP, "abg"),
                                    (ResourceType.TRANSACTIONAL_ID, "abt"))
            for name in names]


@dataclass(slots=True)
class Case:
    key: ApiKey
    version: int
    asked: Callable[[str], Any]            # one item of the request, for a name
    answered: Callable[[str], Any]         # one item of the upstream's answer, for a name
    ident: Callable[[Body], Hashable]      # the name an item of the response answers
    expected: list[str]
    items: str = "topics"                  # the request's item list
    answers: str = "topics"                # the response's item list
    request_fields: dict[str, Any] = field(default_factory=dict)
    response_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.key.name}-v{self.version}"


def _partition(index_field: str = "partition_index", **extra: Any) -> list[dict[str, Any]]:
    return [{index_field: 0, **extra}]


CASES = [
    # --- Produce and the data APIs (authz/policies/produce.py, data.py, rules.py) ---
    Case(K.PRODUCE, 9, lambda n: {"name": n, "partition_data": _partition("index", records=None)},
         lambda n: {"name": n, "partition_responses": _partition("index")}, lambda t: t["name"], IN_CLIENT_ORDER,
         items="topic_data", answers="responses", request_fields={"acks": -1}),
    Case(K.FETCH, 12, lambda n: {"topic": n, "partitions": _partition("partition")},
         lambda n: {"topic": n, "partitions": _partition()}, lambda t: t["topic"], IN_CLIENT_ORDER,
         answers="responses", request_fields={"replica_id": -1, "session_epoch": -1}),
    Case(K.LIST_OFFSETS, 7, lambda n: {"name": n, "partitions": _partition()},
         lambda n: {"name": n, "partitions": _partition()}, lambda t: t["name"], IN_CLIENT_ORDER,
         request_fields={"replica_id": -1}),
    Case(K.OFFSET_FOR_LEADER_EPOCH, 4, lambda n: {"topic": n, "partitions": _partition("partition")},
         lambda n: {"topic": n, "partitions": _partition("partition")}, lambda t: t["topic"], IN_CLIENT_ORDER,
         request_fields={"replica_id": -1}),
    Case(K.DELETE_RECORDS, 2, lambda n: {"name": n, "partitions": _partition()},
         lambda n: {"name": n, "partitions": _partition()}, lambda t: t["name"], IN_CLIENT_ORDER),
    Case(K.DESCRIBE_PRODUCERS, 0, lambda n: {"name": n, "partition_indexes": [0]},
         lambda n: {"name": n, "partitions": _partition()}, lambda t: t["name"], IN_CLIENT_ORDER),
    Case(K.METADATA, 12, lambda n: {"name": n}, lambda n: {"name": n, "topic_id": ID[n]}, lambda t: t["name"],
         IN_CLIENT_ORDER, request_fields={"allow_auto_topic_creation": False}),
    Case(K.DESCRIBE_TOPIC_PARTITIONS, 0, lambda n: {"name": n}, lambda n: {"name": n, "topic_id": ID[n]},
         lambda t: t["name"], ["a", "b", "x"], request_fields={"cursor": None},
         response_fields={"next_cursor": None}),  # by name, the refusals after
    Case(K.SHARE_FETCH, 1, lambda n: {"topic_id": ID[n], "partitions": _partition()},
         lambda n: {"topic_id": ID[n], "partitions": _partition(records=b"")}, lambda t: NAME_OF_ID[t["topic_id"]],
         IN_CLIENT_ORDER, answers="responses", request_fields={"group_id": "g", "share_session_epoch": 0}),
    Case(K.SHARE_ACKNOWLEDGE, 1, lambda n: {"topic_id": ID[n], "partitions": _partition()},
         lambda n: {"topic_id": ID[n], "partitions": _partition()}, lambda t: NAME_OF_ID[t["topic_id"]],
         IN_CLIENT_ORDER, answers="responses", request_fields={"group_id": "g", "share_session_epoch": 1}),
    Case(K.CREATE_TOPICS, 7, lambda n: {"name": n}, lambda n: {"name": n}, lambda t: t["name"], IN_CLIENT_ORDER),
    Case(K.CREATE_PARTITIONS, 3, lambda n: {"name": n}, lambda n: {"name": n}, lambda t: t["name"], IN_CLIENT_ORDER,
         answers="results"),
    Case(K.DELETE_TOPICS, 6, lambda n: {"name": n}, lambda n: {"name": n}, lambda t: t["name"], IN_CLIENT_ORDER,
         answers="responses"),
    # --- group, offset and transaction APIs (authz/policies/groups.py, rules.py) ---
    Case(K.FIND_COORDINATOR, 4, lambda n: n, lambda n: {"key": n}, lambda c: c["key"], IN_CLIENT_ORDER,
         items="coordinator_keys", answers="coordinators", request_fields={"key_type": 0}),
    Case(K.OFFSET_COMMIT, 9, lambda n: {"name": n, "partitions": _partition()},
         lambda n: {"name": n, "partitions": _partition()}, lambda t: t["name"], REFUSALS_FIRST,
         request_fields={"group_id": "g"}),
    Case(K.TXN_OFFSET_COMMIT, 4, lambda n: {"name": n, "partitions": _partition()},
         lambda n: {"name": n, "partitions": _partition()}, lambda t: t["name"], REFUSALS_FIRST,
         request_fields={"group_id": "g", "transactional_id": "t"}),
    Case(K.OFFSET_DELETE, 0, lambda n: {"name": n, "partitions": _partition()},
         lambda n: {"name": n, "partitions": _partition()}, lambda t: t["name"], REFUSALS_FIRST,
         request_fields={"group_id": "g"}),
    Case(K.OFFSET_FETCH, 7, lambda n: {"name": n, "partition_indexes": [0]},
         lambda n: {"name": n, "partitions": _partition()}, lambda t: t["name"], REFUSALS_LAST,
         request_fields={"group_id": "g"}),
    Case(K.ALTER_SHARE_GROUP_OFFSETS, 0, lambda n: {"topic_name": n, "partitions": _partition()},
         lambda n: {"topic_name": n, "partitions": _partition()}, lambda t: t["topic_name"], REFUSALS_FIRST,
         answers="responses", request_fields={"group_id": "g"}),
    Case(K.DELETE_SHARE_GROUP_OFFSETS, 0, lambda n: {"topic_name": n}, lambda n: {"topic_name": n},
         lambda t: t["topic_name"], REFUSALS_FIRST, answers="responses", request_fields={"group_id": "g"}),
    Case(K.DESCRIBE_GROUPS, 5, lambda n: n, lambda n: {"group_id": n}, lambda g: g["group_id"], REFUSALS_FIRST,
         items="groups", answers="groups"),
    Case(K.CONSUMER_GROUP_DESCRIBE, 1, lambda n: n, lambda n: {"group_id": n}, lambda g: g["group_id"],
         REFUSALS_FIRST, items="group_ids", answers="groups"),
    Case(K.SHARE_GROUP_DESCRIBE, 1, lambda n: n, lambda n: {"group_id": n}, lambda g: g["group_id"],
         REFUSALS_FIRST, items="group_ids", answers="groups"),
    Case(K.STREAMS_GROUP_DESCRIBE, 0, lambda n: n, lambda n: {"group_id": n}, lambda g: g["group_id"],
         REFUSALS_FIRST, items="group_ids", answers="groups"),
    Case(K.DELETE_GROUPS, 2, lambda n: n, lambda n: {"group_id": n}, lambda g: g["group_id"], REFUSALS_LAST,
         items="groups_names", answers="results"),
    Case(K.DESCRIBE_TRANSACTIONS, 0, lambda n: n, lambda n: {"transactional_id": n},
         lambda s: s["transactional_id"], IN_CLIENT_ORDER, items="transactional_ids", answers="transaction_states"),
    Case(K.OFFSET_FETCH, 9, lambda n: {"group_id": n, "topics": None},
         lambda n: {"group_id": n, "topics": []}, lambda g: g["group_id"], IN_CLIENT_ORDER,
         items="groups", answers="groups"),
    Case(K.DESCRIBE_SHARE_GROUP_OFFSETS, 1, lambda n: {"group_id": n, "topics": None},
         lambda n: {"group_id": n, "topics": []}, lambda g: g["group_id"], IN_CLIENT_ORDER,
         items="groups", answers="groups"),
    # --- admin APIs (authz/policies/admin.py) ---
    Case(K.DESCRIBE_CONFIGS, 4, lambda n: {"resource_type": TOPIC_CONFIG, "resource_name": n},
         lambda n: {"resource_type": TOPIC_CONFIG, "resource_name": n}, lambda r: r["resource_name"], REFUSALS_LAST,
         items="resources", answers="results"),
    Case(K.ALTER_CONFIGS, 2, lambda n: {"resource_type": TOPIC_CONFIG, "resource_name": n, "configs": []},
         lambda n: {"resource_type": TOPIC_CONFIG, "resource_name": n}, lambda r: r["resource_name"],
         IN_CLIENT_ORDER, items="resources", answers="responses"),
    Case(K.INCREMENTAL_ALTER_CONFIGS, 1, lambda n: {"resource_type": TOPIC_CONFIG, "resource_name": n, "configs": []},
         lambda n: {"resource_type": TOPIC_CONFIG, "resource_name": n}, lambda r: r["resource_name"],
         IN_CLIENT_ORDER, items="resources", answers="responses"),
]


def _merge_through(case: Case, answered: tuple[str, ...]) -> tuple[Rewrite, list[Body]]:
    body = request(case.key, case.version, **case.request_fields, **{case.items: [case.asked(n) for n in ASKED]})
    verdict = all_policies()[case.key](body, case.version, FakeView(_grants(), topics=NAME_OF_ID))
    assert isinstance(verdict, Rewrite), verdict
    answer = upstream(case.key, case.version, **case.response_fields,
                      **{case.answers: [case.answered(n) for n in answered]})
    merged = encodes_response(case.key, case.version, verdict.on_response(answer))
    return verdict, merged[case.answers]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_an_upstream_item_nobody_asked_for_never_reaches_the_client(case: Case) -> None:
    verdict, items = _merge_through(case, ANSWERED)
    relayed = verdict.request[case.items]
    assert len(relayed) == 2, "the refused item is not relayed"
    assert [case.ident(item) for item in items] == case.expected


def test_a_group_answer_keeps_only_the_topics_asked_for() -> None:
    """OffsetFetch v8+: within a relayed group, an upstream topic nobody asked for is dropped too."""
    body = request(K.OFFSET_FETCH, 9, groups=[
        {"group_id": "g", "topics": [{"name": n, "partition_indexes": [0]} for n in ASKED]}])
    verdict = all_policies()[K.OFFSET_FETCH](body, 9, FakeView(_grants()))
    assert isinstance(verdict, Rewrite), verdict
    answer = upstream(K.OFFSET_FETCH, 9, groups=[{"group_id": "g", "topics": [
        {"name": n, "partitions": _partition()} for n in ANSWERED]}])
    merged = encodes_response(K.OFFSET_FETCH, 9, verdict.on_response(answer))
    assert [t["name"] for t in merged["groups"][0]["topics"]] == REFUSALS_LAST


@pytest.mark.parametrize("case", [c for c in CASES if c.key in (K.PRODUCE, K.FIND_COORDINATOR, K.LIST_OFFSETS,
                                                                 K.DESCRIBE_CONFIGS)], ids=lambda c: c.id)
def test_an_asked_item_the_upstream_did_not_answer_is_left_out(case: Case) -> None:
    _, items = _merge_through(case, ("s", "a"))
    assert [case.ident(item) for item in items] == [n for n in case.expected if n != "b"]


@pytest.mark.parametrize("key", [K.ALTER_CONFIGS, K.INCREMENTAL_ALTER_CONFIGS])
def test_alter_configs_answers_a_missing_resource_with_unknown_server_error(key: ApiKey) -> None:
    case = next(c for c in CASES if c.key == key)
    _, items = _merge_through(case, ("s", "a"))
    assert [(r["resource_name"], r["error_code"]) for r in items] == [
        ("b", KafkaError.UNKNOWN_SERVER_ERROR), ("x", KafkaError.TOPIC_AUTHORIZATION_FAILED), ("a", 0)]


def test_a_fetch_session_keeps_its_other_partitions_after_checking_them_again() -> None:
    """Incremental Fetch: the session's partitions this request does not name were asked for earlier."""
    body = request(K.FETCH, 12, replica_id=-1, session_id=7, session_epoch=3, topics=[
        {"topic": n, "partitions": _partition("partition")} for n in ("b", "x")])
    verdict = all_policies()[K.FETCH](body, 12, FakeView(_grants()))
    assert isinstance(verdict, Rewrite), verdict
    answer = upstream(K.FETCH, 12, responses=[{"topic": n, "partitions": _partition()} for n in ("s", "a", "b")])
    merged = encodes_response(K.FETCH, 12, verdict.on_response(answer))
    assert [(t["topic"], t["partitions"][0]["error_code"]) for t in merged["responses"]] == [
        ("b", 0), ("x", KafkaError.TOPIC_AUTHORIZATION_FAILED),
        ("s", KafkaError.TOPIC_AUTHORIZATION_FAILED), ("a", 0)]


def test_a_relay_hook_that_merges_drops_unasked_items_too() -> None:
    """DescribeTransactions relays a fully authorized request but still merges (to filter topics)."""
    body = request(K.DESCRIBE_TRANSACTIONS, 0, transactional_ids=["b", "a"])
    verdict = all_policies()[K.DESCRIBE_TRANSACTIONS](body, 0, FakeView(_grants()))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    answer = upstream(K.DESCRIBE_TRANSACTIONS, 0,
                      transaction_states=[{"transactional_id": n} for n in ANSWERED])
    states = verdict.on_response(answer)["transaction_states"]
    assert [s["transactional_id"] for s in states] == ["b", "a"]


# --- the rule itself --------------------------------------------------------------------------------------------

def _item(name: str, n: int = 0) -> Body:
    return {"name": name, "n": n}


def test_merge_lists_the_slots_in_order_and_drops_what_no_slot_claims() -> None:
    refusal = {"name": "x", "error": 29}
    out = merge_items([(None, "b"), (refusal, "x"), (None, "a")], [_item("s"), _item("a"), _item("b")])
    assert out == [_item("b"), refusal, _item("a")]


def test_merge_gives_repeated_keys_their_answers_in_turn_and_the_last_one_the_rest() -> None:
    refusal = {"name": "x"}
    upstream_items = [_item("a", 1), _item("a", 2), _item("a", 3)]
    out = merge_items([(None, "a"), (refusal, "x"), (None, "a")], upstream_items)
    assert out == [_item("a", 1), refusal, _item("a", 2), _item("a", 3)]


def test_merge_leaves_out_what_the_upstream_did_not_answer_unless_the_policy_fills_it() -> None:
    slots = [(None, "a"), (None, "b")]
    assert merge_items(slots, [_item("b")]) == [_item("b")]
    assert merge_items(slots, [_item("b")], unanswered=lambda key: {"name": key, "error": -1}) == [
        {"name": "a", "error": -1}, _item("b")]


def test_merge_sends_an_unclaimed_item_only_as_the_policy_says() -> None:
    out = merge_items([(None, "a")], [_item("s"), _item("a"), _item("t")],
                      unclaimed=lambda item: None if item["name"] == "s" else {**item, "checked": True})
    assert out == [_item("a"), {"name": "t", "n": 0, "checked": True}]


def test_merge_claims_an_item_with_several_keys_once() -> None:
    def keys(item: Body) -> tuple[Hashable, ...]:
        return ("name", item["name"]), ("id", item["id"])
    answer = {"name": "a", "id": 1}
    assert merge_items([(None, ("name", "a")), (None, ("id", 1))], [answer], keys) == [answer]


def test_merge_logs_how_many_it_dropped_without_the_items(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="ksgate.authz"):
        merge_items([(None, "a")], [_item("secret-topic"), _item("a"), _item("other-secret")])
    assert "dropped 2 upstream item(s)" in caplog.text
    assert "secret" not in caplog.text
