"""Shell scripts that apply bindings: ``ksgate acls`` (ACL file) and ``kafka-acls.sh`` (a Kafka cluster).

``ksgate acls`` mirrors kafka-acls.sh's options, so both take the same arguments after the target.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from authz.model import WILDCARD_HOST, AclBinding, AclPermissionType, ResourceType, display_name

RESOURCE_OPTIONS = {
    ResourceType.TOPIC: "--topic",
    ResourceType.GROUP: "--group",
    ResourceType.TRANSACTIONAL_ID: "--transactional-id",
    ResourceType.DELEGATION_TOKEN: "--delegation-token",
    ResourceType.USER: "--user-principal",
}
KSGATE_TARGET = 'ksgate acls --acl-file "$ACL_FILE"'
KAFKA_TARGET = ('kafka-acls.sh --bootstrap-server "$BOOTSTRAP_SERVER"'
                ' ${COMMAND_CONFIG:+--command-config "$COMMAND_CONFIG"}')


def acl_arguments(binding: AclBinding, action: str = "--add") -> list[str]:
    """kafka-acls.sh arguments for one binding, shell-quoted: ``--add --allow-principal P --operation Read …``."""
    entry, pattern = binding.entry, binding.pattern
    allow = entry.permission_type == AclPermissionType.ALLOW
    args = [action, "--allow-principal" if allow else "--deny-principal", shlex.quote(entry.principal)]
    if entry.host != WILDCARD_HOST:
        args += ["--allow-host" if allow else "--deny-host", shlex.quote(entry.host)]
    args += ["--operation", display_name(entry.operation)]
    if pattern.resource_type == ResourceType.CLUSTER:
        args.append("--cluster")
    else:
        args += [RESOURCE_OPTIONS[pattern.resource_type], shlex.quote(pattern.name)]
    args += ["--resource-pattern-type", pattern.pattern_type.name.lower()]
    if action == "--remove":
        args.append("--force")
    return args


def ksgate_acls_line(binding: AclBinding, action: str = "--add") -> str:
    return " ".join([KSGATE_TARGET, *acl_arguments(binding, action)])


def kafka_acls_line(binding: AclBinding, action: str = "--add") -> str:
    return " ".join([KAFKA_TARGET, *acl_arguments(binding, action)])


def _default(variable: str, value: str) -> str:
    """Shell: use ``$variable`` from the environment, else ``value`` (quoted)."""
    return f'if [ -z "${{{variable}:-}}" ]; then {variable}={shlex.quote(value)}; fi'


def _script(header: Sequence[str], variables: Sequence[str], lines: Sequence[str]) -> str:
    body = ["#!/bin/sh", *(f"# {text}" if text else "#" for text in header), "set -eu", *variables, "", *lines]
    return "\n".join(body) + "\n"


def ksgate_script(bindings: Sequence[AclBinding], acl_file: str, header: Sequence[str] = ()) -> str:
    """``ksgate acls --add`` for each binding; ACL_FILE defaults to ``acl_file``."""
    return _script(header, [_default("ACL_FILE", acl_file)], [ksgate_acls_line(b) for b in bindings])


def kafka_acls_script(bindings: Sequence[AclBinding], header: Sequence[str] = ()) -> str:
    """``kafka-acls.sh --add`` for each binding; set BOOTSTRAP_SERVER (and COMMAND_CONFIG for a secured cluster)."""
    variables = [_default("BOOTSTRAP_SERVER", "localhost:9092"), 'COMMAND_CONFIG="${COMMAND_CONFIG:-}"']
    return _script(header, variables, [kafka_acls_line(b) for b in bindings])


def removal_script(bindings: Sequence[AclBinding], acl_file: str, header: Sequence[str] = ()) -> str:
    """``ksgate acls --remove`` for each binding, every line commented out: review, then uncomment."""
    lines = [f"# {ksgate_acls_line(b, '--remove')}" for b in bindings]
    return _script(header, [_default("ACL_FILE", acl_file)], lines)
