"""``ksgate tokens create|renew|expire|describe``: kafka-delegation-tokens.sh for the gateway's token file.

HMACs are read from a file or stdin, never argv (visible in ps and shell history), and printed only on create.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from auth.principal import KafkaPrincipal
from auth.sasl.mechanism import wall_clock_ms
from gateway.config import ConfigError, load_config
from gateway.stores.access import configured_store
from gateway.stores.file_tokens import (
    DEFAULT_EXPIRY_TIME_MS,
    DEFAULT_MAX_LIFETIME_MS,
    TokenFileError,
    TokenInfo,
    TokenStore,
    TokenStoreError,
    hmac_password,
)
from protocol.kafka_errors import KafkaError

DEFAULT_STORE = "./ksgate-tokens.json"
_COLUMNS = ("TOKENID", "HMAC", "OWNER", "REQUESTER", "RENEWERS", "ISSUEDATE", "EXPIRYDATE", "MAXDATE")
_WIDTHS = (15, 30, 15, 15, 25, 15, 15, 15)


class _CommandError(Exception):
    pass


def add_tokens_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``tokens`` command (``create``/``renew``/``expire``/``describe``) to ``subparsers``."""
    common = argparse.ArgumentParser(add_help=False)
    where = common.add_mutually_exclusive_group()
    where.add_argument("--store", default=DEFAULT_STORE, metavar="PATH",
                       help=f"delegation token file (default {DEFAULT_STORE})")
    where.add_argument("--config", metavar="FILE",
                       help="use the token store and delegation.token.secret.key of this gateway configuration "
                            "(its token file, or the security topic)")
    common.add_argument("--secret-key-file", metavar="FILE",
                        help="file holding delegation.token.secret.key (one trailing newline dropped); "
                             "required with --store")
    lifetimes = argparse.ArgumentParser(add_help=False)
    lifetimes.add_argument("--delegation-token-expiry-time-ms", type=int, default=None,
                           metavar="MS", help=f"the gateway's delegation.token.expiry.time.ms "
                                              f"(default: the --config's, else {DEFAULT_EXPIRY_TIME_MS})")
    lifetimes.add_argument("--delegation-token-max-lifetime-ms", type=int, default=None,
                           metavar="MS", help=f"the gateway's delegation.token.max.lifetime.ms "
                                              f"(default: the --config's, else {DEFAULT_MAX_LIFETIME_MS})")
    by_hmac = argparse.ArgumentParser(add_help=False)
    source = by_hmac.add_mutually_exclusive_group(required=True)
    source.add_argument("--hmac-file", metavar="FILE", help="read the token's base64 HMAC from FILE")
    source.add_argument("--hmac-stdin", action="store_true", help="read the token's base64 HMAC from standard input")
    by_hmac.add_argument("--principal", metavar="TYPE:NAME",
                         help="act as this owner or renewer (default: the token's owner)")

    tokens = subparsers.add_parser("tokens", help="manage delegation tokens in the gateway's token file")
    tokens.set_defaults(func=run_tokens_command)
    commands = tokens.add_subparsers(dest="tokens_command", required=True, metavar="{create,renew,expire,describe}")

    create = commands.add_parser("create", parents=[common, lifetimes], help="create a token (prints its HMAC)")
    create.add_argument("--owner", "--owner-principal", required=True, metavar="TYPE:NAME",
                        help="the principal the token authenticates as, e.g. User:alice")
    create.add_argument("--requester", metavar="TYPE:NAME", help="recorded as the token requester (default: owner)")
    create.add_argument("--renewer", "--renewer-principal", dest="renewers", action="append", default=[],
                        metavar="User:NAME", help="a principal that may renew or expire the token (repeatable)")
    create.add_argument("--max-life-time-period", type=int, default=-1, metavar="MS",
                        help="maximum lifetime; -1 (default) for delegation.token.max.lifetime.ms")

    renew = commands.add_parser("renew", parents=[common, lifetimes, by_hmac], help="renew a token")
    renew.add_argument("--renew-time-period", type=int, default=-1, metavar="MS",
                       help="renew for this long (at most delegation.token.expiry.time.ms; -1 for that)")

    expire = commands.add_parser("expire", parents=[common, by_hmac], help="expire a token")
    expire.add_argument("--expiry-time-period", type=int, default=-1, metavar="MS",
                        help="expire this long from now; -1 (default) removes the token immediately")

    describe = commands.add_parser("describe", parents=[common], help="list tokens (never their HMACs)")
    describe.add_argument("--owner", "--owner-principal", dest="owners", action="append", metavar="TYPE:NAME",
                          help="only tokens this principal owns, requested or renews (repeatable; default all)")
    return tokens


def _strip_newline(text: str) -> str:
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


def _read_secret(path: str) -> str:
    try:
        secret = _strip_newline(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise _CommandError(f"cannot read the secret key file: {exc}") from None
    if not secret:
        raise _CommandError("the secret key is empty: delegation tokens are disabled")
    return secret


def _read_hmac(args: argparse.Namespace) -> bytes:
    if args.hmac_file is not None:
        try:
            text = Path(args.hmac_file).read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise _CommandError(f"cannot read the HMAC file: {exc}") from None
    else:
        text = sys.stdin.read()
    try:
        mac = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise _CommandError("the HMAC is not base64") from None
    if not mac:
        raise _CommandError("the HMAC is empty")
    return mac


def _principal(text: str) -> str:
    try:
        return str(KafkaPrincipal.parse(text.strip()))
    except ValueError as exc:
        raise _CommandError(str(exc)) from None


def _date(ms: int) -> str:
    """kafka-delegation-tokens.sh's SimpleDateFormat("yyyy-MM-dd'T'HH:mm"), in local time."""
    return time.strftime("%Y-%m-%dT%H:%M", time.localtime(ms / 1000))


def _renewers(info: TokenInfo) -> str:
    return "[" + ", ".join(info.renewers) + "]"  # Java's List.toString


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return " ".join(f"{cell:<{width}}" for cell, width in zip(cells, widths, strict=True)).rstrip()


def _print_tokens(tokens: Sequence[tuple[TokenInfo, bytes | None]]) -> None:
    with_hmac = any(mac is not None for _, mac in tokens)
    keep = [i for i, name in enumerate(_COLUMNS) if with_hmac or name != "HMAC"]
    print()
    print(_row([_COLUMNS[i] for i in keep], [_WIDTHS[i] for i in keep]))
    for info, mac in tokens:
        cells = (info.token_id, hmac_password(mac) if mac is not None else "", info.owner, info.requester,
                 _renewers(info), _date(info.issue_timestamp_ms), _date(info.expiry_timestamp_ms),
                 _date(info.max_timestamp_ms))
        print()
        print(_row([cells[i] for i in keep], [_WIDTHS[i] for i in keep]))


def _error_text(error: KafkaError) -> str:
    return f"{error.name} ({error.value})"


def _fail_on(error: KafkaError) -> None:
    if error != KafkaError.NONE:
        raise _CommandError(_error_text(error))


def _acting_principal(store: TokenStore, args: argparse.Namespace, mac: bytes) -> str:
    if args.principal is not None:
        return _principal(args.principal)
    info = store.find(mac)
    if info is None:
        raise _CommandError(_error_text(KafkaError.DELEGATION_TOKEN_NOT_FOUND))
    return info.owner


def run_tokens_command(args: argparse.Namespace) -> int:
    """Run a parsed ``tokens`` command; 0 on success, 1 on failure (explained on stderr)."""
    command: str = args.tokens_command
    try:
        with _open_store(args) as store:
            return _run(command, store, args)
    except TokenStoreError as exc:
        print(f"ksgate tokens {command}: {_error_text(exc.code)}: {exc}", file=sys.stderr)
        return 1
    except (_CommandError, TokenFileError, ConfigError, ValueError, OSError) as exc:
        print(f"ksgate tokens {command}: {exc}", file=sys.stderr)
        return 1


@contextlib.contextmanager
def _open_store(args: argparse.Namespace) -> Iterator[TokenStore]:
    if args.config is None:
        _lifetimes(args, DEFAULT_EXPIRY_TIME_MS, DEFAULT_MAX_LIFETIME_MS)
        if args.secret_key_file is None:
            raise _CommandError("--secret-key-file is required with --store")
        yield TokenStore(args.store, _read_secret(args.secret_key_file))
        return
    config = load_config(args.config)
    _lifetimes(args, config.settings["delegation.token.expiry.time.ms"],
               config.settings["delegation.token.max.lifetime.ms"])
    secret = _read_secret(args.secret_key_file) if args.secret_key_file else \
        config.settings["delegation.token.secret.key"]
    if not secret:
        raise _CommandError("delegation.token.secret.key is not set: delegation tokens are disabled")
    from gateway.stores.replicated import TopicTokenStore

    with configured_store(config, "ksgate.delegation.token.file", lambda path: TokenStore(path, secret),
                          lambda topic: TopicTokenStore(topic, secret)) as store:
        yield store


def _lifetimes(args: argparse.Namespace, expiry_time_ms: int, max_lifetime_ms: int) -> None:
    """Fill the lifetime options not given on the command line (only create and renew have them)."""
    if getattr(args, "delegation_token_expiry_time_ms", 0) is None:
        args.delegation_token_expiry_time_ms = expiry_time_ms
    if getattr(args, "delegation_token_max_lifetime_ms", 0) is None:
        args.delegation_token_max_lifetime_ms = max_lifetime_ms


def _run(command: str, store: TokenStore, args: argparse.Namespace) -> int:
    """One command against an open token store (file or security topic)."""
    now_ms = wall_clock_ms()
    if command == "create":
        owner = _principal(args.owner)
        requester = _principal(args.requester) if args.requester is not None else owner
        renewers = [_principal(r) for r in args.renewers]
        print(f"Calling create token operation with renewers :[{', '.join(renewers)}] , "
              f"max-life-time-period :{args.max_life_time_period}")
        info, mac = store.create(owner, requester, renewers, args.max_life_time_period, now_ms,
                                 args.delegation_token_expiry_time_ms, args.delegation_token_max_lifetime_ms)
        print(f"Created delegation token with tokenId : {info.token_id}")
        _print_tokens([(info, mac)])
    elif command == "renew":
        mac = _read_hmac(args)
        print(f"Calling renew token operation with renew-time-period :{args.renew_time_period}")
        outcome = store.renew(mac, _acting_principal(store, args, mac), args.renew_time_period, now_ms,
                              args.delegation_token_expiry_time_ms)
        _fail_on(outcome.error)
        print(f"Completed renew operation. New expiry date : {_date(outcome.expiry_timestamp_ms)}")
    elif command == "expire":
        mac = _read_hmac(args)
        print(f"Calling expire token operation with expiry-time-period :{args.expiry_time_period}")
        outcome = store.expire(mac, _acting_principal(store, args, mac), args.expiry_time_period, now_ms)
        _fail_on(outcome.error)
        print(f"Completed expire operation. New expiry date : {_date(outcome.expiry_timestamp_ms)}")
    elif command == "describe":
        owners = [_principal(o) for o in args.owners] if args.owners else None
        if owners is None:
            print("Calling describe token operation for all owners.")
        else:
            print(f"Calling describe token operation for owners: [{', '.join(owners)}]")
        infos = store.describe(owners, now_ms)
        print(f"Total number of tokens : {len(infos)}")
        _print_tokens([(info, None) for info in infos])
    else:  # pragma: no cover - argparse restricts the choices
        raise AssertionError(command)
    return 0
