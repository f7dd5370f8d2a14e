"""The contract of per-API authorization: what a request needs, and what happens to it.

Each relayed API has one policy (see ``authz/policies/``).  A policy looks at the decoded
request, asks the AuthzView about Kafka actions, and returns a Verdict:

* ``Relay``   — everything authorized: relay the original bytes (the fast path), optionally
                post-process the response (e.g. Metadata filtering, *_authorized_operations);
* ``Rewrite`` — partly authorized: relay ``request`` (only the authorized part) and merge
                Kafka's per-item errors for the rest back into the response, in client order;
* ``Answer``  — nothing to relay: the gateway answers with ``response`` itself;
* ``Refuse``  — close the connection (e.g. a denied acks=0 Produce, as Kafka does).

Kafka answers an acks=0 Produce that has any error by closing the connection once it has handled the request
(it has no answer to put the error in): a Produce the gateway must refuse that way is a ``Refuse`` with
``in_turn``, or, when some of its topics may be written, a ``Rewrite`` with ``then_close`` (Kafka appends the
allowed part before it closes).  Kafka handles a connection's requests one at a time, so both close only after
the answers owed for the requests before it; a ``Refuse`` without ``in_turn`` is the gateway's own guard and
closes at once.

The merge rule of a ``Rewrite`` (one function, ``authz.policies.merge.merge_items``, used by every policy that
merges): the response lists exactly the items the client asked for, in the client's order (or in Kafka's where
Kafka's handler puts its refusals first or last; the policy lays the order out) — a relayed item with the
upstream's answer, a refused one with the gateway's error.  An upstream item that matches no asked-for relayed
item is dropped, fail closed: an upstream may answer more than was asked (Tansu reads an empty Metadata topic
list as "all topics"), and such an item could name a topic or group the principal may not see; drops are
counted in a debug log line, never with the items.  An asked-for relayed item the upstream did not answer is
left out, as a plain ``Relay`` would pass the upstream's silence on: the gateway invents no answer for the
upstream, and for Fetch/ShareFetch sessions and DescribeTopicPartitions pages an absent item is meaningful.
Two cases stay within the rule: (Incremental)AlterConfigs answer a missing resource with UNKNOWN_SERVER_ERROR,
as Kafka's own ConfigAdminManager.reassemble*Response does; and an incremental Fetch/ShareFetch response may
carry partitions of the session that this request does not name (the client asked for them earlier in the
session, and the gateway does not track sessions), so those are authorized again and sent on, or replaced by
their error entry, after the client's items.  A request that names an item twice is answered as Kafka answers
it: where Kafka reads the items into a map keyed by topic-partition (Produce, Fetch, DeleteRecords) each is
answered once (``merge.once_per_partition``); elsewhere as that API's handler does: each copy, each copy in one
entry per topic (the group offset APIs), or a refusal of the repeated name (measured: tests/conformance,
``*.dup_*`` and the cases with a duplicate item).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from auth.principal import KafkaPrincipal
from authz.model import AclOperation, ResourceType

CLUSTER_NAME = "kafka-cluster"

Body = dict[str, Any]
ResponseHook = Callable[[Body], Body]


@dataclass(slots=True, frozen=True)
class Action:
    """One Kafka action; the two flags are Kafka's Action.logIfAllowed / logIfDenied.

    An implicit check (a probe whose denial refuses nothing the client asked for: the cluster-wide shortcut
    before per-resource checks, auto-creation, filtering a listing) passes ``log_if_denied=False`` where Kafka
    does, so the audit log's denials stay the client's real refusals.  The flags are not part of the identity.
    """

    operation: AclOperation
    resource_type: ResourceType
    name: str
    log_if_allowed: bool = field(default=True, compare=False)
    log_if_denied: bool = field(default=True, compare=False)


@dataclass(slots=True, frozen=True)
class Relay:
    on_response: ResponseHook | None = None


@dataclass(slots=True, frozen=True)
class Rewrite:
    request: Body
    on_response: ResponseHook
    then_close: str | None = None  # set: relayed, then the connection is closed in turn, for this reason


@dataclass(slots=True, frozen=True)
class Answer:
    response: Body


@dataclass(slots=True, frozen=True)
class Refuse:
    reason: str
    in_turn: bool = False  # Kafka's close: after the answers owed for earlier requests, not at once


Verdict = Relay | Rewrite | Answer | Refuse


class AuthzView(Protocol):
    """What a policy may ask while deciding about one request of one connection.

    Every call is an authorization decision, audited by the implementation as the Action's flags say.
    """

    @property
    def principal(self) -> KafkaPrincipal:
        """Who is asking (delegation tokens compare it with a token's owner)."""
        ...

    def allowed(self, action: Action) -> bool: ...

    def allowed_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: may the principal do ``operation`` on some resource?

        Like Kafka's, a denial here is not audited (it only ever backs up another check)."""
        ...

    def authorized_operations(self, resource_type: ResourceType, name: str,
                              candidates: Iterable[AclOperation]) -> int:
        """The bit field Kafka puts in *_authorized_operations (bit n set = operation code n allowed)."""
        ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of a topic id, or None when no topic has that id (→ UNKNOWN_TOPIC_ID)."""
        ...


class ApiPolicy(Protocol):
    def __call__(self, request: Body, version: int, view: AuthzView) -> Verdict: ...


# (operation, resource type, name) → allowed: the authorizer's answer alone, for a question nobody records.
MayDo = Callable[[AclOperation, ResourceType, str], bool]


@dataclass(slots=True, frozen=True)
class WalkedPolicy:
    """A policy's shortcut for a request walked rather than decoded (protocol/entities/topic_prepass.py).

    ``relays(kept, topics, may)`` is True only when the policy, given the decoded request, would return a plain
    ``Relay()`` having asked exactly the questions ``relays`` asks, in that order, each answered yes: ``kept`` holds
    the walk's ``keep`` fields, ``topics`` the names of the topics the request names, in order.  Anything else is
    False and the request goes through the decode and the policy, whose view asks and audits afresh.  Used only
    when an allowed decision records nothing (no active shadow ACLs, ``ksgate.audit.log.allowed`` off), so that asking
    the authorizer directly is all the policy's view would have done.
    """

    keep: tuple[str, ...]
    relays: Callable[[Body, list[str], MayDo], bool]
