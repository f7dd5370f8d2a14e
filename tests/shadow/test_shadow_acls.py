"""The shadow ACL set (authz/shadow.py): the live authorizer's semantics over other bindings, divergences
folded per request and rate-limited per (principal, operation, resource, direction)."""

from __future__ import annotations

from authz.authorizer import GATEWAY_RESERVED, ILLEGAL_TOPIC_NAME, NOT_READY, SUPER_USER, StandardAuthorizer
from authz.kind_fold import MAX_KINDS, OTHER_RULES, SAMPLE_SIZE, KindAggregate, fold
from authz.model import AclOperation, ResourceType
from authz.request_policy import Action
from authz.shadow import (
    WOULD_ALLOW,
    WOULD_DENY,
    ByResourceType,
    ReportLimiter,
    ShadowAcls,
)
from tests.authz.helpers import ALICE, DENY, HOST, PREFIXED, acl

Op = AclOperation


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _live(*bindings: object, everyone: bool = False, super_users: tuple[str, ...] = ()) -> StandardAuthorizer:
    live = StandardAuthorizer(super_users, everyone)
    live.load(bindings)  # type: ignore[arg-type]
    return live


def _observe(shadow: ShadowAcls, live: StandardAuthorizer, action: Action, fold: object = None) -> object:
    decision = live.authorize(ALICE, HOST, action.operation, action.resource_type, action.name)
    return shadow.observe(fold, ALICE, HOST, action, decision)  # type: ignore[arg-type]


def test_the_shadow_twin_has_the_live_authorizers_super_users_and_no_acl_default() -> None:
    live = _live(everyone=True, super_users=("User:root",))
    twin = live.twin()
    assert type(twin) is StandardAuthorizer and twin.super_users == frozenset({"User:root"})
    twin.load([acl("orders", Op.READ)])
    # No ACL names "payments": allow.everyone.if.no.acl.found answers, as on the live side.
    assert twin.authorize(ALICE, HOST, Op.READ, ResourceType.TOPIC, "payments").allowed
    assert not live.twin().ready  # a twin starts empty and not ready, whatever the live one holds


def test_a_shadow_set_that_misses_a_live_grant_reports_would_deny_with_its_deciding_rule() -> None:
    live = _live(acl("orders", Op.WRITE), acl("audit", Op.WRITE))
    shadow = ShadowAcls(live)
    shadow.load([acl("orders", Op.WRITE)])
    fold = _observe(shadow, live, Action(Op.WRITE, ResourceType.TOPIC, "orders"))
    assert fold is None  # both allow: nothing to say
    fold = _observe(shadow, live, Action(Op.WRITE, ResourceType.TOPIC, "audit"))
    [aggregate] = fold.kinds.values()  # type: ignore[attr-defined]
    direction, operation, resource_type, _, shadow_rule, implicit = aggregate.kind
    assert (direction, operation, resource_type, implicit) == (WOULD_DENY, "WRITE", "TOPIC", False)
    assert shadow_rule == "NoAclDefault"
    assert aggregate.sample == ["audit"] and aggregate.count == 1
    assert shadow.counts()[(WOULD_DENY, False)] == 1


def test_a_shadow_deny_rule_is_named_and_the_reverse_direction_is_would_allow() -> None:
    live = _live(acl("orders", Op.READ), acl("o", Op.READ, DENY, pattern=PREFIXED))
    shadow = ShadowAcls(live)
    shadow.load([acl("orders", Op.READ), acl("audit", Op.READ, DENY)])
    fold = _observe(shadow, live, Action(Op.READ, ResourceType.TOPIC, "orders"))
    [aggregate] = fold.kinds.values()  # type: ignore[attr-defined]
    assert aggregate.direction == WOULD_ALLOW  # live denies through the prefixed DENY, the shadow allows
    assert "orders" in aggregate.kind[4] and "ALLOW" in aggregate.kind[4]


def test_implicit_checks_are_evaluated_and_marked_implicit() -> None:
    live = _live(acl("orders", Op.DESCRIBE), acl("audit", Op.DESCRIBE))
    shadow = ShadowAcls(live)
    shadow.load([acl("orders", Op.DESCRIBE)])
    fold = _observe(shadow, live, Action(Op.DESCRIBE, ResourceType.TOPIC, "audit", log_if_denied=False))
    [aggregate] = fold.kinds.values()  # type: ignore[attr-defined]
    assert aggregate.kind[5] is True
    assert shadow.counts()[(WOULD_DENY, True)] == 1 and shadow.counts()[(WOULD_DENY, False)] == 0


def test_by_resource_type_checks_use_authorize_by_resource_type_on_the_shadow_set() -> None:
    live = _live(acl("orders", Op.WRITE))
    shadow = ShadowAcls(live)
    shadow.load([acl("audit", Op.READ)])  # no WRITE anywhere: authorizeByResourceType denies
    action = ByResourceType(Op.WRITE, ResourceType.TOPIC)
    decision = live.authorize_any(ALICE, HOST, Op.WRITE, ResourceType.TOPIC)
    assert decision.allowed
    fold = shadow.observe(None, ALICE, HOST, action, decision)
    assert fold is not None and next(iter(fold.kinds.values())).direction == WOULD_DENY
    # A literal resource named "*" through authorize would answer otherwise: the kind of check matters.
    assert shadow.verdict(ALICE, HOST, action) == shadow.authorizer.authorize_any(ALICE, HOST, Op.WRITE,
                                                                                  ResourceType.TOPIC)


def test_no_shadow_set_or_an_empty_one_evaluates_nothing() -> None:
    live = _live(acl("orders", Op.WRITE))
    shadow = ShadowAcls(live)
    assert _observe(shadow, live, Action(Op.WRITE, ResourceType.TOPIC, "orders")) is None
    shadow.load([acl("x", Op.READ)])
    shadow.apply([], [acl("x", Op.READ)])
    assert not shadow.active
    assert _observe(shadow, live, Action(Op.WRITE, ResourceType.TOPIC, "orders")) is None


def test_the_gateways_own_refusals_are_not_divergences() -> None:
    live = _live()
    shadow = ShadowAcls(live)
    shadow.load([acl("_ksgate_security", Op.ALL)])
    action = Action(Op.READ, ResourceType.TOPIC, "_ksgate_security")
    assert shadow.observe(None, ALICE, HOST, action, GATEWAY_RESERVED) is None
    assert shadow.observe(None, ALICE, HOST, action, NOT_READY) is None
    assert shadow.observe(None, ALICE, HOST, action, ILLEGAL_TOPIC_NAME) is None
    shadow.load([acl("_ksgate_security", Op.ALL, DENY)])
    assert shadow.observe(None, ALICE, HOST, action, SUPER_USER) is None  # the twin has the same super users
    assert sum(shadow.counts().values()) == 0


def test_divergences_are_rate_limited_per_principal_operation_resource_and_direction() -> None:
    clock = Clock()
    live = _live(acl("a", Op.WRITE), acl("b", Op.WRITE))
    shadow = ShadowAcls(live, ReportLimiter(60.0, clock))
    shadow.load([acl("other", Op.WRITE)])
    write_a = Action(Op.WRITE, ResourceType.TOPIC, "a")
    assert _observe(shadow, live, write_a) is not None
    assert _observe(shadow, live, write_a) is None  # the same key within the interval: counted only
    assert _observe(shadow, live, Action(Op.WRITE, ResourceType.TOPIC, "b")) is not None  # another resource
    clock.now = 61.0
    assert _observe(shadow, live, write_a) is not None
    assert shadow.counts()[(WOULD_DENY, False)] == 4 and shadow.suppressed == 1


def test_the_limiter_stays_bounded() -> None:
    clock = Clock()
    limiter = ReportLimiter(60.0, clock, max_keys=3)
    for i in range(10):
        assert limiter.admit(("User:a", 2, 2, f"t{i}", WOULD_DENY))
    assert len(limiter._last) <= 3


def test_a_request_folds_its_divergences_by_kind_with_a_bounded_sample() -> None:
    names = [f"t{i}" for i in range(SAMPLE_SIZE + 5)]
    live = _live(*(acl(n, Op.DESCRIBE) for n in names))
    shadow = ShadowAcls(live)
    shadow.load([acl("other", Op.DESCRIBE)])
    fold = None
    for name in names:
        fold = _observe(shadow, live, Action(Op.DESCRIBE, ResourceType.TOPIC, name), fold)  # type: ignore[assignment]
    [aggregate] = fold.kinds.values()  # type: ignore[attr-defined]
    assert aggregate.count == len(names) and aggregate.sample == names[:SAMPLE_SIZE]


def test_a_request_keeps_at_most_max_kinds_kinds() -> None:
    names = [f"t{i}" for i in range(MAX_KINDS + 10)]
    live = _live()
    shadow = ShadowAcls(live)
    shadow.load([acl(n, Op.READ) for n in names])  # each allow is its own rule: its own kind
    fold = None
    for name in names:
        decision = live.authorize(ALICE, HOST, Op.READ, ResourceType.TOPIC, name)
        fold = shadow.observe(fold, ALICE, HOST, Action(Op.READ, ResourceType.TOPIC, name), decision)
    assert fold is not None and len(fold.kinds) <= MAX_KINDS + 1
    assert sum(a.count for a in fold.kinds.values()) == len(names)


# --- the bounded fold the divergences share with the audit events (authz/kind_fold.py) ---

FoldKind = tuple[str, str]


def _coarser_rule(kind: FoldKind) -> FoldKind:
    return (kind[0], OTHER_RULES)


def test_kinds_beyond_the_bound_count_under_the_coarser_kind_with_exact_counts() -> None:
    kinds: dict[FoldKind, KindAggregate[FoldKind]] = {}
    for rule in range(MAX_KINDS + 10):
        for n in range(3):
            fold(kinds, ("READ", f"rule-{rule}"), f"t{rule}-{n}", _coarser_rule, KindAggregate)
    assert len(kinds) == MAX_KINDS + 1
    assert kinds[("READ", OTHER_RULES)].count == 30
    assert sum(a.count for a in kinds.values()) == 3 * (MAX_KINDS + 10)


def test_the_sample_keeps_the_first_names_only() -> None:
    kinds: dict[FoldKind, KindAggregate[FoldKind]] = {}
    for n in range(SAMPLE_SIZE * 2):
        fold(kinds, ("READ", "r"), f"t{n}", _coarser_rule, KindAggregate)
    assert kinds[("READ", "r")].sample == [f"t{n}" for n in range(SAMPLE_SIZE)]
    assert kinds[("READ", "r")].count == SAMPLE_SIZE * 2
