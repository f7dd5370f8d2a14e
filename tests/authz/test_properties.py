"""Property tests: the indexed, cached authorizer agrees with a naive linear reference on random ACL sets.

Names come from a tiny alphabet so that prefixes, siblings and the ``*`` wildcard collide often.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from auth.principal import KafkaPrincipal
from authz.authorizer import DecisionRule, StandardAuthorizer
from authz.index import AclIndex
from authz.model import (
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from tests.authz.helpers import (
    ALLOW,
    DENY,
    GROUP,
    LITERAL,
    PREFIXED,
    TOPIC,
    acl,
    reference_authorize,
    reference_authorize_any,
    reference_matches,
)

SUPER_USERS = {"User:root"}
names = st.text(alphabet="ab*", min_size=1, max_size=4)
hosts = st.sampled_from(["*", "h1", "h2"])
acl_principals = st.sampled_from(["User:alice", "User:*", "User:bob", "Group:alice", "Group:*", "User:a:b"])
# Operations weighted towards the ones with special rules (ALL, implication), so they collide often.
acl_ops = st.sampled_from([AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.ALL,
                           AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS, AclOperation.CREATE])
query_ops = st.sampled_from([AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
                             AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS, AclOperation.CREATE,
                             AclOperation.ALL, AclOperation.TWO_PHASE_COMMIT])
resource_types = st.sampled_from([TOPIC, TOPIC, TOPIC, GROUP])
bindings = st.builds(
    lambda name, op, perm, principal, host, pattern, rt: acl(name, op, perm, principal=principal, host=host,
                                                            pattern=pattern, resource_type=rt),
    names, acl_ops, st.sampled_from([ALLOW, DENY]), acl_principals, hosts,
    st.sampled_from([LITERAL, PREFIXED]), resource_types)
acl_sets = st.lists(bindings, max_size=25)
principals = st.sampled_from([KafkaPrincipal("User", "alice"), KafkaPrincipal("User", "alice"),
                              KafkaPrincipal("User", "bob"), KafkaPrincipal("Group", "alice"),
                              KafkaPrincipal("User", "a:b"), KafkaPrincipal("User", "*"),
                              KafkaPrincipal("User", "root"),
                              KafkaPrincipal("User", "alice", token_authenticated=True)])
Query = tuple[KafkaPrincipal, str, AclOperation, ResourceType, str]


def queries_for(acls: list[AclBinding]) -> st.SearchStrategy[Query]:
    """Queries whose resource names are mostly stored names or extensions of them (so patterns apply)."""
    stored = sorted({b.pattern.name for b in acls if b.pattern.name != "*"})
    near = st.builds(lambda n, tail: n + tail, st.sampled_from(stored), st.text("ab*", max_size=2)) if stored \
        else names
    return st.tuples(principals, st.sampled_from(["h1", "h2"]), query_ops, resource_types, near | names)


WHY = {DecisionRule.SUPER_USER: "super", DecisionRule.NOT_READY: "not-ready",
       DecisionRule.NO_ACL_DEFAULT: "default", DecisionRule.NO_MATCHING_ACL: "no-match"}


def check(authorizer: StandardAuthorizer, acls: list[AclBinding], allow_if_no_acl: bool, query: Query) -> None:
    decision = authorizer.authorize(*query)
    allowed, why = reference_authorize(acls, SUPER_USERS, allow_if_no_acl, True, *query)
    assert decision.allowed == allowed, (query, decision, why)
    if isinstance(decision.rule, AclBinding):
        assert why == ("allow" if allowed else "deny")
        assert decision.rule in reference_matches(acls, *query)
        assert decision.rule.entry.permission_type == (ALLOW if allowed else DENY)
    else:
        assert WHY[decision.rule] == why


@settings(max_examples=500, deadline=None)
@given(acls=acl_sets, allow_if_no_acl=st.booleans(), data=st.data())
def test_authorize_agrees_with_the_naive_reference(acls: list[AclBinding], allow_if_no_acl: bool,
                                                  data: st.DataObject) -> None:
    authorizer = StandardAuthorizer(SUPER_USERS, allow_if_no_acl)
    authorizer.load(acls)
    query_list = data.draw(st.lists(queries_for(acls), min_size=1, max_size=30))
    for query in query_list + query_list:  # the second round is served from the caches
        check(authorizer, acls, allow_if_no_acl, query)


@settings(max_examples=250, deadline=None)
@given(initial=acl_sets, steps=st.lists(st.tuples(acl_sets, acl_sets), max_size=6),
       threshold=st.sampled_from([1, 3, 1000]), data=st.data())
def test_incremental_updates_agree_with_the_naive_reference(
        initial: list[AclBinding], steps: list[tuple[list[AclBinding], list[AclBinding]]], threshold: int,
        data: st.DataObject) -> None:
    authorizer = StandardAuthorizer(SUPER_USERS, False, compact_threshold=threshold)
    authorizer.load(initial)
    current = set(initial)
    everything = initial + [b for added, removed in steps for b in added + removed]
    query_list = data.draw(st.lists(queries_for(everything), min_size=1, max_size=15))
    for added, removed in steps:
        authorizer.apply(added, removed)
        current = (current - set(removed)) | set(added)
        assert set(authorizer.index) == current and authorizer.acl_count == len(current)
        for query in query_list:
            check(authorizer, sorted(current, key=str), False, query)


@settings(max_examples=400, deadline=None)
@given(acls=acl_sets, allow_if_no_acl=st.booleans(), principal=principals, host=st.sampled_from(["h1", "h2"]),
       operation=query_ops, resource_type=resource_types)
def test_authorize_any_agrees_with_kafkas_default_algorithm(acls: list[AclBinding], allow_if_no_acl: bool,
                                                            principal: KafkaPrincipal, host: str,
                                                            operation: AclOperation,
                                                            resource_type: ResourceType) -> None:
    authorizer = StandardAuthorizer(SUPER_USERS, allow_if_no_acl)
    authorizer.load(acls)
    expected = reference_authorize_any(acls, SUPER_USERS, allow_if_no_acl, principal, host, operation, resource_type)
    assert authorizer.authorize_any(principal, host, operation, resource_type).allowed == expected


filters = st.builds(
    lambda rt, name, pt, principal, host, op, perm: AclBindingFilter(
        ResourcePatternFilter(rt, name, pt), AccessControlEntryFilter(principal, host, op, perm)),
    st.sampled_from([ResourceType.ANY, TOPIC, GROUP]), st.none() | names,
    st.sampled_from([PatternType.ANY, PatternType.MATCH, LITERAL, PREFIXED]),
    st.none() | acl_principals, st.none() | hosts, st.sampled_from([AclOperation.ANY, AclOperation.READ]),
    st.sampled_from([ALLOW, DENY, AclPermissionType.ANY]))


@settings(max_examples=400, deadline=None)
@given(acls=acl_sets, changes=st.tuples(acl_sets, acl_sets), binding_filter=filters)
def test_acls_agree_with_a_linear_filter(acls: list[AclBinding], changes: tuple[list[AclBinding], list[AclBinding]],
                                         binding_filter: AclBindingFilter) -> None:
    index = AclIndex(acls, compact_threshold=2).with_changes(*changes)
    current = (set(acls) - set(changes[1])) | set(changes[0])
    result = index.acls(binding_filter)
    assert len(result) == len(set(result))
    assert set(result) == {b for b in current if binding_filter.matches(b)}
