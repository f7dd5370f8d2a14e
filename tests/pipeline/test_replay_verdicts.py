"""The candidate's verdict on one recorded decision, and the settings a replay learns: no Spark needed."""

from __future__ import annotations

import pytest

from authz.model import AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern
from authz.model import ResourceType as RT
from pipeline.errors import PipelineError
from pipeline.replay.settings import (
    DEFAULT,
    LOG,
    OPTION,
    GivenSettings,
    LogEvidence,
    parse_super_users,
    resolve,
)
from pipeline.replay.verdicts import CandidateAuthorizer, DecisionKey, Verdict, names_hosts
from tests.pipeline.events import binding

ORDERS = binding("User:app", RT.TOPIC, "orders-", AclOperation.WRITE, PatternType.PREFIXED)
AUDIT = binding("User:app", RT.TOPIC, "audit", AclOperation.READ)
EVERYONE_NEWS = binding("User:*", RT.TOPIC, "*", AclOperation.DESCRIBE)
NO_SECRET = binding("User:app", RT.TOPIC, "orders-secret", AclOperation.WRITE,
                    permission=AclPermissionType.DENY)
CANDIDATE = [ORDERS, AUDIT, EVERYONE_NEWS, NO_SECRET]


def _key(name: str, operation: str = "WRITE", principal: str = "User:app", resource_type: str = "TOPIC",
         host: str | None = None, guarded: bool = False) -> DecisionKey:
    return DecisionKey(principal, host, operation, resource_type, name, guarded)


def _verdict(key: DecisionKey, bindings: list[AclBinding] = CANDIDATE, supers: tuple[str, ...] = (),
             everyone: bool = False) -> Verdict:
    return CandidateAuthorizer(bindings, supers, everyone).verdict(key)


def test_prefixed_literal_and_wildcard_patterns_answer_as_the_gateway() -> None:
    assert _verdict(_key("orders-1")).decision == "ALLOWED"
    assert _verdict(_key("orders-1")).rule == f"AclBinding({ORDERS})"  # the text the gateway logs
    assert _verdict(_key("audit", "READ")).decision == "ALLOWED"
    assert _verdict(_key("audit-2", "READ")).decision == "DENIED"  # literal is not a prefix
    assert _verdict(_key("anything", "DESCRIBE", principal="User:other")).rule == f"AclBinding({EVERYONE_NEWS})"
    assert _verdict(_key("payments", "WRITE")) == Verdict("DENIED", "NoMatchingAcl")


def test_a_deny_rule_beats_a_prefixed_allow() -> None:
    assert _verdict(_key("orders-secret")) == Verdict("DENIED", f"AclBinding({NO_SECRET})")


def test_super_users_and_the_no_acl_default() -> None:
    assert _verdict(_key("payments", principal="User:root"), supers=("User:root",)) == Verdict("ALLOWED", "SuperUser")
    unreferenced = _key("nobody-names-it", "READ", principal="User:x", resource_type="GROUP")
    assert _verdict(unreferenced, everyone=True) == Verdict("ALLOWED", "NoAclDefault")
    assert _verdict(unreferenced, everyone=False) == Verdict("DENIED", "NoAclDefault")


def test_a_star_name_is_the_any_resource_of_the_type_check() -> None:
    # authorizeByResourceType: WRITE on *some* topic is allowed by the prefixed ALLOW (a literal
    # authorize("*") would be NoMatchingAcl: no binding names the topic "*").
    assert _verdict(_key("*")).decision == "ALLOWED"
    assert _verdict(_key("*", principal="User:other")).decision == "DENIED"


def test_hosts_matter_only_when_a_binding_names_one() -> None:
    from_office = AclBinding(ResourcePattern(RT.GROUP, "g", PatternType.LITERAL),
                             AccessControlEntry("User:app", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW))
    assert not names_hosts(CANDIDATE)
    assert names_hosts([*CANDIDATE, from_office])
    bindings = [from_office]
    assert _verdict(_key("g", "READ", resource_type="GROUP", host="10.0.0.1"), bindings).decision == "ALLOWED"
    assert _verdict(_key("g", "READ", resource_type="GROUP", host="10.0.0.2"), bindings).decision == "DENIED"


def test_guards_deny_whatever_the_acls_say_and_unlogged_names_are_not_replayed() -> None:
    assert _verdict(_key("orders-1", guarded=True)).decision == "DENIED"
    assert _verdict(_key("(unsampled)")) == Verdict(None, "unsampled")
    assert _verdict(_key("orders-1", principal="nobody")) == Verdict(None, "invalid")
    assert _verdict(_key("orders-1", operation="FLY")) == Verdict(None, "invalid")


def test_options_win_then_the_log_then_kafkas_default() -> None:
    evidence = LogEvidence(frozenset({"User:admin"}), no_acl_default_allowed=True, no_acl_default_denied=False)
    learned = resolve(GivenSettings(), evidence)
    assert (learned.super_users, learned.super_users_from) == (frozenset({"User:admin"}), LOG)
    assert (learned.allow_everyone_if_no_acl_found, learned.allow_everyone_from) == (True, LOG)
    given = resolve(GivenSettings(frozenset(), False), evidence)
    assert (given.super_users, given.allow_everyone_if_no_acl_found, given.allow_everyone_from) == \
        (frozenset(), False, OPTION)
    silent = resolve(GivenSettings(), LogEvidence(frozenset(), False, False))
    assert (silent.allow_everyone_if_no_acl_found, silent.allow_everyone_from) == (False, DEFAULT)
    with pytest.raises(PipelineError, match="both allowing and denying"):
        resolve(GivenSettings(), LogEvidence(frozenset(), True, True))


def test_super_users_are_kafkas_semicolon_list() -> None:
    assert parse_super_users(" User:a ; User:b;") == frozenset({"User:a", "User:b"})
    with pytest.raises(PipelineError, match="not Type:name"):
        parse_super_users("alice")
