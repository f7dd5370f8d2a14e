"""Server-side TLS for client-facing listeners: Kafka-style ssl.* settings, SSLContext, hot reload.

Reloads follow Kafka's dynamic keystore update rules: a new certificate may not change the subject
DN or the SAN set unless ssl.allow.dn.changes / ssl.allow.san.changes say so.
"""

from __future__ import annotations

import enum
import logging
import os
import re
import secrets
import ssl
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from auth.peer_identity import certificate_subject
from auth.tls_handshake import AlertingSSLContext

log = logging.getLogger("ksgate.tls")


class TlsConfigError(ValueError):
    """A listener's TLS settings or key material are unusable; the message names the setting."""


class ClientAuth(enum.Enum):
    """Kafka's ssl.client.auth."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"

    @property
    def verify_mode(self) -> ssl.VerifyMode:
        return {ClientAuth.NONE: ssl.CERT_NONE, ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
                ClientAuth.REQUIRED: ssl.CERT_REQUIRED}[self]


_PROTOCOLS = {
    "tlsv1": ssl.TLSVersion.TLSv1,
    "tlsv1.1": ssl.TLSVersion.TLSv1_1,
    "tlsv1.2": ssl.TLSVersion.TLSv1_2,
    "tlsv1.3": ssl.TLSVersion.TLSv1_3,
}
_ORDER = list(_PROTOCOLS)
# The ssl module cannot choose among these (OpenSSL's TLS 1.3 suites are set separately and
# Python exposes no setter), so naming them restricts nothing.
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                           "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})
_OPENSSL_TLS13_DEFAULT = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                    "TLS_CHACHA20_POLY1305_SHA256"})
_PEM_KEY = re.compile(rb"-----BEGIN ((?:ENCRYPTED |RSA |EC |DSA )?PRIVATE KEY)-----.+?-----END \1-----", re.DOTALL)


def _text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _flag(config: Mapping[str, Any], key: str) -> bool:
    value = config.get(key)
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "false", ""):
        return text == "true"
    raise TlsConfigError(f"{key}: expected true or false, got {value!r}")


def _list(config: Mapping[str, Any], key: str, default: Sequence[str]) -> tuple[str, ...]:
    value = config.get(key)
    if value is None:
        return tuple(default)
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return tuple(item.strip() for item in items if item.strip())


def _store_type(config: Mapping[str, Any], key: str) -> str:
    kind = (_text(config, key) or "PEM").upper()
    if kind in ("PEM", "PKCS12"):
        return kind
    hint = " (convert it with keytool -importkeystore -deststoretype PKCS12)" if kind == "JKS" else ""
    raise TlsConfigError(f"{key}: {kind} is not supported, use PEM or PKCS12{hint}")


@dataclass(slots=True, frozen=True)
class ListenerTlsSettings:
    """One listener's ssl.* settings, with Kafka's names and defaults (ksgate defaults stores to PEM)."""

    keystore_location: Path
    keystore_type: str = "PEM"
    key_location: Path | None = None  # ksgate-specific: a PEM key beside a PEM certificate chain
    keystore_password: str | None = field(default=None, repr=False)
    key_password: str | None = field(default=None, repr=False)
    truststore_location: Path | None = None
    truststore_type: str = "PEM"
    truststore_password: str | None = field(default=None, repr=False)
    client_auth: ClientAuth = ClientAuth.NONE
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    allow_dn_changes: bool = False
    allow_san_changes: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ListenerTlsSettings:
        """Read one listener's settings (``listener.name.<name>.`` already stripped; None means unset)."""
        keystore = _text(config, "ssl.keystore.location")
        if keystore is None:
            raise TlsConfigError("ssl.keystore.location: a TLS listener needs a certificate")
        key = _text(config, "ssl.key.location")
        truststore = _text(config, "ssl.truststore.location")
        client_auth_text = (_text(config, "ssl.client.auth") or "none").lower()
        try:
            client_auth = ClientAuth(client_auth_text)
        except ValueError:
            raise TlsConfigError(f"ssl.client.auth: expected none, requested or required, "
                                 f"got {client_auth_text!r}") from None
        settings = cls(
            keystore_location=Path(keystore),
            keystore_type=_store_type(config, "ssl.keystore.type"),
            key_location=Path(key) if key else None,
            keystore_password=_text(config, "ssl.keystore.password"),
            key_password=_text(config, "ssl.key.password"),
            truststore_location=Path(truststore) if truststore else None,
            truststore_type=_store_type(config, "ssl.truststore.type"),
            truststore_password=_text(config, "ssl.truststore.password"),
            client_auth=client_auth,
            enabled_protocols=_list(config, "ssl.enabled.protocols", ("TLSv1.2", "TLSv1.3")),
            cipher_suites=_list(config, "ssl.cipher.suites", ()),
            allow_dn_changes=_flag(config, "ssl.allow.dn.changes"),
            allow_san_changes=_flag(config, "ssl.allow.san.changes"),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Checks that need no file access."""
        if self.keystore_type == "PEM" and self.keystore_password:
            # Kafka: a PEM key store has no store password, only the key's own (ssl.key.password).
            raise TlsConfigError("ssl.keystore.password cannot be used with a PEM key store; "
                                 "use ssl.key.password for an encrypted key")
        if self.keystore_type == "PKCS12" and self.key_location:
            raise TlsConfigError("ssl.key.location cannot be used with a PKCS12 key store (the key is inside)")
        if self.client_auth is not ClientAuth.NONE and self.truststore_location is None:
            raise TlsConfigError(f"ssl.client.auth={self.client_auth.value} needs ssl.truststore.location "
                                 "(the CAs whose client certificates are accepted)")
        _protocol_range(self.enabled_protocols)

    @property
    def watched_files(self) -> tuple[Path, ...]:
        """The files a reload re-reads."""
        paths = (self.keystore_location, self.key_location, self.truststore_location)
        return tuple(p for p in paths if p is not None)


def _protocol_range(names: Sequence[str]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    if not names:
        raise TlsConfigError("ssl.enabled.protocols: name at least one protocol")
    indices = []
    for name in names:
        if name.lower() not in _PROTOCOLS:
            raise TlsConfigError(f"ssl.enabled.protocols: {name!r} is not one of TLSv1, TLSv1.1, TLSv1.2, TLSv1.3")
        indices.append(_ORDER.index(name.lower()))
    low, high = min(indices), max(indices)
    if set(range(low, high + 1)) != set(indices):
        raise TlsConfigError(f"ssl.enabled.protocols: {', '.join(names)} leaves a gap; "
                             "OpenSSL can only enable a contiguous range")
    return _PROTOCOLS[_ORDER[low]], _PROTOCOLS[_ORDER[high]]


def _read(path: Path, key: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsConfigError(f"{key}: cannot read {path}: {exc.strerror or exc}") from None


def _check_files_exist(config: Mapping[str, Any]) -> None:
    for key in ("ssl.keystore.location", "ssl.key.location", "ssl.truststore.location"):
        location = _text(config, key)
        if location is not None and not Path(location).exists():
            raise TlsConfigError(f"{key}: {location} does not exist")


def _password(value: str | None) -> bytes | None:
    return value.encode() if value else None


def _load_pem_key(data: bytes, password: bytes | None, where: str) -> PrivateKeyTypes:
    block = _PEM_KEY.search(data)
    if block is None:
        raise TlsConfigError(f"{where}: no PEM private key found")
    try:
        return serialization.load_pem_private_key(block.group(0), password)
    except TypeError:
        if password is None:
            raise TlsConfigError(f"{where}: the private key is encrypted; set ssl.key.password") from None
        # A password for an unencrypted key is harmless; Java key stores accept it too.
        return serialization.load_pem_private_key(block.group(0), None)
    except ValueError:
        raise TlsConfigError(f"{where}: cannot decrypt or parse the private key "
                             "(wrong ssl.key.password?)") from None


def _load_keystore(settings: ListenerTlsSettings) -> tuple[PrivateKeyTypes, list[x509.Certificate]]:
    """The private key and the certificate chain, leaf first."""
    where = f"ssl.keystore.location ({settings.keystore_location})"
    data = _read(settings.keystore_location, "ssl.keystore.location")
    if settings.keystore_type == "PKCS12":
        password = _password(settings.keystore_password or settings.key_password)
        try:
            key, cert, extra = pkcs12.load_key_and_certificates(data, password)
        except ValueError:
            raise TlsConfigError(f"{where}: cannot open the PKCS12 key store (wrong ssl.keystore.password?)") from None
        if key is None or cert is None:
            raise TlsConfigError(f"{where}: the PKCS12 key store holds no private key with its certificate")
        return key, [cert, *extra]
    try:
        chain = x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsConfigError(f"{where}: no PEM certificate found (for PKCS#12 set ssl.keystore.type=PKCS12)") from None
    if settings.key_location is not None:
        key_where = f"ssl.key.location ({settings.key_location})"
        key_data = _read(settings.key_location, "ssl.key.location")
    else:
        key_where, key_data = where, data
    return _load_pem_key(key_data, _password(settings.key_password), key_where), chain


def _load_truststore(settings: ListenerTlsSettings) -> list[x509.Certificate]:
    path = settings.truststore_location
    if path is None:
        return []
    where = f"ssl.truststore.location ({path})"
    data = _read(path, "ssl.truststore.location")
    if settings.truststore_type == "PKCS12":
        try:
            bundle = pkcs12.load_pkcs12(data, _password(settings.truststore_password))
        except ValueError:
            raise TlsConfigError(f"{where}: cannot open the PKCS12 trust store "
                                 "(wrong ssl.truststore.password?)") from None
        certs = [c.certificate for c in ([bundle.cert] if bundle.cert else []) + list(bundle.additional_certs)]
    else:
        try:
            certs = x509.load_pem_x509_certificates(data)
        except ValueError:
            certs = []
    if not certs:
        raise TlsConfigError(f"{where}: no certificates found")
    return certs


def _subject_alt_names(cert: x509.Certificate) -> frozenset[tuple[str, str]]:
    try:
        extension = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return frozenset()
    return frozenset((type(name).__name__, str(name.value)) for name in extension.value)


def _canonical_dn(dn: str) -> str:
    # X500Principal.equals compares canonical forms: case and runs of spaces do not count.
    return " ".join(dn.split()).lower()


@dataclass(slots=True, frozen=True)
class ServerCertificate:
    """What one build loaded: the context and the identity its certificate presents."""

    context: ssl.SSLContext
    certificate: x509.Certificate
    subject: str  # RFC 2253, as Java spells it
    subject_alt_names: frozenset[tuple[str, str]]

    @property
    def dns_names(self) -> list[str]:
        return sorted(value for kind, value in self.subject_alt_names if kind == "DNSName")


# A one-port listener's router: the route for a ClientHello's server name, or None to refuse it.
ServerNameGate = Callable[[str | None], object | None]


def build_server_context(settings: ListenerTlsSettings) -> ServerCertificate:
    """Read the key material and build a server SSLContext; raises TlsConfigError."""
    key, chain = _load_keystore(settings)
    leaf = chain[0]
    fmt = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(serialization.Encoding.DER, fmt) != \
            leaf.public_key().public_bytes(serialization.Encoding.DER, fmt):
        raise TlsConfigError(f"ssl.keystore.location ({settings.keystore_location}): "
                             "the private key does not belong to the first certificate")
    trusted = _load_truststore(settings)

    # A refused handshake sends its alert (certificate required, unknown ca…) before the close: auth/tls_handshake.py.
    context = AlertingSSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = _protocol_range(settings.enabled_protocols)
    if context.minimum_version < ssl.TLSVersion.TLSv1_2:
        log.warning("ssl.enabled.protocols enables %s, which is below TLSv1.2", context.minimum_version.name)
    _apply_cipher_suites(context, settings)
    # Clients may not renegotiate (a CPU-exhaustion vector; Kafka clients never do).
    context.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    context.verify_mode = settings.client_auth.verify_mode
    if trusted:
        # Like a Java trust store, every certificate in it is an anchor, intermediates included.
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        pem = "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in trusted)
        try:
            context.load_verify_locations(cadata=pem)
        except ssl.SSLError as exc:
            raise TlsConfigError(f"ssl.truststore.location: {exc}") from None
    _load_chain(context, key, chain, settings)
    return ServerCertificate(context, leaf, certificate_subject(leaf.public_bytes(serialization.Encoding.DER)),
                             _subject_alt_names(leaf))


def _apply_cipher_suites(context: ssl.SSLContext, settings: ListenerTlsSettings) -> None:
    suites = settings.cipher_suites
    if not suites:
        return
    legacy = [s for s in suites if s not in _TLS13_SUITES]
    if not legacy:
        if context.minimum_version < ssl.TLSVersion.TLSv1_3:
            raise TlsConfigError("ssl.cipher.suites names only TLS 1.3 suites while ssl.enabled.protocols allows "
                                 "TLS 1.2; add TLS 1.2 suites or enable only TLSv1.3")
    else:
        for suite in legacy:
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(suite)
            except ssl.SSLError:
                raise TlsConfigError(f"ssl.cipher.suites: OpenSSL knows no cipher suite {suite!r}") from None
        context.set_ciphers(":".join(legacy))
    if len(legacy) < len(suites) and not set(suites) >= _OPENSSL_TLS13_DEFAULT:
        log.warning("ssl.cipher.suites: TLS 1.3 suites cannot be restricted; all of OpenSSL's stay enabled")


def _load_chain(context: ssl.SSLContext, key: PrivateKeyTypes, chain: list[x509.Certificate],
                settings: ListenerTlsSettings) -> None:
    # The ssl module loads keys only from files: write the key, encrypted under a one-time
    # password, to a private (0600) temp file and delete it as soon as OpenSSL has read it.
    one_time = secrets.token_bytes(32)
    data = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(one_time))
    data += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain)
    fd, name = tempfile.mkstemp(prefix="ksgate-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        context.load_cert_chain(name, password=one_time)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"ssl.keystore.location ({settings.keystore_location}): {exc}") from None
    finally:
        os.unlink(name)


_FileState = tuple[tuple[int, int, int, int] | None, ...]


class TlsContextProvider:
    """The current server context of one listener, swapped atomically on a successful reload.

    Every context it builds hands each new handshake to the newest one (from the SNI callback,
    which OpenSSL runs for every ClientHello, with or without SNI), so a server created once
    with ``provider.context`` serves reloaded certificates; open connections keep theirs.
    """

    def __init__(self, settings: ListenerTlsSettings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._state = self._file_state()
        self._current = self._build()
        # One-port listeners (SNI routing): which server names are served, and where each handshake goes.
        self._gate: ServerNameGate | None = None
        self._check_names: Callable[[list[str]], list[str]] | None = None
        self._routes: weakref.WeakKeyDictionary[ssl.SSLObject, object] = weakref.WeakKeyDictionary()

    def route_server_names(self, gate: ServerNameGate, uncovered: Callable[[list[str]], list[str]]) -> None:
        """Serve only the server names ``gate`` routes (refusing others during the handshake) and require
        the certificate to cover them: ``uncovered(dns names)`` lists what it misses, now and on reload."""
        self._check_names = uncovered
        missing = uncovered(self._current.dns_names)
        if missing:
            raise TlsConfigError(f"ssl.keystore.location ({self._settings.keystore_location}): the certificate "
                                 f"does not cover {', '.join(missing)} (its names: "
                                 f"{', '.join(self._current.dns_names) or 'none'})")
        self._gate = gate

    def route_of(self, connection: ssl.SSLObject | None) -> object | None:
        """Where the handshake of ``connection`` was routed by its server name (None: no SNI routing)."""
        return self._routes.get(connection) if connection is not None else None

    @classmethod
    def from_settings(cls, config: Mapping[str, Any]) -> TlsContextProvider:
        """Parse one listener's ssl.* keys and load its material; raises TlsConfigError."""
        _check_files_exist(config)  # a missing file is the first thing to fix, before its password or type
        return cls(ListenerTlsSettings.from_config(config))

    @property
    def settings(self) -> ListenerTlsSettings:
        return self._settings

    @property
    def context(self) -> ssl.SSLContext:
        return self._current.context

    @property
    def current(self) -> ServerCertificate:
        return self._current

    def reload(self) -> bool:
        """Re-read the files; True if the new context is now in use, False if the old one stays."""
        with self._lock:
            self._state = self._file_state()
            try:
                new = self._build()
            except TlsConfigError as exc:
                log.error("TLS reload failed, keeping the current certificate: %s", exc)
                return False
            old = self._current
            if not self._settings.allow_dn_changes and _canonical_dn(new.subject) != _canonical_dn(old.subject):
                log.error("TLS reload refused: the certificate subject changed from %r to %r "
                          "and ssl.allow.dn.changes is false", old.subject, new.subject)
                return False
            missing = self._check_names(new.dns_names) if self._check_names is not None else []
            if missing:
                log.error("TLS reload refused: the new certificate does not cover %s", ", ".join(missing))
                return False
            if not self._settings.allow_san_changes and new.subject_alt_names != old.subject_alt_names:
                log.error("TLS reload refused: the subject alternative names changed from %s to %s "
                          "and ssl.allow.san.changes is false",
                          sorted(old.subject_alt_names), sorted(new.subject_alt_names))
                return False
            self._current = new
            log.info("TLS certificate reloaded: subject %r, serial %x", new.subject,
                     new.certificate.serial_number)
            return True

    def reload_if_changed(self) -> bool:
        """Reload when a watched file's mtime, size or inode changed since the last attempt.

        A failed attempt is not retried until the files change again, so polling stays quiet.
        """
        if self._file_state() == self._state:
            return False
        return self.reload()

    def _build(self) -> ServerCertificate:
        built = build_server_context(self._settings)
        built.context.sni_callback = self._hand_over
        return built

    def _hand_over(self, connection: ssl.SSLObject, server_name: str | None,
                   context: ssl.SSLContext) -> int | None:
        if self._gate is not None:
            route = self._gate(server_name)
            if route is None:  # fail closed: no SNI, or a name this listener does not serve
                log.warning("TLS handshake refused: server name %r is not served on this listener",
                            (server_name or "")[:255])
                return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
            self._routes[connection] = route
        current = self._current.context
        if context is not current:
            connection.context = current
        return None

    def _file_state(self) -> _FileState:
        states: list[tuple[int, int, int, int] | None] = []
        for path in self._settings.watched_files:
            try:
                st = os.stat(path)
                states.append((st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev))
            except OSError:
                states.append(None)
        return tuple(states)
