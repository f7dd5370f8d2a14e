"""StandardAuthorizer: Kafka 4.x's deny-wins ACL evaluation over an atomically swapped AclIndex.

Readers take one reference to the current snapshot per call and never lock; writers publish a new one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from auth.client_address import canonical_host
from auth.principal import KafkaPrincipal
from authz.index import WILDCARD_PRINCIPAL_KEY, AclIndex, Bucket, Grants
from authz.model import (
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_binding,
)

DEFAULT_CACHE_SIZE = 100_000
# Kafka's Authorizer.authorizeByResourceType first authorizes this made-up name, so that
# super users (and the no-ACL default) are answered exactly as for a real resource.
PROBE_RESOURCE_NAME = "hardcode"


class DecisionRule(Enum):
    """Why a decision was reached when it was not a particular ACL binding."""

    SUPER_USER = "SuperUser"
    NO_ACL_DEFAULT = "NoAclDefault"  # no ACL references the resource: allow.everyone.if.no.acl.found
    NOT_READY = "NotReady"  # ACLs not loaded yet: fail closed (Kafka: AuthorizerNotReadyException)
    NO_MATCHING_ACL = "NoMatchingAcl"  # ACLs reference the resource, none applies to this request
    # Not Kafka's: a resource only the gateway itself may use (its security-store topic).
    GATEWAY_RESERVED = "GatewayReserved"
    ILLEGAL_TOPIC_NAME = "IllegalTopicName"


@dataclass(slots=True, frozen=True)
class Decision:
    allowed: bool
    rule: AclBinding | DecisionRule

    def __str__(self) -> str:
        rule = self.rule.value if isinstance(self.rule, DecisionRule) else f"MatchingAcl(acl={self.rule})"
        return f"{'ALLOWED' if self.allowed else 'DENIED'} based on rule {rule}"


SUPER_USER = Decision(True, DecisionRule.SUPER_USER)
NOT_READY = Decision(False, DecisionRule.NOT_READY)
NO_MATCHING_ACL = Decision(False, DecisionRule.NO_MATCHING_ACL)
DEFAULT_ALLOW = Decision(True, DecisionRule.NO_ACL_DEFAULT)
DEFAULT_DENY = Decision(False, DecisionRule.NO_ACL_DEFAULT)
GATEWAY_RESERVED = Decision(False, DecisionRule.GATEWAY_RESERVED)
# An allowed action on a name Kafka's Topic.validate rejects: never relayed (see authz/topic_guard.py).
ILLEGAL_TOPIC_NAME = Decision(False, DecisionRule.ILLEGAL_TOPIC_NAME)

_DecisionKey = tuple[str, str, str, AclOperation, ResourceType, str]


class _Snapshot:
    """What one reader sees: an immutable index, the ready flag, and this snapshot's memo tables."""

    __slots__ = ("decisions", "index", "ready", "resolved")

    def __init__(self, index: AclIndex, ready: bool) -> None:
        self.index = index
        self.ready = ready
        self.decisions: dict[_DecisionKey, Decision] = {}
        self.resolved: dict[tuple[ResourceType, str], tuple[Bucket, ...]] = {}


class StandardAuthorizer:
    """Kafka's StandardAuthorizer semantics; thread-safe, lock-free for readers, one writer at a time.

    Precedence is Kafka's: super user > not ready (fail closed) > any matching DENY > any
    matching ALLOW > (no ACL references the resource at all ? allow.everyone.if.no.acl.found
    : DENIED).

    Caching: each published snapshot carries two bounded memo tables — resource → matching
    buckets, and (principal, host, operation, resource) → Decision.  They live *on the
    snapshot object*, so a swap starts from empty tables and a decision computed from an
    older snapshot can never be served after the swap (a late reader only fills the old,
    unreachable table).  Super users and readiness are checked before the cache.  A full
    table is cleared.
    """

    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False, *,
                 cache_size: int = DEFAULT_CACHE_SIZE, compact_threshold: int | None = None) -> None:
        users = frozenset(u.strip() for u in super_users if u.strip())
        for user in users:
            KafkaPrincipal.parse(user)  # ValueError for anything but Type:name, as Kafka
        self._super_users = users
        self._default = DEFAULT_ALLOW if allow_everyone_if_no_acl_found else DEFAULT_DENY
        self._cache_size = cache_size
        self._write_lock = threading.Lock()
        self._snapshot = _Snapshot(AclIndex(compact_threshold=compact_threshold), ready=False)

    # --- state ---------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """False until the first ``load``; until then only super users are allowed."""
        return self._snapshot.ready

    @property
    def index(self) -> AclIndex:
        """The current immutable snapshot."""
        return self._snapshot.index

    @property
    def acl_count(self) -> int:
        return len(self._snapshot.index)

    @property
    def super_users(self) -> frozenset[str]:
        return self._super_users

    def twin(self) -> StandardAuthorizer:
        """An empty, not-ready authorizer with exactly these semantics (class, super users, no-ACL default,
        cache size): what a candidate ACL set is evaluated with beside the live one (authz/shadow.py)."""
        twin = type(self)(self._super_users, self._default is DEFAULT_ALLOW, cache_size=self._cache_size,
                          compact_threshold=self._snapshot.index.compact_threshold)
        return twin

    @property
    def cache_size(self) -> int:
        """Entries per memo table of each snapshot; 0 computes every decision from the index."""
        return self._cache_size

    @cache_size.setter
    def cache_size(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"cache_size must be >= 0, got {size}")
        self._cache_size = size
        with self._write_lock:  # start from empty tables, so a disabled cache serves nothing old
            current = self._snapshot
            self._snapshot = _Snapshot(current.index, current.ready)

    def load(self, bindings: Iterable[AclBinding]) -> None:
        """Replace every ACL with ``bindings`` (validated first) and become ready."""
        bindings = list(bindings)
        for binding in bindings:
            validate_binding(binding)
        with self._write_lock:
            threshold = self._snapshot.index.compact_threshold
            self._snapshot = _Snapshot(AclIndex(bindings, compact_threshold=threshold), ready=True)

    def apply(self, added: Iterable[AclBinding] = (), removed: Iterable[AclBinding] = ()) -> None:
        """Remove ``removed`` then add ``added`` — published as one snapshot, so all or nothing.

        Every added binding is validated before anything changes.  Does not change ``ready``.
        """
        added = list(added)
        for binding in added:
            validate_binding(binding)
        with self._write_lock:
            current = self._snapshot
            index = current.index.with_changes(added, removed)
            if index is not current.index:
                self._snapshot = _Snapshot(index, current.ready)

    # --- decisions -------------------------------------------------------------------------

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, resource_name: str) -> Decision:
        """May ``principal`` connecting from ``host`` (a ClientAddress's canonical host) do ``operation`` on the
        named resource?  An ACL's host matches by address, not by spelling: ``::ffff:10.1.2.3`` and
        ``10.1.2.3`` are one host, as are ``2001:db8:0:0:0:0:0:42`` (Java's spelling) and ``2001:db8::42``."""
        snapshot = self._snapshot  # the one read of shared state: everything below uses it
        principal_type = principal.principal_type
        name = principal.name
        if self._super_users and f"{principal_type}:{name}" in self._super_users:
            return SUPER_USER
        if not snapshot.ready:
            return NOT_READY
        if not self._cache_size:
            return self._decide(snapshot, principal_type, name, host, operation, resource_type, resource_name)
        decisions = snapshot.decisions
        key = (principal_type, name, host, operation, resource_type, resource_name)
        decision = decisions.get(key)
        if decision is None:
            decision = self._decide(snapshot, principal_type, name, host, operation, resource_type, resource_name)
            if len(decisions) >= self._cache_size:
                decisions.clear()
            decisions[key] = decision
        return decision

    def _decide(self, snapshot: _Snapshot, principal_type: str, principal_name: str, host: str,
                operation: AclOperation, resource_type: ResourceType, resource_name: str) -> Decision:
        if operation <= AclOperation.ANY or resource_type <= ResourceType.ANY:
            raise ValueError(f"authorize needs a concrete operation and resource type, "
                             f"got {operation!r} on {resource_type!r}")
        resolved = snapshot.resolved
        resource = (resource_type, resource_name)
        buckets = resolved.get(resource)
        if buckets is None:
            buckets = snapshot.index.matching_buckets(resource_type, resource_name)
            if self._cache_size:
                if len(resolved) >= self._cache_size:
                    resolved.clear()
                resolved[resource] = buckets
        if not buckets:
            return self._default
        bit = 1 << operation
        principals = ((principal_type, principal_name), WILDCARD_PRINCIPAL_KEY)
        hosts = (host, WILDCARD_HOST)
        allow: Grants | None = None
        for bucket in buckets:
            table = bucket.compiled
            if table is None:
                table = bucket.compile()
            for key in principals:
                by_host = table.get(key)
                if by_host is None:
                    continue
                for h in hosts:
                    grants = by_host.get(h)
                    if grants is None:
                        continue
                    if grants.deny & bit:  # deny wins: stop at the first one
                        return Decision(False, grants.first(AclPermissionType.DENY, operation))
                    if allow is None and grants.allow & bit:
                        allow = grants
        if allow is not None:
            return Decision(True, allow.first(AclPermissionType.ALLOW, operation))
        return NO_MATCHING_ACL

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> Decision:
        """Kafka's ``authorizeByResourceType``: may the principal do ``operation`` on *some* resource?

        As Kafka's default Authorizer implementation (which StandardAuthorizer uses):
        first a normal decision on a made-up resource name (so super users, and the no-ACL
        default when nothing matches that name, answer as usual); then, over the ACLs of
        this principal or ``User:*`` from this host (or ``*``) whose operation is the
        requested one or ALL — no implication here: a LITERAL ``*`` DENY denies; a LITERAL
        ``*`` ALLOW allows; otherwise allowed iff some LITERAL ALLOW has neither an equal
        LITERAL DENY nor a PREFIXED DENY on one of its prefixes, or some PREFIXED ALLOW has
        no PREFIXED DENY on one of its prefixes (itself included).
        """
        if resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            raise ValueError(f"authorize_any needs a concrete resource type, got {resource_type!r}")
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"authorize_any needs a concrete operation, got {operation!r}")
        snapshot = self._snapshot
        principal_type, name = principal.principal_type, principal.name
        if f"{principal_type}:{name}" in self._super_users:
            return SUPER_USER
        if not snapshot.ready:
            return NOT_READY
        probe = self._decide(snapshot, principal_type, name, host, operation, resource_type, PROBE_RESOURCE_NAME)
        if probe.allowed:
            return probe
        principals = ((principal_type, name), WILDCARD_PRINCIPAL_KEY)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow_literal: dict[str, AclBinding] = {}
        allow_prefixed: dict[str, AclBinding] = {}
        wildcard_allow: AclBinding | None = None
        for binding in snapshot.index.bindings_of_principals(resource_type, principals):
            entry, pattern = binding.entry, binding.pattern
            if entry.host != WILDCARD_HOST and canonical_host(entry.host) != host:
                continue
            if entry.operation != operation and entry.operation != AclOperation.ALL:
                continue
            literal = pattern.pattern_type == PatternType.LITERAL
            if entry.permission_type == AclPermissionType.DENY:
                if literal and pattern.name == WILDCARD_RESOURCE:
                    return Decision(False, binding)
                (deny_literal if literal else deny_prefixed).add(pattern.name)
            elif entry.permission_type == AclPermissionType.ALLOW:
                if literal and pattern.name == WILDCARD_RESOURCE:
                    wildcard_allow = wildcard_allow or binding
                else:
                    (allow_literal if literal else allow_prefixed).setdefault(pattern.name, binding)
        if wildcard_allow is not None:
            return Decision(True, wildcard_allow)

        def dominated(resource: str) -> bool:
            return any(resource[:i] in deny_prefixed for i in range(1, len(resource) + 1))

        for resource, binding in allow_literal.items():
            if resource not in deny_literal and not dominated(resource):
                return Decision(True, binding)
        for resource, binding in allow_prefixed.items():
            if not dominated(resource):
                return Decision(True, binding)
        return NO_MATCHING_ACL

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings matching ``binding_filter`` (DescribeAcls), from one consistent snapshot."""
        return self._snapshot.index.acls(binding_filter)


__all__ = [
    "DEFAULT_ALLOW",
    "DEFAULT_DENY",
    "NOT_READY",
    "NO_MATCHING_ACL",
    "SUPER_USER",
    "Decision",
    "DecisionRule",
    "StandardAuthorizer",
]
