"""SCRAM-SHA-256/512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs it, plus delegation-token auth.

Also: ``scram_credential`` (derive the stored keys from a password) and a tiny sans-IO client
(the gateway's own SCRAM login to an upstream, auth/sasl/client.py, and tests).
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from auth.credentials import SCRAM_MECHANISMS, CredentialStore, ScramCredential
from auth.sasl.mechanism import Challenge, Done, Failure, Outcome, SaslContext, SaslMechanismServer

# Kafka's ScramMechanism bounds for both SHA-256 and SHA-512.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32  # real and decoy salts share one length so the salt's size says nothing
SERVER_NONCE_BYTES = 18  # 24 base64 characters, no padding
TOKEN_AUTH_EXTENSION = "tokenauth"

_HASH_NAMES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
AUTHZID_MISMATCH_MESSAGE = "Authentication failed: Client requested an authorization id that is different from username"


def generic_failure_message(mechanism: str) -> str:
    """What Kafka's SaslServerAuthenticator tells a client whose SCRAM exchange failed."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


@dataclass(slots=True, frozen=True)
class TokenCredential:
    """A delegation token as SCRAM sees it: the token's HMAC-derived keys, its owner and expiry."""

    credential: ScramCredential
    owner: str
    expiry_ms: int  # wall clock


TokenLookup = Callable[[str, str], TokenCredential | None]  # (token id, mechanism) -> token


def _hash_name(mechanism: str) -> str:
    try:
        return _HASH_NAMES[mechanism]
    except KeyError:
        raise ValueError(f"not a SCRAM mechanism: {mechanism!r} (expected one of {SCRAM_MECHANISMS})") from None


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def _xor(left: bytes, right: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def scram_credential(mechanism: str, password: str, salt: bytes | None = None,
                     iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
    """Derive RFC 5802's StoredKey/ServerKey.  Like Kafka, the password is used as UTF-8 without SASLprep."""
    hash_name = _hash_name(mechanism)
    if iterations < 1:
        raise ValueError("iterations must be positive")
    if salt is None:
        salt = secrets.token_bytes(SALT_BYTES)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    client_key = _hmac(hash_name, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(hash_name, client_key).digest(),
        server_key=_hmac(hash_name, salted, b"Server Key"),
        iterations=iterations,
    )


def scram_credential_from_salted(mechanism: str, salt: bytes, salted_password: bytes,
                                 iterations: int) -> ScramCredential:
    """StoredKey/ServerKey from a client-side SaltedPassword (KIP-554's AlterUserScramCredentials)."""
    hash_name = _hash_name(mechanism)
    client_key = _hmac(hash_name, salted_password, b"Client Key")
    return ScramCredential(salt=salt, stored_key=hashlib.new(hash_name, client_key).digest(),
                           server_key=_hmac(hash_name, salted_password, b"Server Key"), iterations=iterations)


def default_server_nonce() -> str:
    return _b64(secrets.token_bytes(SERVER_NONCE_BYTES))


# --- message parsing --------------------------------------------------------------------


class _Malformed(Exception):
    """A SCRAM message does not follow RFC 5802's grammar (or asks for what we do not offer)."""


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(text: str) -> str:
    """RFC 5802 §5.1: ',' and '=' travel as '=2C' and '=3D'; any other '=' must fail."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "=":
            escape = text[i + 1 : i + 3]
            if escape == "2C":
                out.append(",")
            elif escape == "3D":
                out.append("=")
            else:
                raise _Malformed("'=' in a name not followed by 2C or 3D")
            i += 3
            continue
        if char in ",\0":
            raise _Malformed("forbidden character in a name")
        out.append(char)
        i += 1
    if not out:
        raise _Malformed("empty name")
    return "".join(out)


def _check_printable(nonce: str) -> None:
    if not nonce or any(not ("!" <= c <= "~") or c == "," for c in nonce):
        raise _Malformed("nonce is empty or not printable ASCII")


def _parse_extensions(fields: list[str]) -> dict[str, str]:
    # Kafka accepts multi-letter keys (its "tokenauth"), unlike RFC 5802's single ALPHA.
    extensions: dict[str, str] = {}
    for item in fields:
        key, sep, value = item.partition("=")
        if not sep or not value or not (key.isascii() and key.isalpha()):
            raise _Malformed("malformed extension")
        extensions[key] = value
    return extensions


@dataclass(slots=True, frozen=True)
class _ClientFirst:
    gs2_header: str
    authzid: str
    username: str
    nonce: str
    bare: str  # client-first-message-bare, exactly as received: it is signed
    extensions: Mapping[str, str]


def _parse_client_first(message: bytes) -> _ClientFirst:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise _Malformed("not UTF-8") from None
    flag, sep, rest = text.partition(",")
    if not sep:
        raise _Malformed("no gs2 header")
    if flag.startswith("p="):
        raise _Malformed("client requires channel binding, which is not offered")
    if flag == "y":
        # RFC 5802 would tolerate 'y' from a server without -PLUS variants; Kafka's grammar
        # accepts only 'n', and ksgate answers as Kafka does.
        raise _Malformed("gs2 flag 'y' is not accepted")
    if flag != "n":
        raise _Malformed("unknown gs2 channel-binding flag")
    authz_field, sep, bare = rest.partition(",")
    if not sep:
        raise _Malformed("truncated gs2 header")
    authzid = ""
    if authz_field:
        if not authz_field.startswith("a="):
            raise _Malformed("gs2 authzid must start with 'a='")
        authzid = decode_saslname(authz_field[2:])
    fields = bare.split(",")
    if fields[0].startswith("m="):
        raise _Malformed("mandatory extension 'm' is not supported")
    if len(fields) < 2 or not fields[0].startswith("n=") or not fields[1].startswith("r="):
        raise _Malformed("expected n=username,r=nonce")
    username = decode_saslname(fields[0][2:])
    nonce = fields[1][2:]
    _check_printable(nonce)
    gs2_header = text[: len(text) - len(bare)]
    return _ClientFirst(gs2_header, authzid, username, nonce, bare, _parse_extensions(fields[2:]))


@dataclass(slots=True, frozen=True)
class _ClientFinal:
    channel_binding: str
    nonce: str
    proof: bytes
    without_proof: str  # client-final-message-without-proof, exactly as received


def _parse_client_final(message: bytes) -> _ClientFinal:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise _Malformed("not UTF-8") from None
    without_proof, sep, proof_text = text.rpartition(",p=")
    if not sep:
        raise _Malformed("no proof")
    try:
        proof = base64.b64decode(proof_text, validate=True)
    except binascii.Error:
        raise _Malformed("proof is not base64") from None
    fields = without_proof.split(",")
    if len(fields) < 2 or not fields[0].startswith("c=") or not fields[1].startswith("r="):
        raise _Malformed("expected c=binding,r=nonce")
    _parse_extensions(fields[2:])  # validated, then ignored as Kafka does
    return _ClientFinal(fields[0][2:], fields[1][2:], proof, without_proof)


# --- the server -------------------------------------------------------------------------


class _State(enum.Enum):
    CLIENT_FIRST = "CLIENT_FIRST"
    CLIENT_FINAL = "CLIENT_FINAL"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class ScramMechanism:
    """MechanismFactory for SCRAM-SHA-256 or SCRAM-SHA-512.

    ``nonce_factory`` (tests) replaces the secure random server nonce.  ``decoy_key`` keys the
    fake salts shown for unknown users: a persistent secret (or a callable returning the
    store's current one, None while it has none) keeps them stable across restarts, as real
    users' salts are; without one they are stable for this process only.  ``legacy_nonce`` accepts
    librdkafka's pre-2.6.1 client-final nonce (see ``_ScramServer._check_nonce``).
    """

    def __init__(self, mechanism: str, store: CredentialStore, token_lookup: TokenLookup | None = None, *,
                 nonce_factory: Callable[[], str] | None = None,
                 decoy_key: bytes | Callable[[], bytes | None] | None = None, legacy_nonce: bool = True) -> None:
        self._hash_name = _hash_name(mechanism)
        self._mechanism = mechanism
        self._store = store
        self._token_lookup = token_lookup
        self._nonce_factory = nonce_factory or default_server_nonce
        self._decoy_key = decoy_key
        self._process_decoy_key = secrets.token_bytes(32)  # when no persistent secret is available
        self._legacy_nonce = legacy_nonce

    @property
    def name(self) -> str:
        return self._mechanism

    def create(self, context: SaslContext) -> SaslMechanismServer:
        return _ScramServer(self, context)

    def __repr__(self) -> str:
        return f"ScramMechanism({self._mechanism!r}, tokens={self._token_lookup is not None})"

    def _decoy_credential(self, username: str) -> ScramCredential:
        """Same salt for the same name every time, so probing twice cannot tell it is fake; the salt's
        length and the iterations are those of a user created with the defaults (``ksgate users add``)."""
        key = self._decoy_key() if callable(self._decoy_key) else self._decoy_key
        salt = _hmac("sha256", key or self._process_decoy_key, f"{self._mechanism}\0{username}".encode())
        size = hashlib.new(self._hash_name).digest_size
        return ScramCredential(salt[:SALT_BYTES], secrets.token_bytes(size), secrets.token_bytes(size),
                               DEFAULT_ITERATIONS)


class _ScramServer:
    """One SCRAM exchange: client-first → server-first, client-final → server-final."""

    def __init__(self, factory: ScramMechanism, context: SaslContext) -> None:
        self._factory = factory
        self._context = context
        self._state = _State.CLIENT_FIRST
        self._credential: ScramCredential | None = None
        self._reject_reason: str | None = None  # set when a decoy credential stands in
        self._client_first_bare = ""
        self._channel_binding = ""
        self._server_first = ""
        self._client_nonce = ""
        self._nonce = ""
        self._legacy_nonce_used = False
        self._authorization_id = ""
        self._token_authenticated = False
        self._expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> Outcome:
        if self._state is _State.CLIENT_FIRST:
            outcome = self._on_client_first(token)
        elif self._state is _State.CLIENT_FINAL:
            outcome = self._on_client_final(token)
        else:
            outcome = self._failure(f"unexpected SCRAM message after the exchange ended ({self._state.value})")
        if isinstance(outcome, Failure):
            self._state = _State.FAILED
            self._credential = None  # as Kafka's clearCredentials: keys live no longer than needed
        return outcome

    def _failure(self, reason: str, failure_class: str = "bad_credentials") -> Failure:
        return Failure(reason, generic_failure_message(self._factory.name), failure_class)

    def _on_client_first(self, token: bytes) -> Outcome:
        factory = self._factory
        try:
            first = _parse_client_first(token)
        except _Malformed as exc:
            return self._failure(f"invalid SCRAM client-first message: {exc}")
        # Checked before any lookup (Kafka checks after), so the answer never depends on existence.
        if first.authzid and first.authzid != first.username:
            return Failure(f"SCRAM authzid {first.authzid!r} differs from username {first.username!r}",
                           AUTHZID_MISMATCH_MESSAGE)
        token_auth = first.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true"
        credential: ScramCredential | None = None
        reject: str | None = None
        if token_auth:
            if factory._token_lookup is None:
                return self._failure("delegation token authentication (tokenauth=true) is not enabled")
            try:
                found = factory._token_lookup(first.username, factory.name)
            except Exception as exc:  # a broken lookup must fail this attempt, not the connection handler
                return self._failure(f"delegation token lookup failed: {exc!r}")
            if found is None:
                reject = f"unknown delegation token {first.username!r}"
            elif found.expiry_ms <= self._context.now_ms():
                reject = f"delegation token {first.username!r} expired at {found.expiry_ms}"
            else:
                credential = found.credential
                self._authorization_id = found.owner
                self._token_authenticated = True
                self._expiry_ms = found.expiry_ms
        else:
            try:
                credential = factory._store.scram_credential(first.username, factory.name)
            except Exception as exc:  # as above; Kafka: "Credentials could not be obtained"
                return self._failure(f"credential lookup failed: {exc!r}")
            if credential is None:
                reject = f"unknown user {first.username!r}"
            self._authorization_id = first.username
        if credential is not None and not MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS:
            reject = (f"credential of {first.username!r} has {credential.iterations} iterations, "
                      f"outside {MIN_ITERATIONS}..{MAX_ITERATIONS}")
            credential = None
        if credential is None:
            # RFC 5802 §9: answer an unknown user like a known one and fail only at the end.
            credential = factory._decoy_credential(first.username)
        self._credential = credential
        self._reject_reason = reject
        self._client_first_bare = first.bare
        # c= echoes the gs2 header: "biws" for the usual "n,,".
        self._channel_binding = _b64(first.gs2_header.encode("utf-8"))
        self._client_nonce = first.nonce
        self._nonce = first.nonce + factory._nonce_factory()
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        self._state = _State.CLIENT_FINAL
        return Challenge(self._server_first.encode("ascii"))

    def _on_client_final(self, token: bytes) -> Outcome:
        credential = self._credential
        assert credential is not None
        try:
            final = _parse_client_final(token)
        except _Malformed as exc:
            return self._failure(f"invalid SCRAM client-final message: {exc}")
        if final.channel_binding != self._channel_binding:
            return self._failure("SCRAM client-final channel binding does not echo the gs2 header")
        nonce_problem = self._check_nonce(final.nonce)
        if nonce_problem is not None:
            return self._failure(nonce_problem, "nonce_mismatch")
        hash_name = self._factory._hash_name
        if len(final.proof) != hashlib.new(hash_name).digest_size:
            return self._failure("SCRAM client proof has the wrong length")
        auth_message = f"{self._client_first_bare},{self._server_first},{final.without_proof}".encode()
        client_signature = _hmac(hash_name, credential.stored_key, auth_message)
        client_key = _xor(final.proof, client_signature)
        proof_ok = hmac.compare_digest(hashlib.new(hash_name, client_key).digest(), credential.stored_key)
        # The decoy path does the same work above, then fails here with the same message.
        if self._reject_reason is not None:
            return self._failure(self._reject_reason)
        if not proof_ok:
            return self._failure(f"invalid SCRAM client proof for {self._authorization_id!r}")
        signature = _hmac(hash_name, credential.server_key, auth_message)
        self._credential = None
        self._state = _State.COMPLETE
        return Done(authorization_id=self._authorization_id, final=f"v={_b64(signature)}".encode("ascii"),
                    credential_expiry_ms=self._expiry_ms, token_authenticated=self._token_authenticated,
                    legacy_nonce=self._legacy_nonce_used)

    def _check_nonce(self, nonce: str) -> str | None:
        """Why the client-final nonce is refused, or None.  RFC 5802 wants exactly the server-first nonce.

        librdkafka before 2.6.1 (its PR #4895) sends the client nonce followed by the whole
        server-first nonce, which itself starts with the client nonce.  That exact form still
        carries this exchange's fresh server nonce (and the proof signs the server-first
        message), so replay protection is unchanged; Kafka 3.8.1-3.9 accepted it too.
        """
        if nonce == self._nonce:
            return None
        if nonce != self._client_nonce + self._nonce:
            return "SCRAM client-final nonce differs from the server-first nonce"
        if not self._factory._legacy_nonce:
            return ("SCRAM client-final nonce repeats the client nonce (librdkafka before 2.6.1), refused because "
                    "ksgate.sasl.scram.legacy.librdkafka.nonce.enable is false")
        self._legacy_nonce_used = True
        return None


# --- a client: the gateway's upstream login (auth/sasl/client.py) and tests ----------------


@functools.lru_cache(maxsize=8)
def _client_salted_password(hash_name: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's SaltedPassword, kept for the next login with the same salt: the gateway logs each
    upstream link in, and again per session lifetime (KIP-368), as one user whose salt the broker keeps,
    and PBKDF2 (~3 ms for SCRAM-SHA-512 at 4096 iterations) runs on the event loop. Worth no more than
    the password it is derived from, which the process holds anyway; a new salt (a new password) misses."""
    return hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)


class ScramClient:
    """The client side of one SCRAM exchange: first, final, then verify the server (upstream links, tests)."""

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None,
                 authzid: str = "", extensions: Mapping[str, str] | None = None,
                 repeat_client_nonce: bool = False) -> None:
        self._hash_name = _hash_name(mechanism)
        self._repeat_client_nonce = repeat_client_nonce  # as librdkafka before 2.6.1 does (tests)
        self._password = password
        self._nonce = nonce or default_server_nonce()
        gs2_authzid = f"a={encode_saslname(authzid)}" if authzid else ""
        self._gs2_header = f"n,{gs2_authzid},"
        ext = "".join(f",{key}={value}" for key, value in (extensions or {}).items())
        self._bare = f"n={encode_saslname(username)},r={self._nonce}{ext}"
        self._server_signature = b""

    def __repr__(self) -> str:
        return "ScramClient(...)"

    def first_message(self) -> bytes:
        return (self._gs2_header + self._bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8")
        attrs = dict(item.split("=", 1) for item in text.split(","))
        nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise ValueError("server nonce does not extend the client nonce")
        salted = _client_salted_password(self._hash_name, self._password, salt, iterations)
        client_key = _hmac(self._hash_name, salted, b"Client Key")
        stored_key = hashlib.new(self._hash_name, client_key).digest()
        binding = _b64(self._gs2_header.encode("utf-8"))
        without_proof = f"c={binding},r={self._nonce if self._repeat_client_nonce else ''}{nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        proof = _xor(client_key, _hmac(self._hash_name, stored_key, auth_message))
        server_key = _hmac(self._hash_name, salted, b"Server Key")
        self._server_signature = _hmac(self._hash_name, server_key, auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8")
        if not text.startswith("v=") or not hmac.compare_digest(base64.b64decode(text[2:]), self._server_signature):
            raise ValueError("server signature does not verify")
