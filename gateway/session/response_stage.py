"""The response stage: an upstream frame → the client's bytes, in the slot its request reserved.

    upstream frame → match slot → (rewrite broker addresses, learn topic ids, authorization hook)
                   → restore the client's correlation id

Pure functions of the slot and the frame (no session, no socket), so the session may run
a large one in the worker thread.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Protocol

from gateway.config import ConfigError
from gateway.session.address_rewrite import (
    ListenerAddresses,
    body_names_endpoints,
    needs_rewrite,
    rewrite_endpoints,
    streams_with_trailer,
)
from gateway.session.response_queue import ResponseQueue, ResponseSlot, WireBytes, with_correlation_id
from gateway.session.routes import RouteTable
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.framing import frame as framed
from protocol.header import decode_response_header, response_header_version
from protocol.registry import ApiSchema, api

_SIZE = struct.Struct(">i")
_RESPONSE_CORRELATION_AT = 4  # size(4): where a response frame's correlation id starts


class PipelineRefusal(Exception):
    """The request (or response) cannot be handled safely; the connection is closed."""

    def __init__(self, reason: str, refused_api: int | None = None) -> None:
        super().__init__(reason)
        # Set: the authorizer's Refuse of a request of this api key, which the session counts as outcome "refused"
        # (the decision never reaches the session's _apply, where the other outcomes are counted).
        self.refused_api = refused_api


class RefusedInTurn(PipelineRefusal):
    """Kafka's own refusal by closing (an acks=0 Produce with an error): the connection closes after the
    answers owed for the requests before this one, which Kafka, handling one request at a time, sends first."""


def match_response(responses: ResponseQueue, wire: memoryview) -> ResponseSlot | None:
    """The slot an upstream response (``wire``: size prefix included) fills, taken out of the awaited ones;
    None to drop it."""
    if len(wire) < 8:
        raise DecodeError("upstream response shorter than a correlation id")
    return responses.match_upstream(_SIZE.unpack_from(wire, _RESPONSE_CORRELATION_AT)[0])


class KnownCluster(Protocol):
    """The cluster view's id → name and name → partition count maps as they are now (replaced whole,
    never edited, so they may be read from the worker): what a response teaches is compared with them."""

    def topic_names(self) -> Mapping[uuid.UUID, str]: ...

    def partition_counts(self) -> Mapping[str, int]: ...


class _NothingKnown:
    __slots__ = ()

    def topic_names(self) -> Mapping[uuid.UUID, str]:
        return {}

    def partition_counts(self) -> Mapping[str, int]:
        return {}


NOTHING_KNOWN = _NothingKnown()


class Learned:
    """What responses taught (brokers, topic ids), recorded for the session to report as a Discovered
    action: the response stage may run in the worker thread and never changes shared state itself.
    Also the address book the rewriting reads (a node's address on this listener)."""

    __slots__ = ("book", "known", "nodes", "partition_counts", "topic_ids")

    def __init__(self, book: ListenerAddresses, known: KnownCluster = NOTHING_KNOWN) -> None:
        """``known``: what the cluster view knows already (the gateway's context), to report only what is new;
        one object shared by every connection (two bound methods kept per connection were 112 bytes)."""
        self.book = book
        self.known = known
        # Tuples, replaced when something is learned (rarely: a Metadata answer): every connection has a
        # Learned and most learn nothing for most of their life, and the empty tuple is shared.
        self.nodes: tuple[tuple[int, str, int], ...] = ()
        self.topic_ids: tuple[tuple[uuid.UUID, str], ...] = ()
        self.partition_counts: tuple[tuple[str, int], ...] = ()  # from Metadata: what controller_mutation_rate counts

    def learn(self, node_id: int, host: str, port: int) -> None:
        self.nodes += ((node_id, host, port),)

    def client_address(self, node_id: int) -> tuple[str, int]:
        return self.book.client_address(node_id)

    def learn_topics(self, topics: list[dict[str, Any]]) -> None:
        # The cluster view keeps only real ids with a name (a topic in error has the zero id). Only what it lacks
        # is reported: an all-topics answer is walked here (in the worker, when large), not again on the loop.
        known = self.known.topic_names()
        self.topic_ids += tuple((topic_id, name) for topic in topics
                                if (topic_id := topic.get("topic_id")) is not None and (name := topic.get("name"))
                                and known.get(topic_id) != name)

    def learn_partition_counts(self, topics: list[dict[str, Any]]) -> None:
        # Metadata lists every partition of a topic it answers without error (DescribeTopicPartitions pages them).
        counts = self.known.partition_counts()
        self.partition_counts += tuple((name, n) for topic in topics
                                       if not topic.get("error_code") and (name := topic.get("name"))
                                       and (n := len(topic.get("partitions") or ())) and counts.get(name) != n)

    def take(self) -> tuple[tuple[tuple[int, str, int], ...], tuple[tuple[uuid.UUID, str], ...],
                            tuple[tuple[str, int], ...]]:
        """What was learned (nodes, topic ids, partition counts); nothing is left afterwards."""
        learned = self.nodes, self.topic_ids, self.partition_counts
        self.nodes = self.topic_ids = self.partition_counts = ()
        return learned

    def take_from(self, other: Learned) -> None:
        """Add what ``other`` (a worker's record, passed on from the loop) learned."""
        nodes, topic_ids, partition_counts = other.take()
        self.nodes += nodes
        self.topic_ids += topic_ids
        self.partition_counts += partition_counts


@lru_cache(maxsize=1024)  # (api key, version) pairs of the schemas (~300 relayed): no eviction
def _layout(api_key: int, version: int) -> tuple[ApiSchema, int, bool]:
    """The response's schema, header version and whether it can name endpoints: the same for every response
    of an (api key, version), so worked out once rather than per response."""
    schema = api(api_key)
    assert schema is not None  # a slot is only opened for a request the schemas parsed
    return schema, response_header_version(api_key, schema.is_flexible(version)), needs_rewrite(api_key, version)


def endpoints_only_in_trailer(slot: ResponseSlot, routes: RouteTable) -> bool:
    """Whether the slot's response can name brokers only in its top-level tag section (Fetch v16+'s
    node_endpoints, KIP-951) and nothing else needs it whole (an authorization hook, topic ids to learn):
    a large one may stream with only that section held back (gateway/session/stream_stage.py), a held one is
    relayed untouched, on the loop, unless a scan of its tags finds endpoints."""
    route = routes.get(slot.api_key)
    return slot.hook is None and route is not None and route.rewrites_endpoints and not route.learns_topic_ids \
        and streams_with_trailer(slot.api_key, slot.api_version)


def names_no_endpoints(slot: ResponseSlot, wire: memoryview) -> bool:
    """Whether a response of endpoints_only_in_trailer names none (found by skipping it, not decoding it)."""
    _, header_version, _ = _layout(slot.api_key, slot.api_version)
    payload = wire[4:]
    _, header_size = decode_response_header(payload, header_version)
    return not body_names_endpoints(slot.api_key, slot.api_version, payload[header_size:])


def needs_decoding(slot: ResponseSlot, routes: RouteTable) -> bool:
    """Whether the response may need decoding (addresses to rewrite, topic ids to learn, an authorization hook)."""
    if slot.hook is not None:
        return True
    route = routes.get(slot.api_key)
    return route is None or not route.streams(slot.api_version)


def relayed_as_is(slot: ResponseSlot, wire: memoryview) -> list[WireBytes]:
    """The upstream's bytes untouched, under the client's correlation id."""
    return with_correlation_id(wire, _RESPONSE_CORRELATION_AT, slot.correlation_id)


def response_pieces(slot: ResponseSlot, wire: memoryview, routes: RouteTable, learned: Learned) -> list[WireBytes]:
    """The slot's response (``wire``: the upstream's frame, size prefix included): its bytes, or (when needed)
    decoded, rewritten and re-encoded.

    Touches nothing of the session or the process (what it learns goes to ``learned``), so the
    session may run it in the worker thread.
    """
    route = routes.get(slot.api_key)
    # needs_decoding(), inline: one route lookup and one call fewer per answer
    if slot.hook is None and route is not None and route.streams(slot.api_version):
        return with_correlation_id(wire, _RESPONSE_CORRELATION_AT, slot.correlation_id)  # relay untouched
    schema, header_version, may_name_endpoints = _layout(slot.api_key, slot.api_version)
    payload = wire[4:]
    _, header_size = decode_response_header(payload, header_version)
    raw_body = payload[header_size:]
    learns = route is not None and route.learns_topic_ids
    rewrite = may_name_endpoints and body_names_endpoints(slot.api_key, slot.api_version, raw_body)
    if slot.hook is None and not rewrite and not learns:
        # e.g. a Produce or Fetch response without node_endpoints: nothing to change (relayed_as_is, inline)
        return with_correlation_id(wire, _RESPONSE_CORRELATION_AT, slot.correlation_id)
    codec = schema.response_codec(slot.api_version)
    body = codec.decode(raw_body)
    if learns:
        learned.learn_topics(body.get("topics") or [])
        if slot.api_key == ApiKey.METADATA:
            learned.learn_partition_counts(body.get("topics") or [])
    changed = False
    if rewrite:
        try:
            changed = rewrite_endpoints(slot.api_key, slot.api_version, body, learned)
        except ConfigError as exc:
            raise PipelineRefusal(str(exc)) from None
    if slot.hook is not None:
        body = slot.hook(body)
        changed = True
    if not changed:
        return relayed_as_is(slot, wire)
    new_header = _SIZE.pack(slot.correlation_id) + bytes(payload[4:header_size])
    return [framed(new_header + codec.encode(body))]

