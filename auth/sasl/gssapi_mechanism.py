"""SASL GSSAPI (Kerberos V5, RFC 4752) as a Kafka broker accepts it, on MIT krb5 via python-gssapi.

The GSS context loop runs first; then the server offers only "no security layer" and reads
the client's choice and authorization id, both under GSS_Wrap without confidentiality.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass

import gssapi
from gssapi.raw.misc import GSSError

from auth.sasl.kerberos_rules import KerberosShortNamer, NoMatchingKerberosRule
from auth.sasl.mechanism import Challenge, Done, Failure, Outcome, SaslContext

MECHANISM = "GSSAPI"
NO_SECURITY_LAYER = 0x01
# What Kafka answers any failed GSSAPI exchange with (SaslServerAuthenticator).
CLIENT_MESSAGE = (
    f"Authentication failed during authentication due to invalid credentials with SASL mechanism {MECHANISM}"
)

# MIT's com_err table for krb5 (ERROR_TABLE_BASE_krb5), as an unsigned minor status.
_KRB5_ERROR_BASE = 0x96C73A00
# Kafka's KerberosError.retriable(): the broker closes the connection without an error
# response so the client retries (client not yet valid, ticket not yet valid, replay).
RETRIABLE_KRB5_ERRORS = frozenset({21, 33, 34})


class _AcceptorContext(gssapi.SecurityContext):
    # python-gssapi otherwise returns a failed step's KRB-ERROR token as if it were output
    # and raises only later; a Kafka broker never sends that token, it fails the exchange.
    __DEFER_STEP_ERRORS__ = False


class _Stage(enum.Enum):
    ACCEPTING = enum.auto()  # GSS context tokens
    AWAITING_EMPTY = enum.auto()  # sent the final GSS token; RFC 4752 wants an empty reply
    AWAITING_LAYER = enum.auto()  # sent the wrapped security-layer offer
    FINISHED = enum.auto()


def krb5_error_code(exc: GSSError) -> int | None:
    """The Kerberos protocol error number (e.g. 34 for a replay) behind a GSS failure, if any."""
    minor = exc.min_code & 0xFFFFFFFF
    if _KRB5_ERROR_BASE <= minor < _KRB5_ERROR_BASE + 256:
        return minor - _KRB5_ERROR_BASE
    return None


def default_realm() -> str:
    """The krb5 configuration's default_realm (KRB5_CONFIG or /etc/krb5.conf), for DEFAULT rules.

    Like Kafka, an unreadable or realm-less configuration gives "" rather than an error.
    """
    try:
        name = gssapi.Name("ksgate", gssapi.NameType.kerberos_principal).canonicalize(gssapi.MechType.kerberos)
    except GSSError:
        return ""
    return str(name).rpartition("@")[2]


def acceptor_problem(mechanism: GssapiMechanism) -> str | None:
    """Why ``mechanism`` could accept no Kerberos login (checked at start-up, as Kafka's Kerberos login is), or None.

    The keytab must exist and be readable, and hold a key for the service principal: ``service/server_host`` when
    the host is configured, else any key (the host is then the one each client dials).
    """
    keytab = mechanism.keytab
    path = _keytab_file(keytab) if keytab is not None else None
    if path is not None:
        if not os.path.isfile(path):
            return f"the keytab {path} does not exist"
        if not os.access(path, os.R_OK):
            return f"the keytab {path} is not readable by this process"
    name = (gssapi.Name(f"{mechanism.service_name}@{mechanism.server_host}", gssapi.NameType.hostbased_service)
            if mechanism.server_host else None)
    store: dict[bytes | str, bytes | str] | None = {"keytab": keytab} if keytab is not None else None
    try:
        gssapi.Credentials(name=name, usage="accept", mechs=[gssapi.MechType.kerberos], store=store)
    except GSSError as exc:
        source = keytab if keytab is not None else "the default keytab (KRB5_KTNAME, else the krb5 configuration's)"
        who = f"{mechanism.service_name}/{mechanism.server_host}" if mechanism.server_host else "any principal"
        return f"no key for {who} in {source}: {_describe(exc)}"
    return None


def _keytab_file(keytab: str) -> str | None:
    """The file a keytab name refers to (``/path``, ``FILE:/path``, ``WRFILE:/path``); None for other kinds."""
    kind, separator, residual = keytab.partition(":")
    if not separator or "/" in kind:
        return keytab
    return residual if kind.upper() in ("FILE", "WRFILE") else None


def _describe(exc: GSSError) -> str:
    code = krb5_error_code(exc)
    suffix = f" (krb5 error {code}{', retriable' if code in RETRIABLE_KRB5_ERRORS else ''})" if code else ""
    return f"{exc.gen_message()}{suffix}"


@dataclass(slots=True, frozen=True, kw_only=True)
class GssapiMechanism:
    """The GSSAPI MechanismFactory.

    The acceptor is ``service_name/host`` from ``keytab`` (or KRB5_KTNAME when None), where
    host is ``server_host`` or, when None, the host name the client used for this listener.
    ``Done.authorization_id`` is the full principal (``alice@REALM``); the principal builder
    shortens it with :meth:`short_name`.

    Kafka ignores the client's authorization id and uses the authenticated principal (kafka-python
    even sends the service name there); ``require_matching_authzid`` instead fails a non-empty
    one that differs.  ``ticket_bounds_session`` reports the ticket's end as the credential
    expiry (Kafka reports none for GSSAPI, so its sessions outlive tickets).
    """

    short_namer: KerberosShortNamer
    service_name: str = "kafka"
    keytab: str | None = None
    server_host: str | None = None
    require_matching_authzid: bool = False
    ticket_bounds_session: bool = True

    @property
    def name(self) -> str:
        return MECHANISM

    def create(self, context: SaslContext) -> GssapiServer:
        return GssapiServer(self, context)

    def acceptor_name(self, context: SaslContext) -> str:
        """The GSS host-based service name the client must have a ticket for: ``kafka@host``."""
        return f"{self.service_name}@{self.server_host or context.server_host}"

    def short_name(self, principal: str) -> str:
        """sasl.kerberos.principal.to.local.rules applied to ``alice@REALM``; raises NoMatchingKerberosRule."""
        return self.short_namer.short_name(principal)


class GssapiServer:
    """One GSSAPI exchange; each evaluate() takes the client's next token."""

    __slots__ = ("_context", "_expiry_ms", "_gss", "_mechanism", "_principal", "_stage")

    def __init__(self, mechanism: GssapiMechanism, context: SaslContext) -> None:
        self._mechanism = mechanism
        self._context = context
        self._stage = _Stage.ACCEPTING
        self._gss: gssapi.SecurityContext | None = None
        self._principal = ""
        self._expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> Outcome:
        stage = self._stage
        # Any failure ends the exchange; a later token is a protocol error, not a retry.
        self._stage = _Stage.FINISHED
        try:
            if stage is _Stage.ACCEPTING:
                return self._accept(token)
            if stage is _Stage.AWAITING_EMPTY:
                if token:
                    return self._fail("expected an empty response after the final GSS token (RFC 4752)")
                return self._offer_security_layer()
            if stage is _Stage.AWAITING_LAYER:
                return self._finish(token)
            return self._fail("GSSAPI exchange already finished")
        except GSSError as exc:
            return self._fail(f"GSSAPI {stage.name.lower()} failed: {_describe(exc)}")

    def _accept(self, token: bytes) -> Outcome:
        if self._gss is None:
            creds = self._acceptor_credentials()
            if isinstance(creds, Failure):
                return creds
            self._gss = _AcceptorContext(creds=creds, usage="accept")
        gss = self._gss
        output = gss.step(token)
        if not gss.complete:
            self._stage = _Stage.ACCEPTING
            return Challenge(output or b"")
        if gss.mech != gssapi.MechType.kerberos:
            return self._fail(f"GSS mechanism {gss.mech} is not Kerberos V5")
        if gssapi.RequirementFlag.anonymity in gss.actual_flags:
            return self._fail("anonymous Kerberos initiators are not accepted")
        self._principal = str(gss.initiator_name)
        try:
            self._mechanism.short_name(self._principal)
        except NoMatchingKerberosRule as exc:
            # Kafka's principal builder would fail the connection; fail before Done instead.
            return self._fail(f"{self._principal}: {exc}")
        lifetime = gss.lifetime  # seconds; MIT adds its clock-skew allowance to the ticket end
        if self._mechanism.ticket_bounds_session and lifetime is not None:
            self._expiry_ms = self._context.now_ms() + lifetime * 1000
        if output:
            self._stage = _Stage.AWAITING_EMPTY
            return Challenge(output)
        return self._offer_security_layer()

    def _acceptor_credentials(self) -> gssapi.Credentials | Failure:
        acceptor = self._mechanism.acceptor_name(self._context)
        name = gssapi.Name(acceptor, gssapi.NameType.hostbased_service)
        keytab = self._mechanism.keytab
        store: dict[bytes | str, bytes | str] | None = {"keytab": keytab} if keytab is not None else None
        try:
            return gssapi.Credentials(name=name, usage="accept", mechs=[gssapi.MechType.kerberos], store=store)
        except GSSError as exc:
            source = keytab if keytab is not None else "the default keytab"
            return self._fail(f"no acceptor credentials for {acceptor} in {source}: {_describe(exc)}")

    def _offer_security_layer(self) -> Outcome:
        assert self._gss is not None
        # RFC 4752 §3.1: layers bitmask, then a 3-byte max size that MUST be 0 with no layer.
        offer = bytes((NO_SECURITY_LAYER, 0, 0, 0))
        self._stage = _Stage.AWAITING_LAYER
        return Challenge(self._gss.wrap(offer, encrypt=False).message)

    def _finish(self, token: bytes) -> Outcome:
        assert self._gss is not None
        message = self._gss.unwrap(token).message
        self._gss = None  # the exchange is over; release the context now
        if len(message) < 4:
            return self._fail(f"security layer reply is {len(message)} bytes, expected at least 4")
        if message[0] != NO_SECURITY_LAYER:
            return self._fail(f"client chose security layer {message[0]:#04x}; only 'no security layer' is offered")
        # The client's max message size (bytes 1-3) only matters with a layer, which there is not.
        try:
            authzid = message[4:].decode("utf-8")
        except UnicodeDecodeError:
            return self._fail("authorization id is not UTF-8")
        if authzid and authzid != self._principal and self._mechanism.require_matching_authzid:
            return self._fail(f"{self._principal} may not act as authorization id {authzid!r}")
        return Done(authorization_id=self._principal, credential_expiry_ms=self._expiry_ms)

    def _fail(self, reason: str) -> Failure:
        self._stage = _Stage.FINISHED
        self._gss = None
        return Failure(reason, client_message=CLIENT_MESSAGE)
