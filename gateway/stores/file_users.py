"""A CredentialStore kept in a JSON file of derived keys (never passwords), reloaded when the file changes.

Writes go to a temp file that is fsynced and renamed over the old one, so readers never see half a file.
The file also keeps the secret that SCRAM's decoy salts for unknown users derive from (``decoy_secret``),
so those stay the same across restarts and on every instance using a copy of the file.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import os
import secrets
import tempfile
import time
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auth.credentials import SCRAM_MECHANISMS, PlainCredential, ScramCredential
from auth.sasl.plain import plain_credential
from auth.sasl.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS, scram_credential
from auth.watched_file import Signature as _Signature
from auth.watched_file import WatchedFile, read_with_signature, writer_lock

log = logging.getLogger("ksgate.auth")

FORMAT_VERSION = 1
PLAIN = "PLAIN"
ALL_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
RELOAD_INTERVAL_S = 1.0
DECOY_SECRET_BYTES = 32
MIN_DECOY_SECRET_BYTES = 16  # a hand-made secret shorter than this is refused as too guessable


class CredentialFileError(ValueError):
    """The credential file cannot be read or does not follow the format; says where, never what."""


@dataclass(slots=True, frozen=True)
class UserEntry:
    plain: PlainCredential | None = None
    scram: Mapping[str, ScramCredential] = field(default_factory=dict)

    @property
    def mechanisms(self) -> list[str]:
        return [m for m in ALL_MECHANISMS if (m == PLAIN and self.plain is not None) or m in self.scram]


@dataclass(slots=True, frozen=True)
class CredentialFileContent:
    """What the file holds: the users, and the decoy secret (None in a file no ksgate has written yet)."""

    users: dict[str, UserEntry] = field(default_factory=dict)
    decoy_secret: bytes | None = field(default=None, repr=False)


# --- the file format --------------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def field_bytes(record: Mapping[str, Any], key: str, where: str,
                error: type[ValueError] = CredentialFileError) -> bytes:
    """A non-empty base64 field of a JSON record; ``error`` (naming the field, never its value) otherwise."""
    value = record.get(key)
    if not isinstance(value, str):
        raise error(f"{where}: '{key}' must be a base64 string")
    try:
        decoded = base64.b64decode(value, validate=True)
    except binascii.Error:
        raise error(f"{where}: '{key}' is not valid base64") from None
    if not decoded:
        raise error(f"{where}: '{key}' is empty")
    return decoded


def _field_iterations(record: Mapping[str, Any], where: str) -> int:
    value = record.get("iterations")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CredentialFileError(f"{where}: 'iterations' must be a positive integer")
    return value


def _parse(data: bytes) -> CredentialFileContent:
    try:
        document = json.loads(data)
    except json.JSONDecodeError as exc:  # its message gives a position, never content
        raise CredentialFileError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except UnicodeDecodeError:
        raise CredentialFileError("not valid UTF-8") from None
    if not isinstance(document, dict) or document.get("version") != FORMAT_VERSION:
        raise CredentialFileError(f"expected an object with \"version\": {FORMAT_VERSION}")
    users = document.get("users")
    if not isinstance(users, dict):
        raise CredentialFileError("'users' must be an object")
    parsed: dict[str, UserEntry] = {}
    for user, records in users.items():
        if not isinstance(records, dict):
            raise CredentialFileError(f"user {user!r}: expected an object of mechanisms")
        plain: PlainCredential | None = None
        scram: dict[str, ScramCredential] = {}
        for mechanism, record in records.items():
            credential = credential_from_json(mechanism, record, f"user {user!r}, {mechanism}")
            if isinstance(credential, PlainCredential):
                plain = credential
            else:
                scram[mechanism] = credential
        parsed[user] = UserEntry(plain, scram)
    decoy_secret = None
    if document.get("decoy_secret") is not None:
        decoy_secret = field_bytes(document, "decoy_secret", "the file")
        if len(decoy_secret) < MIN_DECOY_SECRET_BYTES:
            raise CredentialFileError(f"the file: 'decoy_secret' must hold at least {MIN_DECOY_SECRET_BYTES} bytes")
    return CredentialFileContent(parsed, decoy_secret)


def credential_from_json(mechanism: str, record: object, where: str) -> PlainCredential | ScramCredential:
    """One mechanism's credential from its JSON object (the file's, and the replicated store's records)."""
    if not isinstance(record, dict):
        raise CredentialFileError(f"{where}: expected an object")
    if mechanism == PLAIN:
        return PlainCredential(field_bytes(record, "salt", where), field_bytes(record, "hash", where),
                               _field_iterations(record, where))
    if mechanism in SCRAM_MECHANISMS:
        return ScramCredential(field_bytes(record, "salt", where), field_bytes(record, "stored_key", where),
                               field_bytes(record, "server_key", where), _field_iterations(record, where))
    raise CredentialFileError(f"{where}: unknown mechanism")


def credential_to_json(credential: PlainCredential | ScramCredential) -> dict[str, Any]:
    if isinstance(credential, PlainCredential):
        return {"salt": b64(credential.salt), "hash": b64(credential.hash), "iterations": credential.iterations}
    return {"salt": b64(credential.salt), "stored_key": b64(credential.stored_key),
            "server_key": b64(credential.server_key), "iterations": credential.iterations}


def new_decoy_secret() -> bytes:
    return secrets.token_bytes(DECOY_SECRET_BYTES)


def _serialize(users: Mapping[str, UserEntry], decoy_secret: bytes) -> bytes:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for user, entry in users.items():
        records: dict[str, dict[str, Any]] = {}
        if entry.plain is not None:
            records[PLAIN] = credential_to_json(entry.plain)
        for mechanism, cred in entry.scram.items():
            records[mechanism] = credential_to_json(cred)
        out[user] = records
    text = json.dumps({"version": FORMAT_VERSION, "decoy_secret": b64(decoy_secret), "users": out}, indent=2,
                      sort_keys=True)
    return (text + "\n").encode("utf-8")


def _write_atomic(path: Path, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename over: the old file survives any crash."""
    directory = path.parent
    fd, tmp_name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.chmod(tmp_name, 0o600)
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    # Make the rename itself durable; some file systems cannot fsync a directory.
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def valid_user_name(user: str) -> bool:
    return bool(user) and not any(unicodedata.category(c).startswith("C") for c in user)


def _validate_user(user: str) -> None:
    if not valid_user_name(user):
        raise ValueError("user name must be non-empty and free of control characters")


# --- the store --------------------------------------------------------------------------


class UserEntryReads:
    """CredentialStore's lookups over ``_entry(user)``; each store says where its entries come from."""

    def _entry(self, user: str) -> UserEntry | None:
        raise NotImplementedError

    def decoy_secret(self) -> bytes | None:
        """The persisted secret SCRAM's decoy salts derive from; None while the store has none."""
        return None

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        entry = self._entry(user)
        return entry.scram.get(mechanism) if entry is not None else None

    def plain_credential(self, user: str) -> PlainCredential | None:
        entry = self._entry(user)
        return entry.plain if entry is not None else None

    def mechanisms(self, user: str) -> list[str]:
        """The mechanisms ``user`` has credentials for (empty for an unknown user)."""
        entry = self._entry(user)
        return entry.mechanisms if entry is not None else []


class FileCredentialStore(UserEntryReads):
    """CredentialStore over a JSON file; a long-running gateway sees edits within ``reload_interval_s``.

    A missing file is an empty store.  A file that is corrupt at construction raises
    CredentialFileError; one that becomes corrupt later is logged and the previous content kept.
    """

    def __init__(self, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.monotonic,
                 reload_interval_s: float = RELOAD_INTERVAL_S) -> None:
        self._path = Path(path)
        loaded = self._load()
        if loaded is None:
            log.info("credential file %s does not exist yet: no users", self._path)
        self._watch: WatchedFile[CredentialFileContent] = WatchedFile(
            self._path, self._load, CredentialFileContent, errors=(OSError, CredentialFileError),
            what="credential file", describe=lambda content: f"{len(content.users)} users",
            removed="no users can authenticate",
            clock=clock, interval=reload_interval_s, initial=loaded)

    @property
    def _users(self) -> dict[str, UserEntry]:
        return self._watch.content.users

    @property
    def path(self) -> Path:
        return self._path

    def __repr__(self) -> str:
        return f"FileCredentialStore(path={str(self._path)!r}, users={len(self._users)})"

    # --- CredentialStore (the lookups come from UserEntryReads) ---------------------

    def users(self) -> list[str]:
        self._maybe_reload()
        return sorted(self._users)

    def _entry(self, user: str) -> UserEntry | None:
        self._maybe_reload()
        return self._users.get(user)

    def decoy_secret(self) -> bytes | None:
        self._maybe_reload()
        return self._watch.content.decoy_secret

    def ensure_decoy_secret(self) -> bytes | None:
        """The file's decoy secret, added once to an existing file that has none (a gateway calls this
        at start-up; every ksgate write adds one too).  None if the file is missing or cannot be
        written: decoys then last only as long as the process, which is logged."""
        self.reload_if_changed()
        if self._watch.content.decoy_secret is None and self._path.exists():
            try:
                with self._file_lock():  # concurrent starters: the first writes, the rest find it
                    content = self._read_for_update()
                    if content.decoy_secret is None:
                        self._write(content.users, None)
                        log.info("credential file %s: added the secret for SCRAM decoys of unknown users",
                                 self._path)
            except OSError as exc:
                log.warning("credential file %s: cannot add the secret for SCRAM decoys (%s); unknown users' "
                            "SCRAM salts will change when the gateway restarts. Any `ksgate users` change "
                            "adds it", self._path, exc.strerror or type(exc).__name__)
                return None
            self.reload_if_changed()
        return self._watch.content.decoy_secret

    # --- reloading -------------------------------------------------------------------

    def _maybe_reload(self) -> None:
        self._watch.maybe_reload()

    def reload_if_changed(self) -> bool:
        """Re-read the file if its (mtime, size, inode) changed; True if the content was replaced."""
        return self._watch.reload_if_changed()

    def _load(self) -> tuple[_Signature, CredentialFileContent] | None:
        """Read and parse; the signature comes from the same open file, so it matches the content."""
        loaded = read_with_signature(self._path)
        if loaded is None:
            return None
        try:
            return loaded[0], _parse(loaded[1])
        except CredentialFileError as exc:
            raise CredentialFileError(f"{self._path}: {exc}") from None

    # --- mutators (the ``ksgate users`` command) ------------------------------------

    def upsert_user(self, user: str, password: str, mechanisms: Sequence[str] = ALL_MECHANISMS,
                    iterations: int = DEFAULT_ITERATIONS) -> None:
        """Create or replace ``user`` with exactly ``mechanisms``; ``iterations`` applies to SCRAM."""
        _validate_user(user)
        if not password:
            raise ValueError("password must not be empty")
        unknown = [m for m in mechanisms if m not in ALL_MECHANISMS]
        if unknown or not mechanisms:
            raise ValueError(f"mechanisms must be a non-empty subset of {', '.join(ALL_MECHANISMS)}")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"SCRAM iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        # Derive outside the file lock: PBKDF2 is the slow part.
        entry = UserEntry(
            plain=plain_credential(password) if PLAIN in mechanisms else None,
            scram={m: scram_credential(m, password, iterations=iterations) for m in SCRAM_MECHANISMS
                   if m in mechanisms})
        with self._file_lock():
            content = self._read_for_update()
            self._write({**content.users, user: entry}, content.decoy_secret)
        self.reload_if_changed()

    def delete_user(self, user: str) -> bool:
        """Remove ``user``; False if there was no such user."""
        with self._file_lock():
            content = self._read_for_update()
            users = dict(content.users)
            if users.pop(user, None) is None:
                return False
            self._write(users, content.decoy_secret)
        self.reload_if_changed()
        return True

    def alter_scram(self, upsertions: Sequence[tuple[str, str, ScramCredential]],
                    deletions: Sequence[tuple[str, str]]) -> None:
        """KIP-554: set or remove (user, mechanism) SCRAM credentials in one atomic write.

        A user left with no credential at all is removed; PLAIN credentials are untouched.
        """
        with self._file_lock():
            content = self._read_for_update()
            users = dict(content.users)
            for user, mechanism in deletions:
                entry = users.get(user)
                if entry is not None:
                    users[user] = UserEntry(entry.plain, {m: c for m, c in entry.scram.items() if m != mechanism})
            for user, mechanism, credential in upsertions:
                _validate_user(user)
                entry = users.get(user) or UserEntry()
                users[user] = UserEntry(entry.plain, {**entry.scram, mechanism: credential})
            users = {u: e for u, e in users.items() if e.plain is not None or e.scram}
            self._write(users, content.decoy_secret)
        self.reload_if_changed()

    def _read_for_update(self) -> CredentialFileContent:
        """The file's current content (not our cache): another process may have written it."""
        loaded = self._load()
        return loaded[1] if loaded is not None else CredentialFileContent()

    def _write(self, users: Mapping[str, UserEntry], decoy_secret: bytes | None) -> None:
        """Replace the file (under the file lock); the decoy secret is kept, or created by the first write."""
        _write_atomic(self._path, _serialize(users, decoy_secret or new_decoy_secret()))

    def _file_lock(self) -> contextlib.AbstractContextManager[None]:
        """Serialise concurrent ``ksgate users`` commands so neither loses the other's change."""
        return writer_lock(self._path)
