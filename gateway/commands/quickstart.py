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

from gateway.commands.effective_config import write_effective_config
from gateway.commands.embedded_broker import EmbeddedBroker, free_port
from gateway.commands.java_client_files import java_client_properties
from gateway.commands.serving import serve
from gateway.config import ConfigError, build_config
from gateway.ops.logs import get_logger
from gateway.server import Gateway

CLIENTS = ("admin", "alice", "bob")
PROTOCOLS = ("SASL_SSL", "SASL_PLAINTEXT", "PLAINTEXT")


@dataclass(slots=True, frozen=True)
class QuickstartPlan:
    directory: Path
    port: int
    protocol: str
    # One TLS port for everything, routed by SNI: bootstrap.DOMAIN and broker-{nodeId}.DOMAIN.
    sni_domain: str | None = None

    @property
    def host(self) -> str:
        return f"bootstrap.{self.sni_domain}" if self.sni_domain else "localhost"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def broker_pattern(self) -> str | None:
        return f"broker-{{nodeId}}.{self.sni_domain}" if self.sni_domain else None

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
        "advertised.listeners": f"{plan.protocol}://{plan.bootstrap}",
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
        server_cert, server_key, _ = _tls_files(plan.directory, plan.sni_domain)
        settings.update({"ssl.keystore.location": str(server_cert), "ssl.key.location": str(server_key)})
    if plan.broker_pattern is not None:
        settings[f"listener.name.{plan.protocol.lower()}.ksgate.sni.broker.host.pattern"] = plan.broker_pattern
    return settings


def seed_users(path: Path) -> Path:
    """The demo users (admin, alice, bob; password ``<name>-secret``), each created only once."""
    from gateway.stores.file_users import FileCredentialStore

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
    from gateway.stores.file_acls import FileAclStore

    path = directory / "acls.json"
    if not path.exists():
        FileAclStore(path).add(quickstart_acls())
    return path


def _tls_files(directory: Path, sni_domain: str | None = None) -> tuple[Path, Path, Path]:
    """The CA and a server certificate: for localhost, or with SNI for localhost, DOMAIN and *.DOMAIN.

    The CA's key is never kept: when a certificate is missing, a new CA signs fresh certificates for
    localhost and the domain asked for, and certificates of other domains are dropped (they would no
    longer chain to ca.pem)."""
    from auth.cert_tools import issue_cert, make_ca

    ca_pem = directory / "ca.pem"
    cert, key = _server_files(directory, sni_domain)
    if cert.exists() and key.exists() and ca_pem.exists() and _server_files(directory, None)[0].exists():
        return cert, key, ca_pem
    for stale in [*directory.glob("server-*.pem"), *directory.glob("server-*.key")]:
        stale.unlink()
    ca = make_ca(subject="CN=ksgate quickstart CA")
    ca.write(ca_pem)
    for domain in dict.fromkeys((None, sni_domain)):
        names = ("localhost", domain, f"*.{domain}") if domain else ("localhost",)
        domain_cert, domain_key = _server_files(directory, domain)
        issue_cert(ca, f"CN={domain or 'localhost'}", dns_names=names, ip_addresses=("127.0.0.1",)).write_pem(
            domain_cert, domain_key)
        domain_key.chmod(0o600)
    return cert, key, ca_pem


def _server_files(directory: Path, sni_domain: str | None) -> tuple[Path, Path]:
    stem = f"server-{sni_domain}" if sni_domain else "server"
    return directory / f"{stem}.pem", directory / f"{stem}.key"


def write_client_files(plan: QuickstartPlan) -> list[Path]:
    """Two property files per demo identity: USER.properties for librdkafka-based clients (kcat,
    confluent-kafka) and USER.jaas.properties for Kafka's Java clients and tools (--command-config)."""
    written = []
    for user in CLIENTS:
        java = plan.directory / f"{user}.jaas.properties"
        java.write_text(java_client_properties(
            plan.bootstrap, plan.protocol, user=user if plan.uses_sasl else None,
            password=password_of(user) if plan.uses_sasl else None,
            ca_pem=plan.directory / "ca.pem" if plan.uses_tls else None), "utf-8")
        java.chmod(0o600)
        written.append(java)
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
  def report(err, msg):
      print(f"not delivered: {{err}}" if err else
            f"delivered to {{msg.topic()}} partition {{msg.partition()}} at offset {{msg.offset()}}")
  p = Producer(conf)
  p.produce("demo-topic", b"hello through ksgate", on_delivery=report); p.flush(30)
  PY"""


def _sni_text(plan: QuickstartPlan, node_ids: list[int]) -> str:
    """One port for everything: the names clients use, and the /etc/hosts line that makes them resolve."""
    if plan.broker_pattern is None:
        return ""
    brokers = " ".join(plan.broker_pattern.replace("{nodeId}", str(n)) for n in node_ids)
    return (f"SNI: one TLS port for the bootstrap and every broker ({plan.broker_pattern}).\n"
            f"These names must resolve to the gateway, e.g. with this line in /etc/hosts:\n"
            f"  127.0.0.1 {plan.host} {brokers}".rstrip() + "\n")


def usage_text(plan: QuickstartPlan, metrics: str | None = None, config_file: Path | None = None,
               embedded_broker: bool = True, node_ids: tuple[int, ...] = ()) -> str:
    props = plan.directory / "alice.properties"
    java_props = plan.directory / "alice.jaas.properties"
    extra = []
    if metrics:
        extra.append(f"metrics: http://{metrics}/metrics (health: /healthz, readiness: /readyz)")
    if config_file:
        extra.append(_config_text(plan, config_file, embedded_broker))
    stop = "Press Ctrl-C to stop" + (" (the embedded broker stops with it)." if embedded_broker else ".")
    return f"""
ksgate is up: clients connect to {plan.bootstrap} ({plan.protocol})
{_sni_text(plan, sorted(node_ids))}{_mode_text(plan)}
audit log: {plan.directory}/audit.log
{chr(10).join(extra)}

  kcat -F {props} -L
  kafka-topics.sh --bootstrap-server {plan.bootstrap} --command-config {java_props} --list

{_python_snippet(props)}

{stop}
"""


def _config_text(plan: QuickstartPlan, config_file: Path, embedded_broker: bool) -> str:
    """Where the effective configuration is, what it is good for, and how to add a user with it."""
    if embedded_broker:
        # Its port is this gateway's while the quickstart runs, and its upstream (the embedded broker) dies with it.
        text = (f"configuration: {config_file} (every key this gateway runs with; its upstream is the embedded "
                f"broker, which stops with the quickstart: to serve it with `ksgate run --config`, stop the "
                f"quickstart and set upstream.bootstrap.servers to a broker of yours)")
    else:
        text = f"configuration: {config_file} (after Ctrl-C, `ksgate run --config {config_file}` serves it again)"
    if plan.uses_sasl:
        text += (f"\nmore users: ksgate users add NAME --config {config_file} (asks for the password), then a "
                 f"copy of {plan.directory}/alice.properties with its sasl.username and sasl.password, and ACLs "
                 f"(ksgate acls --acl-file {plan.directory}/acls.json --add ...)")
    return text


def effective_settings(plan: QuickstartPlan, upstream: str, metrics_port: int) -> dict[str, Any]:
    """Everything the quickstart's gateway runs with: the files prepare() made, the upstream, /metrics."""
    return {**prepare(plan), "upstream.bootstrap.servers": upstream,
            "ksgate.metrics.listener": f"127.0.0.1:{metrics_port}"}


def run_quickstart(directory: str, port: int, upstream: str | None, protocol: str = "SASL_SSL",
                   sni_domain: str | None = None) -> int:
    """Serve until Ctrl-C (0) or until the embedded broker dies (1: a gateway without it serves nobody)."""
    if sni_domain and protocol.upper() != "SASL_SSL":
        raise ConfigError(f"--sni-domain routes by TLS server name: it needs --listener-protocol SASL_SSL, "
                          f"not {protocol.upper()}")
    plan = QuickstartPlan(Path(directory).resolve(), port, protocol.upper(), sni_domain.strip(".").lower()
                          if sni_domain else None)
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

        def announce(gateway: Gateway) -> None:
            write_client_files(plan)
            if broker is not None:
                broker.watch(on_broker_exit)
            print(usage_text(plan, settings["ksgate.metrics.listener"], config_file, broker is not None,
                             tuple(gateway.ctx.cluster.nodes)), flush=True)

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
