"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer runs it, verified against salted PBKDF2 hashes.

Whether PLAIN may run on a listener without TLS is the SASL state machine's decision, not this module's.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from auth.credentials import CredentialStore, PlainCredential
from auth.sasl.mechanism import Done, Failure, HashClaim, Outcome, SaslContext, SaslMechanismServer, Verify
from auth.sasl.refuted_passwords import RefutedPasswordCache
from auth.sasl.verified_passwords import VerifiedPasswordCache

# 4096 PBKDF2-SHA512 rounds (SCRAM's minimum) take about 4 ms here, on a worker thread of the
# gateway (never its event loop); a verified password is remembered, so reconnects skip it.
PLAIN_DEFAULT_ITERATIONS = 4096
PLAIN_SALT_BYTES = 32
_HASH_NAME = "sha512"

# Kafka's PlainSaslServer sends these texts to the client verbatim.
INVALID_CREDENTIALS_MESSAGE = "Authentication failed: Invalid username or password"
AUTHZID_MISMATCH_MESSAGE = "Authentication failed: Client requested an authorization id that is different from username"


def _derive(password: str, salt: bytes, iterations: int, size: int) -> bytes:
    return hashlib.pbkdf2_hmac(_HASH_NAME, password.encode("utf-8"), salt, iterations, dklen=size)


def plain_credential(password: str, salt: bytes | None = None,
                     iterations: int = PLAIN_DEFAULT_ITERATIONS) -> PlainCredential:
    """Hash a password for storage (PBKDF2-HMAC-SHA512, 64-byte output)."""
    if iterations < 1:
        raise ValueError("iterations must be positive")
    if salt is None:
        salt = secrets.token_bytes(PLAIN_SALT_BYTES)
    size = hashlib.new(_HASH_NAME).digest_size
    return PlainCredential(salt=salt, hash=_derive(password, salt, iterations, size), iterations=iterations)


class PlainMechanism:
    """MechanismFactory for PLAIN."""

    def __init__(self, store: CredentialStore, cache: VerifiedPasswordCache | None = None,
                 refuted: RefutedPasswordCache | None = None) -> None:
        self._store = store
        self._cache = cache if cache is not None else VerifiedPasswordCache()
        self._refuted = refuted if refuted is not None else RefutedPasswordCache(self._cache.max_entries)
        # Unknown users are checked against this random stand-in, so they cost the same work.
        size = hashlib.new(_HASH_NAME).digest_size
        self._decoy = PlainCredential(secrets.token_bytes(PLAIN_SALT_BYTES), secrets.token_bytes(size),
                                      PLAIN_DEFAULT_ITERATIONS)

    @property
    def name(self) -> str:
        return "PLAIN"

    def create(self, context: SaslContext) -> SaslMechanismServer:
        return _PlainServer(self._store, self._decoy, self._cache, self._refuted, context.client_host)

    def __repr__(self) -> str:
        return "PlainMechanism()"


class _PlainServer:
    """PLAIN is a single message: authzid NUL authcid NUL passwd.  The password check is a
    Verify step (the hash runs off the caller's thread) unless a cache already knows the verdict:
    verified (a reconnect) or refuted (a stale password retried)."""

    def __init__(self, store: CredentialStore, decoy: PlainCredential, cache: VerifiedPasswordCache,
                 refuted: RefutedPasswordCache, client_host: str) -> None:
        self._store = store
        self._decoy = decoy
        self._cache = cache
        self._refuted = refuted
        self._client_host = client_host
        self._used = False

    def evaluate(self, token: bytes) -> Outcome:
        if self._used:
            return Failure("unexpected SASL/PLAIN message after the exchange ended", INVALID_CREDENTIALS_MESSAGE)
        self._used = True
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            return Failure("SASL/PLAIN message is not UTF-8", INVALID_CREDENTIALS_MESSAGE)
        parts = text.split("\0")
        if len(parts) != 3:
            count = min(len(parts), 4)  # Kafka stops counting at 4
            return Failure(f"SASL/PLAIN message has {len(parts)} fields",
                           f"Invalid SASL/PLAIN response: expected 3 tokens, got {count}")
        authzid, username, password = parts
        if not username:
            return Failure("SASL/PLAIN without username", "Authentication failed: username not specified")
        if not password:
            return Failure("SASL/PLAIN without password", "Authentication failed: password not specified")
        try:
            stored = self._store.plain_credential(username)
        except Exception as exc:  # a broken store must fail this attempt, not the connection handler
            return Failure(f"credential lookup failed: {exc!r}",
                           "Authentication failed: credentials for user could not be verified")
        mac = self._cache.password_mac(password)
        if stored is not None and self._cache.verified(username, mac, stored):
            return _authorized(authzid, username)
        if self._refuted.refuted(username, mac, stored):  # the same wrong password again: no hash
            return _wrong(username, stored, repeated=True)
        credential = stored if stored is not None else self._decoy

        def job() -> bytes:  # PBKDF2 releases the GIL: the gateway runs this on a worker thread
            return _derive(password, credential.salt, credential.iterations, len(credential.hash))

        def resume(computed: bytes) -> Outcome:
            matches = hmac.compare_digest(computed, credential.hash)
            if stored is None or not matches:
                self._refuted.remember(username, mac, stored)
                return _wrong(username, stored)
            self._cache.remember(username, mac, stored)
            self._refuted.forget(username, mac)
            return _authorized(authzid, username)

        # The credential's salt (and the user) in the key: a changed credential never shares a stale hash.
        key = b"%d:%d:%s%s%s" % (credential.iterations, len(credential.salt), credential.salt, username.encode(), mac)
        return Verify(job, resume, HashClaim(self._client_host, username, stored is not None, key),
                      INVALID_CREDENTIALS_MESSAGE)


def _wrong(username: str, stored: PlainCredential | None, repeated: bool = False) -> Failure:
    what = f"unknown user {username!r}" if stored is None else f"invalid password for {username!r}"
    if repeated:
        return Failure(f"{what} (a password that already failed: not hashed again)", INVALID_CREDENTIALS_MESSAGE,
                       quiet=True)
    return Failure(what, INVALID_CREDENTIALS_MESSAGE)


def _authorized(authzid: str, username: str) -> Done | Failure:
    # After the password, as Kafka: only someone who knows it learns why they were refused.
    if authzid and authzid != username:
        return Failure(f"PLAIN authzid {authzid!r} differs from username {username!r}", AUTHZID_MISMATCH_MESSAGE)
    return Done(authorization_id=username)
