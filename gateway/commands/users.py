"""``ksgate users add|delete|list``: manage the credential store the gateway reads.

``--store FILE`` names a credential file; ``--config FILE`` takes the store a gateway
configuration names (its ksgate.credentials.file, or the security topic when
ksgate.security.store is KAFKA, which is how the first super user of a replicated store
is created).

Passwords come from a file, stdin or an interactive prompt, never from argv (visible in ps and shell history).
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from auth.sasl.scram import DEFAULT_ITERATIONS
from gateway.config import ConfigError, load_config
from gateway.stores.access import configured_store
from gateway.stores.file_users import ALL_MECHANISMS, CredentialFileError, FileCredentialStore

DEFAULT_STORE = "./ksgate-users.json"


class _PasswordError(Exception):
    pass


def add_users_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``users`` command (and its ``add``/``delete``/``list`` subcommands) to ``subparsers``."""
    store = argparse.ArgumentParser(add_help=False)
    where = store.add_mutually_exclusive_group()
    where.add_argument("--store", default=DEFAULT_STORE, metavar="PATH",
                       help=f"credential file (default {DEFAULT_STORE})")
    where.add_argument("--config", default=None, metavar="FILE",
                       help="the store of this gateway configuration (a file, or the security topic)")

    users = subparsers.add_parser("users", help="manage users in a credential store")
    users.set_defaults(func=run_users_command)
    commands = users.add_subparsers(dest="users_command", required=True, metavar="{add,delete,list}")

    add = commands.add_parser("add", parents=[store], help="create a user or replace its password")
    add.add_argument("name", help="user name (the principal becomes User:NAME)")
    source = add.add_mutually_exclusive_group()
    source.add_argument("--password-file", metavar="FILE",
                        help="read the password from FILE (one trailing newline dropped)")
    source.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    add.add_argument("--mechanism", dest="mechanisms", action="extend", nargs="+", choices=ALL_MECHANISMS,
                     metavar="M",
                     help=f"mechanisms to store credentials for (default: all of {', '.join(ALL_MECHANISMS)})")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="SCRAM iterations (4096..16384)")

    delete = commands.add_parser("delete", parents=[store], help="delete a user")
    delete.add_argument("name")

    commands.add_parser("list", parents=[store], help="list users and their mechanisms (never key material)")
    return users


def _strip_newline(text: str) -> str:
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def _read_password(args: argparse.Namespace) -> str:
    if args.password_file is not None:
        try:
            password = _strip_newline(Path(args.password_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise _PasswordError(f"cannot read the password file: {exc}") from None
    elif args.password_stdin:
        password = _strip_newline(sys.stdin.read())
    elif sys.stdin.isatty():
        password = getpass.getpass(f"Password for {args.name}: ")
        if getpass.getpass("Repeat the password: ") != password:
            raise _PasswordError("the passwords do not match")
    else:
        raise _PasswordError("no password given: use --password-file FILE or --password-stdin")
    if not password:
        raise _PasswordError("the password is empty")
    return password


def run_users_command(args: argparse.Namespace) -> int:
    """Run a parsed ``users`` command; 0 on success, 1 on failure (explained on stderr)."""
    command: str = args.users_command
    try:
        with _open_store(args) as store:
            return _run(command, store, args)
    except (_PasswordError, CredentialFileError, ConfigError, ValueError, OSError) as exc:
        print(f"ksgate users {command}: {exc}", file=sys.stderr)
        return 1


@contextlib.contextmanager
def _open_store(args: argparse.Namespace) -> Iterator[Any]:
    if args.config is None:
        yield FileCredentialStore(args.store)
        return
    from gateway.stores.replicated import TopicCredentialStore

    with configured_store(load_config(args.config), "ksgate.credentials.file", FileCredentialStore,
                          TopicCredentialStore) as store:
        yield store


def _run(command: str, store: Any, args: argparse.Namespace) -> int:
    """One command against an open store (FileCredentialStore or TopicCredentialStore)."""
    if command == "add":
        password = _read_password(args)
        mechanisms = tuple(dict.fromkeys(args.mechanisms or ALL_MECHANISMS))
        store.upsert_user(args.name, password, mechanisms, args.iterations)
        print(f"user {args.name}: {', '.join(store.mechanisms(args.name))} saved in {store.path}")
    elif command == "delete":
        if not store.delete_user(args.name):
            print(f"ksgate users: no user {args.name!r} in {store.path}", file=sys.stderr)
            return 1
        print(f"user {args.name} deleted from {store.path}")
    elif command == "list":
        if isinstance(store, FileCredentialStore) and not store.path.exists():
            print(f"ksgate users: {store.path} does not exist (no users)", file=sys.stderr)
        for user in store.users():
            print(f"{user}\t{', '.join(store.mechanisms(user))}")
    else:  # pragma: no cover - argparse restricts the choices
        raise AssertionError(command)
    return 0
