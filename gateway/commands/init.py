"""``ksgate init --dir DIR``: a deployment's first CA and server certificate, users and ACLs.

The quickstart's provisioning (same demo users and ACLs) laid out for volumes; every file is created only once,
so rerunning it, as docker-compose.yml's init service does on each ``up``, keeps the CA, passwords and ACLs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from gateway.commands.quickstart import CLIENTS, _seed_acls, _tls_files, seed_users


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
    def acls_file(self) -> Path:
        return self.root / "acls" / "acls.json"


def initialise(root: Path, host: str | None = None) -> InitLayout:
    """Create whatever is missing of the CA, server certificate, users and ACLs under ``root``; with ``host``,
    also a server certificate for ``host`` and ``*.host`` (certs/server-HOST.pem and .key)."""
    layout = InitLayout(root)
    for directory in (layout.certs, layout.users_file.parent, layout.acls_file.parent):
        directory.mkdir(parents=True, exist_ok=True)
    _tls_files(layout.certs, host)
    seed_users(layout.users_file)
    acls = _seed_acls(layout.acls_file.parent)
    assert acls == layout.acls_file, "the quickstart's ACL file name changed"
    return layout


def add_init_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``init`` command to ``subparsers``."""
    init = subparsers.add_parser("init", help="create a CA, a server certificate, the first users and ACLs (once)")
    init.add_argument("--dir", required=True, metavar="DIR",
                      help="root of the certs/, users/ and acls/ directories (existing files are kept)")
    init.add_argument("--host", metavar="NAME", type=lambda text: text.strip(".").lower(),
                      help="also a server certificate for NAME and *.NAME (the advertised host and SNI broker "
                           "names), signed by the same CA: certs/server-NAME.pem and .key")
    init.set_defaults(func=run_init_command)
    return init


def run_init_command(args: argparse.Namespace) -> int:
    host = getattr(args, "host", None)
    layout = initialise(Path(args.dir), host)
    # Paths and user names only: the passwords are the quickstart's documented demo ones.
    print(f"ksgate init: CA {layout.certs / 'ca.pem'}, server certificate {layout.certs / 'server.pem'} (localhost)")
    if host:
        print(f"ksgate init: server certificate for {host} and *.{host}: {layout.certs / f'server-{host}.pem'} "
              f"(key {layout.certs / f'server-{host}.key'})")
    print(f"ksgate init: users {', '.join(CLIENTS)} in {layout.users_file} (password <name>-secret: "
          "replace them with `ksgate users add`)")
    print(f"ksgate init: ACLs in {layout.acls_file} (admin is meant as the super user)")
    return 0
