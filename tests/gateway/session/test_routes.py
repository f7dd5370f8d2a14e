"""The route table: one ApiRoute per client-facing API, agreeing with the schemas, policies and handlers."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from authz.model import AclOperation
from authz.policies import all_policies
from authz.policies.produce import WALKED_PRODUCE
from authz.request_policy import Refuse, Verdict
from gateway.admin.handlers import LOCAL_HANDLERS, AdminRequest
from gateway.server import Gateway
from gateway.session import actions as act
from gateway.session.api_versions import negotiate
from gateway.session.routes import ApiRoute, Dispatch, RouteTable, build_routes
from gateway.session.session import LARGE_BYTES, STREAM_MIN_BYTES
from gateway.stores.file_acls import FileAclStore
from protocol.api_keys import INTERNAL_APIS, ApiKey
from protocol.kafka_errors import KafkaError
from protocol.messages import request_frame, response_frame
from protocol.registry import all_apis
from tests.authz.helpers import acl
from tests.authz.test_policies_data import entry, request, response
from tests.gateway.session.session_driver import Driver, gateway_for

METADATA_V = 12
FETCH_V = 15


@pytest.fixture(scope="module")
def routes() -> RouteTable:
    return build_routes(all_policies(), LOCAL_HANDLERS)


def _route(routes: RouteTable, key: int) -> ApiRoute:
    found = routes.get(key)
    assert found is not None
    return found


def test_every_client_facing_api_has_a_route_and_no_inter_broker_api_has_one(routes: RouteTable) -> None:
    assert set(routes) == {key for key in all_apis() if key not in INTERNAL_APIS}
    assert all(routes.get(key) is None for key in INTERNAL_APIS)


def test_every_relayed_api_has_a_policy(routes: RouteTable) -> None:
    unpoliced = {r.name for r in routes.values()
                 if r.dispatch not in (Dispatch.SASL, Dispatch.API_VERSIONS) and r.policy is None}
    assert unpoliced == set()
    assert {k for k, r in routes.items() if r.policy is not None} <= set(all_policies())


def test_the_route_carries_the_policy_and_the_handler_it_was_built_with(routes: RouteTable) -> None:
    policies = all_policies()
    assert all(r.policy is policies.get(k) for k, r in routes.items())
    assert all(r.local is LOCAL_HANDLERS.get(k) for k, r in routes.items())


def test_admin_apis_are_answered_here_and_never_relayed(routes: RouteTable) -> None:
    local = {k for k, r in routes.items() if r.dispatch is Dispatch.LOCAL}
    assert local == set(LOCAL_HANDLERS)
    assert all(routes[k].never_relayed and routes[k].stays_on_loop for k in local)
    assert routes[ApiKey.SASL_AUTHENTICATE].never_relayed and routes[ApiKey.API_VERSIONS].never_relayed


def test_without_a_handler_an_admin_api_keeps_its_dispatch_and_is_not_offered() -> None:
    unserved = build_routes(all_policies(), {})
    assert unserved[ApiKey.CREATE_ACLS].dispatch is Dispatch.LOCAL and unserved[ApiKey.CREATE_ACLS].local is None
    every_version = {key: (0, 99) for key in all_apis()}
    assert ApiKey.CREATE_ACLS not in negotiate(unserved, every_version, authorizing=False)


def test_which_responses_stream_follows_what_they_name(routes: RouteTable) -> None:
    fetch, produce, metadata = _route(routes, ApiKey.FETCH), _route(routes, ApiKey.PRODUCE), \
        _route(routes, ApiKey.METADATA)
    assert fetch.streams(15) and not fetch.streams(16)  # v16 adds node_endpoints (KIP-951)
    assert produce.streams(9) and not produce.streams(10)
    assert not metadata.streams(12)  # brokers to rewrite, topic ids to learn
    assert fetch.offered((4, 17)) == range(4, 18)  # the upstream's own range: v16+ streams with its trailer walked
    assert fetch.offered((4, 18)) == range(4, 19)


def test_only_requests_whose_schema_has_records_count_as_records_as_bytes(routes: RouteTable) -> None:
    # Derived from the schemas' records-typed fields: Produce requests carry records; Fetch requests do not
    # (their responses do, and responses never go by this flag).
    assert {k for k, r in routes.items() if r.records_as_bytes} == {ApiKey.PRODUCE}
    assert not _route(routes, ApiKey.FETCH).stays_on_loop


def test_only_produce_may_expect_no_answer(routes: RouteTable) -> None:
    assert {k for k, r in routes.items() if r.fire_and_forget is not None} == {ApiKey.PRODUCE}
    produce = _route(routes, ApiKey.PRODUCE)
    assert produce.fire_and_forget is not None
    assert produce.fire_and_forget({"acks": 0}) and not produce.fire_and_forget({"acks": -1})


def test_only_fetch_has_a_refusal_no_policy_overrides(routes: RouteTable) -> None:
    assert {k for k, r in routes.items() if r.refusal is not None} == {ApiKey.FETCH}
    refusal = _route(routes, ApiKey.FETCH).refusal
    assert refusal is not None
    assert refusal({"replica_id": 1}, 4) is not None and refusal({"replica_id": -1}, 4) is None


def test_the_guards_exemptions_are_route_rows(routes: RouteTable) -> None:
    assert {k for k, r in routes.items() if r.topic_rules.validates_names} == {
        ApiKey.CREATE_TOPICS, ApiKey.METADATA, ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS}
    assert {k for k, r in routes.items() if r.topic_rules.answers_only_what_was_asked} == {
        ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE}
    assert {k: r.ids_not_checked for k, r in routes.items() if r.ids_not_checked} == {
        ApiKey.PRODUCE: frozenset({"transactionalId"})}


@pytest.mark.parametrize("key", [ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS,
                                 ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN])
def test_admin_apis_the_gateway_serves_start_at_kafka_4s_first_version(routes: RouteTable, key: ApiKey) -> None:
    assert _route(routes, key).versions.start == 1  # v0 was removed by KIP-896
    assert negotiate(routes, {}, authorizing=True)[key][0] == 1


def test_produce_below_v3_is_advertised_but_refused_as_on_kafka_4(routes: RouteTable) -> None:
    found = _route(routes, ApiKey.PRODUCE)
    assert found.versions.start == 0 and found.refused_below == 3


# --- the spine at run time: the session and the stages dispatch through the gateway's table -----------

def _metadata(*names: str) -> dict[str, Any]:
    return request(ApiKey.METADATA, METADATA_V, topics=[{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
                   allow_auto_topic_creation=False)


_PARTITION = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
              "log_start_offset": -1, "partition_max_bytes": 1 << 20}


@pytest.fixture
def plaintext(tmp_path: Path) -> Gateway:
    return gateway_for(tmp_path)


@pytest.fixture
def strict(tmp_path: Path) -> Gateway:
    """An authorizer; ANONYMOUS may describe topic a, nothing else."""
    FileAclStore(tmp_path / "acls.json").add([acl("a", AclOperation.DESCRIBE, principal="User:ANONYMOUS")])
    return gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer",
                                    "ksgate.acl.file": str(tmp_path / "acls.json")})


def _with_route(gateway: Gateway, key: int, **changes: Any) -> None:
    routes = gateway.ctx.routes
    gateway.ctx.routes = MappingProxyType({**routes, key: replace(routes[key], **changes)})


def test_the_gateway_builds_its_table_once_with_the_handlers_it_serves(plaintext: Gateway, strict: Gateway) -> None:
    assert plaintext.ctx.routes[ApiKey.CREATE_ACLS].local is None  # no authorizer: no admin API here
    assert strict.ctx.routes[ApiKey.CREATE_ACLS].local is LOCAL_HANDLERS[ApiKey.CREATE_ACLS]
    assert strict.ctx.routes[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS].local is None  # no credential store


def test_the_policy_that_runs_is_the_routes(strict: Gateway) -> None:
    asked: list[int] = []

    def refuse_all(body: dict[str, Any], version: int, view: Any) -> Verdict:
        asked.append(version)
        return Refuse("the route's own policy")

    _with_route(strict, ApiKey.METADATA, policy=refuse_all)
    driver = Driver.connect(strict)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, _metadata("a")))
    assert asked == [METADATA_V]
    assert driver.closed is not None and driver.closed.reason == "the route's own policy"


def test_the_admin_handler_that_answers_is_the_routes(tmp_path: Path) -> None:
    def answer(authorization: Any, requester: AdminRequest, body: dict[str, Any], version: int) -> dict[str, Any]:
        assert requester.principal.name == "ANONYMOUS" and requester.listener == "PLAINTEXT"
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": "from the route", "resources": []}

    FileAclStore(tmp_path / "acls.json")
    gateway = gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer", "super.users": "User:ANONYMOUS",
                                       "ksgate.acl.file": str(tmp_path / "acls.json")})
    _with_route(gateway, ApiKey.DESCRIBE_ACLS, local=answer)
    driver = Driver.connect(gateway)
    body = request(ApiKey.DESCRIBE_ACLS, 3, resource_type_filter=1, pattern_type_filter=1, operation=1,
                   permission_type=1)
    driver.send(request_frame(ApiKey.DESCRIBE_ACLS, 3, 5, body))
    [(correlation_id, answered)] = driver.responses(ApiKey.DESCRIBE_ACLS, 3)
    assert correlation_id == 5 and answered["error_message"] == "from the route"
    assert driver.upstream_bytes == b""


def test_sasl_frames_are_dispatched_by_their_route(plaintext: Gateway) -> None:
    # Without a SASL listener, a SaslHandshake after connecting gets ILLEGAL_SASL_STATE from the session.
    driver = Driver.connect(plaintext)
    driver.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 3, {"mechanism": "PLAIN"}))
    [(_, answer)] = driver.responses(ApiKey.SASL_HANDSHAKE, 1)
    assert answer["error_code"] == KafkaError.ILLEGAL_SASL_STATE and driver.upstream_bytes == b""


def test_a_large_fetch_request_is_decided_in_the_worker_and_its_response_still_streams(plaintext: Gateway) -> None:
    # Fetch requests carry no records (only their responses do): a large one is decoded off the loop like any other.
    driver = Driver.connect(plaintext)
    topics = [{"topic_id": uuid.uuid4(), "partitions": [_PARTITION]} for _ in range(LARGE_BYTES // 40)]
    driver.send(request_frame(ApiKey.FETCH, FETCH_V, 1, request(ApiKey.FETCH, FETCH_V, topics=topics)))
    assert any(job.kind is act.JobKind.LARGE for job in driver.jobs.values()) and driver.upstream_bytes == b""
    driver.run_job(act.JobKind.LARGE)
    [fetch] = driver.upstream_requests()
    assert len(fetch.body["topics"]) == len(topics)
    assert driver.session.may_stream(fetch.upstream_id, STREAM_MIN_BYTES)


def test_a_broker_a_response_names_is_reported_as_a_discovery_not_learned_by_the_session(
        plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, _metadata("a")))
    [relayed] = driver.upstream_requests()
    topic_id = uuid.uuid4()
    answer = response(ApiKey.METADATA, METADATA_V, "topics",
                      [entry(ApiKey.METADATA, METADATA_V, "topics", name="a", topic_id=topic_id)],
                      brokers=[{"node_id": 7, "host": "10.9.9.7", "port": 9092, "rack": None}])
    actions = driver.session.upstream_frames([memoryview(response_frame(
        ApiKey.METADATA, METADATA_V, relayed.upstream_id, answer))])
    [found] = [a for a in actions if isinstance(a, act.Discovered)]
    assert found.nodes == ((7, "10.9.9.7", 9092),) and found.topic_ids == ((topic_id, "a"),)
    assert 7 not in plaintext.ctx.cluster.nodes and topic_id not in plaintext.ctx.cluster.topic_names


def test_an_unknown_topic_id_asks_for_a_refresh_as_an_action(strict: Gateway) -> None:
    driver = Driver.connect(strict)
    body = request(ApiKey.FETCH, FETCH_V, topics=[{"topic_id": uuid.uuid4(), "partitions": [_PARTITION]}])
    driver.send(request_frame(ApiKey.FETCH, FETCH_V, 2, body))
    assert [d.refresh_topic_ids for d in driver.discovered] == [True]


def test_the_server_opens_node_listeners_once_per_new_broker(plaintext: Gateway,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[int] = []
    refreshed: list[bool] = []
    monkeypatch.setattr(Gateway, "_open_node_listeners", lambda _gateway, node_id: opened.append(node_id))
    monkeypatch.setattr(Gateway, "_request_topic_refresh", lambda _gateway: refreshed.append(True))
    topic_id = uuid.uuid4()
    plaintext.discovered(act.Discovered(nodes=((7, "10.9.9.7", 9092),), topic_ids=((topic_id, "a"),)))
    plaintext.discovered(act.Discovered(nodes=((7, "10.9.9.8", 9092),), refresh_topic_ids=True))
    assert opened == [7] and refreshed == [True]
    assert plaintext.ctx.cluster.nodes[7] == ("10.9.9.8", 9092)
    assert plaintext.ctx.cluster.topic_names == {topic_id: "a"}


def test_a_decision_reads_the_topic_ids_known_when_its_request_arrived(plaintext: Gateway) -> None:
    cluster = plaintext.ctx.cluster
    snapshot = cluster.topic_names
    cluster.learn_topic_ids([(uuid.uuid4(), "later")])
    assert snapshot == {} and len(cluster.topic_names) == 1  # replaced whole, never edited



def test_only_topic_ids_the_cluster_view_lacks_are_reported(plaintext: Gateway) -> None:
    known, new = uuid.uuid4(), uuid.uuid4()
    plaintext.ctx.cluster.learn_topic_ids([(known, "a")])
    driver = Driver.connect(plaintext)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, _metadata("a", "b")))
    [relayed] = driver.upstream_requests()
    driver.answer(relayed, response(ApiKey.METADATA, METADATA_V, "topics", [
        entry(ApiKey.METADATA, METADATA_V, "topics", name="a", topic_id=known),
        entry(ApiKey.METADATA, METADATA_V, "topics", name="b", topic_id=new)]))
    assert [d.topic_ids for d in driver.discovered] == [((new, "b"),)]
    assert plaintext.ctx.cluster.topic_names == {known: "a", new: "b"}


def test_a_walked_shortcut_speaks_only_for_the_policy_it_was_written_for(routes: RouteTable) -> None:
    assert routes[ApiKey.PRODUCE].walked_policy is WALKED_PRODUCE
    assert [key for key, route in routes.items() if route.walked_policy is not None] == [ApiKey.PRODUCE]
    # Another Produce policy (a test's, a future one) gets no shortcut: its own decisions, decoded.
    other = build_routes({**all_policies(), ApiKey.PRODUCE: lambda body, version, view: Refuse("no")}, {})
    assert other[ApiKey.PRODUCE].walked_policy is None
