"""One route per API: everything ksgate does with a request of that API, in one place.

A reader looking for "what happens to API X" reads ``ROUTES[X]``: the versions ksgate can
parse and the cap it offers clients, the authorization policy, whether the session answers
it itself (ApiVersions, SASL) or an admin handler does (never relayed), whether its
responses name broker endpoints (rewritten) or topic ids (learned), whether a request may
expect no answer (Produce acks=0), and whether its traffic stays on the event loop.

The route is derived from the schema (protocol/schemas), the policy table
(authz/policies) and the admin handlers (gateway/admin/handlers.py); ``test_routes``
checks that every client-facing API has one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from authz.policies import all_policies
from authz.request_policy import ApiPolicy
from gateway.admin.handlers import LOCAL_HANDLERS, LocalHandler
from gateway.session.address_rewrite import ENDPOINT_APIS, needs_rewrite
from protocol.api_keys import INTERNAL_APIS, ApiKey
from protocol.registry import all_apis

Body = dict[str, Any]


def _acks_zero(body: Body) -> bool:
    return bool(body["acks"] == 0)


# Answered by the session before any policy runs, whatever the upstream supports.
_SESSION_ANSWERED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# Fetch v16+ responses may end with node_endpoints (broker addresses, KIP-951): a gateway
# must then hold and decode every Fetch response to rewrite them. v15 differs only in lacking
# them, so offering at most v15 lets Fetch responses stream through untouched, and no broker
# address can ride along in them. Clients fall back to a Metadata refresh on NOT_LEADER.
_CAPS: dict[int, int] = {ApiKey.FETCH: 15}
# Versions Kafka 4 removed (KIP-896) from APIs the gateway answers itself: offered from here, as the broker does.
_FLOORS: dict[int, int] = {key: 1 for key in (
    ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.CREATE_DELEGATION_TOKEN,
    ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN, ApiKey.DESCRIBE_DELEGATION_TOKEN)}
# Produce v0-2 stay in Kafka 4's ApiVersions answer (librdkafka stops compressing without them, KAFKA-18659)
# but the broker closes the connection of a client that uses one: so does the gateway, before authorizing.
_REFUSED_BELOW: dict[int, int] = {ApiKey.PRODUCE: 3}
# Responses that reveal topic ids, and so feed the id → name cache authorization uses.
_TOPIC_ID_SOURCES = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_TOPIC_PARTITIONS})
# Requests whose client may expect no response at all, and how to tell.
_FIRE_AND_FORGET: dict[int, Callable[[Body], bool]] = {ApiKey.PRODUCE: _acks_zero}
# Records are relayed as bytes, never decoded, so a large request of these costs the loop no
# more than a small one: never sent to the worker thread.
_RECORDS_AS_BYTES = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})


@dataclass(slots=True, frozen=True)
class Route:
    api_key: int
    name: str
    versions: range  # what ksgate's schema parses, from the floor it offers (why: _FLOORS)
    cap: int | None  # the highest version offered to clients when below the schema's (why: _CAPS)
    refused_below: int  # offered, but a request below this closes the connection (why: _REFUSED_BELOW)
    policy: ApiPolicy | None  # None: refused whenever authorization is on
    session_answered: bool  # ApiVersions and SASL: the session answers them itself
    local: LocalHandler | None  # an admin API ksgate answers itself; never relayed, whatever the policy says
    rewrites_endpoints: bool  # its responses can name brokers (gateway/session/address_rewrite.py)
    learns_topic_ids: bool  # its responses feed the topic id → name cache
    fire_and_forget: Callable[[Body], bool] | None  # the request expects no response (Produce acks=0)
    stays_on_loop: bool  # never decoded in the worker thread, however large

    @property
    def never_relayed(self) -> bool:
        return self.session_answered or self.local is not None

    def streams(self, version: int) -> bool:
        """Whether a response of this version can be relayed as bytes (nothing in it to rewrite or learn),
        so a large one may be written to the client as it arrives. An authorization hook on the
        request still stops it (the session checks the slot)."""
        return not self.learns_topic_ids and not (self.rewrites_endpoints and needs_rewrite(self.api_key, version))

    def offered(self, upstream: tuple[int, int]) -> range:
        """The versions clients may use: the overlap of the upstream's, the schema's and the cap."""
        high = min(upstream[1], self.versions.stop - 1, self.cap if self.cap is not None else upstream[1])
        return range(max(upstream[0], self.versions.start), high + 1)


@cache
def routes() -> Mapping[int, Route]:
    """Every client-facing API, by key. Inter-broker and controller APIs have none: they are refused."""
    policies = all_policies()
    table: dict[int, Route] = {}
    for key, schema in all_apis().items():
        if key in INTERNAL_APIS:
            continue
        table[key] = Route(
            api_key=key, name=schema.name,
            versions=range(max(schema.min_version, _FLOORS.get(key, 0)), schema.max_version + 1),
            cap=_CAPS.get(key), refused_below=_REFUSED_BELOW.get(key, 0), policy=policies.get(key),
            session_answered=key in _SESSION_ANSWERED,
            local=LOCAL_HANDLERS.get(key), rewrites_endpoints=key in ENDPOINT_APIS,
            learns_topic_ids=key in _TOPIC_ID_SOURCES, fire_and_forget=_FIRE_AND_FORGET.get(key),
            stays_on_loop=key in _RECORDS_AS_BYTES or key in _SESSION_ANSWERED or key in LOCAL_HANDLERS)
    return table


def route(api_key: int) -> Route | None:
    return routes().get(api_key)
