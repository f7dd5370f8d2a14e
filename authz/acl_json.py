"""The ACL file format: bindings as JSON objects (field names as Kafka's AccessControlEntryRecord).

Part of the ACL model, so that the file store, the security topic and the pipeline share one format.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AclValidationError,
    PatternType,
    ResourcePattern,
    ResourceType,
    parse_enum,
    validate_binding,
)

FORMAT_VERSION = 1


class AclStoreError(Exception):
    """An ACL file or store could not be read, decoded or written; the previous state is still in force."""


def binding_to_json(binding: AclBinding) -> dict[str, str]:
    pattern, entry = binding.pattern, binding.entry
    return {
        "resourceType": pattern.resource_type.name,
        "resourceName": pattern.name,
        "patternType": pattern.pattern_type.name,
        "principal": entry.principal,
        "host": entry.host,
        "operation": entry.operation.name,
        "permissionType": entry.permission_type.name,
    }


def _enum_field(kind: Any, raw: object, field: str) -> Any:
    if isinstance(raw, bool):
        raise AclValidationError(f"{field}: expected a name or code, got {raw!r}")
    if isinstance(raw, int):
        try:
            return kind(raw)
        except ValueError:
            raise AclValidationError(f"{field}: unknown code {raw}") from None
    if isinstance(raw, str):
        return parse_enum(kind, raw)
    raise AclValidationError(f"{field}: expected a name or code, got {raw!r}")


def _str_field(obj: dict[str, Any], field: str) -> str:
    value = obj.get(field)
    if not isinstance(value, str):
        raise AclValidationError(f"{field}: expected a string, got {value!r}")
    return value


def binding_from_json(obj: object) -> AclBinding:
    """One validated binding from its JSON object; AclValidationError if it is not acceptable."""
    if not isinstance(obj, dict):
        raise AclValidationError(f"expected an object, got {obj!r}")
    host = obj.get("host", "*")
    if not isinstance(host, str):
        raise AclValidationError(f"host: expected a string, got {host!r}")
    binding = AclBinding(
        ResourcePattern(
            _enum_field(ResourceType, obj.get("resourceType"), "resourceType"),
            _str_field(obj, "resourceName"),
            _enum_field(PatternType, obj.get("patternType", "LITERAL"), "patternType"),
        ),
        AccessControlEntry(
            _str_field(obj, "principal"),
            host,
            _enum_field(AclOperation, obj.get("operation"), "operation"),
            _enum_field(AclPermissionType, obj.get("permissionType"), "permissionType"),
        ),
    )
    validate_binding(binding)
    return binding


def encode_acl_file(bindings: Iterable[AclBinding]) -> bytes:
    document = {"version": FORMAT_VERSION, "acls": [binding_to_json(b) for b in bindings]}
    return (json.dumps(document, indent=2) + "\n").encode()


def decode_acl_file(data: bytes) -> list[AclBinding]:
    """Every binding of an ACL file, deduplicated in file order; AclStoreError for any defect."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise AclStoreError(f"not valid JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("acls"), list):
        raise AclStoreError('expected an object with an "acls" list')
    if document.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise AclStoreError(f"unsupported version {document.get('version')!r}")
    out: dict[AclBinding, None] = {}
    for i, obj in enumerate(document["acls"]):
        try:
            out[binding_from_json(obj)] = None
        except AclValidationError as exc:
            raise AclStoreError(f"acls[{i}]: {exc}") from None
    return list(out)
