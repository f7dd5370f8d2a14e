"""The route table: one route per client-facing API, agreeing with the schemas, policies and handlers."""

from __future__ import annotations

import pytest

from authz.policies import all_policies
from gateway.admin.handlers import LOCAL_HANDLERS
from gateway.session.api_versions import negotiate
from gateway.session.routes import route, routes
from protocol.api_keys import INTERNAL_APIS, ApiKey
from protocol.registry import all_apis


def test_every_client_facing_api_has_a_route_and_no_inter_broker_api_has_one() -> None:
    assert set(routes()) == {key for key in all_apis() if key not in INTERNAL_APIS}
    assert all(route(key) is None for key in INTERNAL_APIS)


def test_every_relayed_api_has_a_policy() -> None:
    unpoliced = {r.name for r in routes().values() if not r.session_answered and r.policy is None}
    assert unpoliced == set()
    assert {k for k, r in routes().items() if r.policy is not None} <= set(all_policies())


def test_admin_apis_are_answered_here_and_never_relayed() -> None:
    local = {k for k, r in routes().items() if r.local is not None}
    assert local == set(LOCAL_HANDLERS)
    assert all(routes()[k].never_relayed and routes()[k].stays_on_loop for k in local)
    assert routes()[ApiKey.SASL_AUTHENTICATE].never_relayed and routes()[ApiKey.API_VERSIONS].never_relayed


def test_which_responses_stream_follows_what_they_name() -> None:
    fetch, produce, metadata = route(ApiKey.FETCH), route(ApiKey.PRODUCE), route(ApiKey.METADATA)
    assert fetch is not None and produce is not None and metadata is not None
    assert fetch.streams(15) and not fetch.streams(16)  # v16 adds node_endpoints (KIP-951)
    assert produce.streams(9) and not produce.streams(10)
    assert not metadata.streams(12)  # brokers to rewrite, topic ids to learn
    assert fetch.offered((4, 17)) == range(4, 16)  # capped at v15 so responses stream (routes._CAPS)


def test_only_produce_may_expect_no_answer() -> None:
    assert {k for k, r in routes().items() if r.fire_and_forget is not None} == {ApiKey.PRODUCE}
    produce = route(ApiKey.PRODUCE)
    assert produce is not None and produce.fire_and_forget is not None
    assert produce.fire_and_forget({"acks": 0}) and not produce.fire_and_forget({"acks": -1})


@pytest.mark.parametrize("key", [ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS,
                                 ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN])
def test_admin_apis_the_gateway_serves_start_at_kafka_4s_first_version(key: ApiKey) -> None:
    found = route(key)
    assert found is not None and found.versions.start == 1  # v0 was removed by KIP-896
    assert negotiate({}, (set(), {key}))[key][0] == 1


def test_produce_below_v3_is_advertised_but_refused_as_on_kafka_4() -> None:
    found = route(ApiKey.PRODUCE)
    assert found is not None and found.versions.start == 0 and found.refused_below == 3
