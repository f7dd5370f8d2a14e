"""Delegation tokens (KIP-48) in a JSON file of token details and HMAC-derived SCRAM keys, never the HMAC itself.

As Kafka's DelegationTokenControlManager: HMAC = HMAC-SHA512(delegation.token.secret.key, token id); clients
authenticate with SCRAM (``tokenauth=true``), the token id as user name and base64(HMAC) as password.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac as hmac_lib
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from auth.credentials import SCRAM_MECHANISMS, ScramCredential
from auth.principal import USER_TYPE, KafkaPrincipal
from auth.sasl.mechanism import wall_clock_ms
from auth.sasl.scram import DEFAULT_ITERATIONS, TokenCredential, TokenLookup, scram_credential
from auth.watched_file import Signature as _Signature
from auth.watched_file import WatchedFile, read_with_signature, writer_lock
from gateway.ops.audit import bounded_name
from gateway.stores.file_users import (
    CredentialFileError,
    _write_atomic,
    b64,
    credential_from_json,
    credential_to_json,
    field_bytes,
)
from protocol.kafka_errors import KafkaError

log = logging.getLogger("ksgate.auth")

FORMAT_VERSION = 1
RELOAD_INTERVAL_S = 1.0
DEFAULT_EXPIRY_TIME_MS = 86_400_000  # delegation.token.expiry.time.ms: renew once a day…
DEFAULT_MAX_LIFETIME_MS = 604_800_000  # delegation.token.max.lifetime.ms: …for up to a week
TOKEN_ITERATIONS = DEFAULT_ITERATIONS  # Kafka derives token credentials with the mechanism's minimum, 4096
HMAC_ALGORITHM = "sha512"  # Kafka's "HmacSHA512"
_LONG_MAX = 2**63 - 1


class TokenFileError(ValueError):
    """The token file cannot be read or does not follow the format; says where, never what."""


class TokenStoreError(ValueError):
    """A token operation was refused for a reason Kafka reports with ``code``."""

    def __init__(self, code: KafkaError, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True, frozen=True)
class TokenInfo:
    """Kafka's TokenInformation; principals in their ``Type:name`` form, times in wall-clock ms."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    def may_renew(self, principal: str) -> bool:
        """DelegationTokenControlManager.allowedToRenew: the owner or a renewer (renew and expire)."""
        return principal == self.owner or principal in self.renewers

    def involves(self, principal: str) -> bool:
        """TokenInformation.ownerOrRenewer: owner, requester or renewer (describe's filters)."""
        return principal in (self.owner, self.requester) or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        """As Kafka's sweep and renew checks: past its expiry or its maximum lifetime."""
        return self.max_timestamp_ms < now_ms or self.expiry_timestamp_ms < now_ms


@dataclass(slots=True, frozen=True)
class TokenOutcome:
    """The answer to a renew or expire: an error code and, on success, the new expiry timestamp."""

    error: KafkaError
    expiry_timestamp_ms: int = 0


@dataclass(slots=True, frozen=True)
class TokenEntry:
    info: TokenInfo
    hmac_sha256: bytes = field(repr=False)  # finds the token from a renew/expire's HMAC
    scram: Mapping[str, ScramCredential] = field(repr=False)


# --- HMACs and ids ----------------------------------------------------------------------


def token_hmac(secret_key: bytes, token_id: str) -> bytes:
    """DelegationTokenControlManager.createHmac: HmacSHA512 keyed by the UTF-8 secret, over the UTF-8 id."""
    return hmac_lib.new(secret_key, token_id.encode("utf-8"), HMAC_ALGORITHM).digest()


def hmac_password(token_hmac_bytes: bytes) -> str:
    """The SCRAM password of a token (and what kafka-delegation-tokens.sh prints): standard base64."""
    return base64.b64encode(token_hmac_bytes).decode("ascii")


def new_token_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 16 random bytes, 22 base64url characters, never a leading '-'."""
    while True:
        token_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode("ascii").rstrip("=")
        if not token_id.startswith("-"):
            return token_id


def _hmac_hash(token_hmac_bytes: bytes) -> bytes:
    return hashlib.sha256(token_hmac_bytes).digest()


def _principal(text: str, what: str) -> str:
    try:
        return str(KafkaPrincipal.parse(text))
    except ValueError:
        raise TokenStoreError(KafkaError.UNKNOWN_SERVER_ERROR, f"{what}: expected 'Type:name', got {text!r}") \
            from None


def _saturating_add(now_ms: int, period_ms: int) -> int:
    return min(now_ms + period_ms, _LONG_MAX)


# --- the file format --------------------------------------------------------------------


def _field_int(record: Mapping[str, Any], key: str, where: str) -> int:
    value = record.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TokenFileError(f"{where}: '{key}' must be an integer")
    return value


def _field_principal(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise TokenFileError(f"{where}: a principal must be a 'Type:name' string")
    try:
        return str(KafkaPrincipal.parse(value))
    except ValueError:
        raise TokenFileError(f"{where}: a principal must be a 'Type:name' string") from None


def token_entry_from_json(token_id: str, record: Any) -> TokenEntry:
    where = f"token {token_id!r}"
    if not isinstance(record, dict):
        raise TokenFileError(f"{where}: expected an object")
    renewers = record.get("renewers")
    if not isinstance(renewers, list):
        raise TokenFileError(f"{where}: 'renewers' must be a list")
    credentials = record.get("credentials")
    if not isinstance(credentials, dict):
        raise TokenFileError(f"{where}: 'credentials' must be an object")
    scram: dict[str, ScramCredential] = {}
    for mechanism, cred in credentials.items():
        cwhere = f"{where}, {mechanism}"
        if mechanism not in SCRAM_MECHANISMS or not isinstance(cred, dict):
            raise TokenFileError(f"{cwhere}: expected a SCRAM mechanism and an object")
        try:  # the same record as a user's SCRAM credential in the credential file
            credential = credential_from_json(mechanism, cred, cwhere)
        except CredentialFileError as exc:
            raise TokenFileError(str(exc)) from None
        assert isinstance(credential, ScramCredential)
        scram[mechanism] = credential
    info = TokenInfo(
        token_id=token_id,
        owner=_field_principal(record.get("owner"), where),
        requester=_field_principal(record.get("requester"), where),
        renewers=tuple(_field_principal(r, where) for r in renewers),
        issue_timestamp_ms=_field_int(record, "issue_timestamp_ms", where),
        expiry_timestamp_ms=_field_int(record, "expiry_timestamp_ms", where),
        max_timestamp_ms=_field_int(record, "max_timestamp_ms", where))
    return TokenEntry(info, field_bytes(record, "hmac_sha256", where, TokenFileError), scram)


def _parse(data: bytes) -> dict[str, TokenEntry]:
    try:
        document = json.loads(data)
    except json.JSONDecodeError as exc:  # its message gives a position, never content
        raise TokenFileError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except UnicodeDecodeError:
        raise TokenFileError("not valid UTF-8") from None
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise TokenFileError(f"expected an object with \"version\": {FORMAT_VERSION}")
    tokens = document.get("tokens")
    if not isinstance(tokens, dict):
        raise TokenFileError("'tokens' must be an object")
    return {token_id: token_entry_from_json(token_id, record) for token_id, record in tokens.items()}


def token_entry_to_json(entry: TokenEntry) -> dict[str, Any]:
    """One token's JSON object (without its id), as the file and the replicated store keep it."""
    info = entry.info
    return {
        "owner": info.owner, "requester": info.requester, "renewers": list(info.renewers),
        "issue_timestamp_ms": info.issue_timestamp_ms, "expiry_timestamp_ms": info.expiry_timestamp_ms,
        "max_timestamp_ms": info.max_timestamp_ms, "hmac_sha256": b64(entry.hmac_sha256),
        "credentials": {m: credential_to_json(c) for m, c in entry.scram.items()},
    }


def _serialize(entries: Mapping[str, TokenEntry]) -> bytes:
    out = {token_id: token_entry_to_json(entry) for token_id, entry in entries.items()}
    text = json.dumps({"version": FORMAT_VERSION, "tokens": out}, indent=2, sort_keys=True)
    return (text + "\n").encode("utf-8")


# --- the store --------------------------------------------------------------------------


class TokenStore:
    """Delegation tokens over a JSON file; a long-running gateway sees edits within ``reload_interval_s``.

    Only tokens whose stored HMAC hash matches ``secret_key`` are valid: after a secret rotation the old
    tokens stop authenticating, renewing and expiring (as Kafka), and ``purge_expired`` removes them.
    A missing file is an empty store; a corrupt one raises TokenFileError at construction and is
    logged (keeping the previous tokens) on a later reload.
    """

    def __init__(self, path: str | os.PathLike[str], secret_key: str | bytes, *,
                 clock: Callable[[], float] = time.monotonic, reload_interval_s: float = RELOAD_INTERVAL_S) -> None:
        key = secret_key.encode("utf-8") if isinstance(secret_key, str) else bytes(secret_key)
        if not key:
            raise ValueError("delegation.token.secret.key is empty: delegation tokens are disabled")
        self._path = Path(path)
        self._secret_key = key
        # Holds the tokens valid under the current secret key only.
        self._watch: WatchedFile[dict[str, TokenEntry]] = WatchedFile(
            self._path, self._load_valid, dict, errors=(OSError, TokenFileError), what="token file",
            describe=lambda tokens: f"{len(tokens)} tokens", removed="no delegation token can authenticate",
            clock=clock, interval=reload_interval_s, initial=self._load_valid(), reload_level=logging.DEBUG)

    @property
    def _tokens(self) -> dict[str, TokenEntry]:
        return self._watch.content

    def _load_valid(self) -> tuple[_Signature, dict[str, TokenEntry]] | None:
        loaded = self._load()
        return None if loaded is None else (loaded[0], self._valid(loaded[1], report=True))

    @property
    def path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        return f"TokenStore(path={str(self._path)!r}, tokens={len(self._tokens)})"

    def hmac(self, token_id: str) -> bytes:
        """The token's HMAC under the current secret key (describe responses carry it, as Kafka's)."""
        return token_hmac(self._secret_key, token_id)

    # --- reads ----------------------------------------------------------------------

    def token_lookup(self, token_id: str, mechanism: str, now_ms: int) -> TokenCredential | None:
        """What SCRAM needs to authenticate a token: None for an unknown, expired or stale token."""
        self._maybe_reload()
        entry = self._tokens.get(token_id)
        if entry is None or entry.info.expired(now_ms):
            return None
        credential = entry.scram.get(mechanism)
        if credential is None:
            return None
        # DelegationTokenCache.owner: the owner's name becomes the SASL authorization id.
        owner = KafkaPrincipal.parse(entry.info.owner).name
        return TokenCredential(credential, owner, entry.info.expiry_timestamp_ms)

    def describe(self, owners: Sequence[str] | None, now_ms: int) -> list[TokenInfo]:
        """Unexpired tokens; with ``owners``, those any of them owns, requested or renews (Kafka's filterToken)."""
        self._maybe_reload()
        infos = [e.info for e in self._tokens.values() if not e.info.expired(now_ms)
                 and (owners is None or any(e.info.involves(o) for o in owners))]
        return sorted(infos, key=lambda i: (i.issue_timestamp_ms, i.token_id))

    def find(self, token_hmac_bytes: bytes) -> TokenInfo | None:
        """The token an HMAC belongs to (from the file, not the cache), or None."""
        entries = self._read_for_update()
        found = self._by_hmac(entries, token_hmac_bytes)
        return entries[found].info if found is not None else None

    # --- mutations ------------------------------------------------------------------

    def create(self, owner: str, requester: str, renewers: Iterable[str], max_lifetime_ms: int, now_ms: int,
               expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS,
               max_lifetime_cap_ms: int = DEFAULT_MAX_LIFETIME_MS) -> tuple[TokenInfo, bytes]:
        """A new token and its HMAC (returned once, never stored). Renewers must be User principals."""
        owner = _principal(owner, "owner")
        requester = _principal(requester, "requester")
        renewer_list = tuple(dict.fromkeys(_principal(r, "renewer") for r in renewers))
        for renewer in renewer_list:
            if KafkaPrincipal.parse(renewer).principal_type != USER_TYPE:
                raise TokenStoreError(KafkaError.INVALID_PRINCIPAL_TYPE, f"renewer {renewer} is not a User principal")
        if expiry_time_ms <= 0 or max_lifetime_cap_ms <= 0:
            raise ValueError("delegation.token.expiry.time.ms and delegation.token.max.lifetime.ms must be positive")
        max_lifetime = max_lifetime_cap_ms if max_lifetime_ms <= 0 else min(max_lifetime_cap_ms, max_lifetime_ms)
        max_timestamp = _saturating_add(now_ms, max_lifetime)
        expiry_timestamp = min(max_timestamp, _saturating_add(now_ms, expiry_time_ms))
        while True:
            token_id = new_token_id()
            mac = self.hmac(token_id)
            # Derive outside the file lock: PBKDF2 is the slow part.
            password = hmac_password(mac)
            entry = TokenEntry(TokenInfo(token_id, owner, requester, renewer_list, now_ms, expiry_timestamp,
                                          max_timestamp), _hmac_hash(mac),
                                {m: scram_credential(m, password, iterations=TOKEN_ITERATIONS)
                                 for m in SCRAM_MECHANISMS})
            with self._file_lock():
                entries = self._read_for_update()
                if token_id in entries:  # pragma: no cover - 128 random bits
                    continue
                entries[token_id] = entry
                self._commit(entries)
            self.reload_if_changed()
            log.info("delegation token %s created for %s by %s, expires at %d", token_id, bounded_name(owner),
                     bounded_name(requester), expiry_timestamp)
            return entry.info, mac

    def renew(self, token_hmac_bytes: bytes, renewer: str, renew_period_ms: int, now_ms: int,
              expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS) -> TokenOutcome:
        """DelegationTokenControlManager.renewDelegationToken: at most ``expiry_time_ms`` more, never past the max."""
        with self._file_lock():
            entries = self._read_for_update()
            token_id = self._by_hmac(entries, token_hmac_bytes)
            if token_id is None:
                return TokenOutcome(KafkaError.DELEGATION_TOKEN_NOT_FOUND)
            info = entries[token_id].info
            if info.expired(now_ms):
                return TokenOutcome(KafkaError.DELEGATION_TOKEN_EXPIRED)
            if not info.may_renew(renewer):
                return TokenOutcome(KafkaError.DELEGATION_TOKEN_OWNER_MISMATCH)
            period = expiry_time_ms if renew_period_ms <= 0 else min(expiry_time_ms, renew_period_ms)
            expiry = min(info.max_timestamp_ms, _saturating_add(now_ms, period))
            entries[token_id] = replace(entries[token_id], info=replace(info, expiry_timestamp_ms=expiry))
            self._commit(entries)
        self.reload_if_changed()
        log.info("delegation token %s renewed by %s until %d", token_id, bounded_name(renewer), expiry)
        return TokenOutcome(KafkaError.NONE, expiry)

    def expire(self, token_hmac_bytes: bytes, principal: str, period_ms: int, now_ms: int) -> TokenOutcome:
        """DelegationTokenControlManager.expireDelegationToken: a negative period removes the token now."""
        with self._file_lock():
            entries = self._read_for_update()
            token_id = self._by_hmac(entries, token_hmac_bytes)
            if token_id is None:
                return TokenOutcome(KafkaError.DELEGATION_TOKEN_NOT_FOUND)
            info = entries[token_id].info
            if not info.may_renew(principal):
                return TokenOutcome(KafkaError.DELEGATION_TOKEN_OWNER_MISMATCH)
            if period_ms < 0:
                del entries[token_id]
                expiry = now_ms
            elif info.expired(now_ms):
                return TokenOutcome(KafkaError.DELEGATION_TOKEN_EXPIRED)
            else:
                expiry = min(info.max_timestamp_ms, _saturating_add(now_ms, period_ms))
                entries[token_id] = replace(entries[token_id], info=replace(info, expiry_timestamp_ms=expiry))
            self._commit(entries)
        self.reload_if_changed()
        log.info("delegation token %s expired by %s at %d", token_id, bounded_name(principal), expiry)
        return TokenOutcome(KafkaError.NONE, expiry)

    def purge_expired(self, now_ms: int) -> int:
        """Remove expired tokens and those a previous secret key made (Kafka's periodic sweep); how many."""
        with self._file_lock():
            entries = self._read_for_update()
            valid = self._valid(entries)
            keep = {t: e for t, e in valid.items() if not e.info.expired(now_ms)}
            removed = len(entries) - len(keep)
            if removed:
                self._commit(keep)
        if removed:
            self.reload_if_changed()
            log.info("purged %d expired delegation tokens from %s", removed, self._path)
        return removed

    # --- helpers --------------------------------------------------------------------

    def _valid(self, entries: Mapping[str, TokenEntry], report: bool = False) -> dict[str, TokenEntry]:
        valid = {t: e for t, e in entries.items()
                 if hmac_lib.compare_digest(_hmac_hash(self.hmac(t)), e.hmac_sha256)}
        if report and len(valid) != len(entries):
            log.warning("token file %s: %d tokens were made with another delegation.token.secret.key and are "
                        "ignored", self._path, len(entries) - len(valid))
        return valid

    def _by_hmac(self, entries: Mapping[str, TokenEntry], token_hmac_bytes: bytes) -> str | None:
        digest = _hmac_hash(bytes(token_hmac_bytes))
        for token_id, entry in entries.items():
            # Also the current key's HMAC of that id: a token of a rotated-out key is not found.
            if hmac_lib.compare_digest(digest, entry.hmac_sha256) and \
                    hmac_lib.compare_digest(self.hmac(token_id), bytes(token_hmac_bytes)):
                return token_id
        return None

    # --- reloading (as FileCredentialStore) ------------------------------------------

    def _maybe_reload(self) -> None:
        self._watch.maybe_reload()

    def reload_if_changed(self) -> bool:
        """Re-read the file if its (mtime, size, inode) changed; True if the content was replaced."""
        return self._watch.reload_if_changed()

    def _load(self) -> tuple[_Signature, dict[str, TokenEntry]] | None:
        loaded = read_with_signature(self._path)
        if loaded is None:
            return None
        try:
            return loaded[0], _parse(loaded[1])
        except TokenFileError as exc:
            raise TokenFileError(f"{self._path}: {exc}") from None

    def _commit(self, entries: Mapping[str, TokenEntry]) -> None:
        """Persist ``entries`` as the whole new state (called under ``_file_lock``)."""
        _write_atomic(self._path, _serialize(entries))

    def _read_for_update(self) -> dict[str, TokenEntry]:
        """The file's current content (not our cache): another gateway or ``ksgate tokens`` may have written it."""
        loaded = self._load()
        return dict(loaded[1]) if loaded is not None else {}

    def _file_lock(self) -> contextlib.AbstractContextManager[None]:
        """Serialise writers (gateways, ``ksgate tokens``) so none loses another's change."""
        return writer_lock(self._path)


def token_lookup(store: TokenStore, clock: Callable[[], int] = wall_clock_ms) -> TokenLookup:
    """Adapt ``store`` to ScramMechanism's ``token_lookup(token_id, mechanism)``, reading the time from ``clock``."""

    def lookup(token_id: str, mechanism: str) -> TokenCredential | None:
        return store.token_lookup(token_id, mechanism, clock())

    return lookup


def open_token_store(path: str | os.PathLike[str] | None, secret_key: str | None) -> TokenStore | None:
    """The gateway's store, or None when ``delegation.token.secret.key`` is unset or empty (feature off)."""
    if not secret_key:
        return None
    if path is None:
        raise ValueError("delegation.token.secret.key is set but no token file is configured")
    return TokenStore(path, secret_key)
