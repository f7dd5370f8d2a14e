"""Broker address rewriting, on decoded response bodies (no sockets)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.session.address_rewrite import REWRITERS, body_names_endpoints, needs_rewrite
from gateway.session.response_queue import Slot
from gateway.session.response_stage import response_pieces
from gateway.upstream.cluster_view import ClusterView
from protocol.api_keys import ApiKey
from protocol.codec import default_value
from protocol.framing import Frame
from protocol.messages import decode_response, response_frame
from protocol.registry import api


class Book:
    def __init__(self) -> None:
        self.learned: dict[int, tuple[str, int]] = {}

    def learn(self, node_id: int, host: str, port: int) -> None:
        self.learned[node_id] = (host, port)

    def client_address(self, node_id: int) -> tuple[str, int]:
        return "gw", 9000 + node_id


def _run(key: ApiKey, body: dict[str, Any], version: int) -> tuple[bool, Book]:
    book = Book()
    return REWRITERS[key](body, version, book), book


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
    slot = Slot(correlation_id=7, api_key=key, api_version=version)
    cluster: ClusterView = None  # type: ignore[assignment]  # only Metadata-like responses reach it
    return wire, b"".join(bytes(p) for p in response_pieces(slot, Frame(memoryview(wire)), cluster, Book()))


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
