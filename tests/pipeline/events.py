"""Hand-built audit events in exactly the documented schema (docs/audit-log.md), for the pipeline tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from authz.model import AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern
from authz.model import ResourceType as RT
from pipeline.least_privilege.acl_diff import rule_text

BASE = datetime(2026, 11, 20, 0, 0, tzinfo=UTC)
APIS = {"READ": ("Fetch", 1, 13), "WRITE": ("Produce", 0, 9), "DESCRIBE": ("Metadata", 3, 12)}


def ts(minutes: float = 0.0) -> str:
    moment = BASE + timedelta(minutes=minutes)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def binding(principal: str, resource_type: RT, name: str, operation: AclOperation,
            pattern_type: PatternType = PatternType.LITERAL,
            permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type),
                      AccessControlEntry(principal, "*", operation, permission))


def authorization(principal: str, operation: str, resource_type: str, resource_name: str, *,
                  decision: str = "ALLOWED", rule: str | AclBinding | None = None, at: float = 0.0,
                  host: str = "10.0.0.1", api: tuple[str, int, int] | None = None) -> dict[str, Any]:
    name, key, version = api or APIS.get(operation, ("DescribeConfigs", 32, 4))
    pattern_type = rule.pattern.pattern_type.name if isinstance(rule, AclBinding) else None
    text = rule_text(rule) if isinstance(rule, AclBinding) else rule
    return {"schema": 1, "ts": ts(at), "event": "authorization", "principal": principal, "client_host": host,
            "client_port": 50000, "listener": "SASL_SSL", "api_key": key, "api_name": name, "api_version": version,
            "operation": operation, "resource_type": resource_type, "resource_name": resource_name,
            "pattern_type": pattern_type, "decision": decision, "rule": text}


def authentication(*, decision: str, host: str, at: float = 0.0, principal: str | None = None,
                   attempted_user: str | None = None, mechanism: str = "SCRAM-SHA-512",
                   failure: str | None = None) -> dict[str, Any]:
    return {"schema": 1, "ts": ts(at), "event": "authentication", "principal": principal,
            "attempted_user": attempted_user, "client_host": host, "client_port": 40000, "listener": "SASL_SSL",
            "mechanism": mechanism, "decision": decision, "failure": failure}


def failure(host: str, user: str | None, at: float) -> dict[str, Any]:
    return authentication(decision="FAILED", host=host, at=at, attempted_user=user, failure="bad_credentials")


def write_events(directory: Path, events: Iterable[dict[str, Any]], name: str = "audit.log") -> str:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events), encoding="utf-8")
    return str(path)


def mixed_log(directory: Path) -> str:
    """Decisions (one aggregated) in and out of a window, an authentication, and lines that are no events."""
    read_audit = binding("User:app", RT.TOPIC, "audit", AclOperation.READ)
    aggregated = {**authorization("User:app", "READ", "TOPIC", "audit", rule=read_audit, at=1), "count": 5,
                  "sample": ["audit", "audit-2"]}
    log = Path(write_events(directory, [
        authorization("User:app", "READ", "TOPIC", "audit", rule=read_audit), aggregated,
        authorization("User:app", "READ", "TOPIC", "other", decision="DENIED", rule="NoMatchingAcl", at=2),
        authorization("User:app", "READ", "TOPIC", "late", decision="DENIED", rule="NoMatchingAcl", at=90),
        authentication(decision="SUCCEEDED", host="10.0.0.1", principal="User:app", at=3)]))
    log.write_text(log.read_text() + "garbage\n" + json.dumps({"schema": 2, "event": "authorization"}) + "\n")
    return str(log)
