"""``ksgate quickstart``: an embedded broker, a secured gateway in front of it, client files.

By default the listener is SASL_SSL with a throwaway CA and server certificate generated
into DIR (``ca.pem``), and three users — admin, alice, bob (password ``<name>-secret``) —
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 credentials.  Everything lives in DIR, so a
second run reuses the same CA and users; DIR/gateway.yaml is the gateway's effective configuration
(``ksgate run --config DIR/gateway.yaml``).  /metrics, /healthz and /readyz answer on a free port.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.cli import serve
from gateway.config import build_config
from gateway.effective_config import write_effective_config
from gateway.embedded_broker import EmbeddedBroker, free_port
from gateway.logs import get_logger
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


def _mode_text(plan: QuickstartPlan) -> str:
    """What is actually in force on the listener: only what this protocol enables."""
    if not plan.uses_sasl:
        return ("security: none. No authentication and no authorization: every client is ANONYMOUS\n"
                "and may do anything (no users, passwords or ACLs apply on a PLAINTEXT listener).")
    lines = [f"users: admin, alice, bob (password: <name>-secret); client settings in {plan.directory}/",
             "ACLs: admin is a super user; alice owns topics demo-*; bob may read them (groups demo-*)."]
    if plan.uses_tls:
        lines.append(f"TLS: a throwaway CA signed the server certificate: {plan.directory}/ca.pem")
    else:
        lines.append("TLS: none; passwords cross the loopback in clear (PLAIN is allowed for this demo).")
    return "\n".join(lines)


def _python_snippet(props: Path) -> str:
    # The interpreter running ksgate: `python3` on PATH may be another one, without confluent-kafka.
    try:
        import confluent_kafka  # noqa: F401
        missing = ""
    except ImportError:
        missing = f"  # first: {sys.executable} -m pip install confluent-kafka\n"
    return f"""{missing}  {sys.executable} - <<'PY'
  from confluent_kafka import Producer
  conf = dict(line.split("=", 1) for line in open("{props}").read().splitlines()
              if line and not line.startswith("#"))
  p = Producer(conf)
  p.produce("demo-topic", b"hello through ksgate"); p.flush()
  PY"""


def usage_text(plan: QuickstartPlan, metrics: str | None = None, config_file: Path | None = None,
               embedded_broker: bool = True) -> str:
    props = plan.directory / "alice.properties"
    extra = []
    if metrics:
        extra.append(f"metrics: http://{metrics}/metrics (health: /healthz, readiness: /readyz)")
    if config_file:
        extra.append(f"configuration: {config_file} (ksgate run --config {config_file} runs this gateway again)")
    stop = "Press Ctrl-C to stop" + (" (the embedded broker stops with it)." if embedded_broker else ".")
    return f"""
ksgate is up: clients connect to {plan.bootstrap} ({plan.protocol})
{_mode_text(plan)}
audit log: {plan.directory}/audit.log
{chr(10).join(extra)}

  kcat -F {props} -L

{_python_snippet(props)}

{stop}
"""


def effective_settings(plan: QuickstartPlan, upstream: str, metrics_port: int) -> dict[str, Any]:
    """Everything the quickstart's gateway runs with: the files prepare() made, the upstream, /metrics."""
    return {**prepare(plan), "upstream.bootstrap.servers": upstream,
            "ksgate.metrics.listener": f"127.0.0.1:{metrics_port}"}


def run_quickstart(directory: str, port: int, upstream: str | None, protocol: str = "SASL_SSL") -> int:
    """Serve until Ctrl-C (0) or until the embedded broker dies (1: a gateway without it serves nobody)."""
    plan = QuickstartPlan(Path(directory).resolve(), port, protocol.upper())
    broker = None
    if upstream is None:
        broker = EmbeddedBroker().start()
        upstream = broker.bootstrap
    died: list[int] = []
    try:
        settings = effective_settings(plan, upstream, free_port())
        config_file = write_effective_config(plan.directory / "gateway.yaml", settings, header=(
            "The gateway `ksgate quickstart` ran, every key it set: ksgate run --config <this file>.",
            *(("upstream.bootstrap.servers is the quickstart's embedded broker (in memory): it is gone "
               "once the quickstart stops.",) if broker is not None else ()),
        ))
        config = build_config(settings)

        def on_broker_exit(code: int) -> None:
            died.append(code)
            os.kill(os.getpid(), signal.SIGTERM)  # the gateway stops as on Ctrl-C; nothing is left to relay to

        def announce(_: Gateway) -> None:
            write_client_files(plan)
            if broker is not None:
                broker.watch(on_broker_exit)
            print(usage_text(plan, settings["ksgate.metrics.listener"], config_file, broker is not None),
                  flush=True)

        asyncio.run(serve(config, on_started=announce))
    finally:
        if broker is not None:
            broker.stop()
    if died:
        get_logger(component="quickstart").error(
            "embedded_broker_exited", exit_code=died[0],
            hint="the embedded Tansu broker stopped, so the gateway had nothing to relay to and stopped too")
        return 1
    return 0
