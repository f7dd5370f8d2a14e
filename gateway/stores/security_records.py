"""The records of the replicated security store, and the state they add up to (sans-IO).

Every user credential, ACL binding and delegation token is one record of a compacted
Kafka topic, keyed so that compaction keeps exactly the latest record of each:

    {"kind": "credential", "mechanism": M, "user": U}  →  the derived keys (never a password)
    {"kind": "acl", <the binding's fields>}             →  {"v": 1} while the binding exists
    {"kind": "token", "id": TOKEN_ID}                   →  the token's details, its HMAC hashed
    {"kind": "decoy_secret", "id": RANDOM}              →  the secret SCRAM's decoy salts derive from
    {"kind": "quota", "entity": {TYPE: NAME or null}}   →  the entity's client-quota values
    {"kind": "shadow_acl", <the binding's fields>}      →  {"v": 1} while the shadow set holds the binding
    {"kind": "rollback_acl", <the binding's fields>}    →  {"v": 1}: the live set before the last promotion
    {"kind": "rollback_acl_set"}                        →  {"v": 1} once a promotion kept a set (maybe empty)

A promotion of the shadow set (``ksgate acls --shadow --promote``) is one batch — the live set's
changes, the shadow set's tombstones and the new rollback set — which every instance applies as one
change (one record batch is one ``apply_records``), so no reader sees it half done.

A null value (a tombstone) deletes.  The decoy secret is written once, by whichever instance
finds none after loading; if several race, each writes its own id (so compaction keeps all)
and the first in log order wins everywhere.  Keys are canonical JSON (sorted, no spaces), so the
same entity always has byte-identical keys whichever instance wrote them.  Replaying the
topic in log order from any point where the state was known gives the same state; from
offset 0 it gives the whole state, which is what every instance does at start-up.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from auth.credentials import PlainCredential, ScramCredential
from authz.acl_json import binding_from_json, binding_to_json
from authz.model import AclBinding, AclValidationError
from gateway.quotas.model import QuotaEntity, QuotaError
from gateway.quotas.state import entity_from_json, entity_to_json, values_from_json
from gateway.stores.file_tokens import TokenEntry, TokenFileError, token_entry_from_json, token_entry_to_json
from gateway.stores.file_users import (
    MIN_DECOY_SECRET_BYTES,
    PLAIN,
    CredentialFileError,
    UserEntry,
    b64,
    credential_from_json,
    credential_to_json,
    field_bytes,
)

VALUE_VERSION = 1
KIND_CREDENTIAL = "credential"
KIND_ACL = "acl"
KIND_TOKEN = "token"
KIND_DECOY_SECRET = "decoy_secret"
KIND_QUOTA = "quota"
KIND_SHADOW_ACL = "shadow_acl"
KIND_ROLLBACK_ACL = "rollback_acl"
KIND_ROLLBACK_ACL_SET = "rollback_acl_set"


class StoreRecordError(ValueError):
    """A record of a known kind that cannot be read; says which part, never the secret content."""


@dataclass(slots=True, frozen=True)
class StoreRecord:
    key: bytes
    value: bytes | None = field(repr=False)  # None: a tombstone, the entity is deleted


def _canonical(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def acl_record(binding: AclBinding, present: bool = True) -> StoreRecord:
    return StoreRecord(_canonical({"kind": KIND_ACL, **binding_to_json(binding)}),
                       _canonical({"v": VALUE_VERSION}) if present else None)


def shadow_acl_record(binding: AclBinding, present: bool = True, kind: str = KIND_SHADOW_ACL) -> StoreRecord:
    """A binding of the shadow set (or, with ``kind=KIND_ROLLBACK_ACL``, of the set kept for a rollback)."""
    return StoreRecord(_canonical({"kind": kind, **binding_to_json(binding)}),
                       _canonical({"v": VALUE_VERSION}) if present else None)


def rollback_kept_record() -> StoreRecord:
    """Marks that a promotion kept the live set it replaced (which may have been empty) for a rollback."""
    return StoreRecord(_canonical({"kind": KIND_ROLLBACK_ACL_SET}), _canonical({"v": VALUE_VERSION}))


def credential_record(user: str, mechanism: str, credential: PlainCredential | ScramCredential | None) -> StoreRecord:
    """One (user, mechanism) credential, as Kafka's UserScramCredentialRecord: mechanisms change independently."""
    key = _canonical({"kind": KIND_CREDENTIAL, "user": user, "mechanism": mechanism})
    if credential is None:
        return StoreRecord(key, None)
    return StoreRecord(key, _canonical({"v": VALUE_VERSION, **credential_to_json(credential)}))


def token_record(token_id: str, entry: TokenEntry | None) -> StoreRecord:
    key = _canonical({"kind": KIND_TOKEN, "id": token_id})
    return StoreRecord(key, None if entry is None else _canonical({"v": VALUE_VERSION, **token_entry_to_json(entry)}))


def decoy_secret_record(secret: bytes) -> StoreRecord:
    """A candidate decoy secret under a fresh id: it never replaces one already in the log."""
    key = _canonical({"kind": KIND_DECOY_SECRET, "id": secrets.token_hex(16)})
    return StoreRecord(key, _canonical({"v": VALUE_VERSION, "secret": b64(secret)}))


def quota_record(entity: QuotaEntity, values: Mapping[str, float] | None) -> StoreRecord:
    """One entity's quotas, whole (None or empty: it has none left), as Kafka's ClientQuotaRecord per entity."""
    key = _canonical({"kind": KIND_QUOTA, "entity": entity_to_json(entity)})
    return StoreRecord(key, _canonical({"v": VALUE_VERSION, "values": dict(values)}) if values else None)


@dataclass(slots=True, frozen=True)
class SecuritySnapshot:
    """Everything the store holds at one log position; replaced whole, never changed in place."""

    acls: Mapping[AclBinding, None] = field(default_factory=dict)  # a dict for its order
    users: Mapping[str, UserEntry] = field(default_factory=dict)
    tokens: Mapping[str, TokenEntry] = field(default_factory=dict)
    decoy_secret: bytes | None = field(default=None, repr=False)  # the first in log order
    quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=dict)
    shadow_acls: Mapping[AclBinding, None] = field(default_factory=dict)  # the candidate set (authz/shadow.py)
    rollback_acls: Mapping[AclBinding, None] = field(default_factory=dict)  # the live set before a promotion
    rollback_kept: bool = False  # a promotion kept rollback_acls (an empty kept set is still one)


@dataclass(slots=True, frozen=True)
class AppliedRecords:
    """The state after a run of records, and the net ACL change (for the authorizer's one atomic apply)."""

    state: SecuritySnapshot
    acls_added: list[AclBinding]
    acls_removed: list[AclBinding]
    unknown: int  # records of kinds this version does not know (written by a newer ksgate): skipped
    quotas_changed: bool = False  # a quota record was applied: the quota book must follow
    shadow_added: list[AclBinding] = field(default_factory=list)
    shadow_removed: list[AclBinding] = field(default_factory=list)


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise StoreRecordError(f"{what} is not JSON") from None
    if not isinstance(obj, dict):
        raise StoreRecordError(f"{what} is not a JSON object")
    return obj


def _value_object(value: bytes, what: str) -> dict[str, Any]:
    obj = _json_object(value, f"{what} value")
    if obj.pop("v", None) != VALUE_VERSION:
        raise StoreRecordError(f"{what} value has an unsupported version")
    return obj


class _Changes:
    """Copy-on-write views of the three maps: a map is copied the first time a record touches it."""

    __slots__ = ("acls", "base", "decoy_secret", "quotas", "rollback_kept", "sets", "tokens", "touched_acls",
                 "touched_shadow", "users")

    def __init__(self, base: SecuritySnapshot) -> None:
        self.base = base
        self.acls: dict[AclBinding, None] | None = None
        self.users: dict[str, UserEntry] | None = None
        self.tokens: dict[str, TokenEntry] | None = None
        self.quotas: dict[QuotaEntity, Mapping[str, float]] | None = None
        self.touched_acls: dict[AclBinding, None] = {}
        self.decoy_secret = base.decoy_secret
        self.sets: dict[str, dict[AclBinding, None]] = {}  # shadow_acl / rollback_acl, copied when touched
        self.touched_shadow: dict[AclBinding, None] = {}
        self.rollback_kept = base.rollback_kept

    def acl(self, binding: AclBinding, present: bool) -> None:
        if self.acls is None:
            self.acls = dict(self.base.acls)
        self.touched_acls[binding] = None
        if present:
            self.acls[binding] = None
        else:
            self.acls.pop(binding, None)

    def acl_set(self, kind: str, binding: AclBinding, present: bool) -> None:
        members = self.sets.get(kind)
        if members is None:
            base = self.base.shadow_acls if kind == KIND_SHADOW_ACL else self.base.rollback_acls
            members = self.sets[kind] = dict(base)
        if kind == KIND_SHADOW_ACL:
            self.touched_shadow[binding] = None
        if present:
            members[binding] = None
        else:
            members.pop(binding, None)

    def credential(self, user: str, mechanism: str, credential: PlainCredential | ScramCredential | None) -> None:
        if self.users is None:
            self.users = dict(self.base.users)
        entry = self.users.get(user) or UserEntry()
        plain, scram = entry.plain, dict(entry.scram)
        if mechanism == PLAIN:
            plain = credential if isinstance(credential, PlainCredential) else None
        elif isinstance(credential, ScramCredential):
            scram[mechanism] = credential
        else:
            scram.pop(mechanism, None)
        if plain is None and not scram:
            self.users.pop(user, None)
        else:
            self.users[user] = UserEntry(plain, scram)

    def token(self, token_id: str, entry: TokenEntry | None) -> None:
        if self.tokens is None:
            self.tokens = dict(self.base.tokens)
        if entry is None:
            self.tokens.pop(token_id, None)
        else:
            self.tokens[token_id] = entry

    def quota(self, entity: QuotaEntity, values: Mapping[str, float] | None) -> None:
        if self.quotas is None:
            self.quotas = dict(self.base.quotas)
        if values:
            self.quotas[entity] = values
        else:
            self.quotas.pop(entity, None)

    def result(self, unknown: int) -> AppliedRecords:
        base = self.base
        state = SecuritySnapshot(base.acls if self.acls is None else self.acls,
                                 base.users if self.users is None else self.users,
                                 base.tokens if self.tokens is None else self.tokens, self.decoy_secret,
                                 base.quotas if self.quotas is None else self.quotas,
                                 self.sets.get(KIND_SHADOW_ACL, base.shadow_acls),
                                 self.sets.get(KIND_ROLLBACK_ACL, base.rollback_acls), self.rollback_kept)
        added = [b for b in self.touched_acls if b in state.acls and b not in base.acls]
        removed = [b for b in self.touched_acls if b in base.acls and b not in state.acls]
        shadow, before = state.shadow_acls, base.shadow_acls
        return AppliedRecords(state, added, removed, unknown, self.quotas is not None,
                              shadow_added=[b for b in self.touched_shadow if b in shadow and b not in before],
                              shadow_removed=[b for b in self.touched_shadow if b in before and b not in shadow])


def apply_records(state: SecuritySnapshot, records: Iterable[tuple[bytes | None, bytes | None]]) -> AppliedRecords:
    """Apply ``(key, value)`` records in order; StoreRecordError on the first one of a known kind that is bad.

    The caller keeps ``state`` on error: a store never applies part of the log out of order.
    """
    changes = _Changes(state)
    unknown = 0
    for key, value in records:
        if key is None:
            raise StoreRecordError("record without a key")
        key_obj = _json_object(key, "key")
        kind = key_obj.get("kind")
        try:
            if kind == KIND_ACL:
                _apply_acl(changes, key_obj, value)
            elif kind == KIND_CREDENTIAL:
                _apply_credential(changes, key_obj, value)
            elif kind == KIND_TOKEN:
                _apply_token(changes, key_obj, value)
            elif kind == KIND_DECOY_SECRET:
                _apply_decoy_secret(changes, value)
            elif kind == KIND_QUOTA:
                _apply_quota(changes, key_obj, value)
            elif kind in (KIND_SHADOW_ACL, KIND_ROLLBACK_ACL):
                _apply_acl_set(changes, kind, key_obj, value)
            elif kind == KIND_ROLLBACK_ACL_SET:
                changes.rollback_kept = value is not None and _value_object(value, kind) is not None
            else:
                unknown += 1
        except (AclValidationError, CredentialFileError, TokenFileError, QuotaError) as exc:
            raise StoreRecordError(f"{kind} record: {exc}") from None
    return changes.result(unknown)


def _apply_acl(changes: _Changes, key: dict[str, Any], value: bytes | None) -> None:
    binding = binding_from_json({k: v for k, v in key.items() if k != "kind"})
    if value is not None:
        _value_object(value, "acl")
    changes.acl(binding, value is not None)


def _apply_acl_set(changes: _Changes, kind: str, key: dict[str, Any], value: bytes | None) -> None:
    binding = binding_from_json({k: v for k, v in key.items() if k != "kind"})
    if value is not None:
        _value_object(value, kind)
    changes.acl_set(kind, binding, value is not None)


def _apply_credential(changes: _Changes, key: dict[str, Any], value: bytes | None) -> None:
    user, mechanism = key.get("user"), key.get("mechanism")
    if not isinstance(user, str) or not user or not isinstance(mechanism, str):
        raise StoreRecordError("credential record: the key needs a user and a mechanism")
    credential = None if value is None else credential_from_json(
        mechanism, _value_object(value, "credential"), f"user {user!r}, {mechanism}")
    changes.credential(user, mechanism, credential)


def _apply_token(changes: _Changes, key: dict[str, Any], value: bytes | None) -> None:
    token_id = key.get("id")
    if not isinstance(token_id, str) or not token_id:
        raise StoreRecordError("token record: the key needs an id")
    entry = None if value is None else token_entry_from_json(token_id, _value_object(value, "token"))
    changes.token(token_id, entry)


def _apply_decoy_secret(changes: _Changes, value: bytes | None) -> None:
    """First writer wins: later candidates (lost races) are checked and ignored; nothing deletes it."""
    if value is None:
        return
    secret = field_bytes(_value_object(value, "decoy_secret"), "secret", "decoy_secret record", StoreRecordError)
    if len(secret) < MIN_DECOY_SECRET_BYTES:
        raise StoreRecordError(f"decoy_secret record: the secret must hold at least {MIN_DECOY_SECRET_BYTES} bytes")
    if changes.decoy_secret is None:
        changes.decoy_secret = secret


def _apply_quota(changes: _Changes, key: dict[str, Any], value: bytes | None) -> None:
    entity = entity_from_json(key.get("entity"))
    values = None if value is None else values_from_json(entity, _value_object(value, "quota").get("values"))
    changes.quota(entity, values)
