"""Shadow ACLs: a candidate ACL set evaluated beside the live one on every decision, enforcing nothing.

A divergence — live ALLOWED and shadow DENIED (``would_deny``) or the reverse (``would_allow``) —
is folded per request (count and bounded sample), rate-limited per (principal, operation,
resource, direction) and counted; the gateway writes the folds as ``"event":"shadow"`` audit events.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from auth.principal import KafkaPrincipal
from authz.authorizer import (
    GATEWAY_RESERVED,
    ILLEGAL_TOPIC_NAME,
    NOT_READY,
    SUPER_USER,
    Decision,
    DecisionRule,
    StandardAuthorizer,
)
from authz.kind_fold import OTHER_RULES, KindAggregate, fold
from authz.model import AclBinding
from authz.request_policy import Action

WOULD_DENY = "would_deny"  # live ALLOWED, shadow DENIED: enforcing the shadow set would break this
WOULD_ALLOW = "would_allow"  # live DENIED, shadow ALLOWED: the shadow set would open this
DIRECTIONS = (WOULD_DENY, WOULD_ALLOW)

# Decisions the gateway takes whatever the ACLs say (its reserved topics, illegal names), the live
# authorizer's before its first load (comparing them with a candidate set would only be noise), and a super
# user's (the twin has the same super users: the same answer).  The authorizer returns these very objects.
_NOT_COMPARED = frozenset(map(id, (GATEWAY_RESERVED, ILLEGAL_TOPIC_NAME, NOT_READY, SUPER_USER)))

DEFAULT_REPORT_INTERVAL_S = 60.0
# Keys whose last report the limiter remembers; a full table forgets the expired ones, then all.
MAX_TRACKED_KEYS = 100_000


@dataclass(slots=True, frozen=True)
class ByResourceType(Action):
    """Kafka's authorizeByResourceType (``AuthzView.allowed_any``): the shadow set answers it the same way."""

    name: str = "*"
    log_if_denied: bool = field(default=False, compare=False)


def rule_text(decision: Decision) -> str:
    """The ``rule`` of an audit event: a DecisionRule's name or the deciding binding."""
    rule = decision.rule
    if isinstance(rule, DecisionRule):
        return rule.value
    return f"AclBinding({rule})"


def _pattern_type(decision: Decision) -> str | None:
    return decision.rule.pattern.pattern_type.name if isinstance(decision.rule, AclBinding) else None


# principal, operation, resource type, resource name, direction
ReportKey = tuple[str, int, int, str, str]
# direction, operation, resource type, shadow rule's pattern type, shadow rule, implicit (the live side is
# implied by the direction; its rules, often one per resource, would keep a request's divergences apart)
DivergenceKind = tuple[str, str, str, str | None, str, bool]


@dataclass(slots=True)
class DivergenceAggregate(KindAggregate[DivergenceKind]):

    @property
    def direction(self) -> str:
        return self.kind[0]


@dataclass(slots=True)
class DivergenceFold:
    """One request's reported divergences, one aggregate per kind (bounded like DecisionBatch)."""

    kinds: dict[DivergenceKind, DivergenceAggregate] = field(default_factory=dict)

    def add(self, kind: DivergenceKind, resource_name: str) -> None:
        fold(self.kinds, kind, resource_name, _coarser, DivergenceAggregate)


def _coarser(kind: DivergenceKind) -> DivergenceKind:
    """Beyond MAX_KINDS, divergences fold by direction, operation and type."""
    return (kind[0], kind[1], kind[2], None, OTHER_RULES, kind[5])


@dataclass(slots=True)
class ReportLimiter:
    """At most one report per (principal, operation, resource, direction) per ``interval_s``."""

    interval_s: float = DEFAULT_REPORT_INTERVAL_S
    clock: Callable[[], float] = time.monotonic
    max_keys: int = MAX_TRACKED_KEYS
    _last: dict[ReportKey, float] = field(default_factory=dict)

    def admit(self, key: ReportKey) -> bool:
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval_s:
            return False
        if last is None and len(self._last) >= self.max_keys:
            self._forget_expired(now)
        self._last[key] = now
        return True

    def _forget_expired(self, now: float) -> None:
        live = {k: t for k, t in list(self._last.items()) if now - t < self.interval_s}
        self._last = live if len(live) < self.max_keys else {}


class ShadowAcls:
    """The shadow ACL set, evaluated by a twin of the live authorizer (same semantics, other bindings).

    Fits ``gateway.stores.file_acls.attach`` (``load`` / ``apply``).  Inactive while the set is
    empty (one call and one test per decision; a file-store gateway without ksgate.acl.shadow.file has
    no ShadowAcls at all).  The twin caches its decisions per snapshot, as the live authorizer does, so a
    repeated decision costs a lookup.  ``observe`` may run on worker threads: the counters take a lock,
    the limiter's races at worst let one extra report through.
    """

    def __init__(self, live: StandardAuthorizer, limiter: ReportLimiter | None = None) -> None:
        self.authorizer = live.twin()
        self.limiter = limiter or ReportLimiter()
        self.active = False
        self._counts_lock = threading.Lock()
        # (direction, implicit) → divergences seen / reported in an event
        self.divergences: dict[tuple[str, bool], int] = {(d, i): 0 for d in DIRECTIONS for i in (False, True)}
        self.suppressed = 0
        # Picks up changes of a polled store (the shadow file); the security topic pushes them instead.
        self.refresh: Callable[[], object] = lambda: None

    def load(self, bindings: Iterable[AclBinding]) -> None:
        self.authorizer.load(bindings)
        self.active = self.authorizer.acl_count > 0

    def apply(self, added: Iterable[AclBinding], removed: Iterable[AclBinding]) -> None:
        self.authorizer.apply(added, removed)
        self.active = self.authorizer.ready and self.authorizer.acl_count > 0

    def verdict(self, principal: KafkaPrincipal, host: str, action: Action) -> Decision:
        """The shadow set's decision on ``action`` (authorizeByResourceType for a ByResourceType); ``observe``
        inlines the same two calls on the hot path."""
        if isinstance(action, ByResourceType):
            return self.authorizer.authorize_any(principal, host, action.operation, action.resource_type)
        return self.authorizer.authorize(principal, host, action.operation, action.resource_type, action.name)

    def observe(self, fold: DivergenceFold | None, principal: KafkaPrincipal, host: str, action: Action,
                live: Decision) -> DivergenceFold | None:
        """Evaluate ``action`` against the shadow set; a divergence goes into ``fold`` (created on the first)
        unless the limiter holds it back.  Returns the fold to keep for the request."""
        if not self.active or id(live) in _NOT_COMPARED:
            return fold
        if action.__class__ is ByResourceType:
            shadow = self.authorizer.authorize_any(principal, host, action.operation, action.resource_type)
        else:  # the hot path: one cached lookup on the shadow snapshot, as the live decision was
            shadow = self.authorizer.authorize(principal, host, action.operation, action.resource_type, action.name)
        if shadow.allowed is live.allowed:
            return fold
        direction = WOULD_DENY if live.allowed else WOULD_ALLOW
        implicit = not action.log_if_denied
        admitted = self.limiter.admit((str(principal), int(action.operation), int(action.resource_type),
                                       action.name, direction))
        with self._counts_lock:
            self.divergences[(direction, implicit)] += 1
            if not admitted:
                self.suppressed += 1
        if not admitted:
            return fold
        if fold is None:
            fold = DivergenceFold()
        fold.add((direction, action.operation.name, action.resource_type.name, _pattern_type(shadow),
                  rule_text(shadow), implicit), action.name)
        return fold

    def counts(self) -> dict[tuple[str, bool], int]:
        with self._counts_lock:
            return dict(self.divergences)


def divergence_counts(shadow: ShadowAcls | None) -> list[tuple[tuple[str, str], float]]:
    """``ksgate_shadow_divergences_total``'s samples: (direction, implicit) → count."""
    counts = shadow.counts() if shadow is not None else {(d, i): 0 for d in DIRECTIONS for i in (False, True)}
    return [((direction, "true" if implicit else "false"), float(n)) for (direction, implicit), n in counts.items()]


__all__ = [
    "DIRECTIONS",
    "WOULD_ALLOW",
    "WOULD_DENY",
    "ByResourceType",
    "DivergenceAggregate",
    "DivergenceFold",
    "ReportLimiter",
    "ShadowAcls",
    "divergence_counts",
    "rule_text",
]
