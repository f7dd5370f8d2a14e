"""The route table: one ApiRoute per client-facing API, agreeing with the schemas, policies and handlers."""

from __future__ import annotations

import pytest

from authz.policies import all_policies
from gateway.admin.handlers import LOCAL_HANDLERS
from gateway.session.api_versions import negotiate
from gateway.session.routes import ApiRoute, Dispatch, RouteTable, build_routes
from protocol.api_keys import INTERNAL_APIS, ApiKey
from protocol.registry import all_apis


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
    assert fetch.offered((4, 17)) == range(4, 16)  # capped at v15 so responses stream (routes._CAPS)


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


@pytest.mark.parametrize("key", [ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS,
                                 ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN])
def test_admin_apis_the_gateway_serves_start_at_kafka_4s_first_version(routes: RouteTable, key: ApiKey) -> None:
    assert _route(routes, key).versions.start == 1  # v0 was removed by KIP-896
    assert negotiate(routes, {}, authorizing=True)[key][0] == 1


def test_produce_below_v3_is_advertised_but_refused_as_on_kafka_4(routes: RouteTable) -> None:
    found = _route(routes, ApiKey.PRODUCE)
    assert found.versions.start == 0 and found.refused_below == 3
