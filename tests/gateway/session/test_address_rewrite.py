"""Broker address rewriting, on decoded response bodies (no sockets)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from authz.policies import all_policies
from gateway.session.address_rewrite import ENDPOINT_APIS, body_names_endpoints, needs_rewrite, rewrite_endpoints
from gateway.session.response_queue import ResponseSlot
from gateway.session.response_stage import Learned, response_pieces
from gateway.session.routes import build_routes
from protocol.api_keys import ApiKey
from protocol.codec import default_value
from protocol.messages import decode_response, response_frame
from protocol.registry import all_apis, api
from protocol.schema import FieldSpec
from tests.protocol.sample_values import sample_message


class Book:
    def __init__(self) -> None:
        self.learned: dict[int, tuple[str, int]] = {}

    def learn(self, node_id: int, host: str, port: int) -> None:
        self.learned[node_id] = (host, port)

    def client_address(self, node_id: int) -> tuple[str, int]:
        return "gw", 9000 + node_id


def _run(key: ApiKey, body: dict[str, Any], version: int) -> tuple[bool, Book]:
    book = Book()
    return rewrite_endpoints(key, version, body, book), book


def test_metadata_brokers_are_replaced_and_remembered() -> None:
    body = {"brokers": [{"node_id": 1, "host": "10.0.0.1", "port": 9092, "rack": None},
                        {"node_id": 2, "host": "10.0.0.2", "port": 9092, "rack": "r"}]}
    changed, book = _run(ApiKey.METADATA, body, 12)
    assert changed
    assert [(b["host"], b["port"]) for b in body["brokers"]] == [("gw", 9001), ("gw", 9002)]
    assert book.learned == {1: ("10.0.0.1", 9092), 2: ("10.0.0.2", 9092)}


def test_find_coordinator_old_and_batched_versions() -> None:
    old = {"error_code": 0, "node_id": 3, "host": "10.0.0.3", "port": 9092}
    _run(ApiKey.FIND_COORDINATOR, old, 3)
    assert (old["host"], old["port"]) == ("gw", 9003)
    batched = {"coordinators": [{"key": "g", "node_id": 4, "host": "10.0.0.4", "port": 1},
                                {"key": "h", "node_id": -1, "host": "leak", "port": 7}]}
    _run(ApiKey.FIND_COORDINATOR, batched, 4)
    assert [(c["host"], c["port"]) for c in batched["coordinators"]] == [("gw", 9004), ("", -1)]


def test_describe_cluster_uses_broker_id() -> None:
    body = {"brokers": [{"broker_id": 5, "host": "10.0.0.5", "port": 9092, "rack": None}]}
    _run(ApiKey.DESCRIBE_CLUSTER, body, 1)
    assert (body["brokers"][0]["host"], body["brokers"][0]["port"]) == ("gw", 9005)


def test_produce_and_fetch_rewrite_only_when_node_endpoints_are_present() -> None:
    assert not needs_rewrite(ApiKey.PRODUCE, 9)  # no node_endpoints before v10
    assert needs_rewrite(ApiKey.PRODUCE, 10)
    assert not needs_rewrite(ApiKey.FETCH, 15)
    assert needs_rewrite(ApiKey.FETCH, 16)
    empty = {"responses": [], "node_endpoints": []}
    assert _run(ApiKey.FETCH, empty, 16)[0] is False
    body = {"node_endpoints": [{"node_id": 6, "host": "10.0.0.6", "port": 9092, "rack": None}]}
    assert _run(ApiKey.PRODUCE, body, 10)[0] is True
    assert (body["node_endpoints"][0]["host"], body["node_endpoints"][0]["port"]) == ("gw", 9006)


def test_apis_without_endpoints_are_never_decoded() -> None:
    assert not needs_rewrite(ApiKey.OFFSET_COMMIT, 8)
    assert not needs_rewrite(ApiKey.LIST_OFFSETS, 7)


_ENDPOINT = {"node_id": 6, "host": "10.0.0.6", "port": 9092, "rack": None}
_TAGGED = [(ApiKey.PRODUCE, 10), (ApiKey.PRODUCE, 13), (ApiKey.FETCH, 16), (ApiKey.FETCH, 17)]


def _encoded(key: ApiKey, version: int, **fields: Any) -> bytes:
    schema = api(key)
    assert schema is not None
    codec = schema.response_codec(version)
    body = codec.decode(codec.encode(_minimal(schema.response.fields, version)))
    body.update(fields)
    return bytes(codec.encode(body))


def _minimal(fields: Any, version: int) -> dict[str, Any]:
    return {f.name: default_value(f, version) for f in fields if version in f.versions}


@pytest.mark.parametrize(("key", "version"), _TAGGED)
def test_the_tag_scan_sees_node_endpoints_only_when_sent(key: ApiKey, version: int) -> None:
    assert needs_rewrite(key, version)
    assert not body_names_endpoints(key, version, _encoded(key, version))
    assert body_names_endpoints(key, version, _encoded(key, version, node_endpoints=[_ENDPOINT]))


def test_a_body_the_scan_cannot_walk_is_decoded() -> None:
    data = _encoded(ApiKey.FETCH, 16)
    assert body_names_endpoints(ApiKey.FETCH, 16, data[:-1])  # fail closed: the decoder refuses it
    assert body_names_endpoints(ApiKey.FETCH, 16, data + b"\x00")


def test_apis_with_untagged_endpoints_are_always_decoded() -> None:
    assert body_names_endpoints(ApiKey.METADATA, 12, b"")
    # The share-group data APIs carry node_endpoints as a plain field, not a tag: no scan applies.
    assert body_names_endpoints(ApiKey.SHARE_FETCH, 1, _encoded(ApiKey.SHARE_FETCH, 1))


def _pieces(key: ApiKey, version: int, body: dict[str, Any]) -> tuple[bytes, bytes]:
    """The upstream's frame (upstream correlation id 99) and what the client gets (its id 7)."""
    wire = response_frame(key, version, 99, body)
    slot = ResponseSlot(correlation_id=7, api_key=key, api_version=version)
    routes = build_routes(all_policies(), {})
    pieces = response_pieces(slot, memoryview(wire), routes, Learned(Book()))
    return wire, b"".join(bytes(p) for p in pieces)


def test_a_fetch_without_node_endpoints_is_relayed_byte_for_byte() -> None:
    schema = api(ApiKey.FETCH)
    assert schema is not None
    body = schema.response_codec(16).decode(_encoded(ApiKey.FETCH, 16))
    wire, sent = _pieces(ApiKey.FETCH, 16, body)
    assert sent[8:] == wire[8:] and decode_response(sent[4:], ApiKey.FETCH, 16)[0] == 7


def test_a_fetch_with_node_endpoints_is_rewritten() -> None:
    schema = api(ApiKey.FETCH)
    assert schema is not None
    body = schema.response_codec(16).decode(_encoded(ApiKey.FETCH, 16, node_endpoints=[dict(_ENDPOINT)]))
    _, sent = _pieces(ApiKey.FETCH, 16, body)
    correlation_id, decoded = decode_response(sent[4:], ApiKey.FETCH, 16)
    assert correlation_id == 7
    assert [(n["host"], n["port"]) for n in decoded["node_endpoints"]] == [("gw", 9006)]


# --- every endpoint in every schema, found through the annotations ------------------------------------------------

def test_endpoint_apis_are_those_whose_responses_annotate_an_endpoint() -> None:
    expected = {ApiKey.METADATA, ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_CLUSTER, ApiKey.PRODUCE, ApiKey.FETCH,
                ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE}
    assert expected == ENDPOINT_APIS
    assert needs_rewrite(ApiKey.FIND_COORDINATOR, 0) and needs_rewrite(ApiKey.FIND_COORDINATOR, 6)
    assert not needs_rewrite(ApiKey.METADATA, 99)  # a version the schema does not have


def _all_fields(fields: list[FieldSpec]) -> Iterator[FieldSpec]:
    for f in fields:
        yield f
        yield from _all_fields(f.fields)


def test_every_response_host_and_port_is_annotated() -> None:
    """A future schema cannot add an endpoint the rewrite would not see: each host/port says what it is."""
    unmarked = [(schema.name, f.name) for schema in all_apis().values() for f in _all_fields(schema.response.fields)
                if f.name in ("host", "port") and f.entity not in ("brokerHost", "brokerPort", "none")]
    assert unmarked == []


# A Kafka Streams application's own endpoint (StreamsGroupDescribe/Heartbeat), not a broker: relayed as is.
_NOT_BROKER_ENDPOINTS = frozenset({"user_endpoint"})


def _host_port_structs(value: Any, parent: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every dict with a host and a port, found by key (not through the annotations), with its field name."""
    if isinstance(value, list):
        for item in value:
            yield from _host_port_structs(item, parent)
    elif isinstance(value, dict):
        if "host" in value and "port" in value:
            yield parent, value
        for name, item in value.items():
            yield from _host_port_structs(item, name)


_RESPONSE_VERSIONS = [(key, version) for key, schema in sorted(all_apis().items())
                      for version in range(schema.min_version, schema.max_version + 1)]


@pytest.mark.parametrize(("key", "version"), _RESPONSE_VERSIONS)
def test_no_upstream_address_survives_in_any_response(key: int, version: int) -> None:
    """Random bodies of every response version: after the rewrite no broker host or port of the upstream is left."""
    schema = api(key)
    assert schema is not None
    rng = random.Random(f"{key}/{version}")
    for _ in range(8):
        body = sample_message(schema.response, version, rng)
        if needs_rewrite(key, version):
            rewrite_endpoints(key, version, body, Book())
        for parent, struct in _host_port_structs(body):
            if parent in _NOT_BROKER_ENDPOINTS:
                continue
            assert (struct["host"], struct["port"]) in {("", -1)} | {("gw", 9000 + struct.get("node_id", struct.get(
                "broker_id", -1)))}, (parent, struct)


def test_the_endpoint_scans_stay_compiled_for_every_parsable_version() -> None:
    # A scan is generated code (~0.25 ms to build): a client cycling through every API version must
    # not make the gateway rebuild them, so the cache holds one per (api key, version) ksgate parses.
    from gateway.session.address_rewrite import _endpoints_scan

    pairs = sum(schema.max_version - schema.min_version + 1 for schema in all_apis().values())
    maxsize = _endpoints_scan.cache_info().maxsize
    assert maxsize is None or maxsize >= pairs, (maxsize, pairs)
