"""One ApiRoute per API: everything ksgate does with a request of that API, in one place.

A reader looking for "what happens to API X" reads its row of the table ``build_routes``
makes: the versions ksgate can parse and the cap it offers clients, how the request is
dispatched (relayed, answered by an admin handler here, ApiVersions, SASL), the authorization
policy, a refusal no policy may override (a follower Fetch), the guards' exemptions (how Kafka
treats the topic names and ids it names), whether its responses name broker
endpoints (rewritten) or topic ids (learned), whether a request may expect no answer (Produce
acks=0), whether its body is walked rather than decoded (Produce: without an authorizer, and with
one when the policy's shortcut allows everything), and
whether its requests carry records (relayed as bytes, so never worth the worker).

The table is built once, when the gateway is wired (gateway/server.py), from the schemas
(protocol/schemas), the policies (authz/policies) and the admin handlers this gateway serves
(gateway/admin/handlers.py). The session and the stages dispatch through it and nothing else.
Adding a Kafka API: its schema, its policy, and (when it is not simply relayed) a line here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Any

from authz.policies.data import is_follower_fetch
from authz.policies.produce import WALKED_PRODUCE, authorize_produce
from authz.request_policy import ApiPolicy, WalkedPolicy
from authz.topic_guard import TopicRules
from gateway.admin.handlers import LOCAL_HANDLERS, LocalHandler
from gateway.session.address_rewrite import ENDPOINT_APIS, needs_rewrite
from protocol.api_keys import INTERNAL_APIS, ApiKey
from protocol.entities.ids import Entity
from protocol.registry import all_apis
from protocol.schema import FieldSpec

Body = dict[str, Any]
VersionRanges = Mapping[int, tuple[int, int]]  # api key → (lowest, highest) version offered to clients


class Dispatch(Enum):
    """Where a request of the API goes once read."""

    RELAY = "relay"  # authorized, then relayed upstream (rewritten when partly denied)
    LOCAL = "local"  # authorized, then answered by an admin handler here: never relayed
    API_VERSIONS = "api_versions"  # answered from the negotiated table, before any policy
    SASL = "sasl"  # fed to the connection's SASL state machine: never relayed, never a stage's


def _acks_zero(body: Body) -> bool:
    return bool(body["acks"] == 0)


def _follower_fetch(body: Body, version: int) -> str | None:
    if is_follower_fetch(body, version):
        return "a follower (replica) Fetch: brokers never replicate through the gateway"
    return None


_DISPATCH: dict[int, Dispatch] = {
    ApiKey.API_VERSIONS: Dispatch.API_VERSIONS,
    ApiKey.SASL_HANDSHAKE: Dispatch.SASL, ApiKey.SASL_AUTHENTICATE: Dispatch.SASL,
    **{key: Dispatch.LOCAL for key in LOCAL_HANDLERS},
}
# The highest version offered to clients, where below the schema's. None today: Fetch v16+ responses, whose
# node_endpoints (KIP-951) name brokers, stream with only their trailer held back (gateway/session/stream_stage.py).
_CAPS: dict[int, int] = {}
# Versions Kafka 4 removed (KIP-896) from APIs the gateway answers itself: offered from here, as the broker does.
_FLOORS: dict[int, int] = {key: 1 for key in (
    ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.CREATE_DELEGATION_TOKEN,
    ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN)}
# Produce v0-2 stay in Kafka 4's ApiVersions answer (librdkafka stops compressing without them, KAFKA-18659)
# but the broker closes the connection of a client that uses one: so does the gateway, before authorizing.
_REFUSED_BELOW: dict[int, int] = {ApiKey.PRODUCE: 3}
# Refusals no policy may override, checked before any (with or without an authorizer).
_REFUSALS: dict[int, Callable[[Body, int], str | None]] = {ApiKey.FETCH: _follower_fetch}
# How Kafka's handler treats topic names, for the topic guard (authz/topic_guard.py, TopicRules): where it
# validates them itself, and where its answer names exactly the topics asked (never a listing to scrub).
_VALIDATES_TOPIC_NAMES = frozenset({ApiKey.CREATE_TOPICS, ApiKey.METADATA, ApiKey.DESCRIBE_CONFIGS,
                                    ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS})
_ANSWERS_ONLY_WHAT_WAS_ASKED = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE})
# Ids a request names that Kafka's handler does not authorize as such, for the id guard (authz/id_guard.py):
# a Produce's transactional id is checked by its policy only when its batches are transactional.
_IDS_NOT_CHECKED: dict[int, frozenset[Entity]] = {ApiKey.PRODUCE: frozenset({"transactionalId"})}
# Responses that reveal topic ids, and so feed the id → name cache authorization uses.
_TOPIC_ID_SOURCES = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_TOPIC_PARTITIONS})
# Requests whose client may expect no response at all, and how to tell.
_FIRE_AND_FORGET: dict[int, Callable[[Body], bool]] = {ApiKey.PRODUCE: _acks_zero}
# Without an authorizer, requests walked rather than decoded (protocol/entities/topic_prepass.py: the topic names
# for Kafka's name rules, and these top-level fields, all that fire_and_forget reads); no refusal may read them.
_WALKED: dict[int, tuple[str, ...]] = {ApiKey.PRODUCE: ("acks",)}
# With an authorizer, the policies with a shortcut over a walked body (authz/request_policy.py WalkedPolicy): each
# is used only on the route whose policy it was written for.
_WALKED_POLICIES: dict[int, tuple[ApiPolicy, WalkedPolicy]] = {ApiKey.PRODUCE: (authorize_produce, WALKED_PRODUCE)}


@dataclass(slots=True, frozen=True)
class ApiRoute:
    api_key: int
    name: str
    versions: range  # what ksgate's schema parses, from the floor it offers (why: _FLOORS)
    cap: int | None  # the highest version offered to clients when below the schema's (why: _CAPS)
    refused_below: int  # offered, but a request below this closes the connection (why: _REFUSED_BELOW)
    dispatch: Dispatch
    policy: ApiPolicy | None  # None: refused whenever authorization is on
    local: LocalHandler | None  # LOCAL: the admin handler, when this gateway serves it (None: refused)
    refusal: Callable[[Body, int], str | None] | None  # a reason to close the connection, before any policy
    topic_rules: TopicRules  # how Kafka treats its topic names (the topic guard's exemptions)
    ids_not_checked: frozenset[Entity]  # ids Kafka does not authorize as such (the id guard's exemptions)
    rewrites_endpoints: bool  # its responses can name brokers (gateway/session/address_rewrite.py)
    learns_topic_ids: bool  # its responses feed the topic id → name cache
    fire_and_forget: Callable[[Body], bool] | None  # the request expects no response (Produce acks=0)
    walked: tuple[str, ...] | None  # no authorizer: the body is walked keeping these fields, not decoded (_WALKED)
    walked_policy: WalkedPolicy | None  # an authorizer: its policy's shortcut over a walked body (_WALKED_POLICIES)
    records_as_bytes: bool  # the request schema has a records field: relayed as bytes, never decoded

    @property
    def never_relayed(self) -> bool:
        return self.dispatch is not Dispatch.RELAY

    @property
    def stays_on_loop(self) -> bool:
        """Never decided in the worker thread, however large: records cost the loop no more when large
        (they stay bytes), and what is never relayed is answered small or is authentication."""
        return self.records_as_bytes or self.never_relayed

    def streams(self, version: int) -> bool:
        """Whether a response of this version can be relayed as bytes (nothing in it to rewrite or learn),
        so a large one may be written to the client as it arrives. An authorization hook on the
        request still stops it (the session checks the slot)."""
        return not self.learns_topic_ids and not (self.rewrites_endpoints and needs_rewrite(self.api_key, version))

    def offered(self, upstream: tuple[int, int]) -> range:
        """The versions clients may use: the overlap of the upstream's, the schema's and the cap."""
        high = min(upstream[1], self.versions.stop - 1, self.cap if self.cap is not None else upstream[1])
        return range(max(upstream[0], self.versions.start), high + 1)


RouteTable = Mapping[int, ApiRoute]


def route_of(routes: RouteTable, wire: memoryview) -> ApiRoute | None:
    """The route of a request frame (``wire``: size prefix + payload), looked up once for every stage; None: the
    frame is too short for a header, or no route has its key (read unsigned: a negative int16 has none either)."""
    return routes.get(wire[4] << 8 | wire[5]) if len(wire) >= 8 else None


def build_routes(policies: Mapping[int, ApiPolicy], local: Mapping[int, LocalHandler]) -> RouteTable:
    """Every client-facing API, by key, built once when the gateway is wired. ``local``: the admin
    handlers this gateway serves (none without an authorizer). Inter-broker and controller APIs
    have no route: they are refused."""
    table: dict[int, ApiRoute] = {}
    for key, schema in all_apis().items():
        if key in INTERNAL_APIS:
            continue
        table[key] = ApiRoute(
            api_key=key, name=schema.name,
            versions=range(max(schema.min_version, _FLOORS.get(key, 0)), schema.max_version + 1),
            cap=_CAPS.get(key), refused_below=_REFUSED_BELOW.get(key, 0),
            dispatch=_DISPATCH.get(key, Dispatch.RELAY), policy=policies.get(key), local=local.get(key),
            refusal=_REFUSALS.get(key),
            topic_rules=TopicRules(key in _VALIDATES_TOPIC_NAMES, key in _ANSWERS_ONLY_WHAT_WAS_ASKED),
            ids_not_checked=_IDS_NOT_CHECKED.get(key, frozenset()), rewrites_endpoints=key in ENDPOINT_APIS,
            learns_topic_ids=key in _TOPIC_ID_SOURCES, fire_and_forget=_FIRE_AND_FORGET.get(key),
            walked=_WALKED.get(key) if key not in _REFUSALS else None,
            walked_policy=_walked_policy(key, policies.get(key)),
            records_as_bytes=_has_records(schema.request.fields))
    return MappingProxyType(table)


def _walked_policy(key: int, policy: ApiPolicy | None) -> WalkedPolicy | None:
    """The shortcut of the route's own policy, if it has one (never one written for another policy)."""
    pair = _WALKED_POLICIES.get(key)
    if pair is None or pair[0] is not policy or key in _REFUSALS:
        return None
    return pair[1]


def _has_records(fields: list[FieldSpec]) -> bool:
    """Whether a message (at some version) carries a records field, at any depth."""
    return any(spec.type == "records" or _has_records(spec.fields) for spec in fields)
