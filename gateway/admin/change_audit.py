"""What an admin request changed, read from the request and the answer the gateway gave it.

One function per API that changes a store: the items that took effect (as the audit log's
``sample`` names them) and how many were refused.  Never a secret: SCRAM items name the user
and mechanism, token items the token id and owner (a renew or expire names its token only by
its HMAC, which is never recorded); quota items their entity and keys.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from gateway.admin.scram_credentials import MECHANISMS
from gateway.ops.audit import AdminChange
from gateway.quotas.model import QuotaEntity
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError

Body = dict[str, Any]


def _acl(item: Body, pattern_key: str) -> str:
    """A binding that took effect, in the text form the audit's ``rule`` uses for ACLs."""
    return str(AclBinding(
        ResourcePattern(ResourceType(item["resource_type"]), item["resource_name"],
                        PatternType(item.get(pattern_key, PatternType.LITERAL))),
        AccessControlEntry(item["principal"], item["host"], AclOperation(item["operation"]),
                           AclPermissionType(item["permission_type"]))))


def acls_created(request: Body, response: Body) -> AdminChange:
    pairs = list(zip(request["creations"], response["results"], strict=True))
    changed = [_acl(item, "resource_pattern_type") for item, result in pairs if result["error_code"] == KafkaError.NONE]
    return AdminChange.of(changed, len(pairs) - len(changed))


def acls_deleted(_request: Body, response: Body) -> AdminChange:
    results = response["filter_results"]
    # An ACL two filters match is listed under both (Kafka): named and counted once.
    removed = dict.fromkeys(_acl(acl, "pattern_type") for result in results for acl in result["matching_acls"])
    return AdminChange.of(list(removed), sum(1 for r in results if r["error_code"] != KafkaError.NONE))


def scram_altered(request: Body, response: Body) -> AdminChange:
    refused = {r["user"] for r in response["results"] if r["error_code"] != KafkaError.NONE}
    changed = [f"{verb} {item['name']} {MECHANISMS.get(item['mechanism'], item['mechanism'])}"
               for key, verb in (("deletions", "delete"), ("upsertions", "upsert"))
               for item in request[key] if item["name"] not in refused]
    return AdminChange.of(changed, len(refused))


def token_created(_request: Body, response: Body) -> AdminChange:
    if response["error_code"] != KafkaError.NONE:
        return AdminChange.of([], 1)
    owner = f"{response['principal_type']}:{response['principal_name']}"
    return AdminChange.of([f"token {response['token_id']} owner {owner}"], 0)


def token_changed(_request: Body, response: Body) -> AdminChange:
    ok = response["error_code"] == KafkaError.NONE
    return AdminChange(1 if ok else 0, 0 if ok else 1, ())


def _quota_value(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)


def _quota_ops(entry: Body) -> str:
    return " ".join(f"remove {op['key']}" if op["remove"] else f"set {op['key']}={_quota_value(op['value'])}"
                    for op in entry["ops"])


def quotas_altered(request: Body, response: Body) -> AdminChange:
    """Entities whose change took effect (none when validate_only): ``user=alice set producer_byte_rate=1048576``."""
    failed = sum(1 for r in response["entries"] if r["error_code"] != KafkaError.NONE)
    if request["validate_only"]:
        return AdminChange.of([], failed)
    refused = {QuotaEntity.of((e["entity_type"], e["entity_name"]) for e in r["entity"])
               for r in response["entries"] if r["error_code"] != KafkaError.NONE}
    changed = []
    for entry in request["entries"]:
        entity = QuotaEntity.of((e["entity_type"], e["entity_name"]) for e in entry["entity"])
        if entity not in refused:
            changed.append(f"{entity.label()} {_quota_ops(entry)}".rstrip())
    return AdminChange.of(changed, failed)


DESCRIBE_CHANGE: dict[int, Callable[[Body, Body], AdminChange]] = {
    ApiKey.CREATE_ACLS: acls_created,
    ApiKey.DELETE_ACLS: acls_deleted,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_altered,
    ApiKey.CREATE_DELEGATION_TOKEN: token_created,
    ApiKey.RENEW_DELEGATION_TOKEN: token_changed,
    ApiKey.EXPIRE_DELEGATION_TOKEN: token_changed,
    ApiKey.ALTER_CLIENT_QUOTAS: quotas_altered,
}
