"""``ksgate quotas``: add, remove and describe client quotas with kafka-configs' options, no Java needed.

``--quota-file PATH`` edits a gateway's quota file (``ksgate.quota.file``) directly; ``--config FILE``
takes the store a gateway configuration names (its quota file, or the security topic when
ksgate.security.store is KAFKA).  A running gateway applies the change within a second.

Entities as kafka-configs names them: ``--entity-type users|clients|ips`` with ``--entity-name NAME``
or ``--entity-default``, paired in the order given (``--entity-type users --entity-name alice
--entity-type clients --entity-default``), or the short forms ``--user NAME``, ``--user-defaults``,
``--client NAME``, ``--client-defaults``, ``--ip ADDRESS``, ``--ip-defaults``.  Values are checked
as Kafka checks them (the same messages).  ``--describe`` without an entity lists every quota;
with entity types but no names, every entity of exactly those types (as kafka-configs).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

from gateway.config import ConfigError, load_config
from gateway.quotas.model import CLIENT_ID, IP, USER, QuotaEntity, QuotaError, validate_entity, validate_value
from gateway.quotas.state import QuotaState
from gateway.stores.access import configured_store
from gateway.stores.file_quotas import FileQuotaStore, QuotaStore, QuotaStoreError

_TYPES = {"users": USER, "clients": CLIENT_ID, "ips": IP}
_NAMED = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
_PRINT_ORDER = (USER, CLIENT_ID, IP)
_EPILOG = """examples:
  ksgate quotas --quota-file quotas.json --alter --add-config producer_byte_rate=1048576 --entity-type users \\
      --entity-name alice
  ksgate quotas --config gateway.yaml --alter --add-config consumer_byte_rate=2097152 --user alice --client billing
  ksgate quotas --config gateway.yaml --alter --delete-config producer_byte_rate --entity-type users --entity-default
  ksgate quotas --config gateway.yaml --describe --entity-type users
"""


class QuotasUsageError(Exception):
    pass


class _Part(argparse.Action):
    """Appends (kind, value) to ``entity_parts`` in command-line order: kafka-configs pairs by order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parts = list(getattr(namespace, "entity_parts", None) or [])
        parts.append((self.const, values))
        namespace.entity_parts = parts


def add_quotas_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``quotas`` command (kafka-configs' quota options) to ``subparsers``."""
    quotas = subparsers.add_parser(
        "quotas", help="add, remove or describe client quotas (kafka-configs' options)",
        description="Add, remove or describe client quotas (user, client-id, user + client-id, ip; "
                    "<default> entities), with kafka-configs' options, in a gateway's quota store.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    quotas.set_defaults(func=run_quotas_command, quotas_parser=quotas, entity_parts=[])
    action = quotas.add_mutually_exclusive_group(required=True)
    action.add_argument("--alter", dest="quotas_action", action="store_const", const="alter",
                        help="add (--add-config) or remove (--delete-config) quotas of one entity")
    action.add_argument("--describe", dest="quotas_action", action="store_const", const="describe",
                        help="list quotas")
    where = quotas.add_mutually_exclusive_group(required=True)
    where.add_argument("--quota-file", metavar="PATH", help="edit this quota file (ksgate.quota.file) directly")
    where.add_argument("--config", metavar="FILE",
                       help="the store of this gateway configuration (its quota file, or the security topic)")
    entity = quotas.add_argument_group("entity")
    entity.add_argument("--entity-type", action=_Part, const="type", choices=sorted(_TYPES),
                        help="users, clients or ips; twice for users and clients")
    entity.add_argument("--entity-name", action=_Part, const="name", metavar="NAME",
                        help="the name of the entity type given in the same position")
    entity.add_argument("--entity-default", action=_Part, const="default", nargs=0,
                        help="the <default> entity of the type given in the same position")
    for option, entity_type in (("--user", "users"), ("--client", "clients"), ("--ip", "ips")):
        entity.add_argument(option, action=_Part, const=f"{entity_type}=", metavar="NAME",
                            help=f"short for --entity-type {entity_type} --entity-name NAME")
        entity.add_argument(f"{option}-defaults", action=_Part, const=f"{entity_type}=<default>", nargs=0,
                            help=f"short for --entity-type {entity_type} --entity-default")
    quotas.add_argument("--add-config", action="append", default=[], metavar="K=V[,K=V...]",
                        help="producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate; "
                             "connection_creation_rate for ips")
    quotas.add_argument("--delete-config", action="append", default=[], metavar="K[,K...]",
                        help="quota keys to remove")
    return quotas


def entity_parts(parts: Sequence[tuple[str, Any]]) -> tuple[list[str], list[str | None]]:
    """(entity types, names with None for <default>) from the command line's entity options, in order."""
    types: list[str] = []
    names: list[str | None] = []
    for kind, value in parts:
        if kind == "type":
            types.append(_TYPES[value])
        elif kind == "name":
            names.append(value)
        elif kind == "default":
            names.append(None)
        else:  # a short form: "users=" + NAME, or "users=<default>"
            entity_type, _, default = kind.partition("=")
            types.append(_TYPES[entity_type])
            names.append(None if default else value)
    if len(set(types)) != len(types):
        raise QuotasUsageError("each entity type may be given once")
    return types, names


def parse_add_config(items: Sequence[str]) -> dict[str, float]:
    values: dict[str, float] = {}
    for item in (piece for text in items for piece in text.split(",") if piece.strip()):
        key, equals, text = item.partition("=")
        key = key.strip()
        if not equals or not key:
            raise QuotasUsageError(f"--add-config: {item!r} is not KEY=VALUE")
        try:
            values[key] = float(text)
        except ValueError:
            raise QuotasUsageError(f"--add-config: the value of {key} is not a number: {text!r}") from None
    return values


def parse_delete_config(items: Sequence[str]) -> list[str]:
    return [key.strip() for text in items for key in text.split(",") if key.strip()]


@contextlib.contextmanager
def _open_store(args: argparse.Namespace) -> Iterator[Any]:
    if args.config is None:
        yield _file_store(args.quota_file)
        return
    from gateway.stores.replicated import TopicQuotaStore

    with configured_store(load_config(args.config), "ksgate.quota.file", _file_store, TopicQuotaStore) as store:
        yield store


def _file_store(path: str) -> FileQuotaStore:
    store = FileQuotaStore(path)
    store.load()
    return store


def java_double(value: float) -> str:
    """A double as Java's Double.toString prints it (kafka-configs' output): 1048576.0, 50.5, 1.0E8."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(text) - 1 + exponent}"


def _described(entity: QuotaEntity) -> str:
    parts = dict(entity.parts)
    return ", ".join(f"the default {_NAMED[t]}" if parts[t] is None else f"{_NAMED[t]} '{parts[t]}'"
                     for t in _PRINT_ORDER if t in parts)


def _listing_order(entity: QuotaEntity) -> tuple[tuple[bool, bool, str], ...]:
    """Users first, then client ids, then ips; within a type, the default before the names."""
    parts = dict(entity.parts)
    return tuple((t not in parts, parts.get(t) is not None, parts.get(t) or "") for t in _PRINT_ORDER)


def format_quota_listing(state: QuotaState) -> str:
    """kafka-configs' lines: ``Quota configs for user-principal 'alice' are producer_byte_rate=1048576.0``."""
    lines = [f"Quota configs for {_described(entity)} are "
             + ", ".join(f"{k}={java_double(v)}" for k, v in sorted(values.items()))
             for entity, values in sorted(state.items(), key=lambda item: _listing_order(item[0]))]
    return "".join(line + "\n" for line in lines)


def _selected(state: QuotaState, types: list[str], names: list[str | None]) -> QuotaState:
    if not types:
        return state
    if names:
        wanted = QuotaEntity.of(zip(types, names, strict=True))
        return {wanted: state[wanted]} if wanted in state else {}
    return {e: v for e, v in state.items() if {t for t, _ in e.parts} == set(types)}


def _alter(store: QuotaStore, entity: QuotaEntity, added: dict[str, float], deleted: list[str]) -> str:
    for key, value in added.items():
        validate_value(entity, key, value)
    store.alter([(entity, {**dict.fromkeys(deleted), **added})])
    first, name = entity.parts[0]
    kafka_type = next(k for k, v in _TYPES.items() if v == first)
    if name is None:
        return f"Completed updating default config for {kafka_type} in the cluster.\n"
    return f"Completed updating config for {kafka_type[:-1]} {name}.\n"


def run_quotas_command(args: argparse.Namespace) -> int:
    """Run a parsed ``quotas`` command: 0 on success, 1 on failure, 2 on a usage error (explained on stderr)."""
    try:
        types, names = entity_parts(args.entity_parts)
        if names and len(names) != len(types):
            raise QuotasUsageError("give each --entity-type its --entity-name or --entity-default, in order")
        if args.quotas_action == "alter" and not names:
            raise QuotasUsageError("--alter needs an entity: --entity-type with --entity-name or --entity-default")
        if args.quotas_action == "describe" and (args.add_config or args.delete_config):
            raise QuotasUsageError("--add-config and --delete-config go with --alter")
        entity = validate_entity(zip(types, names, strict=True)) if names else None
        added, deleted = parse_add_config(args.add_config), parse_delete_config(args.delete_config)
        if args.quotas_action == "alter" and not added and not deleted:
            raise QuotasUsageError("--alter needs --add-config or --delete-config")
        if added.keys() & set(deleted):
            raise QuotasUsageError(f"{', '.join(sorted(added.keys() & set(deleted)))}: both added and deleted")
    except (QuotasUsageError, QuotaError) as exc:
        parser: argparse.ArgumentParser | None = getattr(args, "quotas_parser", None)
        if parser is not None:
            parser.error(str(exc))  # exits 2
        print(f"ksgate quotas: error: {exc}", file=sys.stderr)
        return 2
    try:
        with _open_store(args) as store:
            if args.quotas_action == "alter":
                assert entity is not None
                print(_alter(store, entity, added, deleted), end="")
            else:
                print(format_quota_listing(_selected(store.quotas(), types, names)), end="")
    except (QuotasUsageError, QuotaError, QuotaStoreError, ConfigError, OSError) as exc:
        print(f"ksgate quotas: {exc}", file=sys.stderr)
        return 1
    return 0
