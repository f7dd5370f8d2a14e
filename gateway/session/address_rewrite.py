"""Broker address rewriting: no upstream host or port ever reaches a client.

Every response field that names a broker endpoint is replaced by the gateway listener
that serves that node; the upstream address is remembered first so the gateway can
connect there when a client follows the rewritten address.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any, Protocol

from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.registry import api
from protocol.tag_scan import TagScan, compile_tag_scan


class NodeAddressBook(Protocol):
    def learn(self, node_id: int, host: str, port: int) -> None: ...

    def client_address(self, node_id: int) -> tuple[str, int]: ...


def _rewrite_node(node: dict[str, Any], book: NodeAddressBook, id_field: str = "node_id") -> None:
    """Replace one {node_id, host, port} entry; node id -1 (an error answer) means 'none'."""
    node_id = node[id_field]
    if node_id < 0:
        node["host"], node["port"] = "", -1
        return
    book.learn(node_id, node["host"], node["port"])
    node["host"], node["port"] = book.client_address(node_id)


def _rewrite_list(nodes: list[dict[str, Any]] | None, book: NodeAddressBook, id_field: str = "node_id") -> bool:
    for node in nodes or ():
        _rewrite_node(node, book, id_field)
    return bool(nodes)


def _brokers(body: dict[str, Any], version: int, book: NodeAddressBook) -> bool:
    _rewrite_list(body["brokers"], book)
    return True


def _cluster_brokers(body: dict[str, Any], version: int, book: NodeAddressBook) -> bool:
    _rewrite_list(body["brokers"], book, "broker_id")
    return True


def _find_coordinator(body: dict[str, Any], version: int, book: NodeAddressBook) -> bool:
    if version < 4:  # v0-3 carry a single coordinator at the top level
        _rewrite_node(body, book)
        return True
    _rewrite_list(body["coordinators"], book)
    return True


def _node_endpoints(body: dict[str, Any], version: int, book: NodeAddressBook) -> bool:
    return _rewrite_list(body.get("node_endpoints"), book)


# Returns whether the body changed (and so must be re-encoded).
Rewriter = Callable[[dict[str, Any], int, NodeAddressBook], bool]

# The responses that carry broker endpoints.  DescribeQuorum (controller endpoints) is
# never relayed, so it has no entry.
REWRITERS: dict[int, Rewriter] = {
    ApiKey.METADATA: _brokers,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.DESCRIBE_CLUSTER: _cluster_brokers,
    ApiKey.PRODUCE: _node_endpoints,
    ApiKey.FETCH: _node_endpoints,
    ApiKey.SHARE_FETCH: _node_endpoints,
    ApiKey.SHARE_ACKNOWLEDGE: _node_endpoints,
}

ENDPOINT_APIS = frozenset(REWRITERS)  # the api keys whose responses can name brokers


def rewrite_endpoints(api_key: int, version: int, body: dict[str, Any], book: NodeAddressBook) -> bool:
    """Rewrite every broker endpoint of a decoded response; whether the body changed."""
    return REWRITERS[api_key](body, version, book)


# Produce/Fetch and the share-group data APIs carry endpoints only in the tagged
# node_endpoints field (KIP-951); a version without it is relayed without decoding, and so is
# a response of a version with it that leaves the field out (body_names_endpoints).
_ENDPOINTS_ONLY_WHEN_TAGGED = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.SHARE_FETCH,
                                          ApiKey.SHARE_ACKNOWLEDGE})


def needs_rewrite(api_key: int, version: int) -> bool:
    """Whether a response of this api key and version can name a broker endpoint."""
    if api_key not in REWRITERS:
        return False
    if api_key not in _ENDPOINTS_ONLY_WHEN_TAGGED:
        return True
    schema = api(api_key)
    if schema is None:
        return False
    return any(f.name == "node_endpoints" and version in f.versions for f in schema.response.fields)


def body_names_endpoints(api_key: int, version: int, body: memoryview | bytes | bytearray) -> bool:
    """Whether this response body (of an api key and version needs_rewrite accepts) has endpoints to rewrite.

    Only the tagged node_endpoints of Produce, Fetch and the share-group APIs can be absent; it is
    looked for by skipping the body (tag_scan), not decoding it.  Fails closed: a body the scan
    cannot walk is reported as naming endpoints, so the full decoder sees (and refuses) it.
    """
    if api_key not in _ENDPOINTS_ONLY_WHEN_TAGGED:
        return True
    found = _endpoints_scan(api_key, version)
    if found is None:
        return True
    scan, tag = found
    try:
        return tag in scan(body)
    except DecodeError:
        return True


@lru_cache(maxsize=128)  # (api key, version) pairs: a few dozen
def _endpoints_scan(api_key: int, version: int) -> tuple[TagScan, int] | None:
    schema = api(api_key)
    if schema is None:
        return None
    for f in schema.response.fields:
        if f.name == "node_endpoints" and version in f.versions and f.tag is not None \
                and version in f.tagged_versions:
            return compile_tag_scan(schema.response, version), f.tag
    return None
