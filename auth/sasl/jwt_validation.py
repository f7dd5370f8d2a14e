"""JWT validation for OAUTHBEARER: signature keys (JWKS or static PEM), claim rules, principal.

Kafka's BrokerJwtValidator (plus its unsecured test-only validator) in Python, built on PyJWT.
"""

from __future__ import annotations

import binascii
import json
import logging
import math
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeGuard

import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from jwt.utils import base64url_decode

log = logging.getLogger("ksgate.auth.jwt")

RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
# Only the asymmetric algorithms: an HMAC algorithm would let anyone holding the (public)
# verification key mint tokens, which is the whole algorithm-confusion attack.
ASYMMETRIC_ALGORITHMS = RSA_ALGORITHMS | frozenset({"ES256", "ES384", "ES512", "EdDSA"})
_EC_ALGORITHM_BY_CURVE = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
MIN_RSA_KEY_BITS = 2048  # jose4j (Kafka's JWT library) refuses shorter RSA keys too
MAX_JWKS_BYTES = 1 << 20
MAX_KID_LENGTH = 256  # longer kids are never worth a JWKS refresh (Kafka caps them too)


@dataclass(slots=True, frozen=True)
class ValidatedToken:
    """A token whose signature and claims checked out; what Kafka calls an OAuthBearerToken."""

    principal: str
    expiry_ms: int
    scopes: frozenset[str] = frozenset()
    issued_at_ms: int | None = None
    claims: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(slots=True, frozen=True)
class InvalidToken:
    """Why a token was refused.

    ``reason`` is for operators' logs; ``status``/``scope``/``openid_configuration`` become
    the RFC 7628 §3.2.2 error JSON the client receives.
    """

    reason: str
    status: str = "invalid_token"
    scope: str | None = None
    openid_configuration: str | None = None


class TokenValidator(Protocol):
    """Validates a compact-serialised JWT; never blocks on I/O and never raises for bad tokens."""

    def validate(self, token: str, now_ms: int) -> ValidatedToken | InvalidToken: ...


@dataclass(slots=True, frozen=True)
class JwtConfig:
    """Claim rules, named after Kafka's ``sasl.oauthbearer.*`` broker settings."""

    expected_audience: tuple[str, ...] = ()  # sasl.oauthbearer.expected.audience; any one must match
    expected_issuer: str | None = None  # sasl.oauthbearer.expected.issuer
    clock_skew_s: int = 30  # sasl.oauthbearer.clock.skew.seconds
    principal_claim: str = "sub"  # sasl.oauthbearer.sub.claim.name
    scope_claim: str = "scope"  # sasl.oauthbearer.scope.claim.name
    required_scopes: frozenset[str] = frozenset()  # ksgate.oauthbearer.required.scopes
    algorithms: frozenset[str] = ASYMMETRIC_ALGORITHMS
    openid_configuration: str | None = None  # advertised in RFC 7628 error JSON when set

    def __post_init__(self) -> None:
        unsupported = self.algorithms - ASYMMETRIC_ALGORITHMS
        if unsupported or not self.algorithms:
            raise ValueError(
                f"JWT algorithms must be a non-empty subset of {sorted(ASYMMETRIC_ALGORITHMS)}; "
                f"refused: {sorted(unsupported)}"
            )
        if self.clock_skew_s < 0:
            raise ValueError("clock skew must not be negative")
        if not self.principal_claim or not self.scope_claim:
            raise ValueError("principal and scope claim names must not be empty")


# ---------------------------------------------------------------------------------------------
# Keys


@dataclass(slots=True, frozen=True)
class VerificationKey:
    """A public key and the JWS algorithms it may verify (derived from the key, never the token)."""

    kid: str | None
    public_key: PublicKeyTypes = field(repr=False)
    algorithms: frozenset[str]


class KeySource(Protocol):
    """Where signing keys come from. ``keys_for`` is on the hot path: it must only read memory.

    ``kid=None`` asks for every key (the token named none).
    """

    def keys_for(self, kid: str | None, now_ms: int) -> Sequence[VerificationKey]: ...


def algorithms_for_key(public_key: PublicKeyTypes) -> frozenset[str]:
    """The algorithms a key type can honestly verify; an empty set means "unusable"."""
    if isinstance(public_key, rsa.RSAPublicKey):
        return RSA_ALGORITHMS if public_key.key_size >= MIN_RSA_KEY_BITS else frozenset()
    if isinstance(public_key, ec.EllipticCurvePublicKey):
        alg = _EC_ALGORITHM_BY_CURVE.get(public_key.curve.name)
        return frozenset({alg}) if alg else frozenset()
    if isinstance(public_key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return frozenset({"EdDSA"})
    return frozenset()


def _verification_key(kid: str | None, public_key: PublicKeyTypes, declared_alg: object) -> VerificationKey | None:
    algorithms = algorithms_for_key(public_key)
    if declared_alg is not None:
        # A JWK's "alg" narrows the key to that one algorithm (RFC 7517 §4.4).
        algorithms = algorithms & {declared_alg} if isinstance(declared_alg, str) else frozenset()
    return VerificationKey(kid, public_key, algorithms) if algorithms else None


def parse_jwks(document: bytes) -> tuple[VerificationKey, ...]:
    """The usable signature keys of a JWK Set; symmetric, encryption and odd keys are skipped."""
    data = json.loads(document)
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError("not a JWK Set: expected an object with a 'keys' list")
    keys: list[VerificationKey] = []
    for entry in data["keys"]:
        if not isinstance(entry, dict):
            continue
        kid = entry.get("kid")
        if entry.get("use", "sig") != "sig" or entry.get("kty") not in ("RSA", "EC", "OKP"):
            continue
        if kid is not None and not isinstance(kid, str):
            continue
        try:
            material = jwt.PyJWK(entry).key
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            # Never log the exception text: PyJWT quotes the whole JWK, which may be private.
            log.warning("jwks_key_skipped kid=%r error=%s", kid, type(exc).__name__)
            continue
        public = _as_public_key(material)
        key = _verification_key(kid, public, entry.get("alg")) if public is not None else None
        if key is None:
            log.warning("jwks_key_skipped kid=%r error=unsupported key type, size or alg", kid)
            continue
        keys.append(key)
    return tuple(keys)


def _as_public_key(material: object) -> PublicKeyTypes | None:
    # A JWKS that (wrongly) publishes private keys still only yields their public halves.
    if isinstance(material, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        return material.public_key()
    if isinstance(material, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return material.public_key()
    if isinstance(
        material,
        rsa.RSAPublicKey | ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey | ed448.Ed448PublicKey,
    ):
        return material
    return None


def _select(keys: Iterable[VerificationKey], kid: str | None) -> tuple[VerificationKey, ...]:
    return tuple(keys) if kid is None else tuple(k for k in keys if k.kid == kid)


class StaticKeySource:
    """Public keys from PEM files (SubjectPublicKeyInfo or X.509 certificate); kid = file stem.

    A token without a ``kid`` may use the only key, or the one in ``default.pem``.
    """

    def __init__(self, pem_paths: Sequence[str | Path]) -> None:
        if not pem_paths:
            raise ValueError("StaticKeySource needs at least one PEM file")
        keys: dict[str, VerificationKey] = {}
        for raw in pem_paths:
            path = Path(raw)
            kid = path.stem
            if kid in keys:
                raise ValueError(f"two static JWT keys share the kid {kid!r} ({path})")
            try:
                pem = path.read_bytes()
                public = (
                    x509.load_pem_x509_certificate(pem).public_key()
                    if b"-----BEGIN CERTIFICATE-----" in pem
                    else load_pem_public_key(pem)
                )
            except (OSError, ValueError, TypeError) as exc:
                raise ValueError(f"cannot load JWT public key {path}: {type(exc).__name__}") from None
            key = _verification_key(kid, public, None)
            if key is None:
                raise ValueError(f"{path}: unsupported key (RSA >= 2048 bits, P-256/384/521 or Ed25519/Ed448)")
            keys[kid] = key
        self._keys = keys

    def keys_for(self, kid: str | None, now_ms: int) -> Sequence[VerificationKey]:
        if kid is not None:
            key = self._keys.get(kid)
            return (key,) if key else ()
        if len(self._keys) == 1:
            return tuple(self._keys.values())
        default = self._keys.get("default")
        return (default,) if default else ()


def urllib_fetch(url: str, timeout_s: float) -> bytes:
    """GET a JWKS document; TLS is verified with the system trust store."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        body: bytes = response.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise ValueError(f"JWKS document larger than {MAX_JWKS_BYTES} bytes")
    return body


class JwksKeySource:
    """Keys from a JWKS endpoint, kept fresh by a background thread.

    The gateway is asyncio, so ``keys_for`` (on the hot path) only reads the cached key set;
    every fetch happens on the ``ksgate-jwks`` daemon thread.  A ``kid`` the cache does not
    know asks that thread for an immediate refresh — at most once per
    ``min_refresh_interval_ms`` so that tokens with random kids cannot turn the gateway into
    a request amplifier against the identity provider — and the current attempt fails; the
    client's retry (Kafka clients retry authentication) then sees the rotated key.  Call
    ``prefetch()`` at startup (e.g. via ``asyncio.to_thread``) so the first clients do not
    meet an empty cache.  A failed refresh keeps the previous keys.
    """

    def __init__(
        self,
        url: str,
        refresh_ms: int = 3_600_000,
        *,
        min_refresh_interval_ms: int = 10_000,
        timeout_s: float = 10.0,
        fetch: Callable[[str, float], bytes] = urllib_fetch,
    ) -> None:
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in ("https", "http", "file"):
            raise ValueError(f"JWKS endpoint must be an https (or http/file) URL, got scheme {scheme!r}")
        if scheme == "http":
            log.warning("jwks_endpoint_not_tls url=%s: keys fetched without TLS can be forged in transit", url)
        if refresh_ms <= 0 or min_refresh_interval_ms < 0 or timeout_s <= 0:
            raise ValueError("JWKS refresh interval and timeout must be positive")
        self.url = url
        self._refresh_s = refresh_ms / 1000
        self._min_refresh_interval_ms = min_refresh_interval_ms
        self._retry_s = min(self._refresh_s, max(min_refresh_interval_ms / 1000, 1.0))
        self._timeout_s = timeout_s
        self._fetch = fetch
        self._keys: tuple[VerificationKey, ...] = ()  # replaced whole, never mutated: safe to read lock-free
        self._lock = threading.Lock()
        self._refreshed = threading.Condition()
        self._generation = 0
        self._last_requested_ms: int | None = None
        self._requested = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- hot path ---------------------------------------------------------------------------

    def keys_for(self, kid: str | None, now_ms: int) -> Sequence[VerificationKey]:
        self._ensure_started()
        found = _select(self._keys, kid)
        if not found and (kid is None or len(kid) <= MAX_KID_LENGTH):
            self.request_refresh(now_ms)
        return found

    def request_refresh(self, now_ms: int) -> bool:
        """Ask the background thread to refresh now, unless one was asked for too recently."""
        with self._lock:
            last = self._last_requested_ms
            # A clock that went backwards does not lock refreshes out.
            if last is not None and 0 <= now_ms - last < self._min_refresh_interval_ms:
                return False
            self._last_requested_ms = now_ms
            self._requested += 1
        self._wake.set()
        return True

    # -- lifecycle and observation ------------------------------------------------------------

    def prefetch(self) -> bool:
        """Fetch the key set now, in the calling thread (blocking), and start the refresher."""
        ok = self._refresh_once()
        self._ensure_started()
        return ok

    def close(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    @property
    def refresh_generation(self) -> int:
        """Counts completed refresh attempts (successful or not)."""
        with self._refreshed:
            return self._generation

    @property
    def refreshes_requested(self) -> int:
        """Counts on-demand refreshes that passed the rate limit."""
        with self._lock:
            return self._requested

    def wait_for_refresh(self, generation: int, timeout_s: float) -> bool:
        """Block until a refresh attempt completes after ``generation``; False on timeout."""
        with self._refreshed:
            return self._refreshed.wait_for(lambda: self._generation > generation, timeout_s)

    # -- background thread ------------------------------------------------------------------

    def _ensure_started(self) -> None:
        if self._thread is not None or self._stop.is_set():
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ksgate-jwks", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        wait_s = self._refresh_s
        while not self._stop.is_set():
            self._wake.wait(wait_s)
            if self._stop.is_set():
                return
            # Cleared before fetching, so a request arriving mid-fetch triggers one more round.
            self._wake.clear()
            wait_s = self._refresh_s if self._refresh_once() else self._retry_s

    def _refresh_once(self) -> bool:
        ok = False
        try:
            keys = parse_jwks(self._fetch(self.url, self._timeout_s))
            if keys:
                self._keys = keys
                ok = True
                log.info("jwks_refreshed url=%s keys=%d", self.url, len(keys))
            else:
                log.warning("jwks_refresh_failed url=%s error=no usable signature keys; keeping old keys", self.url)
        except (OSError, ValueError) as exc:  # URLError/HTTPError/timeouts are OSErrors; bad JSON is a ValueError
            log.warning("jwks_refresh_failed url=%s error=%s; keeping old keys", self.url, exc)
        with self._refreshed:
            self._generation += 1
            self._refreshed.notify_all()
        return ok


# ---------------------------------------------------------------------------------------------
# Validators


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _scopes(raw: object) -> frozenset[str] | None:
    if raw is None:
        return frozenset()
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        return frozenset(s.strip() for s in raw if s.strip())
    return None


def check_claims(claims: Mapping[str, Any], now_ms: int, config: JwtConfig) -> ValidatedToken | InvalidToken:
    """Kafka's claim rules: exp required, nbf/iat honoured with skew, aud/iss if configured."""
    skew_ms = config.clock_skew_s * 1000

    def invalid(reason: str) -> InvalidToken:
        return InvalidToken(reason, openid_configuration=config.openid_configuration)

    exp = claims.get("exp")
    if not _is_number(exp):
        return invalid("exp claim missing or not a number")
    expiry_ms = int(exp * 1000)
    if now_ms >= expiry_ms + skew_ms:
        return invalid(f"token expired at {expiry_ms} (now {now_ms}, skew {config.clock_skew_s}s)")
    nbf = claims.get("nbf")
    if nbf is not None:
        if not _is_number(nbf):
            return invalid("nbf claim not a number")
        if now_ms + skew_ms < int(nbf * 1000):
            return invalid(f"token not valid before {int(nbf * 1000)} (now {now_ms})")
    iat = claims.get("iat")
    issued_at_ms: int | None = None
    if iat is not None:
        if not _is_number(iat) or iat < 0:
            return invalid("iat claim not a non-negative number")
        issued_at_ms = int(iat * 1000)
        if issued_at_ms > now_ms + skew_ms:
            return invalid(f"token issued in the future at {issued_at_ms} (now {now_ms})")
    if config.expected_audience:
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(isinstance(a, str) and a in config.expected_audience for a in audiences):
            return invalid(f"audience {aud!r} not among the expected {list(config.expected_audience)}")
    if config.expected_issuer is not None and claims.get("iss") != config.expected_issuer:
        return invalid(f"issuer {claims.get('iss')!r} is not the expected {config.expected_issuer!r}")
    raw_principal = claims.get(config.principal_claim)
    # Kafka trims the subject and refuses an empty one.
    principal = raw_principal.strip() if isinstance(raw_principal, str) else ""
    if not principal:
        return invalid(f"principal claim {config.principal_claim!r} missing, empty or not a string")
    scopes = _scopes(claims.get(config.scope_claim))
    if scopes is None:
        return invalid(f"scope claim {config.scope_claim!r} is neither a string nor a list of strings")
    missing = config.required_scopes - scopes
    if missing:
        return InvalidToken(
            f"token for {principal!r} lacks required scope(s) {sorted(missing)}",
            status="insufficient_scope",
            scope=" ".join(sorted(config.required_scopes)),
            openid_configuration=config.openid_configuration,
        )
    return ValidatedToken(principal, expiry_ms, scopes, issued_at_ms, dict(claims))


# Signature only: every claim is checked by check_claims against the caller's clock.
_SIGNATURE_ONLY: jwt.types.Options = {
    "verify_signature": True,
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "verify_aud": False,
    "verify_iss": False,
    "verify_sub": False,
    "verify_jti": False,
    "require": [],
    "enforce_minimum_key_length": True,
}


class JwtValidator:
    """Verifies a signed JWT against a KeySource, then applies the configured claim rules.

    The algorithms PyJWT may use come from the key (and the configured allow-list), never
    from the token: ``alg: none``, HS* and an alg that does not fit the key are all refused.
    """

    def __init__(self, config: JwtConfig, key_source: KeySource) -> None:
        self.config = config
        self.key_source = key_source

    def validate(self, token: str, now_ms: int) -> ValidatedToken | InvalidToken:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            return self._invalid(f"malformed JWT: {exc}")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.config.algorithms:
            return self._invalid(f"JWS algorithm {alg!r} is not allowed")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            return self._invalid("kid header is not a string")
        candidates = [k for k in self.key_source.keys_for(kid, now_ms) if alg in k.algorithms]
        if len(candidates) != 1:
            what = "no" if not candidates else "more than one"
            return self._invalid(f"{what} verification key for kid {kid!r} and alg {alg}")
        key = candidates[0]
        try:
            claims = jwt.decode(
                token,
                key.public_key,  # type: ignore[arg-type]  # PyJWT's AllowedPublicKeys excludes Ed448 statically
                algorithms=sorted(key.algorithms & self.config.algorithms),
                options=_SIGNATURE_ONLY,
            )
        except jwt.PyJWTError as exc:
            return self._invalid(f"JWT rejected (kid {kid!r}, alg {alg}): {exc}")
        return check_claims(claims, now_ms, self.config)

    def _invalid(self, reason: str) -> InvalidToken:
        return InvalidToken(reason, openid_configuration=self.config.openid_configuration)


class UnsecuredJwtValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: unsigned (``alg: none``) tokens.

    Anyone can mint such a token for any principal, so this exists for tests and demos only
    and shouts about it every time one is built.
    """

    def __init__(self, config: JwtConfig | None = None) -> None:
        self.config = config or JwtConfig()
        log.warning(
            "OAUTHBEARER UNSECURED JWT validation is enabled: token signatures are NOT checked and any "
            "client can authenticate as any principal. Never use ksgate.oauthbearer.unsecured in production."
        )

    def validate(self, token: str, now_ms: int) -> ValidatedToken | InvalidToken:
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            return InvalidToken("unsecured JWT must be 'header.payload.' with an empty signature")
        try:
            header = json.loads(base64url_decode(parts[0]))
            claims = json.loads(base64url_decode(parts[1]))
        except (ValueError, binascii.Error):
            return InvalidToken("malformed unsecured JWT")
        if not isinstance(header, dict) or header.get("alg") != "none":
            return InvalidToken("unsecured JWT must declare alg 'none'")
        if not isinstance(claims, dict):
            return InvalidToken("unsecured JWT payload is not a JSON object")
        return check_claims(claims, now_ms, self.config)
