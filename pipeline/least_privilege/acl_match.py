"""Kafka's ACL matching rules (authz.model) as Spark column expressions.

Used to decide which observed actions a binding covers, on the executors, without collecting events.
"""

from __future__ import annotations

from pyspark.sql import Column

from authz.model import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclOperation,
    PatternType,
)

LITERAL = PatternType.LITERAL.name
PREFIXED = PatternType.PREFIXED.name


def _names(operations: frozenset[AclOperation]) -> list[str]:
    return sorted(op.name for op in operations)


def pattern_matches(pattern_type: Column, pattern_name: Column, resource_name: Column) -> Column:
    """ResourcePattern.matches: LITERAL equal (or ``*``), PREFIXED a prefix of the name."""
    literal = (pattern_type == LITERAL) & ((pattern_name == resource_name) | (pattern_name == WILDCARD_RESOURCE))
    prefixed = (pattern_type == PREFIXED) & resource_name.startswith(pattern_name)
    return literal | prefixed


def pattern_covers(outer_type: Column, outer_name: Column, inner_type: Column, inner_name: Column) -> Column:
    """Does pattern ``outer`` apply to every resource pattern ``inner`` applies to?"""
    wildcard = (outer_type == LITERAL) & (outer_name == WILDCARD_RESOURCE)
    same_literal = (outer_type == LITERAL) & (inner_type == LITERAL) & (outer_name == inner_name)
    prefix = (outer_type == PREFIXED) & inner_name.startswith(outer_name)
    return wildcard | same_literal | prefix


def allow_operation_matches(acl_operation: Column, requested: Column) -> Column:
    """operation_matches for an ALLOW entry: ALL, equal, or an operation that implies the DESCRIBE asked."""
    implied_describe = (requested == AclOperation.DESCRIBE.name) & acl_operation.isin(_names(IMPLIES_DESCRIBE))
    implied_configs = ((requested == AclOperation.DESCRIBE_CONFIGS.name)
                       & acl_operation.isin(_names(IMPLIES_DESCRIBE_CONFIGS)))
    return (acl_operation == AclOperation.ALL.name) | (acl_operation == requested) | implied_describe | implied_configs


def principal_matches(acl_principal: Column, principal: Column) -> Column:
    """The entry names this principal, or every user (``User:*``)."""
    return (acl_principal == principal) | (acl_principal == WILDCARD_PRINCIPAL)


def host_matches(acl_host: Column, client_host: Column) -> Column:
    """The entry is for any host (``*``) or for this client's address."""
    return (acl_host == WILDCARD_HOST) | (acl_host == client_host)
