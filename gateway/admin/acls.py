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


def create_acls(store: AclStore, request: Body, version: int) -> Body:
    response = default_response(ApiKey.CREATE_ACLS, version)
    results: list[Body] = []
    for creation in request["creations"]:
        try:
            binding = _binding(creation)
            validate_binding(binding)
            store.add([binding])
            results.append({"error_code": KafkaError.NONE, "error_message": None})
        except (AclValidationError, ValueError) as exc:
            results.append({"error_code": KafkaError.INVALID_REQUEST, "error_message": str(exc)})
        except AclStoreError as exc:
            results.append({"error_code": KafkaError.UNKNOWN_SERVER_ERROR, "error_message": f"ACL store: {exc}"})
    response["results"] = results
    return response


def delete_acls(store: AclStore, request: Body, version: int) -> Body:
    response = default_response(ApiKey.DELETE_ACLS, version)
    results: list[Body] = []
    for item in request["filters"]:
        try:
            binding_filter = _filter(item)
            validate_filter(binding_filter)
            removed = store.remove_matching([binding_filter])
            results.append({"error_code": KafkaError.NONE, "error_message": None, "matching_acls": [
                {"error_code": KafkaError.NONE, "error_message": None, **_acl_fields(b)} for b in removed]})
        except (AclValidationError, ValueError) as exc:
            results.append({"error_code": KafkaError.INVALID_REQUEST, "error_message": str(exc), "matching_acls": []})
        except AclStoreError as exc:
            results.append({"error_code": KafkaError.UNKNOWN_SERVER_ERROR, "error_message": f"ACL store: {exc}",
                            "matching_acls": []})
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
