"""``ksgate quickstart``: an embedded broker, a secured gateway in front of it, client files.

By default the listener is SASL_SSL with a throwaway CA and server certificate generated
into DIR (``ca.pem``), and three users — admin, alice, bob (password ``<name>-secret``) —
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 credentials.  Everything lives in DIR, so a
second run reuses the same CA and users.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.cli import serve
from gateway.config import build_config
from gateway.embedded_broker import EmbeddedBroker
from gateway.server import Gateway

CLIENTS = ("admin", "alice", "bob")
PROTOCOLS = ("SASL_SSL", "SASL_PLAINTEXT", "PLAINTEXT")


@dataclass(slots=True, frozen=True)
class QuickstartPlan:
    directory: Path
    port: int
    protocol: str

    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.port}"

    @property
    def uses_tls(self) -> bool:
        return self.protocol == "SASL_SSL"

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def password_of(user: str) -> str:
    return f"{user}-secret"


def prepare(plan: QuickstartPlan) -> dict[str, Any]:
    """Create the CA, certificates and users (once) and return the gateway's settings."""
    plan.directory.mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {
        "listeners": f"{plan.protocol}://127.0.0.1:{plan.port}",
        "advertised.listeners": f"{plan.protocol}://localhost:{plan.port}",
        # Record allowed decisions too, so `ksgate audit recommend` has something to learn from.
        "ksgate.audit.log.file": str(plan.directory / "audit.log"),
        "ksgate.audit.log.allowed": True,
    }
    if plan.uses_sasl:
        users = seed_users(plan.directory / "users.json")
        settings.update({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                         "ksgate.credentials.file": str(users)})
        if not plan.uses_tls:
            settings["ksgate.sasl.plain.allow.insecure"] = True  # a local demo on loopback
    if plan.uses_sasl:
        settings.update({"authorizer.class.name": "StandardAuthorizer", "super.users": "User:admin",
                         "ksgate.acl.file": str(_seed_acls(plan.directory))})
    # PLAINTEXT: everyone is ANONYMOUS, so there is nobody to authorize by; no authorizer.
    if plan.uses_tls:
        server_cert, server_key, _ = _tls_files(plan.directory)
        settings.update({"ssl.keystore.location": str(server_cert), "ssl.key.location": str(server_key)})
    return settings


def seed_users(path: Path) -> Path:
    """The demo users (admin, alice, bob; password ``<name>-secret``), each created only once."""
    from auth.file_store import FileCredentialStore

    store = FileCredentialStore(path)
    for user in CLIENTS:
        if user not in store.users():
            store.upsert_user(user, password_of(user))
    return path


def quickstart_acls() -> list[Any]:
    """alice: ALL on topics demo-*, READ on groups demo-*, IDEMPOTENT_WRITE on the cluster;
    bob: READ and DESCRIBE on topics demo-*, READ on groups demo-*.  admin is a super user."""
    from authz.model import (
        AccessControlEntry,
        AclBinding,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    def allow(principal: str, resource: ResourceType, name: str, op: AclOperation,
              pattern: PatternType = PatternType.PREFIXED) -> AclBinding:
        return AclBinding(ResourcePattern(resource, name, pattern),
                          AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW))

    return [
        allow("User:alice", ResourceType.TOPIC, "demo-", AclOperation.ALL),
        allow("User:alice", ResourceType.GROUP, "demo-", AclOperation.READ),
        allow("User:alice", ResourceType.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE, PatternType.LITERAL),
        allow("User:bob", ResourceType.TOPIC, "demo-", AclOperation.READ),
        allow("User:bob", ResourceType.TOPIC, "demo-", AclOperation.DESCRIBE),
        allow("User:bob", ResourceType.GROUP, "demo-", AclOperation.READ),
    ]


def _seed_acls(directory: Path) -> Path:
    from authz.acl_store import FileAclStore

    path = directory / "acls.json"
    if not path.exists():
        FileAclStore(path).add(quickstart_acls())
    return path


def _tls_files(directory: Path) -> tuple[Path, Path, Path]:
    from auth.cert_tools import issue_cert, make_ca

    ca_pem = directory / "ca.pem"
    cert, key = directory / "server.pem", directory / "server.key"
    if not (ca_pem.exists() and cert.exists() and key.exists()):
        ca = make_ca(subject="CN=ksgate quickstart CA")
        ca.write(ca_pem)
        issue_cert(ca, "CN=localhost", dns_names=("localhost",), ip_addresses=("127.0.0.1",)).write_pem(cert, key)
        key.chmod(0o600)
    return cert, key, ca_pem


def write_client_files(plan: QuickstartPlan) -> list[Path]:
    """librdkafka-style property files, one per demo identity."""
    written = []
    for user in CLIENTS:
        lines = [f"# ksgate quickstart client '{user}'", f"bootstrap.servers={plan.bootstrap}",
                 f"security.protocol={plan.protocol}"]
        if plan.uses_sasl:
            lines += ["sasl.mechanism=SCRAM-SHA-512", f"sasl.username={user}", f"sasl.password={password_of(user)}"]
        if plan.uses_tls:
            lines.append(f"ssl.ca.location={(plan.directory / 'ca.pem').resolve()}")
        path = plan.directory / f"{user}.properties"
        path.write_text("\n".join(lines) + "\n", "utf-8")
        path.chmod(0o600)
        written.append(path)
    return written


def usage_text(plan: QuickstartPlan) -> str:
    props = plan.directory / "alice.properties"
    return f"""
ksgate is up: clients connect to {plan.bootstrap} ({plan.protocol})
users: admin, alice, bob (password: <name>-secret); client settings in {plan.directory}/
ACLs: admin is a super user; alice owns topics demo-*; bob may read them (groups demo-*).
audit log: {plan.directory}/audit.log

  kcat -F {props} -L

  python3 - <<'PY'
  from confluent_kafka import Producer
  conf = dict(line.split("=", 1) for line in open("{props}").read().splitlines()
              if line and not line.startswith("#"))
  p = Producer(conf)
  p.produce("demo-topic", b"hello through ksgate"); p.flush()
  PY

Press Ctrl-C to stop (the embedded broker stops with it).
"""


def run_quickstart(directory: str, port: int, upstream: str | None, protocol: str = "SASL_SSL") -> int:
    plan = QuickstartPlan(Path(directory), port, protocol.upper())
    settings = prepare(plan)
    broker = None
    if upstream is None:
        broker = EmbeddedBroker().start()
        upstream = broker.bootstrap
    try:
        config = build_config({**settings, "upstream.bootstrap.servers": upstream})

        def announce(_: Gateway) -> None:
            write_client_files(plan)
            print(usage_text(plan), flush=True)

        asyncio.run(serve(config, on_started=announce))
    finally:
        if broker is not None:
            broker.stop()
    return 0
