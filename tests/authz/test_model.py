"""ACL vocabulary: Kafka's wire codes, filter matching, create-time validation and text forms."""

from __future__ import annotations

import pytest

from authz.model import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclValidationError,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    display_name,
    parse_operation,
    parse_pattern_type,
    parse_permission_type,
    parse_resource_type,
    validate_binding,
    validate_filter,
)
from protocol.kafka_errors import KafkaError
from tests.authz.helpers import ALLOW, DENY, GROUP, LITERAL, PREFIXED, TOPIC, Op, acl


def test_enums_carry_kafkas_wire_codes() -> None:
    assert [(m.name, m.value) for m in ResourceType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("TOPIC", 2), ("GROUP", 3), ("CLUSTER", 4),
        ("TRANSACTIONAL_ID", 5), ("DELEGATION_TOKEN", 6), ("USER", 7)]
    assert [(m.name, m.value) for m in PatternType] == [
        ("UNKNOWN", 0), ("ANY", 1), ("MATCH", 2), ("LITERAL", 3), ("PREFIXED", 4)]
    assert [m.value for m in AclOperation] == list(range(16))
    assert AclOperation.IDEMPOTENT_WRITE.value == 12 and AclOperation.TWO_PHASE_COMMIT.value == 15
    assert [(m.name, m.value) for m in AclPermissionType] == [("UNKNOWN", 0), ("ANY", 1), ("DENY", 2), ("ALLOW", 3)]


def pattern(name: str, pattern_type: PatternType = LITERAL, resource_type: ResourceType = TOPIC) -> ResourcePattern:
    return ResourcePattern(resource_type, name, pattern_type)


def test_match_filter_selects_every_pattern_that_applies_to_the_name() -> None:
    f = ResourcePatternFilter(TOPIC, "Name", PatternType.MATCH)
    assert f.matches(pattern("Name"))
    assert f.matches(pattern("*"))
    assert f.matches(pattern("Na", PREFIXED))
    assert f.matches(pattern("Name", PREFIXED))
    assert not f.matches(pattern("Name1", PREFIXED))
    assert not f.matches(pattern("Na"))  # literal prefix of the name: does not apply
    assert not f.matches(pattern("Name", resource_type=GROUP))


def test_any_filter_matches_the_exact_name_in_any_pattern_type_only() -> None:
    f = ResourcePatternFilter(TOPIC, "Name", PatternType.ANY)
    assert f.matches(pattern("Name")) and f.matches(pattern("Name", PREFIXED))
    assert not f.matches(pattern("*"))
    assert not f.matches(pattern("Na", PREFIXED))


def test_specific_pattern_type_filter_matches_that_type_and_exact_name() -> None:
    assert ResourcePatternFilter(TOPIC, "*", LITERAL).matches(pattern("*"))
    assert not ResourcePatternFilter(TOPIC, "*", LITERAL).matches(pattern("x"))
    assert ResourcePatternFilter(TOPIC, "Na", PREFIXED).matches(pattern("Na", PREFIXED))
    assert not ResourcePatternFilter(TOPIC, "Na", PREFIXED).matches(pattern("Na"))
    assert not ResourcePatternFilter(TOPIC, "Name", PREFIXED).matches(pattern("Na", PREFIXED))


def test_filter_without_name_matches_all_names_and_any_type_matches_all_types() -> None:
    assert ResourcePatternFilter(TOPIC, None, PatternType.MATCH).matches(pattern("x", PREFIXED))
    assert ResourcePatternFilter(TOPIC, None, PREFIXED).matches(pattern("x", PREFIXED))
    assert not ResourcePatternFilter(TOPIC, None, PREFIXED).matches(pattern("x"))
    assert ResourcePatternFilter().matches(pattern("x", resource_type=GROUP))
    assert AclBindingFilter.ANY.matches(acl("anything", principal="Group:x", host="1.2.3.4"))


def test_entry_filter_compares_principal_and_host_as_plain_strings() -> None:
    entry = AccessControlEntry("User:alice", "10.0.0.1", Op.READ, ALLOW)
    assert AccessControlEntryFilter().matches(entry)
    assert AccessControlEntryFilter("User:alice", "10.0.0.1", Op.READ, ALLOW).matches(entry)
    assert not AccessControlEntryFilter(principal="User:*").matches(entry)  # no wildcard semantics
    assert not AccessControlEntryFilter(host="*").matches(entry)
    assert not AccessControlEntryFilter(operation=Op.ALL).matches(entry)
    assert not AccessControlEntryFilter(permission_type=DENY).matches(entry)


def test_binding_to_filter_matches_only_that_binding() -> None:
    binding = acl("t", Op.WRITE, host="h")
    assert binding.to_filter().matches(binding)
    assert not binding.to_filter().matches(acl("t", Op.WRITE, host="h2"))
    assert not binding.to_filter().matches(acl("t", Op.WRITE, host="h", pattern=PREFIXED))


@pytest.mark.parametrize(("binding", "message"), [
    (acl("t", resource_type=ResourceType.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl("t", pattern=PatternType.UNKNOWN), "Invalid patternType UNKNOWN"),
    (acl("t", Op.UNKNOWN), "Invalid operation UNKNOWN"),
    (acl("t", permission=AclPermissionType.UNKNOWN), "Invalid permissionType UNKNOWN"),
    (acl(""), "Resource name should not be empty"),
    (acl("other", Op.ALTER, resource_type=ResourceType.CLUSTER), "only valid name for the CLUSTER resource"),
    (acl("t", principal="alice"), "Could not parse principal"),
    (acl("t", principal="User:"), "Could not parse principal"),
    (acl("t", host=""), "Host should not be empty"),
])
def test_validation_refuses_what_kafkas_controller_refuses(binding: AclBinding, message: str) -> None:
    with pytest.raises(AclValidationError, match=message) as caught:
        validate_binding(binding)
    assert caught.value.error_code == KafkaError.INVALID_REQUEST == 42


def test_validation_accepts_ordinary_bindings() -> None:
    validate_binding(acl("kafka-cluster", Op.ALTER, resource_type=ResourceType.CLUSTER))
    validate_binding(acl("orders-", pattern=PREFIXED, principal="User:*", host="192.0.2.7"))
    validate_binding(acl("*", Op.ALL, DENY, principal="Group:ops"))


def test_patterns_and_entries_refuse_filter_only_values_at_construction() -> None:
    for pattern_type in (PatternType.ANY, PatternType.MATCH):
        with pytest.raises(AclValidationError):
            ResourcePattern(TOPIC, "t", pattern_type)
    with pytest.raises(AclValidationError):
        ResourcePattern(ResourceType.ANY, "t")
    with pytest.raises(AclValidationError):
        AccessControlEntry("User:a", "*", Op.ANY, ALLOW)
    with pytest.raises(AclValidationError):
        AccessControlEntry("User:a", "*", Op.READ, AclPermissionType.ANY)


def test_delete_filters_with_unknown_parts_are_refused() -> None:
    validate_filter(AclBindingFilter.ANY)
    with pytest.raises(AclValidationError, match="Unknown patternFilter"):
        validate_filter(AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN)))
    with pytest.raises(AclValidationError, match="Unknown entryFilter"):
        validate_filter(AclBindingFilter(entry_filter=AccessControlEntryFilter(operation=Op.UNKNOWN)))


def test_text_parsing_is_case_insensitive_like_kafka_acls() -> None:
    assert parse_operation("Read") is Op.READ
    assert parse_operation("DescribeConfigs") is Op.DESCRIBE_CONFIGS
    assert parse_operation("describe_configs") is Op.DESCRIBE_CONFIGS
    assert parse_operation("IDEMPOTENT-WRITE") is Op.IDEMPOTENT_WRITE
    assert parse_resource_type("TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert parse_resource_type("transactional-id") is ResourceType.TRANSACTIONAL_ID
    assert parse_pattern_type("prefixed") is PREFIXED
    assert parse_pattern_type("Match") is PatternType.MATCH
    assert parse_permission_type("allow") is ALLOW
    with pytest.raises(AclValidationError, match="unknown AclOperation 'Reed'"):
        parse_operation("Reed")


def test_display_names_are_kafkas_pascal_case() -> None:
    assert display_name(Op.DESCRIBE_CONFIGS) == "DescribeConfigs"
    assert display_name(ResourceType.TRANSACTIONAL_ID) == "TransactionalId"
    assert display_name(DENY) == "Deny"


def test_string_forms_follow_kafkas_to_string() -> None:
    assert str(acl("t", Op.READ)) == ("(pattern=ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL), "
                                      "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))")
