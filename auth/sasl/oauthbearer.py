"""SASL/OAUTHBEARER (RFC 7628) server, parsing the client's first message as Kafka does.

The token itself is judged by a TokenValidator (auth/sasl/jwt_validation.py); this module owns the
exchange: GS2 header, key/value pairs, the authzid rule and the RFC 7628 error round trip.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from auth.errors import AuthenticationFailed
from auth.sasl.jwt_validation import (
    InvalidToken,
    JwksKeySource,
    JwtConfig,
    JwtValidator,
    KeySource,
    StaticKeySource,
    TokenValidator,
    UnsecuredJwtValidator,
    ValidatedToken,
)
from auth.sasl.mechanism import Challenge, Done, Failure, Outcome, SaslContext, SaslMechanismServer

MECHANISM = "OAUTHBEARER"
AUTH_KEY = "auth"
KVSEP = b"\x01"
# What Kafka's SaslServerAuthenticator tells a client whose mechanism raised a plain SaslException.
GENERIC_FAILURE = (
    f"Authentication failed during authentication due to invalid credentials with SASL mechanism {MECHANISM}"
)

# The grammar of Kafka's OAuthBearerClientInitialResponse (RFC 7628 §3.1 with RFC 5801's GS2
# header, channel binding "n" only).  Every repetition ends on a byte the next cannot start
# with, so matching is linear in the message length.
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"  # any ASCII but ',' and '=', or their escapes
EXTENSION_KEY = re.compile(r"[A-Za-z]+")
EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]+")
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01"
    rf"(?P<kvpairs>(?:{EXTENSION_KEY.pattern}={EXTENSION_VALUE.pattern}\x01)*)\x01"
)
_AUTH_VALUE = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_.A-Za-z0-9]+)")


@dataclass(slots=True, frozen=True)
class ClientInitialResponse:
    """The parsed client first message; ``extensions`` excludes the reserved ``auth`` key."""

    token: str = field(repr=False)
    authorization_id: str = ""
    extensions: Mapping[str, str] = field(default_factory=dict)


def parse_client_initial_response(message: bytes) -> ClientInitialResponse:
    """Parse ``n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A]*^A``; raise AuthenticationFailed."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("OAUTHBEARER client first message is not UTF-8", GENERIC_FAILURE) from None
    matched = _CLIENT_INITIAL_RESPONSE.fullmatch(text)
    if matched is None:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message", GENERIC_FAILURE)
    pairs: dict[str, str] = {}
    for pair in matched["kvpairs"].split("\x01")[:-1]:
        key, _, value = pair.partition("=")
        pairs[key] = value  # a repeated key keeps its last value, as Kafka's Utils.parseMap does
    auth = pairs.pop(AUTH_KEY, None)
    if auth is None:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message: 'auth' not specified", GENERIC_FAILURE)
    auth_matched = _AUTH_VALUE.fullmatch(auth)
    if auth_matched is None:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message: invalid 'auth' format", GENERIC_FAILURE)
    if auth_matched["scheme"].lower() != "bearer":
        raise AuthenticationFailed(
            f"Invalid scheme in OAUTHBEARER client first message: {auth_matched['scheme']}", GENERIC_FAILURE
        )
    # Like Kafka, the authzid is compared as sent: "=2C"/"=3D" escapes are not decoded.
    return ClientInitialResponse(auth_matched["token"], matched["authzid"] or "", pairs)


def error_json(invalid: InvalidToken) -> str:
    """RFC 7628 §3.2.2 error, laid out byte for byte as Kafka's OAuthBearerSaslServer does."""
    text = '{"status":' + json.dumps(invalid.status)
    if invalid.scope is not None:
        text += ', "scope":' + json.dumps(invalid.scope)
    if invalid.openid_configuration is not None:
        text += ', "openid-configuration":' + json.dumps(invalid.openid_configuration)
    return text + "}"


class _State(enum.Enum):
    AWAIT_FIRST_MESSAGE = enum.auto()
    AWAIT_ERROR_ACK = enum.auto()  # we sent the error JSON; the client must answer 0x01
    FINISHED = enum.auto()


class OAuthBearerServer:
    """One OAUTHBEARER exchange.

    After success ``token`` and ``extensions`` hold what Kafka exposes as the negotiated
    properties (``OAUTHBEARER.token`` and the SASL extensions).
    """

    def __init__(self, validator: TokenValidator, context: SaslContext) -> None:
        self._validator = validator
        self._context = context
        self._state = _State.AWAIT_FIRST_MESSAGE
        self._pending: Failure | None = None
        self.token: ValidatedToken | None = None
        self.extensions: Mapping[str, str] = {}

    def evaluate(self, token: bytes) -> Outcome:
        state, self._state = self._state, _State.FINISHED
        if state is _State.AWAIT_ERROR_ACK:
            if token == KVSEP and self._pending is not None:
                return self._pending
            # Stricter than Kafka (which would parse a fresh first message): RFC 7628 §3.2.3
            # allows only %x01 here, and one token per exchange keeps guessing expensive.
            return Failure(
                "OAUTHBEARER client answered the error challenge with something other than %x01", GENERIC_FAILURE
            )
        if state is _State.FINISHED:
            return Failure("OAUTHBEARER exchange already finished", GENERIC_FAILURE)
        try:
            first = parse_client_initial_response(token)
        except AuthenticationFailed as exc:
            return Failure(str(exc), exc.client_message)
        result = self._validator.validate(first.token, self._context.now_ms())
        if isinstance(result, InvalidToken):
            message = error_json(result)
            # Kafka sends the error JSON as the failure message once the client acknowledges it.
            self._pending = Failure(f"OAUTHBEARER token refused: {result.reason}", message)
            self._state = _State.AWAIT_ERROR_ACK
            return Challenge(message.encode())
        if first.authorization_id and first.authorization_id != result.principal:
            return Failure(
                f"OAUTHBEARER authzid {first.authorization_id!r} differs from the token principal {result.principal!r}",
                "Authentication failed: Client requested an authorization id that is different from "
                "the token's principal name",
            )
        self.token = result
        self.extensions = dict(first.extensions)
        return Done(authorization_id=result.principal, credential_expiry_ms=result.expiry_ms)


class OAuthBearerMechanism:
    """MechanismFactory for OAUTHBEARER; one validator (and its key cache) shared by all attempts."""

    def __init__(self, validator: TokenValidator) -> None:
        self.validator = validator

    @property
    def name(self) -> str:
        return MECHANISM

    def create(self, context: SaslContext) -> SaslMechanismServer:
        return OAuthBearerServer(self.validator, context)

    def prefetch(self) -> bool:
        """Blocking: load a JWKS key set before serving (run it off the event loop)."""
        source = self._key_source()
        return source.prefetch() if isinstance(source, JwksKeySource) else True

    def close(self) -> None:
        source = self._key_source()
        if isinstance(source, JwksKeySource):
            source.close()

    def _key_source(self) -> KeySource | None:
        return self.validator.key_source if isinstance(self.validator, JwtValidator) else None


# ---------------------------------------------------------------------------------------------
# Configuration (Kafka's sasl.oauthbearer.* broker keys plus ksgate.oauthbearer.*)

JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"
JWKS_REFRESH_MS = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
EXPECTED_AUDIENCE = "sasl.oauthbearer.expected.audience"
EXPECTED_ISSUER = "sasl.oauthbearer.expected.issuer"
CLOCK_SKEW_SECONDS = "sasl.oauthbearer.clock.skew.seconds"
SUB_CLAIM_NAME = "sasl.oauthbearer.sub.claim.name"
SCOPE_CLAIM_NAME = "sasl.oauthbearer.scope.claim.name"
REQUIRED_SCOPES = "ksgate.oauthbearer.required.scopes"
STATIC_KEYS = "ksgate.oauthbearer.static.keys"
UNSECURED = "ksgate.oauthbearer.unsecured"


def _list(settings: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = settings.get(key)
    if value is None:
        return ()
    items: Sequence[object] = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError(f"{key}: expected a comma-separated list")
    return tuple(str(item).strip() for item in items if str(item).strip())


def _int(settings: Mapping[str, Any], key: str, default: int) -> int:
    value = settings.get(key, default)
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}: expected an integer, got {value!r}") from None


def _bool(settings: Mapping[str, Any], key: str) -> bool:
    value = settings.get(key, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{key}: expected true or false, got {value!r}")


def _str(settings: Mapping[str, Any], key: str, default: str | None) -> str | None:
    value = settings.get(key, default)
    if value is None:
        return None
    text = str(value).strip()
    return text or default


def build_oauthbearer_from_config(settings: Mapping[str, Any]) -> OAuthBearerMechanism:
    """Build the mechanism from Kafka-style keys; raises ValueError on a bad or incomplete config.

    Exactly one key source is required: ``sasl.oauthbearer.jwks.endpoint.url`` or
    ``ksgate.oauthbearer.static.keys`` — or, for tests only, ``ksgate.oauthbearer.unsecured``.
    """
    config = JwtConfig(
        expected_audience=_list(settings, EXPECTED_AUDIENCE),
        expected_issuer=_str(settings, EXPECTED_ISSUER, None),
        clock_skew_s=_int(settings, CLOCK_SKEW_SECONDS, 30),
        principal_claim=_str(settings, SUB_CLAIM_NAME, "sub") or "sub",
        scope_claim=_str(settings, SCOPE_CLAIM_NAME, "scope") or "scope",
        required_scopes=frozenset(_list(settings, REQUIRED_SCOPES)),
    )
    url = _str(settings, JWKS_URL, None)
    static_keys = _list(settings, STATIC_KEYS)
    if _bool(settings, UNSECURED):
        if url or static_keys:
            raise ValueError(f"{UNSECURED}=true cannot be combined with {JWKS_URL} or {STATIC_KEYS}")
        return OAuthBearerMechanism(UnsecuredJwtValidator(config))
    if url and static_keys:
        raise ValueError(f"set either {JWKS_URL} or {STATIC_KEYS}, not both")
    source: KeySource
    if url:
        source = JwksKeySource(url, refresh_ms=_int(settings, JWKS_REFRESH_MS, 3_600_000))
    elif static_keys:
        source = StaticKeySource(static_keys)
    else:
        raise ValueError(f"OAUTHBEARER needs {JWKS_URL} or {STATIC_KEYS} (or {UNSECURED}=true for tests)")
    return OAuthBearerMechanism(JwtValidator(config, source))
