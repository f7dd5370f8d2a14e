"""Kafka's ACL vocabulary: resource patterns, access control entries, bindings and their filters.

Wire codes, `matches` semantics and create-time validation follow Apache Kafka 4.x exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, TypeVar

from auth.principal import KafkaPrincipal
from protocol.kafka_errors import KafkaError

WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_RESOURCE_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, exact name
    MATCH = 2  # filters only: every pattern that would apply to the name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AclValidationError(ValueError):
    """An ACL binding, filter or name that Kafka would refuse (INVALID_REQUEST)."""

    error_code: ClassVar[int] = KafkaError.INVALID_REQUEST


# An ALLOW of any of these also allows DESCRIBE / DESCRIBE_CONFIGS (never for DENY).
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def operation_matches(acl_operation: AclOperation, permission: AclPermissionType, requested: AclOperation) -> bool:
    """Does an ACE with ``acl_operation`` apply to a request for ``requested`` (StandardAuthorizerData)?"""
    if acl_operation == AclOperation.ALL:
        return True
    if permission == AclPermissionType.ALLOW:
        if requested == AclOperation.DESCRIBE:
            return acl_operation in IMPLIES_DESCRIBE
        if requested == AclOperation.DESCRIBE_CONFIGS:
            return acl_operation in IMPLIES_DESCRIBE_CONFIGS
    return acl_operation == requested


@dataclass(slots=True, frozen=True)
class ResourcePattern:
    """A stored pattern: LITERAL (exact name, or ``*`` = every name) or PREFIXED."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type == ResourceType.ANY:
            raise AclValidationError("resourceType must not be ANY")
        if self.pattern_type in (PatternType.MATCH, PatternType.ANY):
            raise AclValidationError(f"patternType must not be {self.pattern_type.name}")

    def matches(self, resource_name: str) -> bool:
        """Does this pattern apply to the concrete resource ``resource_name``?"""
        if self.pattern_type == PatternType.LITERAL:
            return self.name == resource_name or self.name == WILDCARD_RESOURCE
        if self.pattern_type == PatternType.PREFIXED:
            return resource_name.startswith(self.name)
        return False

    def to_filter(self) -> ResourcePatternFilter:
        return ResourcePatternFilter(self.resource_type, self.name, self.pattern_type)

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(slots=True, frozen=True)
class AccessControlEntry:
    """Who (``Type:name``), from where (host or ``*``), may or may not do what."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        if self.operation == AclOperation.ANY:
            raise AclValidationError("operation must not be ANY")
        if self.permission_type == AclPermissionType.ANY:
            raise AclValidationError("permissionType must not be ANY")

    def to_filter(self) -> AccessControlEntryFilter:
        return AccessControlEntryFilter(self.principal, self.host, self.operation, self.permission_type)

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")


@dataclass(slots=True, frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def to_filter(self) -> AclBindingFilter:
        """The filter matching exactly this binding (as Kafka's ``toFilter``)."""
        return AclBindingFilter(self.pattern.to_filter(), self.entry.to_filter())

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(slots=True, frozen=True)
class ResourcePatternFilter:
    """Selects stored patterns. ``name=None`` is any name; ANY/MATCH pattern types as in Kafka."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type == PatternType.ANY or self.pattern_type == pattern.pattern_type:
            return self.name == pattern.name
        # MATCH: every stored pattern that would apply to a resource called ``name``.
        return pattern.matches(self.name)


@dataclass(slots=True, frozen=True)
class AccessControlEntryFilter:
    """Selects entries by exact principal/host strings (None = any) and operation/permission (ANY = any)."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type


@dataclass(slots=True, frozen=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    ANY: ClassVar[AclBindingFilter]

    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown() or self.entry_filter.is_unknown()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern_filter.matches(binding.pattern) and self.entry_filter.matches(binding.entry)

    def exact_binding(self) -> AclBinding | None:
        """The one binding this filter can match, when every field names one value (else None).

        Lets a store find such a filter's match with one set lookup instead of a scan.
        """
        pattern, entry = self.pattern_filter, self.entry_filter
        if (pattern.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN) or pattern.name is None
                or pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED)
                or entry.principal is None or entry.host is None
                or entry.operation in (AclOperation.ANY, AclOperation.UNKNOWN)
                or entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY)):
            return None
        return AclBinding(ResourcePattern(pattern.resource_type, pattern.name, pattern.pattern_type),
                          AccessControlEntry(entry.principal, entry.host, entry.operation, entry.permission_type))


AclBindingFilter.ANY = AclBindingFilter()


def validate_binding(binding: AclBinding) -> None:
    """Refuse a binding Kafka's controller (and broker CreateAcls handling) would refuse to create."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise AclValidationError(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclValidationError(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclValidationError(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        raise AclValidationError(f"Invalid permissionType {entry.permission_type.name}")
    if not pattern.name:
        raise AclValidationError("Resource name should not be empty")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_RESOURCE_NAME:
        raise AclValidationError(f"The only valid name for the CLUSTER resource is {CLUSTER_RESOURCE_NAME}")
    try:
        KafkaPrincipal.parse(entry.principal)
    except ValueError:
        raise AclValidationError(
            f"Could not parse principal from `{entry.principal}` (expected `Type:name`)") from None
    if not entry.host:
        raise AclValidationError("Host should not be empty (use * for any host)")


def validate_filter(binding_filter: AclBindingFilter) -> None:
    """Refuse a DeleteAcls filter with UNKNOWN parts, as Kafka's controller does."""
    if binding_filter.pattern_filter.is_unknown():
        raise AclValidationError("Unknown patternFilter.")
    if binding_filter.entry_filter.is_unknown():
        raise AclValidationError("Unknown entryFilter.")


# --- text forms for the CLI and the ACL file ----------------------------------------------

E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _squash(text: str) -> str:
    return text.replace("_", "").replace("-", "").replace(" ", "").upper()


def parse_enum(kind: type[E], text: str) -> E:
    """Case-insensitive name (``Read``, ``describe_configs``, ``TransactionalId``, ``transactional-id``)."""
    wanted = _squash(text)
    for member in kind:
        if _squash(member.name) == wanted:
            return member
    choices = ", ".join(display_name(m) for m in kind if m.name not in ("UNKNOWN",))
    raise AclValidationError(f"unknown {kind.__name__} {text!r} (expected one of {choices})")


def parse_resource_type(text: str) -> ResourceType:
    return parse_enum(ResourceType, text)


def parse_pattern_type(text: str) -> PatternType:
    return parse_enum(PatternType, text)


def parse_operation(text: str) -> AclOperation:
    return parse_enum(AclOperation, text)


def parse_permission_type(text: str) -> AclPermissionType:
    return parse_enum(AclPermissionType, text)


def display_name(member: ResourceType | PatternType | AclOperation | AclPermissionType) -> str:
    """Kafka's PascalCase display form: ``TransactionalId``, ``DescribeConfigs``, ``Allow``."""
    return "".join(part.capitalize() for part in member.name.split("_"))
