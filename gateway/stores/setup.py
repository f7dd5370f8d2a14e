"""Builds each listener's ListenerSecurity (TLS context, SASL mechanisms, principal builder).

Mechanism modules are imported only when a listener enables them, so a gateway without
Kerberos or OAuth configured never needs their libraries.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from auth.credentials import CredentialStore
from auth.listener_security import ListenerSecurity
from auth.principal_builder import DefaultPrincipalBuilder
from auth.sasl.mechanism import MechanismFactory
from auth.sasl.server import SaslServerConfig
from authz.acl_json import AclStoreError
from gateway.config import ConfigError, GatewayConfig, ListenerConfig

if TYPE_CHECKING:
    from auth.tls import TlsContextProvider
    from authz.authorizer import StandardAuthorizer
    from authz.shadow import ShadowAcls
    from gateway.authorization import GatewayAuthorization
    from gateway.quotas.book import QuotaBook
    from gateway.stores.file_acls import FileAclStore
    from gateway.stores.file_quotas import QuotaStore
    from gateway.stores.file_tokens import TokenStore
    from gateway.stores.security_topic import SecurityTopic


def build_security(config: GatewayConfig, store: CredentialStore | None,
                   tokens: TokenStore | None = None) -> dict[str, ListenerSecurity]:
    short_name = _kerberos_short_namer(config.settings["sasl.kerberos.principal.to.local.rules"])
    return {listener.name: _listener_security(config, listener, short_name, store, tokens)
            for listener in config.listeners}


def security_topic(config: GatewayConfig, ssl_context: ssl.SSLContext | None) -> SecurityTopic | None:
    """The replicated store's topic link when ksgate.security.store is KAFKA (not started yet), else None."""
    if config.settings["ksgate.security.store"] != "KAFKA":
        return None
    from gateway.stores.security_topic import SecurityTopic, StoreTopicSettings

    settings = config.settings
    return SecurityTopic(config.upstream, ssl_context, StoreTopicSettings(
        topic=settings["ksgate.security.store.topic"],
        replication_factor=settings["ksgate.security.store.replication.factor"],
        fetch_max_wait_ms=settings["ksgate.security.store.fetch.max.wait.ms"]))


def token_store(config: GatewayConfig, topic: SecurityTopic | None = None) -> TokenStore | None:
    """Delegation tokens: None when delegation.token.secret.key is unset (the feature is off)."""
    from gateway.stores.file_tokens import TokenFileError, open_token_store

    settings = config.settings
    if topic is not None:
        if not settings["delegation.token.secret.key"]:
            return None
        from gateway.stores.replicated import TopicTokenStore

        return TopicTokenStore(topic, settings["delegation.token.secret.key"])
    try:
        return open_token_store(settings["ksgate.delegation.token.file"], settings["delegation.token.secret.key"])
    except (ValueError, TokenFileError) as exc:
        raise ConfigError(f"ksgate.delegation.token.file: {exc}") from None


def quota_store(config: GatewayConfig, topic: SecurityTopic | None = None) -> QuotaStore:
    """Client quotas: in the security topic, else in ksgate.quota.file (loaded now: a bad file stops the
    start, as a bad ACL file does), else none: no quota is set and a change is refused (NoQuotaStore)."""
    if topic is not None:
        from gateway.stores.replicated import TopicQuotaStore

        return TopicQuotaStore(topic)
    from gateway.stores.file_quotas import FileQuotaStore, NoQuotaStore, QuotaStoreError

    path = config.settings["ksgate.quota.file"]
    if path is None:
        return NoQuotaStore()

    store = FileQuotaStore(path)
    try:
        store.load()
    except QuotaStoreError as exc:
        raise ConfigError(f"ksgate.quota.file: {exc}") from None
    return store


def follow_quotas(store: QuotaStore, book: QuotaBook) -> Callable[[], None]:
    """Keep ``book`` (what enforcement reads) in step with ``store``; for the topic store, before it starts."""
    book.replace(store.quotas())
    return store.subscribe(book.replace)


def _identity(name: str) -> str:
    return name


def _ssl_mapper(listener: ListenerConfig) -> Callable[[str], str]:
    """The listener's ssl.principal.mapping.rules (its own, or the global ones)."""
    rules = str(listener.settings.get("ssl.principal.mapping.rules") or "DEFAULT")
    if rules.strip().upper() == "DEFAULT":
        return _identity
    from auth.ssl_principal_mapping import SslPrincipalMapper
    from auth.tls import TlsConfigError

    try:
        return SslPrincipalMapper.from_rules(rules).principal_name
    except TlsConfigError as exc:
        raise ConfigError(f"ssl.principal.mapping.rules: {exc}") from None


def _kerberos_short_namer(rules: str) -> Callable[[str], str]:
    """Parsed on first use, so a gateway without GSSAPI never needs the krb5 configuration."""
    namer: list[Callable[[str], str]] = []

    def short_name(principal: str) -> str:
        if not namer:
            from auth.sasl.gssapi_mechanism import default_realm
            from auth.sasl.kerberos_rules import KerberosShortNamer

            namer.append(KerberosShortNamer.from_rules(default_realm(), rules).short_name)
        return namer[0](principal)

    return short_name


def _listener_security(config: GatewayConfig, listener: ListenerConfig, short_name: Callable[[str], str],
                       store: CredentialStore | None, tokens: TokenStore | None) -> ListenerSecurity:
    builder = DefaultPrincipalBuilder(ssl_mapper=_ssl_mapper(listener), kerberos_short_name=short_name)
    security = ListenerSecurity(principal_builder=builder)
    if listener.uses_tls:
        security.tls = _tls_provider(listener)
    if listener.uses_sasl:
        mechanisms = {name: _mechanism(name, config, store, tokens) for name in listener.sasl_mechanisms}
        security.sasl = SaslServerConfig(
            mechanisms=mechanisms, principal_builder=builder,
            connections_max_reauth_ms=config.connections_max_reauth_ms,
            allow_plain_without_tls=bool(config.settings["ksgate.sasl.plain.allow.insecure"]))
    return security


def _tls_provider(listener: ListenerConfig) -> TlsContextProvider:
    from auth.tls import TlsConfigError, TlsContextProvider

    tls_settings = {k: v for k, v in listener.settings.items()
                    if k.startswith("ssl.") and k != "ssl.principal.mapping.rules" and v is not None}
    if "ssl.keystore.location" not in tls_settings:
        raise ConfigError(f"ssl.keystore.location: listener {listener.name} is {listener.security_protocol} "
                          f"and needs a server certificate")
    try:
        return TlsContextProvider.from_settings(tls_settings)
    except TlsConfigError as exc:
        raise ConfigError(f"listener {listener.name}: {exc}") from None


def _mechanism(name: str, config: GatewayConfig, store: CredentialStore | None,
               tokens: TokenStore | None = None) -> MechanismFactory:
    settings = config.settings
    if name in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        if store is None:
            raise ConfigError(f"ksgate.credentials.file: {name} needs a credential store")
        if name == "PLAIN":
            from auth.sasl.plain import PlainMechanism
            from auth.sasl.verified_passwords import VerifiedPasswordCache

            return PlainMechanism(store, VerifiedPasswordCache(settings["ksgate.authentication.plain.cache.size"]))
        from auth.sasl.scram import ScramMechanism
        from gateway.stores.file_tokens import token_lookup
        from gateway.stores.file_users import UserEntryReads

        return ScramMechanism(name, store, token_lookup=token_lookup(tokens) if tokens is not None else None,
                              decoy_key=store.decoy_secret if isinstance(store, UserEntryReads) else None,
                              legacy_nonce=bool(settings["ksgate.sasl.scram.legacy.librdkafka.nonce.enable"]))
    if name == "OAUTHBEARER":
        from auth.sasl.oauthbearer import build_oauthbearer_from_config

        return build_oauthbearer_from_config(settings)
    if name == "GSSAPI":
        return _gssapi(settings)
    raise ConfigError(f"sasl.enabled.mechanisms: unsupported mechanism {name}")


def _gssapi(settings: Mapping[str, Any]) -> MechanismFactory:
    """GSSAPI, with its acceptor credentials checked now: a gateway that could accept no Kerberos login fails
    at start-up, as Kafka's Kerberos login does, instead of failing each client."""
    try:
        from auth.sasl.gssapi_mechanism import GssapiMechanism, acceptor_problem, default_realm
    except ImportError as exc:
        raise ConfigError(f"sasl.enabled.mechanisms: GSSAPI needs the gssapi extra: pip install 'ksgate[gssapi]' "
                          f"(building it needs MIT Kerberos' headers and krb5-config: libkrb5-dev on Debian and "
                          f"Ubuntu, krb5-devel on Fedora) ({exc})") from None
    from auth.sasl.kerberos_rules import KerberosShortNamer

    mechanism = GssapiMechanism(service_name=settings["sasl.kerberos.service.name"],
                                keytab=settings["ksgate.sasl.kerberos.keytab"],
                                server_host=settings["ksgate.sasl.kerberos.server.host"],
                                short_namer=KerberosShortNamer.from_rules(
                                    default_realm(), settings["sasl.kerberos.principal.to.local.rules"]))
    problem = acceptor_problem(mechanism)
    if problem is not None:
        raise ConfigError(f"ksgate.sasl.kerberos.keytab: {problem}")
    return mechanism


def credential_store(config: GatewayConfig, topic: SecurityTopic | None = None) -> CredentialStore | None:
    if topic is not None:
        from gateway.stores.replicated import TopicCredentialStore

        return TopicCredentialStore(topic)
    path = config.settings["ksgate.credentials.file"]
    if path is None:
        return None
    from gateway.stores.file_users import FileCredentialStore

    store = FileCredentialStore(path)
    store.ensure_decoy_secret()
    return store


def _warn_if_missing(store: FileAclStore, allow_if_no_acl: bool) -> None:
    """An authorizer over an ACL file that does not exist: a misspelt path looks exactly like "no ACLs yet"."""
    if store.path.exists():
        return
    outcome = ("every client may do anything (allow.everyone.if.no.acl.found is true)" if allow_if_no_acl else
               "every request by anyone but super.users is denied")
    logging.getLogger("ksgate.authz").warning(
        "ksgate.acl.file %s does not exist: no ACLs, so %s; check the path, or add ACLs with "
        "`ksgate acls --acl-file %s --add ...`", store.path, outcome, store.path)


def build_authorization(config: GatewayConfig, credentials: CredentialStore | None = None,
                        tokens: TokenStore | None = None,
                        topic: SecurityTopic | None = None,
                        quotas: QuotaStore | None = None) -> GatewayAuthorization | None:
    """The shared authorizer, ACL store and audit log; None when authorization is off.

    With a file store the authorizer is loaded here; with the security topic it stays
    unloaded (denying everyone but super users) until the topic has been replayed.
    """
    from authz.authorizer import StandardAuthorizer
    from gateway.authorization import GatewayAuthorization
    from gateway.ops.audit import AuditLog
    from gateway.stores.file_acls import AclStore, FileAclStore

    if not config.authorization_enabled:
        return None  # nothing is ever audited, so no audit file is opened
    settings = config.settings
    authorizer = StandardAuthorizer(config.super_users, settings["allow.everyone.if.no.acl.found"])
    store: AclStore
    if topic is not None:
        from gateway.stores.replicated import TopicAclStore

        store = TopicAclStore(topic)
    else:
        path = settings["ksgate.acl.file"]
        if path is None:
            raise ConfigError("ksgate.acl.file: required when authorizer.class.name is set (where ACLs are kept)")
        store = FileAclStore(path)
        _warn_if_missing(store, settings["allow.everyone.if.no.acl.found"])
        authorizer.load(store.load())
        store.subscribe(authorizer.apply)
    from gateway.admin.delegation_tokens import TokenSettings

    shadow = shadow_acls(config, authorizer, topic)
    # Opened last, so that a refused ACL file leaves no audit file open; still before any listener opens,
    # so that an audit file that cannot be opened stops start-up.
    audit = AuditLog(settings["ksgate.audit.log.file"], settings["ksgate.audit.log.allowed"],
                     settings["ksgate.audit.log.max.bytes"], settings["ksgate.audit.log.backups"])
    return GatewayAuthorization(authorizer, store, audit,
                                reserved_topics=frozenset({topic.settings.topic}) if topic is not None else frozenset(),
                                credentials=credentials, tokens=tokens, quota_store=quotas,
                                token_settings=TokenSettings.from_settings(settings), shadow=shadow)


def shadow_acls(config: GatewayConfig, live: StandardAuthorizer, topic: SecurityTopic | None) -> ShadowAcls | None:
    """The shadow ACL set, following its store: the security topic's shadow_acl records, or ksgate.acl.shadow.file
    (polled with the live file: ``refresh``); None when there is nowhere a shadow set could be."""
    from authz.shadow import ReportLimiter, ShadowAcls
    from gateway.stores.shadow_acls import FileShadowStore, TopicShadowAclStore

    settings = config.settings
    shadow = ShadowAcls(live, ReportLimiter(settings["ksgate.acl.shadow.report.interval.ms"] / 1000))
    if topic is not None:  # loads as the topic replays, before any listener opens
        TopicShadowAclStore(topic).load_and_subscribe(shadow.load, shadow.apply)
        return shadow
    path = settings["ksgate.acl.shadow.file"]
    if path is None:
        return None
    store = FileShadowStore(path)
    try:
        shadow.load(store.load())
    except AclStoreError as exc:  # a bad candidate set must not stop the gateway: it enforces nothing
        logging.getLogger("ksgate.authz").error("ksgate.acl.shadow.file: %s; no shadow ACLs until it is fixed", exc)
        shadow.load([])  # ready and empty, so that the fixed file's bindings apply
    store.subscribe(shadow.apply)
    shadow.refresh = store.reload_if_changed
    return shadow
