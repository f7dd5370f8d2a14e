"""Builders for ACL tests, and a deliberately naive reference authorizer to compare against.

The reference restates Kafka's rules as plain linear scans, independently of authz.index.
"""

from __future__ import annotations

from collections.abc import Iterable

from auth.principal import KafkaPrincipal
from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
LITERAL = PatternType.LITERAL
PREFIXED = PatternType.PREFIXED
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY
Op = AclOperation

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "10.0.0.1"


def acl(name: str, operation: AclOperation = Op.READ, permission: AclPermissionType = ALLOW, *,
        principal: str = "User:alice", host: str = "*", pattern: PatternType = LITERAL,
        resource_type: ResourceType = TOPIC) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


# --- the naive reference ---------------------------------------------------------------------

def _pattern_applies(binding: AclBinding, resource_type: ResourceType, name: str) -> bool:
    pattern = binding.pattern
    if pattern.resource_type != resource_type:
        return False
    if pattern.pattern_type == LITERAL:
        return pattern.name == name or pattern.name == "*"
    return name[: len(pattern.name)] == pattern.name


def _principal_applies(binding: AclBinding, principal: KafkaPrincipal) -> bool:
    principal_type, _, principal_name = binding.entry.principal.partition(":")
    if (principal_type, principal_name) == ("User", "*"):
        return True
    return principal_type == principal.principal_type and principal_name == principal.name


def _operation_applies(binding: AclBinding, operation: AclOperation) -> bool:
    acl_op, permission = binding.entry.operation, binding.entry.permission_type
    if acl_op == Op.ALL:
        return True
    if permission == ALLOW and operation == Op.DESCRIBE:
        return acl_op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE)
    if permission == ALLOW and operation == Op.DESCRIBE_CONFIGS:
        return acl_op in (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)
    return acl_op == operation


def reference_matches(bindings: Iterable[AclBinding], principal: KafkaPrincipal, host: str,
                      operation: AclOperation, resource_type: ResourceType, name: str) -> list[AclBinding]:
    """Every binding that applies to the request (pattern, principal, host and operation)."""
    return [b for b in bindings
            if _pattern_applies(b, resource_type, name) and _principal_applies(b, principal)
            and b.entry.host in (host, "*") and _operation_applies(b, operation)]


def reference_authorize(bindings: list[AclBinding], super_users: set[str], allow_if_no_acl: bool, ready: bool,
                        principal: KafkaPrincipal, host: str, operation: AclOperation,
                        resource_type: ResourceType, name: str) -> tuple[bool, str]:
    """(allowed, why) with why in {super, not-ready, deny, allow, default, no-match}."""
    if f"{principal.principal_type}:{principal.name}" in super_users:
        return True, "super"
    if not ready:
        return False, "not-ready"
    matching = reference_matches(bindings, principal, host, operation, resource_type, name)
    if any(b.entry.permission_type == DENY for b in matching):
        return False, "deny"
    if any(b.entry.permission_type == ALLOW for b in matching):
        return True, "allow"
    if not any(_pattern_applies(b, resource_type, name) for b in bindings):
        return allow_if_no_acl, "default"
    return False, "no-match"


def reference_authorize_any(bindings: list[AclBinding], super_users: set[str], allow_if_no_acl: bool,
                            principal: KafkaPrincipal, host: str, operation: AclOperation,
                            resource_type: ResourceType) -> bool:
    """Kafka's Authorizer.authorizeByResourceType default method, restated."""
    if reference_authorize(bindings, super_users, allow_if_no_acl, True, principal, host, operation,
                           resource_type, "hardcode")[0]:
        return True
    deny: dict[PatternType, set[str]] = {LITERAL: set(), PREFIXED: set()}
    allow: dict[PatternType, set[str]] = {LITERAL: set(), PREFIXED: set()}
    wildcard_allow = False
    for b in bindings:
        if b.pattern.resource_type != resource_type:
            continue
        if b.entry.host not in (host, "*"):
            continue
        if not (_principal_applies(b, principal)):
            continue
        if b.entry.operation not in (operation, Op.ALL):
            continue
        if b.entry.permission_type == DENY:
            if b.pattern.pattern_type == LITERAL and b.pattern.name == "*":
                return False
            deny[b.pattern.pattern_type].add(b.pattern.name)
        elif b.pattern.pattern_type == LITERAL and b.pattern.name == "*":
            wildcard_allow = True
        else:
            allow[b.pattern.pattern_type].add(b.pattern.name)
    if wildcard_allow:
        return True
    for pattern_type, names in allow.items():
        for name in names:
            if pattern_type == LITERAL and name in deny[LITERAL]:
                continue
            if not any(name[:i] in deny[PREFIXED] for i in range(1, len(name) + 1)):
                return True
    return False
