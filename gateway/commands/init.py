"""``ksgate init --dir DIR``: a deployment's first CA and server certificate, its super user and an ACL file.

The super user ``admin`` gets a random password, printed once and kept in ``users/admin.password`` (0600);
no demo users (those belong to ``ksgate quickstart``).  Every file is created only once, so rerunning it, as
docker-compose.yml's init service does on each ``up``, keeps the CA, the password and the ACLs.
"""

from __future__ import annotations

import argparse
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from authz.acl_json import encode_acl_file
from gateway.commands.init_upstream import GATEWAY_USER, initialise_upstream
from gateway.commands.quickstart import _tls_files
from gateway.stores.file_users import FileCredentialStore
from gateway.stores.json_file import write_atomically

SUPER_USER = "admin"  # configs/docker/ksgate.yaml's super.users is User:admin


@dataclass(slots=True, frozen=True)
class InitLayout:
    """Where ``init`` puts each kind of file: one subdirectory per volume (certs, users, acls)."""

    root: Path

    @property
    def certs(self) -> Path:
        return self.root / "certs"

    @property
    def users_file(self) -> Path:
        return self.root / "users" / "users.json"

    @property
    def password_file(self) -> Path:
        """The super user's generated password, readable by the owner only."""
        return self.root / "users" / f"{SUPER_USER}.password"

    @property
    def acls_file(self) -> Path:
        return self.root / "acls" / "acls.json"


def initialise(root: Path, host: str | None = None) -> tuple[InitLayout, str | None]:
    """Create whatever is missing of the CA, server certificate, super user and ACL file under ``root`` (with
    ``host``, also a server certificate for ``host`` and ``*.host``: certs/server-HOST.pem and .key); the super
    user's password if it was created now (None: it already existed)."""
    layout = InitLayout(root)
    for directory in (layout.certs, layout.users_file.parent, layout.acls_file.parent):
        directory.mkdir(parents=True, exist_ok=True)
    _tls_files(layout.certs, host)
    password = _create_super_user(layout)
    if not layout.acls_file.exists():
        # None yet (the super user grants them with `ksgate acls`); the file exists, so a gateway can tell a
        # deployment without ACLs from a misspelt ksgate.acl.file.
        write_atomically(layout.acls_file, encode_acl_file([]))
    return layout, password


def _create_super_user(layout: InitLayout) -> str | None:
    store = FileCredentialStore(layout.users_file)
    if SUPER_USER in store.users():
        return None
    password = secrets.token_urlsafe(18)  # 144 random bits
    # The file first: a password that was never written down would lock the operator out.
    _write_private(layout.password_file, password + "\n")
    store.upsert_user(SUPER_USER, password)
    return password


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to a file created with mode 0600 (never readable by others, not even briefly)."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)


def add_init_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``init`` command to ``subparsers``."""
    init = subparsers.add_parser("init", help="create a CA, a server certificate, the super user and an ACL file "
                                              "(once)")
    init.add_argument("--dir", required=True, metavar="DIR",
                      help="root of the certs/, users/ and acls/ directories (existing files are kept)")
    init.add_argument("--kafka-host", metavar="HOST",
                      help="also create, under DIR/kafka/ and DIR/upstream/, a SASL_SSL broker's keystore for HOST "
                           "and the gateway's SCRAM-SHA-512 password on it (docker-compose.yml's Kafka)")
    init.add_argument("--host", metavar="NAME", type=lambda text: text.strip(".").lower(),
                      help="also a server certificate for NAME and *.NAME (the advertised host and SNI broker "
                           "names), signed by the same CA: certs/server-NAME.pem and .key")
    init.set_defaults(func=run_init_command)
    return init


def run_init_command(args: argparse.Namespace) -> int:
    host = getattr(args, "host", None)
    layout, password = initialise(Path(args.dir), host)
    print(f"ksgate init: CA {layout.certs / 'ca.pem'}, server certificate {layout.certs / 'server.pem'} (localhost)")
    if host:
        print(f"ksgate init: server certificate for {host} and *.{host}: {layout.certs / f'server-{host}.pem'} "
              f"(key {layout.certs / f'server-{host}.key'})")
    if password is not None:
        # Shown this once (and kept in the 0600 file): the operator's way in.
        print(f"ksgate init: super user {SUPER_USER} created with the random password {password} "
              f"(also in {layout.password_file}, mode 0600)")
    else:
        print(f"ksgate init: super user {SUPER_USER} already exists in {layout.users_file} (kept; its generated "
              f"password is in {layout.password_file} unless you removed it)")
    print(f"ksgate init: ACLs in {layout.acls_file} (add users with `ksgate users add NAME --config ...`, "
          f"their ACLs with `ksgate acls`)")
    if args.kafka_host:
        upstream = initialise_upstream(Path(args.dir), args.kafka_host)
        print(f"ksgate init: Kafka's keystore for {args.kafka_host} in {upstream.broker_keystore.parent}, its CA "
              f"{upstream.gateway_ca}, the gateway's password as {GATEWAY_USER!r} in {upstream.gateway_password}")
    return 0
