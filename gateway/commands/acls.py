"""``ksgate acls``: add, remove and list ACLs with kafka-acls.sh's options.

Two back ends:

* ``--bootstrap-server HOST:PORT [--command-config FILE]`` talks to a running ksgate (or any
  Kafka cluster) through confluent-kafka's AdminClient (CreateAcls / DescribeAcls / DeleteAcls);
  FILE is a librdkafka-style properties file (``key=value``, ``#`` comments).
* ``--acl-file PATH`` edits a gateway's ACL file directly (offline); a running gateway picks
  the change up within a second.

``--import-from-cluster HOST:PORT [--import-command-config FILE]`` copies a Kafka cluster's ACLs
(DescribeAcls there; every ACL, or those of the resources given as for ``--list``) into the back end.

The expansion of the options into ACL bindings follows Kafka's ``AclCommand``: every
principal x operation x host (allow, then deny), on every resource given; ``--producer``,
``--consumer`` and ``--idempotent`` expand as kafka-acls.sh does.  Differences, all on the
safe side: there is never a prompt (``--force`` is accepted and changes nothing); a
``--remove`` without principals but with operations (given, or implied by ``--producer`` /
``--consumer``) removes only ACLs with those operations (kafka-acls.sh would remove every ACL
of the resource); options that kafka-acls.sh silently ignores (a host without a principal,
``--operation`` with ``--list``, resources the convenience options do not use) are refused.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

from auth.principal import KafkaPrincipal
from authz.acl_json import AclStoreError
from authz.model import (
    CLUSTER_RESOURCE_NAME,
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
)
from gateway.stores.file_acls import AclStore, FileAclStore
from protocol.kafka_errors import KafkaError

DEFAULT_TIMEOUT_S = 30.0

# Kafka's AclEntry.supportedOperations (4.x), plus ALL everywhere (as AclCommand allows).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                                   AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                                   AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                                     AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                                     AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE,
                                              AclOperation.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

PRODUCER_TOPIC_OPERATIONS = (AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE)
PRODUCER_TRANSACTIONAL_ID_OPERATIONS = (AclOperation.WRITE, AclOperation.DESCRIBE)
CONSUMER_TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.DESCRIBE)
CONSUMER_GROUP_OPERATIONS = (AclOperation.READ,)

# Actions only the shadow ACL set has (gateway/commands/shadow_acls.py).
SHADOW_ACTIONS = ("load", "diff", "clear", "promote", "rollback")

_CONCRETE_OPERATIONS = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]
_RESOURCE_OPTIONS = "--topic, --group, --cluster, --transactional-id, --delegation-token or --user-principal"


class AclsUsageError(ValueError):
    """The options do not make a valid ``acls`` command (exit code 2, like argparse)."""


class AclsCommandError(Exception):
    """The command could not be carried out (exit code 1)."""


# --- argument types ---------------------------------------------------------------------------

def _principal(text: str) -> str:
    try:
        return str(KafkaPrincipal.parse(text.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected PrincipalType:name (e.g. User:alice or User:*), got {text!r}") from None


def _operation(text: str) -> AclOperation:
    try:
        operation = parse_operation(text.strip())
    except AclValidationError:
        operation = AclOperation.UNKNOWN
    if operation not in _CONCRETE_OPERATIONS:
        choices = ", ".join(display_name(op) for op in _CONCRETE_OPERATIONS)
        raise argparse.ArgumentTypeError(f"unknown operation {text!r} (expected one of {choices})")
    return operation


def _pattern_type(text: str) -> PatternType:
    try:
        pattern_type = parse_pattern_type(text.strip())
    except AclValidationError:
        pattern_type = PatternType.UNKNOWN
    if pattern_type == PatternType.UNKNOWN:
        raise argparse.ArgumentTypeError(f"unknown pattern type {text!r} (expected any, match, literal or prefixed)")
    return pattern_type


def _non_empty(what: str) -> Any:
    def convert(text: str) -> str:
        value = text.strip()
        if not value:
            raise argparse.ArgumentTypeError(f"{what} must not be empty")
        return value

    convert.__name__ = what  # argparse names the type in its messages
    return convert


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


# --- the parser -------------------------------------------------------------------------------

_EPILOG = """\
examples:
  ksgate acls --acl-file acls.json --add --allow-principal User:alice --producer --topic orders
  ksgate acls --acl-file acls.json --add --allow-principal User:bob --consumer --topic orders --group billing
  ksgate acls --bootstrap-server localhost:9092 --command-config admin.properties \\
      --add --allow-principal User:jane --operation Read --topic logs- --resource-pattern-type prefixed
  ksgate acls --bootstrap-server localhost:9092 --command-config admin.properties \\
      --list --topic orders --resource-pattern-type match
  ksgate acls --acl-file acls.json --remove --allow-principal User:alice --producer --topic orders
  ksgate acls --bootstrap-server ksgate:9092 --command-config admin.properties \\
      --import-from-cluster kafka-1:9093 --import-command-config cluster-admin.properties
  ksgate acls --shadow --config gateway.yaml --load recommend/recommended-acls.json
  ksgate acls --shadow --config gateway.yaml --diff
  ksgate acls --shadow --config gateway.yaml --promote       # and --rollback to undo
"""


class _ImportFrom(argparse.Action):
    """--import-from-cluster HOST:PORT: the action "import" and where to import from, in one option."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        namespace.acls_action = "import"
        namespace.import_from_cluster = values


def add_acls_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``acls`` command (kafka-acls.sh's options) to ``subparsers``."""
    acls = subparsers.add_parser(
        "acls", help="add, remove or list ACLs (kafka-acls.sh's options)",
        description="Add, remove or list ACLs, with kafka-acls.sh's options, through a running gateway "
                    "(--bootstrap-server) or directly in its ACL file (--acl-file).",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    acls.set_defaults(func=run_acls_command, acls_parser=acls)

    actions = acls.add_argument_group("action (exactly one)").add_mutually_exclusive_group(required=True)
    actions.add_argument("--add", dest="acls_action", action="store_const", const="add", help="add ACLs")
    actions.add_argument("--remove", dest="acls_action", action="store_const", const="remove", help="remove ACLs")
    actions.add_argument("--list", dest="acls_action", action="store_const", const="list", help="list ACLs")
    actions.add_argument("--import-from-cluster", action=_ImportFrom, metavar="HOST:PORT",
                         help="copy the ACLs of the Kafka cluster at HOST:PORT (DescribeAcls) into the back end")
    # The shadow ACL set's own actions (gateway/commands/shadow_acls.py; with --shadow --config).
    actions.add_argument("--load", dest="load_file", metavar="FILE",
                         help="with --shadow: replace the shadow set with the ACLs of FILE (e.g. ksgate audit "
                              "recommend's recommended-acls.json)")
    actions.add_argument("--diff", dest="acls_action", action="store_const", const="diff",
                         help="with --shadow: the bindings the shadow set adds and removes against the live one")
    actions.add_argument("--clear", dest="acls_action", action="store_const", const="clear",
                         help="with --shadow: remove the shadow set (nothing is evaluated against it any more)")
    actions.add_argument("--promote", dest="acls_action", action="store_const", const="promote",
                         help="with --shadow: the shadow set becomes the live one, at once on every instance; "
                              "the live set it replaces is kept for --rollback")
    actions.add_argument("--rollback", dest="acls_action", action="store_const", const="rollback",
                         help="with --shadow: the live set kept by the last --promote becomes live again")

    backend = acls.add_argument_group("where the ACLs are (exactly one)")
    backend.add_argument("--bootstrap-server", metavar="HOST:PORT",
                         help="a running ksgate (or Kafka cluster), through the Admin API")
    backend.add_argument("--command-config", metavar="FILE",
                         help="librdkafka properties (key=value) for the admin client, e.g. security.protocol, "
                              "sasl.mechanism, sasl.username, sasl.password, ssl.ca.location")
    backend.add_argument("--acl-file", metavar="PATH",
                         help="edit this ACL file (the gateway's ksgate.acl.file) directly")
    backend.add_argument("--shadow", action="store_true",
                         help="act on the shadow ACL set of the gateway configuration --config names (evaluated "
                              "beside the live set, enforcing nothing): with --add, --remove, --list, --load, "
                              "--diff, --clear, --promote or --rollback")
    backend.add_argument("--config", metavar="FILE",
                         help="with --shadow: the gateway configuration whose stores are used (its "
                              "ksgate.acl.file and ksgate.acl.shadow.file, or its security topic)")
    backend.add_argument("--import-command-config", metavar="FILE",
                         help="librdkafka properties for the admin client of --import-from-cluster")
    backend.add_argument("--timeout", type=_positive_float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                         help=f"admin request timeout with --bootstrap-server (default {DEFAULT_TIMEOUT_S:g})")

    resources = acls.add_argument_group("resource patterns")
    resources.add_argument("--topic", action="append", type=_non_empty("topic"), metavar="TOPIC",
                           help="a topic (* = every topic); repeatable")
    resources.add_argument("--group", action="append", type=_non_empty("group"), metavar="GROUP",
                           help="a consumer group (* = every group); repeatable")
    resources.add_argument("--cluster", action="store_true", help="the cluster resource")
    resources.add_argument("--transactional-id", action="append", type=_non_empty("transactional id"),
                           metavar="ID", help="a transactional id (* = every one); repeatable")
    resources.add_argument("--delegation-token", action="append", type=_non_empty("delegation token"),
                           metavar="TOKEN", help="a delegation token id (* = every token); repeatable")
    resources.add_argument("--user-principal", action="append", type=_principal, metavar="PRINCIPAL",
                           help="a USER resource (for CreateTokens / DescribeTokens); repeatable")
    resources.add_argument("--resource-pattern-type", type=_pattern_type, default=PatternType.LITERAL,
                           metavar="TYPE",
                           help="literal or prefixed for --add; any, match, literal or prefixed for --list and "
                                "--remove (any: any pattern type, exact name; match: every pattern that applies "
                                "to the name, use with care with --remove); default literal")

    entries = acls.add_argument_group("principals, hosts and operations")
    entries.add_argument("--allow-principal", action="append", type=_principal, metavar="PRINCIPAL",
                         help="Type:name to allow (e.g. User:alice, User:*); repeatable")
    entries.add_argument("--deny-principal", action="append", type=_principal, metavar="PRINCIPAL",
                         help="Type:name to deny; repeatable")
    entries.add_argument("--allow-host", action="append", type=_non_empty("host"), metavar="HOST",
                         help="IP address the allowed principals may connect from "
                              "(default * when --allow-principal is given); repeatable")
    entries.add_argument("--deny-host", action="append", type=_non_empty("host"), metavar="HOST",
                         help="IP address the denied principals are denied from "
                              "(default * when --deny-principal is given); repeatable")
    entries.add_argument("--operation", action="append", type=_operation, metavar="OPERATION",
                         help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                              "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, TwoPhaseCommit or All "
                              "(default All); repeatable")
    entries.add_argument("--principal", action="append", type=_principal, metavar="PRINCIPAL",
                         help="with --list: only the ACLs of this principal; repeatable")

    convenience = acls.add_argument_group("convenience")
    convenience.add_argument("--producer", action="store_true",
                             help="Write, Describe, Create on --topic (and Write, Describe on --transactional-id)")
    convenience.add_argument("--consumer", action="store_true",
                             help="Read, Describe on --topic and Read on --group (both required)")
    convenience.add_argument("--idempotent", action="store_true",
                             help="with --producer: also IdempotentWrite on the cluster")
    convenience.add_argument("--force", action="store_true",
                             help="do not prompt (accepted for compatibility: ksgate never prompts)")
    return acls


# --- expansion (pure) -------------------------------------------------------------------------

def _opt(args: argparse.Namespace, name: str) -> list[Any]:
    value = getattr(args, name, None)
    return list(value) if value else []


def _flag(args: argparse.Namespace, name: str) -> bool:
    return bool(getattr(args, name, False))


def _action(args: argparse.Namespace) -> str:
    action = getattr(args, "acls_action", None)
    if action is None and getattr(args, "load_file", None):
        action = "load"
    if action in SHADOW_ACTIONS and not getattr(args, "shadow", False):
        raise AclsUsageError(f"--{action} is an action on the shadow ACL set: add --shadow --config FILE")
    if action not in ("add", "remove", "list", "import", *SHADOW_ACTIONS):
        raise AclsUsageError("exactly one action is required: --add, --remove, --list or --import-from-cluster")
    return str(action)


def _pattern(args: argparse.Namespace) -> PatternType:
    pattern_type = getattr(args, "resource_pattern_type", None)
    return PatternType.LITERAL if pattern_type is None else PatternType(pattern_type)


def _check_options(args: argparse.Namespace) -> None:
    """AclCommandOptions.checkArgs, plus refusals of what kafka-acls.sh would silently ignore."""
    action = _action(args)
    producer, consumer = _flag(args, "producer"), _flag(args, "consumer")
    pattern_type = _pattern(args)

    def given(*names: str) -> list[str]:
        return ["--" + n.replace("_", "-") for n in names if getattr(args, n, None)]

    if action in SHADOW_ACTIONS:
        bad = [o for o in ("topic", "group", "cluster", "transactional_id", "delegation_token", "user_principal",
                           "allow_principal", "deny_principal", "allow_host", "deny_host", "operation", "principal",
                           "producer", "consumer", "idempotent") if getattr(args, o, None)]
        if bad:
            raise AclsUsageError(f"--{action} takes no resource or principal options "
                                 f"({', '.join('--' + o.replace('_', '-') for o in bad)})")
        return
    if action in ("list", "import"):  # an import selects what it copies as --list selects what it shows
        bad = given("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal",
                    "operation", "idempotent", *(("principal",) if action == "import" else ()))
        if bad:
            raise AclsUsageError(f"{', '.join(bad)} cannot be used with --{action if action == 'list' else 'import'}"
                                 f"{' (use --principal to filter)' if action == 'list' else '-from-cluster'}")
    elif _opt(args, "principal"):
        raise AclsUsageError("--principal is only available with --list")
    if producer or consumer:
        which = "--producer" if producer else "--consumer"
        bad = given("operation", "deny_principal", "deny_host")
        if bad:
            raise AclsUsageError(f"{', '.join(bad)} cannot be used with {which} (the operations are implied; "
                                 "only --allow-principal and --allow-host)")
        bad = given("cluster", "delegation_token", "user_principal")
        if bad:
            raise AclsUsageError(f"{', '.join(bad)} cannot be used with {which}")
    if producer and not _opt(args, "topic"):
        raise AclsUsageError("with --producer you must specify a --topic")
    if _flag(args, "idempotent") and not producer:
        raise AclsUsageError("--idempotent is only available with --producer")
    if consumer and not (_opt(args, "topic") and _opt(args, "group")):
        raise AclsUsageError("with --consumer you must specify a --topic and a --group")
    if consumer and not producer and _opt(args, "transactional_id"):
        raise AclsUsageError("--transactional-id cannot be used with --consumer (only with --producer)")
    if producer and not consumer and _opt(args, "group"):
        raise AclsUsageError("--group cannot be used with --producer alone (it is for --consumer)")
    if action != "list":
        for host, principal in (("allow_host", "allow_principal"), ("deny_host", "deny_principal")):
            if _opt(args, host) and not _opt(args, principal):
                raise AclsUsageError(f"--{host.replace('_', '-')} needs --{principal.replace('_', '-')}")
    if action == "add" and pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclsUsageError(f"a --resource-pattern-type of {pattern_type.name.lower()} is not valid with --add "
                             "(use literal or prefixed)")
    if _flag(args, "cluster") and pattern_type == PatternType.PREFIXED:
        raise AclsUsageError("--cluster cannot be used with --resource-pattern-type prefixed")


def _resource_filters(args: argparse.Namespace) -> list[ResourcePatternFilter]:
    """Every resource the options name (AclCommand.getResourceFilter), in option order, deduplicated."""
    pattern_type = _pattern(args)
    cluster_type = PatternType.LITERAL if pattern_type == PatternType.PREFIXED else pattern_type
    out: dict[ResourcePatternFilter, None] = {}
    for name in _opt(args, "topic"):
        out[ResourcePatternFilter(ResourceType.TOPIC, name, pattern_type)] = None
    if _flag(args, "cluster") or _flag(args, "idempotent"):
        out[ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, cluster_type)] = None
    for name in _opt(args, "group"):
        out[ResourcePatternFilter(ResourceType.GROUP, name, pattern_type)] = None
    for name in _opt(args, "transactional_id"):
        out[ResourcePatternFilter(ResourceType.TRANSACTIONAL_ID, name, pattern_type)] = None
    for name in _opt(args, "delegation_token"):
        out[ResourcePatternFilter(ResourceType.DELEGATION_TOKEN, name, pattern_type)] = None
    for name in _opt(args, "user_principal"):
        out[ResourcePatternFilter(ResourceType.USER, name, pattern_type)] = None
    return list(out)


def _resource_operations(args: argparse.Namespace) -> dict[ResourcePatternFilter, list[AclOperation]]:
    """Which operations go on which resource (AclCommand.getResourceFilterToAcls, before principals)."""
    filters = _resource_filters(args)
    if not filters:
        raise AclsUsageError(f"you must provide at least one resource: {_RESOURCE_OPTIONS}")
    producer, consumer = _flag(args, "producer"), _flag(args, "consumer")
    out: dict[ResourcePatternFilter, dict[AclOperation, None]] = {}

    def put(resource: ResourcePatternFilter, operations: Iterable[AclOperation]) -> None:
        out.setdefault(resource, {}).update(dict.fromkeys(operations))

    if not producer and not consumer:
        given = _opt(args, "operation") or [AclOperation.ALL]
        for resource in filters:
            put(resource, given)
    if producer:
        for resource in filters:
            if resource.resource_type == ResourceType.TOPIC:
                put(resource, PRODUCER_TOPIC_OPERATIONS)
            elif resource.resource_type == ResourceType.TRANSACTIONAL_ID:
                put(resource, PRODUCER_TRANSACTIONAL_ID_OPERATIONS)
        if _flag(args, "idempotent"):
            put(ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME, PatternType.LITERAL),
                [AclOperation.IDEMPOTENT_WRITE])
    if consumer:
        for resource in filters:
            if resource.resource_type == ResourceType.TOPIC:
                put(resource, CONSUMER_TOPIC_OPERATIONS)
            elif resource.resource_type == ResourceType.GROUP:
                put(resource, CONSUMER_GROUP_OPERATIONS)

    for resource, operations in out.items():
        valid = SUPPORTED_OPERATIONS[resource.resource_type] | {AclOperation.ALL}
        unsupported = [op for op in operations if op not in valid]
        if unsupported:
            supported = ", ".join(display_name(op) for op in sorted(valid))
            raise AclsUsageError(f"resource type {display_name(resource.resource_type)} does not support "
                                 f"{', '.join(display_name(op) for op in unsupported)} (only {supported})")
    return {resource: list(operations) for resource, operations in out.items()}


def _entries(args: argparse.Namespace, operations: Sequence[AclOperation]) -> list[AccessControlEntry]:
    """principals x operations x hosts, allow then deny (AclCommand.getAcl); empty without principals."""
    out: dict[AccessControlEntry, None] = {}
    for permission, principal_opt, host_opt in ((AclPermissionType.ALLOW, "allow_principal", "allow_host"),
                                                (AclPermissionType.DENY, "deny_principal", "deny_host")):
        principals = list(dict.fromkeys(_opt(args, principal_opt)))
        hosts = list(dict.fromkeys(_opt(args, host_opt))) or ["*"]
        for principal in principals:
            for operation in operations:
                for host in hosts:
                    out[AccessControlEntry(principal, host, operation, permission)] = None
    return list(out)


def _pattern_of(resource: ResourcePatternFilter) -> ResourcePattern:
    assert resource.name is not None
    return ResourcePattern(resource.resource_type, resource.name, resource.pattern_type)


def planned_additions(args: argparse.Namespace) -> list[tuple[ResourcePattern, list[AccessControlEntry]]]:
    """What ``--add`` creates, per resource pattern; AclsUsageError if the options do not make sense."""
    _check_options(args)
    plan = []
    for resource, operations in _resource_operations(args).items():
        entries = _entries(args, operations)
        if not entries:
            raise AclsUsageError("you must specify --allow-principal or --deny-principal when adding ACLs")
        plan.append((_pattern_of(resource), entries))
    return plan


def bindings_from_args(args: argparse.Namespace) -> list[AclBinding]:
    """The ACL bindings the options describe, expanded as kafka-acls.sh does (what ``--add`` creates).

    Pure: no I/O.  Raises AclsUsageError when the options do not make a valid command.
    """
    return [AclBinding(pattern, entry) for pattern, entries in planned_additions(args) for entry in entries]


def filters_from_args(args: argparse.Namespace) -> list[AclBindingFilter]:
    """The filters ``--remove`` deletes with.  Pure; AclsUsageError on misuse.

    With principals: exactly the entries ``--add`` would create (same command line, undone).
    Without principals: every ACL of the resource, narrowed to the operations if any were given
    (or implied by ``--producer`` / ``--consumer``).
    """
    _check_options(args)
    narrow = bool(_opt(args, "operation")) or _flag(args, "producer") or _flag(args, "consumer")
    out: dict[AclBindingFilter, None] = {}
    for resource, operations in _resource_operations(args).items():
        entries = _entries(args, operations)
        if entries:
            for entry in entries:
                out[AclBindingFilter(resource, entry.to_filter())] = None
        elif narrow:
            for operation in operations:
                out[AclBindingFilter(resource, AccessControlEntryFilter(operation=operation))] = None
        else:
            out[AclBindingFilter(resource, AccessControlEntryFilter())] = None
    return list(out)


def listing_filters(args: argparse.Namespace) -> list[ResourcePatternFilter]:
    """The resources ``--list`` (and the listing after --add/--remove) shows; empty = every ACL."""
    return _resource_filters(args)


# --- back ends --------------------------------------------------------------------------------

class AclBackend(Protocol):
    def create(self, bindings: Sequence[AclBinding]) -> None: ...

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]: ...

    def describe(self, filters: Sequence[ResourcePatternFilter]) -> list[AclBinding]:
        """Every ACL on any of ``filters`` (every ACL at all if there are none)."""
        ...


def on_filters(bindings: Iterable[AclBinding], filters: Sequence[ResourcePatternFilter]) -> list[AclBinding]:
    """The bindings on any of ``filters`` (all of them if there are none): DescribeAcls over a store."""
    wanted = [AclBindingFilter(f, AccessControlEntryFilter()) for f in filters] or [AclBindingFilter.ANY]
    return [b for b in bindings if any(f.matches(b) for f in wanted)]


class StoreBackend:
    """AclBackend over an AclStore (the shadow set of ``ksgate acls --shadow``; FileBackend's file)."""

    def __init__(self, store: AclStore) -> None:
        self.store = store

    def create(self, bindings: Sequence[AclBinding]) -> None:
        self.store.add(bindings)

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        return self.store.remove_matching(filters)

    def describe(self, filters: Sequence[ResourcePatternFilter]) -> list[AclBinding]:
        return on_filters(self.store.load(), filters)


class FileBackend(StoreBackend):
    """The gateway's ACL file, edited in place (atomically; the gateway polls it)."""

    def __init__(self, path: str | Path) -> None:
        self.file = FileAclStore(path)
        super().__init__(self.file)
        self.existed = self.file.path.exists()
        self.file.load()  # AclStoreError if the file is unreadable or invalid: nothing is changed then

    def describe(self, filters: Sequence[ResourcePatternFilter]) -> list[AclBinding]:
        return on_filters(self.file.bindings, filters)  # what load() read, without reading it again


def read_properties(path: str | Path) -> dict[str, str]:
    """A librdkafka-style properties file: ``key=value`` lines; blank lines and ``#``/``!`` comments skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AclsCommandError(f"cannot read the command config {path}: {exc}") from None
    out: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise AclsCommandError(f"{path}:{number}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def format_filter(binding_filter: AclBindingFilter) -> str:
    """Kafka's AclBindingFilter.toString form (``null`` = any)."""
    pattern, entry = binding_filter.pattern_filter, binding_filter.entry_filter

    def text(value: str | None) -> str:
        return "null" if value is None else value

    return (f"(patternFilter=ResourcePattern(resourceType={pattern.resource_type.name}, name={text(pattern.name)}, "
            f"patternType={pattern.pattern_type.name}), entryFilter=(principal={text(entry.principal)}, "
            f"host={text(entry.host)}, operation={entry.operation.name}, "
            f"permissionType={entry.permission_type.name}))")


def _kafka_error_text(exc: BaseException) -> str:
    error = exc.args[0] if exc.args else None
    if error is not None and callable(getattr(error, "name", None)) and callable(getattr(error, "str", None)):
        return f"{error.name()}: {error.str()}"
    return str(exc) or type(exc).__name__


# librdkafka errors that retrying cannot fix: a refused login or a failed TLS handshake.
# Waiting on would only repeat the failed login (and look like brute force in the audit log).
_FINAL_CLIENT_ERRORS = frozenset({
    -169,  # _AUTHENTICATION
    KafkaError.SASL_AUTHENTICATION_FAILED,
    -181,  # _SSL
})

# librdkafka's own log lines (one per reconnect) go here and no further: the command reports
# what went wrong once, from error_cb and the request's result.
_LIBRDKAFKA_LOG = logging.getLogger("ksgate.acls.librdkafka")
_LIBRDKAFKA_LOG.propagate = False
_LIBRDKAFKA_LOG.addHandler(logging.NullHandler())

# Few, slow reconnects: a wrong address or password should fail, not hammer the gateway.
CLIENT_DEFAULTS = {"reconnect.backoff.ms": "500", "reconnect.backoff.max.ms": "2000",
                   "log.connection.close": "false"}


# librdkafka's errors for a broker it cannot reach (refused, unresolvable, dropped), and its
# "every broker is down" that follows them.
_TRANSPORT_ERRORS = frozenset({-195, -193})  # _TRANSPORT, _RESOLVE
_ALL_BROKERS_DOWN = -187


class ClientErrors:
    """confluent-kafka's ``error_cb``: remembers the last error and the first one retrying cannot fix.

    Every broker down (the first connection to the bootstrap address failed) is final too: otherwise the
    request times out with librdkafka's "Failed while waiting for controller", which hides that nothing
    listens there.
    """

    def __init__(self, bootstrap: str = "") -> None:
        self.bootstrap = bootstrap
        self.last: str | None = None
        self.final: str | None = None
        self._transport: str | None = None  # why the last connection attempt failed

    def __call__(self, error: Any) -> None:
        text = f"{error.name()}: {error.str()}"
        self.last = text
        if error.code() in _TRANSPORT_ERRORS:
            self._transport = error.str()
        if self.final is not None:
            return
        if error.code() in _FINAL_CLIENT_ERRORS or error.fatal():
            self.final = text
        elif error.code() == _ALL_BROKERS_DOWN:
            why = f" ({self._transport})" if self._transport else ""
            self.final = (f"cannot connect to {self.bootstrap}{why}: is the gateway running, and is this its "
                          f"listener's address?")


class AdminBackend:
    """A running ksgate (or Kafka cluster), through confluent-kafka's AdminClient."""

    def __init__(self, bootstrap: str, command_config: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S) -> None:
        try:
            from confluent_kafka import admin as ck
        except ImportError:
            raise AclsCommandError("--bootstrap-server needs the confluent-kafka package "
                                   "(pip install confluent-kafka), or use --acl-file") from None
        self.ck: Any = ck  # its stubs disagree with its behaviour (None is a valid filter string)
        self.timeout = timeout
        self.errors = ClientErrors(bootstrap)
        config: dict[str, Any] = {**CLIENT_DEFAULTS, **(read_properties(command_config) if command_config else {})}
        config.update({"bootstrap.servers": bootstrap, "error_cb": self.errors, "logger": _LIBRDKAFKA_LOG})
        try:
            self.admin: Any = self.ck.AdminClient(config)
        except Exception as exc:  # KafkaException (bad property), TypeError, ValueError
            raise AclsCommandError(f"cannot create the admin client: {_kafka_error_text(exc)}") from None

    # conversions to and from confluent_kafka.admin's types (same wire codes; CLUSTER is BROKER there)

    def _restype(self, resource_type: ResourceType) -> Any:
        name = "BROKER" if resource_type == ResourceType.CLUSTER else resource_type.name
        try:
            return self.ck.ResourceType[name]
        except KeyError:
            raise AclsCommandError(f"confluent-kafka's AdminClient cannot handle {display_name(resource_type)} "
                                   "ACLs; use --acl-file") from None

    def _operation(self, operation: AclOperation) -> Any:
        try:
            return self.ck.AclOperation[operation.name]
        except KeyError:
            raise AclsCommandError(f"confluent-kafka's AdminClient cannot handle the {display_name(operation)} "
                                   "operation; use --acl-file") from None

    def to_ck_binding(self, binding: AclBinding) -> Any:
        pattern, entry = binding.pattern, binding.entry
        return self.ck.AclBinding(self._restype(pattern.resource_type), pattern.name,
                                  self.ck.ResourcePatternType(int(pattern.pattern_type)), entry.principal,
                                  entry.host, self._operation(entry.operation),
                                  self.ck.AclPermissionType(int(entry.permission_type)))

    def to_ck_filter(self, binding_filter: AclBindingFilter) -> Any:
        pattern, entry = binding_filter.pattern_filter, binding_filter.entry_filter
        return self.ck.AclBindingFilter(self._restype(pattern.resource_type), pattern.name,
                                        self.ck.ResourcePatternType(int(pattern.pattern_type)), entry.principal,
                                        entry.host, self._operation(entry.operation),
                                        self.ck.AclPermissionType(int(entry.permission_type)))

    @staticmethod
    def from_ck_binding(binding: Any) -> AclBinding:
        restype = binding.restype.name
        resource_type = ResourceType.CLUSTER if restype == "BROKER" else ResourceType[restype]
        return AclBinding(
            ResourcePattern(resource_type, binding.name, PatternType(binding.resource_pattern_type.value)),
            AccessControlEntry(binding.principal, binding.host, AclOperation(binding.operation.value),
                               AclPermissionType(binding.permission_type.value)))

    def _wait(self, futures: Sequence[Future[Any]]) -> None:
        """Until every future is done or the timeout; polling serves error_cb, and a final error ends it."""
        deadline = time.monotonic() + self.timeout + 5
        while not all(f.done() for f in futures) and time.monotonic() < deadline:
            self.admin.poll(0.1)
            if self.errors.final is not None:
                final = self.errors.final
                raise AclsCommandError(final if final.startswith("cannot connect") else
                                       f"cannot connect to the cluster: {final}")

    def _results(self, calls: Sequence[tuple[str, Future[Any]]]) -> list[Any]:
        """Each future's result, in order; one AclsCommandError naming every failure."""
        self._wait([f for _, f in calls])
        results, failures = [], []
        for what, future in calls:
            if not future.done():
                last = f" (last error: {self.errors.last})" if self.errors.last else ""
                failures.append(f"{what}: no answer within {self.timeout:g}s{last}")
                continue
            try:
                results.append(future.result())
            except Exception as exc:  # KafkaException carrying a KafkaError
                failures.append(f"{what} failed: {_kafka_error_text(exc)}")
        if failures:
            raise AclsCommandError("\n".join(failures))
        return results

    def create(self, bindings: Sequence[AclBinding]) -> None:
        if not bindings:
            return
        ours = {self.to_ck_binding(b): b for b in dict.fromkeys(bindings)}
        futures = self.admin.create_acls(list(ours), request_timeout=self.timeout)
        self._results([(f"CreateAcls {ours[ck_binding]}", future) for ck_binding, future in futures.items()])

    def delete(self, filters: Sequence[AclBindingFilter]) -> list[AclBinding]:
        if not filters:
            return []
        ours = {self.to_ck_filter(f): f for f in dict.fromkeys(filters)}
        futures = self.admin.delete_acls(list(ours), request_timeout=self.timeout)
        removed: dict[AclBinding, None] = {}
        for found in self._results([(f"DeleteAcls {format_filter(ours[ck_filter])}", future)
                                    for ck_filter, future in futures.items()]):
            for ck_binding in found:
                removed[self.from_ck_binding(ck_binding)] = None
        return list(removed)

    def describe(self, filters: Sequence[ResourcePatternFilter]) -> list[AclBinding]:
        wanted = [AclBindingFilter(f, AccessControlEntryFilter()) for f in filters] or [AclBindingFilter.ANY]
        found: dict[AclBinding, None] = {}
        for binding_filter in wanted:
            future = self.admin.describe_acls(self.to_ck_filter(binding_filter), request_timeout=self.timeout)
            for ck_binding in self._results([("DescribeAcls", future)])[0]:
                found[self.from_ck_binding(ck_binding)] = None
        if not found:
            self._check_may_describe()
        return list(found)

    def _check_may_describe(self) -> None:
        """An empty DescribeAcls answer: was it empty, or refused?

        librdkafka drops DescribeAcls' top-level error code (CLUSTER_AUTHORIZATION_FAILED comes
        back as an empty list), so ask the cluster what this principal may do with it (DescribeCluster,
        KIP-430): DescribeAcls needs DESCRIBE on the cluster, as in Kafka.
        """
        future = self.admin.describe_cluster(include_authorized_operations=True, request_timeout=self.timeout)
        try:
            [cluster] = self._results([("DescribeCluster", future)])
        except AclsCommandError:
            return  # a cluster without DescribeCluster: the empty answer stands
        allowed = {getattr(op, "name", str(op)) for op in (cluster.authorized_operations or ())}
        if not allowed & {"DESCRIBE", "ALTER", "ALL"}:  # ALTER implies DESCRIBE (Kafka's implied operations)
            raise AclsCommandError("DescribeAcls failed: CLUSTER_AUTHORIZATION_FAILED: this principal may not "
                                   "describe ACLs (it needs DESCRIBE on the cluster)")


# --- output -----------------------------------------------------------------------------------

def _pattern_key(pattern: ResourcePattern) -> tuple[int, str, int]:
    return (int(pattern.resource_type), pattern.name, int(pattern.pattern_type))


def _entry_key(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return (entry.principal, entry.host, int(entry.operation), int(entry.permission_type))


def group_by_pattern(bindings: Iterable[AclBinding]) -> list[tuple[ResourcePattern, list[AccessControlEntry]]]:
    grouped: dict[ResourcePattern, dict[AccessControlEntry, None]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, {})[binding.entry] = None
    return [(pattern, sorted(grouped[pattern], key=_entry_key)) for pattern in sorted(grouped, key=_pattern_key)]


def format_resource_acls(title: str, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> str:
    """kafka-acls.sh's block: ``<title> `ResourcePattern(...)`:`` then one tab-indented entry a line."""
    lines = [f"{title} `{pattern}`:"] + [f"\t{entry}" for entry in entries]
    return "\n".join(lines) + "\n"


def format_acl_listing(bindings: Iterable[AclBinding], principals: Sequence[str] = ()) -> str:
    """What ``--list`` prints; with ``principals``, a section per principal (as kafka-acls.sh)."""
    groups = group_by_pattern(bindings)
    if not principals:
        return "".join(format_resource_acls("Current ACLs for resource", p, e) + "\n" for p, e in groups)
    out = []
    for principal in principals:
        out.append(f"ACLs for principal `{principal}`\n")
        for pattern, entries in groups:
            mine = [e for e in entries if e.principal == principal]
            if mine:
                out.append(format_resource_acls("Current ACLs for resource", pattern, mine) + "\n")
    return "".join(out)


# --- the command ------------------------------------------------------------------------------

def _check_backend(args: argparse.Namespace) -> None:
    bootstrap, acl_file = getattr(args, "bootstrap_server", None), getattr(args, "acl_file", None)
    if getattr(args, "shadow", False):
        if bootstrap or acl_file:
            raise AclsUsageError("--shadow works on the stores of a gateway configuration: use --config FILE, "
                                 "not --bootstrap-server or --acl-file")
        if not getattr(args, "config", None):
            raise AclsUsageError("--shadow needs --config FILE (the gateway configuration)")
        return
    if getattr(args, "config", None):
        raise AclsUsageError("--config can only be used with --shadow")
    if bootstrap and acl_file:
        raise AclsUsageError("use either --bootstrap-server or --acl-file, not both")
    if not bootstrap and not acl_file:
        raise AclsUsageError("one of --bootstrap-server (a running gateway) or --acl-file (its ACL file) is required")
    if getattr(args, "command_config", None) and not bootstrap:
        raise AclsUsageError("--command-config can only be used with --bootstrap-server")
    if getattr(args, "import_command_config", None) and getattr(args, "acls_action", None) != "import":
        raise AclsUsageError("--import-command-config can only be used with --import-from-cluster")


def open_backend(args: argparse.Namespace) -> AclBackend:
    if getattr(args, "acl_file", None):
        return FileBackend(args.acl_file)
    return AdminBackend(args.bootstrap_server, getattr(args, "command_config", None),
                        getattr(args, "timeout", DEFAULT_TIMEOUT_S))


def execute(args: argparse.Namespace, backend: AclBackend) -> None:
    """Carry out an already validated command against ``backend``, printing as kafka-acls.sh does."""
    action = _action(args)
    if action == "add":
        plan = planned_additions(args)
        for pattern, entries in plan:
            print(format_resource_acls("Adding ACLs for resource", pattern, entries))
        backend.create([AclBinding(pattern, entry) for pattern, entries in plan for entry in entries])
    elif action == "import":
        source = AdminBackend(args.import_from_cluster, getattr(args, "import_command_config", None),
                              getattr(args, "timeout", DEFAULT_TIMEOUT_S))
        found = source.describe(listing_filters(args))
        for pattern, entries in group_by_pattern(found):
            print(format_resource_acls("Importing ACLs for resource", pattern, entries))
        if found:
            backend.create(found)
        else:
            print(f"No ACLs on {args.import_from_cluster} matched: nothing was imported.\n")
    elif action == "remove":
        removed = backend.delete(filters_from_args(args))
        for pattern, entries in group_by_pattern(removed):
            print(format_resource_acls("Removed ACLs for resource", pattern, entries))
        if not removed:
            print("No ACLs matched: nothing was removed.\n")
    principals = list(dict.fromkeys(_opt(args, "principal")))
    print(format_acl_listing(backend.describe(listing_filters(args)), principals), end="")


def usage_problem(args: argparse.Namespace) -> int | None:
    """Check a parsed ``acls`` command's options: None when they make a valid command, else 2 (explained).

    A usage error exits with status 2 through argparse (``parser.error``), as a parse error would.
    """
    try:
        _check_backend(args)
        if _action(args) == "add":
            planned_additions(args)
        elif _action(args) == "remove":
            filters_from_args(args)
        else:
            _check_options(args)
    except AclsUsageError as exc:
        parser: argparse.ArgumentParser | None = getattr(args, "acls_parser", None)
        if parser is not None:
            parser.error(str(exc))  # exits 2
        print(f"ksgate acls: error: {exc}", file=sys.stderr)
        return 2
    return None


def run_acls_command(args: argparse.Namespace) -> int:
    """Run a parsed ``acls`` command: 0 on success, 1 on failure (explained on stderr), 2 on a usage error."""
    problem = usage_problem(args)
    if problem is not None:
        return problem
    if getattr(args, "shadow", False):  # gateway/commands/shadow_acls.py runs those (see its parser hook)
        print("ksgate acls: error: --shadow is not available here", file=sys.stderr)
        return 2
    try:
        backend = open_backend(args)
        if isinstance(backend, FileBackend) and not backend.existed and _action(args) == "list":
            print(f"ksgate acls: {backend.file.path} does not exist (no ACLs)", file=sys.stderr)
        execute(args, backend)
    except (AclsCommandError, AclStoreError, AclValidationError) as exc:
        print(f"ksgate acls: {exc}", file=sys.stderr)
        return 1
    return 0
