"""StandardAuthorizer decisions: Kafka 4.x's deny-wins algorithm, pinned case by case."""

from __future__ import annotations

import pytest

from auth.principal import KafkaPrincipal
from authz.authorizer import Decision, DecisionRule, StandardAuthorizer
from authz.model import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclValidationError,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from tests.authz.helpers import ALICE, BOB, DENY, GROUP, HOST, LITERAL, PREFIXED, TOPIC, Op, acl


def loaded(*bindings: AclBinding, super_users: set[str] | None = None,
           allow_if_no_acl: bool = False) -> StandardAuthorizer:
    authorizer = StandardAuthorizer(super_users or set(), allow_if_no_acl)
    authorizer.load(bindings)
    return authorizer


def read(authorizer: StandardAuthorizer, name: str, principal: KafkaPrincipal = ALICE,
         operation: Op = Op.READ, host: str = HOST) -> Decision:
    return authorizer.authorize(principal, host, operation, TOPIC, name)


def test_prefix_walk_finds_every_nested_prefix() -> None:
    authorizer = loaded(
        acl("a", Op.READ, pattern=PREFIXED),
        acl("ab", Op.WRITE, pattern=PREFIXED),
        acl("abc", Op.DELETE, pattern=PREFIXED),
        acl("abcd", Op.ALTER, pattern=PREFIXED),
        acl("abd", Op.CREATE, pattern=PREFIXED),  # a sibling between the nested ones
    )
    for operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert read(authorizer, "abcde", operation=operation).allowed, operation
    assert not read(authorizer, "abcde", operation=Op.CREATE).allowed
    assert read(authorizer, "abd-x", operation=Op.CREATE).allowed
    assert not read(authorizer, "abc", operation=Op.ALTER).allowed  # "abcd" is longer than the name
    assert read(authorizer, "abc", operation=Op.DELETE).allowed  # a prefix equal to the name applies


def test_sibling_prefixes_do_not_match() -> None:
    deny_b = acl("orders-b", Op.READ, DENY, pattern=PREFIXED)
    authorizer = loaded(acl("orders-", pattern=PREFIXED), acl("orders-a", Op.WRITE, pattern=PREFIXED), deny_b,
                        acl("orders-c", Op.WRITE, DENY, pattern=PREFIXED))
    decision = read(authorizer, "orders-a1")
    assert decision.allowed and decision.rule == acl("orders-", pattern=PREFIXED)
    assert read(authorizer, "orders-a1", operation=Op.WRITE).allowed
    assert not read(authorizer, "orders-b1").allowed
    assert read(authorizer, "orders-b1").rule == deny_b
    assert not read(authorizer, "orders-b1", operation=Op.WRITE).allowed  # the WRITE allow is on orders-a only
    assert read(authorizer, "orders-b1", operation=Op.WRITE).rule is DecisionRule.NO_MATCHING_ACL


def test_literal_acl_applies_to_its_exact_name_only() -> None:
    authorizer = loaded(acl("foo"))
    assert read(authorizer, "foo").allowed
    assert read(authorizer, "foobar").rule is DecisionRule.NO_ACL_DEFAULT
    assert read(authorizer, "fo").rule is DecisionRule.NO_ACL_DEFAULT


def test_literal_wildcard_resource_applies_to_every_name() -> None:
    authorizer = loaded(acl("*", Op.WRITE))
    for name in ("a", "orders", "*", "x" * 200):
        decision = read(authorizer, name, operation=Op.WRITE)
        assert decision.allowed and decision.rule == acl("*", Op.WRITE)


def test_prefixed_star_is_an_ordinary_prefix_not_a_wildcard() -> None:
    authorizer = loaded(acl("*", pattern=PREFIXED))
    assert read(authorizer, "*stars").allowed
    assert read(authorizer, "orders").rule is DecisionRule.NO_ACL_DEFAULT


def test_wildcard_principal_user_star_applies_to_every_principal() -> None:
    authorizer = loaded(acl("t", principal="User:*"))
    assert read(authorizer, "t", ALICE).allowed
    assert read(authorizer, "t", BOB).allowed
    assert read(authorizer, "t", KafkaPrincipal("Group", "ops")).allowed  # as Kafka: User:* is always matched


def test_only_user_star_is_a_wildcard_principal() -> None:
    authorizer = loaded(acl("t", principal="Group:*"))
    assert not read(authorizer, "t", KafkaPrincipal("Group", "ops")).allowed
    assert read(authorizer, "t", KafkaPrincipal("Group", "*")).allowed


def test_principal_type_is_part_of_the_match() -> None:
    authorizer = loaded(acl("t", principal="Group:alice"))
    assert not read(authorizer, "t", ALICE).allowed
    assert read(authorizer, "t", KafkaPrincipal("Group", "alice")).allowed


def test_token_authenticated_principal_is_matched_by_type_and_name() -> None:
    authorizer = loaded(acl("t"))
    assert read(authorizer, "t", KafkaPrincipal("User", "alice", token_authenticated=True)).allowed


@pytest.mark.parametrize(("allow", "deny"), [
    (acl("orders"), acl("ord", Op.READ, DENY, pattern=PREFIXED)),
    (acl("ord", pattern=PREFIXED), acl("orders", Op.READ, DENY)),
    (acl("orders"), acl("*", Op.READ, DENY)),
    (acl("*"), acl("orders", Op.READ, DENY)),
    (acl("o", pattern=PREFIXED), acl("orde", Op.READ, DENY, pattern=PREFIXED)),
    (acl("orders"), acl("orders", Op.READ, DENY, principal="User:*")),
    (acl("orders", principal="User:*"), acl("orders", Op.READ, DENY, host=HOST)),
], ids=["prefixed-deny", "literal-deny", "wildcard-deny", "deny-beats-wildcard-allow", "longer-prefix-deny",
        "wildcard-principal-deny", "host-deny"])
def test_deny_beats_allow_across_pattern_types(allow: AclBinding, deny: AclBinding) -> None:
    authorizer = loaded(allow, deny)
    decision = read(authorizer, "orders")
    assert decision == Decision(False, deny)


def test_allow_implies_describe_and_describe_configs() -> None:
    for operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert read(loaded(acl("t", operation)), "t", operation=Op.DESCRIBE).allowed, operation
    assert read(loaded(acl("t", Op.ALTER_CONFIGS)), "t", operation=Op.DESCRIBE_CONFIGS).allowed
    assert not read(loaded(acl("t", Op.CREATE)), "t", operation=Op.DESCRIBE).allowed
    assert not read(loaded(acl("t", Op.READ)), "t", operation=Op.DESCRIBE_CONFIGS).allowed
    assert not read(loaded(acl("t", Op.DESCRIBE)), "t", operation=Op.READ).allowed
    assert not read(loaded(acl("t", Op.DESCRIBE_CONFIGS)), "t", operation=Op.ALTER_CONFIGS).allowed


def test_implication_never_applies_to_deny() -> None:
    authorizer = loaded(acl("t", Op.ALL), acl("t", Op.READ, DENY), acl("t", Op.ALTER_CONFIGS, DENY))
    assert not read(authorizer, "t", operation=Op.READ).allowed
    assert read(authorizer, "t", operation=Op.DESCRIBE).allowed  # DENY READ does not deny DESCRIBE
    assert not read(authorizer, "t", operation=Op.ALTER_CONFIGS).allowed
    assert read(authorizer, "t", operation=Op.DESCRIBE_CONFIGS).allowed


def test_all_in_allow_grants_every_operation() -> None:
    authorizer = loaded(acl("t", Op.ALL))
    for operation in Op:
        if operation > Op.ANY:
            assert read(authorizer, "t", operation=operation).allowed, operation


def test_all_in_deny_denies_every_operation() -> None:
    authorizer = loaded(acl("t", Op.ALL, principal="User:*"), acl("t", Op.ALL, DENY))
    for operation in Op:
        if operation > Op.ANY:
            assert not read(authorizer, "t", operation=operation).allowed, operation
    assert read(authorizer, "t", BOB).allowed


def test_host_must_match_exactly_or_be_the_wildcard() -> None:
    authorizer = loaded(acl("t", Op.READ, host="10.0.0.1"), acl("t", Op.WRITE, host="*"))
    assert read(authorizer, "t", host="10.0.0.1").allowed
    assert not read(authorizer, "t", host="10.0.0.2").allowed
    assert not read(authorizer, "t", host="10.0.0.10").allowed
    assert read(authorizer, "t", host="10.0.0.2", operation=Op.WRITE).allowed


@pytest.mark.parametrize("written", ["::ffff:10.1.2.3", "::FFFF:a01:203", "0:0:0:0:0:ffff:10.1.2.3"])
def test_an_acl_host_written_ipv4_mapped_means_the_ipv4_client(written: str) -> None:
    # Kafka would store such a host and match it against nobody (its JVM sees 10.1.2.3):
    # a DENY written so must still deny, and an ALLOW still allow.
    deny = loaded(acl("t", Op.READ), acl("t", Op.READ, DENY, host=written))
    assert not read(deny, "t", host="10.1.2.3").allowed
    assert read(deny, "t", host="10.1.2.4").allowed
    assert read(loaded(acl("t", Op.READ, host=written)), "t", host="10.1.2.3").allowed
    assert not any_write(loaded(acl("t", Op.WRITE), acl("t", Op.WRITE, DENY, host=written)), host="10.1.2.3").allowed


def test_an_ipv6_acl_host_matches_in_any_spelling_of_the_address() -> None:
    java_spelling = loaded(acl("t", Op.READ, DENY, host="2001:DB8:0:0:0:0:0:42"), acl("t", Op.READ))
    assert not read(java_spelling, "t", host="2001:db8::42").allowed
    assert read(java_spelling, "t", host="2001:db8::43").allowed


def test_super_users_bypass_deny() -> None:
    authorizer = loaded(acl("t", Op.ALL, DENY, principal="User:*"), super_users={"User:admin"})
    assert read(authorizer, "t", KafkaPrincipal("User", "admin")) == Decision(True, DecisionRule.SUPER_USER)
    assert read(authorizer, "t", KafkaPrincipal("User", "admin", token_authenticated=True)).allowed
    assert not read(authorizer, "t", KafkaPrincipal("Group", "admin")).allowed
    assert not read(authorizer, "t").allowed


def test_super_users_must_be_type_colon_name() -> None:
    with pytest.raises(ValueError, match="Type:name"):
        StandardAuthorizer({"admin"}, False)
    assert StandardAuthorizer({" User:admin ", ""}, False).super_users == {"User:admin"}


@pytest.mark.parametrize("allow_if_no_acl", [True, False])
def test_no_acl_default_decides_when_no_acl_references_the_resource(allow_if_no_acl: bool) -> None:
    authorizer = loaded(acl("other-topic"), acl("x", pattern=PREFIXED), allow_if_no_acl=allow_if_no_acl)
    assert read(authorizer, "orders") == Decision(allow_if_no_acl, DecisionRule.NO_ACL_DEFAULT)
    group = authorizer.authorize(ALICE, HOST, Op.READ, GROUP, "other-topic")  # another resource type
    assert group == Decision(allow_if_no_acl, DecisionRule.NO_ACL_DEFAULT)


@pytest.mark.parametrize("other", [
    acl("orders", principal="User:bob"),
    acl("orders", Op.WRITE),
    acl("orders", host="192.0.2.1"),
    acl("ord", principal="User:bob", pattern=PREFIXED),
    acl("*", Op.DELETE, DENY, principal="User:bob"),
], ids=["other-principal", "other-operation", "other-host", "prefixed", "wildcard"])
def test_an_acl_for_someone_else_turns_the_default_off(other: AclBinding) -> None:
    authorizer = loaded(other, allow_if_no_acl=True)
    assert read(authorizer, "orders") == Decision(False, DecisionRule.NO_MATCHING_ACL)


def test_not_ready_denies_everyone_but_super_users() -> None:
    authorizer = StandardAuthorizer({"User:admin"}, allow_everyone_if_no_acl_found=True)
    assert not authorizer.ready
    assert read(authorizer, "t") == Decision(False, DecisionRule.NOT_READY)
    assert read(authorizer, "t", KafkaPrincipal("User", "admin")).allowed
    authorizer.apply([acl("t")])  # changes before the initial load do not make it ready
    assert read(authorizer, "t") == Decision(False, DecisionRule.NOT_READY)
    authorizer.load([])
    assert authorizer.ready and read(authorizer, "t").allowed  # default allow: nothing references "t"


def test_resource_types_are_separate() -> None:
    authorizer = loaded(acl("app"), acl("*", Op.ALL, DENY, resource_type=GROUP))
    assert read(authorizer, "app").allowed
    assert not authorizer.authorize(ALICE, HOST, Op.READ, GROUP, "app").allowed


def test_a_cached_decision_is_never_served_after_a_swap() -> None:
    authorizer = loaded(acl("t"))
    assert read(authorizer, "t").allowed
    assert read(authorizer, "t").allowed  # now cached
    authorizer.apply(added=[acl("t", Op.READ, DENY)])
    assert not read(authorizer, "t").allowed
    authorizer.apply(removed=[acl("t", Op.READ, DENY)])
    assert read(authorizer, "t").allowed


def test_apply_removes_then_adds_in_one_step() -> None:
    authorizer = loaded(acl("t"))
    authorizer.apply(added=[acl("t", Op.WRITE)], removed=[acl("t"), acl("never-there")])
    assert not read(authorizer, "t").allowed
    assert read(authorizer, "t", operation=Op.WRITE).allowed
    assert authorizer.acl_count == 1


def test_apply_validates_the_whole_batch_before_changing_anything() -> None:
    authorizer = loaded(acl("t"))
    with pytest.raises(AclValidationError):
        authorizer.apply(added=[acl("t", Op.READ, DENY), acl("", Op.READ)])
    assert read(authorizer, "t").allowed


def test_load_replaces_everything() -> None:
    authorizer = loaded(acl("t"))
    authorizer.load([acl("u")])
    assert authorizer.acls(AclBindingFilter.ANY) == [acl("u")]


def test_authorize_refuses_filter_only_operation_and_resource_type() -> None:
    authorizer = loaded(acl("t"))
    with pytest.raises(ValueError, match="concrete"):
        authorizer.authorize(ALICE, HOST, Op.ANY, TOPIC, "t")
    with pytest.raises(ValueError, match="concrete"):
        authorizer.authorize(ALICE, HOST, Op.READ, ResourceType.ANY, "t")


def test_acls_lists_through_filters() -> None:
    bindings = [acl("orders"), acl("ord", pattern=PREFIXED), acl("*", Op.WRITE), acl("orders", resource_type=GROUP),
                acl("payments", principal="User:bob")]
    authorizer = loaded(*bindings)
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.MATCH))
    assert set(authorizer.acls(match)) == set(bindings[:3])
    exact = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", PatternType.ANY))
    assert authorizer.acls(exact) == [bindings[0]]
    assert set(authorizer.acls(AclBindingFilter(ResourcePatternFilter(name="orders")))) == {bindings[0], bindings[3]}
    prefixed = AclBindingFilter(ResourcePatternFilter(TOPIC, None, PREFIXED))
    assert authorizer.acls(prefixed) == [bindings[1]]
    by_bob = AclBindingFilter(entry_filter=AccessControlEntryFilter(principal="User:bob"))
    assert authorizer.acls(by_bob) == [bindings[4]]
    assert len(authorizer.acls(AclBindingFilter.ANY)) == 5


# --- authorize_any: Kafka's authorizeByResourceType -----------------------------------------

def any_write(authorizer: StandardAuthorizer, principal: KafkaPrincipal = ALICE, host: str = HOST) -> Decision:
    return authorizer.authorize_any(principal, host, Op.WRITE, TOPIC)


def test_authorize_any_allows_with_an_allow_on_some_resource() -> None:
    allow = acl("payments", Op.WRITE)
    decision = any_write(loaded(allow))
    assert decision == Decision(True, allow)
    assert not any_write(loaded(allow), BOB).allowed
    assert any_write(loaded(acl("pay", Op.ALL, pattern=PREFIXED))).allowed
    assert any_write(loaded(acl("x", Op.WRITE, principal="User:*"))).allowed


def test_authorize_any_uses_no_operation_implication() -> None:
    assert not loaded(acl("payments", Op.WRITE)).authorize_any(ALICE, HOST, Op.DESCRIBE, TOPIC).allowed


def test_authorize_any_literal_allow_fully_covered_by_deny_is_not_enough() -> None:
    assert not any_write(loaded(acl("payments", Op.WRITE), acl("payments", Op.WRITE, DENY))).allowed
    assert not any_write(loaded(acl("payments", Op.WRITE), acl("pay", Op.WRITE, DENY, pattern=PREFIXED))).allowed
    assert not any_write(loaded(acl("payments", Op.WRITE), acl("payments", Op.ALL, DENY, pattern=PREFIXED))).allowed
    assert any_write(loaded(acl("payments", Op.WRITE), acl("paymentsX", Op.WRITE, DENY, pattern=PREFIXED))).allowed


def test_authorize_any_prefixed_allow_is_only_covered_by_a_prefixed_deny_on_its_prefix() -> None:
    allow = acl("pay", Op.WRITE, pattern=PREFIXED)
    assert not any_write(loaded(allow, acl("pa", Op.WRITE, DENY, pattern=PREFIXED))).allowed
    assert not any_write(loaded(allow, acl("pay", Op.WRITE, DENY, pattern=PREFIXED))).allowed
    assert any_write(loaded(allow, acl("pay", Op.WRITE, DENY))).allowed  # a literal deny on "pay" only
    assert any_write(loaded(allow, acl("pay-1", Op.WRITE, DENY, pattern=PREFIXED))).allowed  # narrower deny


def test_authorize_any_wildcard_deny_denies_and_wildcard_allow_allows() -> None:
    assert not any_write(loaded(acl("*", Op.WRITE), acl("*", Op.WRITE, DENY, principal="User:*"))).allowed
    assert any_write(loaded(acl("*", Op.WRITE), acl("x", Op.WRITE, DENY, pattern=PREFIXED))).allowed


def test_authorize_any_ignores_other_hosts_and_operations() -> None:
    assert not any_write(loaded(acl("t", Op.WRITE, host="192.0.2.1"))).allowed
    assert any_write(loaded(acl("t", Op.WRITE, host=HOST))).allowed
    assert not any_write(loaded(acl("t", Op.READ))).allowed
    assert any_write(loaded(acl("t", Op.WRITE), acl("t", Op.WRITE, DENY, host="192.0.2.1"))).allowed


def test_authorize_any_answers_super_users_not_ready_and_the_default_like_authorize() -> None:
    admin = KafkaPrincipal("User", "admin")
    assert any_write(loaded(acl("*", Op.ALL, DENY, principal="User:*"), super_users={"User:admin"}), admin).allowed
    assert any_write(StandardAuthorizer(set(), True)) == Decision(False, DecisionRule.NOT_READY)
    # As Kafka: the probe resource has no ACLs, so allow.everyone.if.no.acl.found answers, DENYs elsewhere or not.
    assert any_write(loaded(acl("payments", Op.WRITE, DENY), allow_if_no_acl=True)).allowed
    assert not any_write(loaded(acl("payments", Op.WRITE, DENY), allow_if_no_acl=False)).allowed


def test_authorize_any_refuses_filter_only_arguments() -> None:
    with pytest.raises(ValueError):
        loaded().authorize_any(ALICE, HOST, Op.ANY, TOPIC)
    with pytest.raises(ValueError):
        loaded().authorize_any(ALICE, HOST, Op.WRITE, ResourceType.ANY)


def test_decision_reads_like_kafkas_audit_log() -> None:
    assert str(Decision(True, DecisionRule.SUPER_USER)) == "ALLOWED based on rule SuperUser"
    assert str(Decision(False, acl("t"))).startswith("DENIED based on rule MatchingAcl(acl=(pattern=")


def test_literal_and_prefixed_on_the_same_name_are_distinct_patterns() -> None:
    authorizer = loaded(acl("t", Op.READ, pattern=LITERAL), acl("t", Op.WRITE, pattern=PREFIXED))
    assert read(authorizer, "t").allowed and read(authorizer, "t", operation=Op.WRITE).allowed
    assert not read(authorizer, "tx").allowed and read(authorizer, "tx", operation=Op.WRITE).allowed
    assert read(authorizer, "tx").rule is DecisionRule.NO_MATCHING_ACL
