"""Broker address rewriting: no upstream host or port ever reaches a client.

Every response field that names a broker endpoint is replaced by the gateway listener
that serves that node; the upstream address is remembered first so the gateway can
connect there when a client follows the rewritten address.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from protocol.codec import MessageCodec, compile_message
from protocol.entities.endpoints import endpoint_places, endpoints
from protocol.errors import DecodeError
from protocol.primitives import Reader
from protocol.registry import all_apis, api
from protocol.schema import MessageSpec
from protocol.streaming.tag_padding import pad_tag_section
from protocol.tag_scan import TagScan, compile_tag_scan


class ListenerAddresses(Protocol):
    def client_address(self, node_id: int) -> tuple[str, int]: ...


class NodeAddressBook(ListenerAddresses, Protocol):
    """Where the rewriting finds a node's address on the client's listener, and notes the upstream's."""

    def learn(self, node_id: int, host: str, port: int) -> None: ...


def _has_endpoints(api_key: int, version: int) -> bool:
    schema = api(api_key)
    return schema is not None and version in schema.response.versions \
        and bool(endpoint_places(schema.response, version))


def _endpoint_apis() -> frozenset[int]:
    """The api keys with a response version that names an endpoint (entity=brokerHost/brokerPort)."""
    return frozenset(key for key, schema in all_apis().items()
                     if any(_has_endpoints(key, v) for v in range(schema.min_version, schema.max_version + 1)))


# Metadata, FindCoordinator, DescribeCluster, and Produce/Fetch/ShareFetch/ShareAcknowledge
# (node_endpoints).  DescribeQuorum (controller endpoints) is never relayed and has no schema.
ENDPOINT_APIS: frozenset[int] = _endpoint_apis()


@lru_cache(maxsize=256)  # (api key, version) pairs: a few hundred at most
def needs_rewrite(api_key: int, version: int) -> bool:
    """Whether a response of this api key and version can name a broker endpoint."""
    return api_key in ENDPOINT_APIS and _has_endpoints(api_key, version)


def rewrite_endpoints(api_key: int, version: int, body: dict[str, Any], book: NodeAddressBook) -> bool:
    """Replace every endpoint of a decoded response by the gateway listener serving that node.

    The upstream address is remembered first (book.learn).  Node id -1 (an error answer) means
    'no node': its address becomes ("", -1).  Returns whether the body changed.
    """
    schema = api(api_key)
    return schema is not None and _rewrite(schema.response, version, body, book)


def _rewrite(spec: MessageSpec, version: int, body: dict[str, Any], book: NodeAddressBook) -> bool:
    changed = False
    for endpoint in endpoints(spec, version, body):
        node_id = endpoint.node_id
        if node_id < 0:
            endpoint.set_address("", -1)
        else:
            book.learn(node_id, *endpoint.address)
            endpoint.set_address(*book.client_address(node_id))
        changed = True
    return changed


def body_names_endpoints(api_key: int, version: int, body: memoryview | bytes | bytearray) -> bool:
    """Whether this response body (of an api key and version needs_rewrite accepts) has endpoints to rewrite.

    Where every endpoint sits under a tagged top-level field (node_endpoints of Produce and Fetch,
    KIP-951) the tags are looked for by skipping the body (tag_scan), not decoding it; anywhere
    else the body is decoded.  Fails closed: a body the scan cannot walk is reported as naming
    endpoints, so the full decoder sees (and refuses) it.
    """
    compiled = _endpoints_scan(api_key, version)
    if compiled is None:
        return True
    scan, tags = compiled
    try:
        present = scan(body)
    except DecodeError:
        return True
    return not tags.isdisjoint(present)  # usually empty: no generator per response


@lru_cache(maxsize=512)  # (api key, version) pairs the schemas parse (~300): no eviction, no recompiling
def _endpoints_scan(api_key: int, version: int) -> tuple[TagScan, frozenset[int]] | None:
    """The tag scan and the tags that hold endpoints, when only tagged fields can hold them."""
    schema = api(api_key)
    if schema is None:
        return None
    places = endpoint_places(schema.response, version)
    if not places or any(place.tag is None for place in places):
        return None
    return compile_tag_scan(schema.response, version), frozenset(place.tag for place in places if place.tag is not None)


# --- a streamed response's trailer: its top-level tag section, rewritten to the length already sent -------

@dataclass(slots=True, frozen=True)
class TrailerRewrite:
    trailer: bytes  # exactly as long as the upstream's
    dropped: bool  # the rewritten endpoints did not fit: they were left out (the client asks Metadata instead)


def streams_with_trailer(api_key: int, version: int) -> bool:
    """Whether a response's endpoints all sit in its top-level tag section (node_endpoints, KIP-951), so a
    streamed one needs only that trailer rewritten (gateway/session/stream_stage.py)."""
    return _trailer_codec(api_key, version) is not None


def rewrite_trailer(api_key: int, version: int, trailer: bytes, book: NodeAddressBook) -> TrailerRewrite:
    """The top-level tag section of a streamed response, its endpoints rewritten, as long as ``trailer``.

    Untouched when it names none (the usual empty section). Shorter, it is padded with one tagged field no
    version defines (protocol/streaming/tag_padding.py); longer, the endpoint fields are left out and the
    section padded the same way. Raises DecodeError for a section that cannot be decoded or padded.
    """
    compiled = _trailer_codec(api_key, version)
    if compiled is None:
        raise DecodeError(f"api key {api_key} v{version} has endpoints outside its tag section")
    spec, codec, tags = compiled
    if trailer == b"\x00" or tags.isdisjoint(_tags_of(trailer)):
        return TrailerRewrite(trailer, dropped=False)
    body = codec.decode(trailer)
    _rewrite(spec, version, body, book)
    padded = pad_tag_section(codec.encode(body), len(trailer))
    if padded is not None:
        return TrailerRewrite(padded, dropped=False)
    for field in spec.fields:  # every top-level field here is a tagged one; those holding endpoints go
        if field.tag in tags:
            body.pop(field.name, None)
    padded = pad_tag_section(codec.encode(body), len(trailer))
    if padded is None:  # dropping endpoint fields frees more than two bytes: not reached
        raise DecodeError(f"api key {api_key} v{version}: a tag section that cannot keep its length")
    return TrailerRewrite(padded, dropped=True)


def _tags_of(section: bytes) -> frozenset[int]:
    reader = Reader(section)
    tags = []
    for _ in range(reader.count(reader.uvarint(), 2)):
        tags.append(reader.uvarint())
        reader.view(reader.uvarint())
    return frozenset(tags)


@lru_cache(maxsize=64)  # (api key, version) pairs with node_endpoints: a few dozen
def _trailer_codec(api_key: int, version: int) -> tuple[MessageSpec, MessageCodec, frozenset[int]] | None:
    """The codec of a response's top-level tag section alone (its tagged fields as a message of their own),
    and the tags holding endpoints; None unless the response is flexible and every endpoint is tagged."""
    schema = api(api_key)
    if schema is None or version not in schema.response.versions or version not in schema.response.flexible:
        return None
    places = endpoint_places(schema.response, version)
    if not places or any(place.tag is None for place in places):
        return None
    full = schema.response
    tagged = [f for f in full.fields if f.tag is not None and version in f.tagged_versions]
    spec = MessageSpec("response-trailer", f"{full.name}Trailer", full.api_key, full.versions, full.flexible, tagged)
    return spec, compile_message(spec, version), frozenset(place.tag for place in places if place.tag is not None)
