"""CreateAcls, DeleteAcls and DescribeAcls, served by the gateway from its own ACL store.

Authorization (ALTER / DESCRIBE on the cluster) has already been decided by the policies;
these handlers validate like Kafka's controller and apply the change, which the store
then pushes to the authorizer (and so to every open connection) at once.
"""

from __future__ import annotations

from typing import Any

from authz.acl_json import AclStoreError
from authz.authorizer import StandardAuthorizer
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
    validate_binding,
    validate_filter,
)
from authz.response_defaults import default_response
from gateway.stores.file_acls import AclStore
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError

Body = dict[str, Any]


def _filter(item: Body, pattern_key: str = "pattern_type_filter") -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType(item["resource_type_filter"]), item["resource_name_filter"],
                              PatternType(item.get(pattern_key, PatternType.LITERAL))),
        AccessControlEntryFilter(item["principal_filter"], item["host_filter"], AclOperation(item["operation"]),
                                 AclPermissionType(item["permission_type"])))


def _binding(item: Body) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType(item["resource_type"]), item["resource_name"],
                        PatternType(item.get("resource_pattern_type", PatternType.LITERAL))),
        AccessControlEntry(item["principal"], item["host"], AclOperation(item["operation"]),
                           AclPermissionType(item["permission_type"])))


def _acl_fields(binding: AclBinding) -> Body:
    return {"resource_type": int(binding.pattern.resource_type), "resource_name": binding.pattern.name,
            "pattern_type": int(binding.pattern.pattern_type), "principal": binding.entry.principal,
            "host": binding.entry.host, "operation": int(binding.entry.operation),
            "permission_type": int(binding.entry.permission_type)}


def _error(code: int, message: str | None) -> Body:
    return {"error_code": code, "error_message": message}


def create_acls(store: AclStore, request: Body, version: int) -> Body:
    """Every valid creation is written in one store change (one file write, one batch of records):
    the request lands whole, or each valid item carries the store's error (as Kafka's atomic apply)."""
    response = default_response(ApiKey.CREATE_ACLS, version)
    results: list[Body] = []
    valid: list[tuple[int, AclBinding]] = []
    for creation in request["creations"]:
        try:
            binding = _binding(creation)
            validate_binding(binding)
            valid.append((len(results), binding))
            results.append(_error(KafkaError.NONE, None))
        except (AclValidationError, ValueError) as exc:
            results.append(_error(KafkaError.INVALID_REQUEST, str(exc)))
    if valid:
        try:
            store.add([binding for _, binding in valid])
        except AclStoreError as exc:
            for i, _ in valid:
                results[i] = _error(KafkaError.UNKNOWN_SERVER_ERROR, f"ACL store: {exc}")
    response["results"] = results
    return response


def delete_acls(store: AclStore, request: Body, version: int) -> Body:
    """All valid filters are applied in one store change; each matches the ACLs as they were before
    the request (Kafka's controller), so an ACL two filters match is listed under both."""
    response = default_response(ApiKey.DELETE_ACLS, version)
    results: list[Body] = []
    valid: list[tuple[int, AclBindingFilter]] = []
    for item in request["filters"]:
        try:
            binding_filter = _filter(item)
            validate_filter(binding_filter)
            valid.append((len(results), binding_filter))
            results.append({**_error(KafkaError.NONE, None), "matching_acls": []})
        except (AclValidationError, ValueError) as exc:
            results.append({**_error(KafkaError.INVALID_REQUEST, str(exc)), "matching_acls": []})
    if valid:
        try:
            matched = store.remove_each([binding_filter for _, binding_filter in valid])
        except AclStoreError as exc:
            for i, _ in valid:
                results[i] = {**_error(KafkaError.UNKNOWN_SERVER_ERROR, f"ACL store: {exc}"), "matching_acls": []}
        else:
            for (i, _), removed in zip(valid, matched, strict=True):
                results[i]["matching_acls"] = [{"error_code": KafkaError.NONE, "error_message": None, **_acl_fields(b)}
                                               for b in removed]
    response["filter_results"] = results
    return response


def describe_acls(authorizer: StandardAuthorizer, request: Body, version: int) -> Body:
    response = default_response(ApiKey.DESCRIBE_ACLS, version)
    try:
        binding_filter = _filter(request)
        validate_filter(binding_filter)
    except (AclValidationError, ValueError) as exc:
        response.update(error_code=KafkaError.INVALID_REQUEST, error_message=str(exc))
        return response
    grouped: dict[tuple[int, str, int], list[Body]] = {}
    for binding in authorizer.acls(binding_filter):
        key = (int(binding.pattern.resource_type), binding.pattern.name, int(binding.pattern.pattern_type))
        grouped.setdefault(key, []).append({"principal": binding.entry.principal, "host": binding.entry.host,
                                            "operation": int(binding.entry.operation),
                                            "permission_type": int(binding.entry.permission_type)})
    response["resources"] = [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                             for (t, n, p), acls in sorted(grouped.items())]
    return response
