"""Users, ACLs, tokens and client quotas in the security topic: the file stores' interfaces over one SecurityTopic.

Reads come from the topic's current snapshot (no I/O).  Every change is one batch of records
appended to the topic; the call returns once this instance has applied it, and the other
instances apply it on their next Fetch.  Concurrent read-modify-write changes of one token
on two instances are last-writer-wins, as two ``ksgate tokens`` commands on one file are.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from auth.credentials import SCRAM_MECHANISMS, ScramCredential
from auth.sasl.plain import plain_credential
from auth.sasl.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS, scram_credential
from authz.acl_json import AclStoreError
from authz.model import AclBinding, AclBindingFilter, validate_binding, validate_filter
from gateway.quotas.state import QuotaChange, QuotaState, apply_changes
from gateway.stores.file_acls import AclChangeListener, matches_per_filter, union
from gateway.stores.file_quotas import QuotaListener, QuotaStoreError
from gateway.stores.file_tokens import TokenEntry, TokenStore
from gateway.stores.file_users import ALL_MECHANISMS, PLAIN, UserEntry, UserEntryReads, _validate_user, new_decoy_secret
from gateway.stores.security_records import (
    AppliedRecords,
    StoreRecord,
    acl_record,
    credential_record,
    decoy_secret_record,
    quota_record,
    token_record,
)
from gateway.stores.security_topic import SecurityTopic, StoreWriteError

log = logging.getLogger("ksgate.store")


def append_acl_records(topic: SecurityTopic, records: list[StoreRecord]) -> None:
    """Append one batch of ACL records; a failed write is the ACL stores' error."""
    try:
        topic.append(records)
    except StoreWriteError as exc:
        raise AclStoreError(str(exc)) from None


class TopicAclSet:
    """gateway.stores.file_acls.AclStore over one ACL set of the security topic (the live one, the shadow one):
    subclasses say which snapshot field holds it, which record kind changes it, and how a change is reported."""

    where = ""  # appended to the topic's name in ``path``

    def __init__(self, topic: SecurityTopic) -> None:
        self._topic = topic
        self.path = f"topic {topic.settings.topic}{self.where}"

    def _present(self) -> Mapping[AclBinding, None]:
        raise NotImplementedError

    def _record(self, binding: AclBinding, present: bool) -> StoreRecord:
        raise NotImplementedError

    def _change(self, applied: AppliedRecords) -> tuple[list[AclBinding], list[AclBinding]]:
        raise NotImplementedError

    @property
    def bindings(self) -> list[AclBinding]:
        return list(self._present())

    def load(self) -> list[AclBinding]:
        return list(self._present())

    def add(self, bindings: Iterable[AclBinding]) -> None:
        bindings = list(bindings)
        for binding in bindings:
            validate_binding(binding)
        present = self._present()
        append_acl_records(self._topic, [self._record(b, True) for b in dict.fromkeys(bindings) if b not in present])

    def remove_matching(self, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        return union(self.remove_each(list(filters)))

    def remove_each(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        for binding_filter in filters:
            validate_filter(binding_filter)
        matched = matches_per_filter(self._present(), filters)
        append_acl_records(self._topic, [self._record(b, False) for b in union(matched)])
        return matched

    def subscribe(self, callback: AclChangeListener) -> Callable[[], None]:
        def on_applied(applied: AppliedRecords) -> None:
            added, removed = self._change(applied)
            if added or removed:
                callback(added, removed)

        return self._topic.subscribe(on_applied)

    def load_and_subscribe(self, load: Callable[[list[AclBinding]], None], callback: AclChangeListener) -> None:
        """Load the current bindings and follow every later change, with no change slipping in between."""
        with self._topic.lock:
            load(self.load())
            self.subscribe(callback)

    def reload_if_changed(self) -> bool:
        return False  # the topic's tail applies changes as they arrive


class TopicAclStore(TopicAclSet):
    """The live ACLs in the security topic (acl records)."""

    def _present(self) -> Mapping[AclBinding, None]:
        return self._topic.snapshot.acls

    def _record(self, binding: AclBinding, present: bool) -> StoreRecord:
        return acl_record(binding, present)

    def _change(self, applied: AppliedRecords) -> tuple[list[AclBinding], list[AclBinding]]:
        return applied.acls_added, applied.acls_removed


class TopicCredentialStore(UserEntryReads):
    """auth.credentials.CredentialStore over the security topic, with FileCredentialStore's mutators."""

    def __init__(self, topic: SecurityTopic) -> None:
        self._topic = topic
        self.path = f"topic {topic.settings.topic}"

    def __repr__(self) -> str:
        return f"TopicCredentialStore(topic={self._topic.settings.topic!r}, users={len(self._topic.snapshot.users)})"

    def _entry(self, user: str) -> UserEntry | None:
        return self._topic.snapshot.users.get(user)

    def users(self) -> list[str]:
        return sorted(self._topic.snapshot.users)

    def decoy_secret(self) -> bytes | None:
        return self._topic.snapshot.decoy_secret

    def ensure_decoy_secret(self) -> bytes | None:
        """The topic's decoy secret, written first if the loaded topic has none (blocking: a worker
        thread).  Racing instances each append a candidate; all converge on the first in the log."""
        if self._topic.snapshot.decoy_secret is None:
            try:
                self._topic.append([decoy_secret_record(new_decoy_secret())])
            except StoreWriteError as exc:
                log.warning("security store: cannot write the secret for SCRAM decoys (%s); unknown users' "
                            "SCRAM salts will change when the gateway restarts", exc)
                return None
            log.info("security store: the secret for SCRAM decoys of unknown users is in place")
        return self._topic.snapshot.decoy_secret

    def reload_if_changed(self) -> bool:
        return False

    def alter_scram(self, upsertions: Sequence[tuple[str, str, ScramCredential]],
                    deletions: Sequence[tuple[str, str]]) -> None:
        """KIP-554: set or remove (user, mechanism) SCRAM credentials in one batch (applied all or none)."""
        for user, _, _ in upsertions:
            _validate_user(user)
        records = [credential_record(user, mechanism, None) for user, mechanism in deletions]
        records += [credential_record(user, mechanism, credential) for user, mechanism, credential in upsertions]
        self._topic.append(records)

    def upsert_user(self, user: str, password: str, mechanisms: Sequence[str] = ALL_MECHANISMS,
                    iterations: int = DEFAULT_ITERATIONS) -> None:
        """Create or replace ``user`` with exactly ``mechanisms`` (as FileCredentialStore.upsert_user)."""
        _validate_user(user)
        if not password:
            raise ValueError("password must not be empty")
        if not mechanisms or any(m not in ALL_MECHANISMS for m in mechanisms):
            raise ValueError(f"mechanisms must be a non-empty subset of {', '.join(ALL_MECHANISMS)}")
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise ValueError(f"SCRAM iterations must be within {MIN_ITERATIONS}..{MAX_ITERATIONS}")
        records = [credential_record(user, PLAIN, plain_credential(password) if PLAIN in mechanisms else None)]
        records += [credential_record(user, m, scram_credential(m, password, iterations=iterations)
                                      if m in mechanisms else None) for m in SCRAM_MECHANISMS]
        self._topic.append(records)

    def delete_user(self, user: str) -> bool:
        mechanisms = self.mechanisms(user)
        if not mechanisms:
            return False
        self._topic.append([credential_record(user, m, None) for m in mechanisms])
        return True


class TopicTokenStore(TokenStore):
    """Delegation tokens in the security topic: TokenStore's rules with the topic as its persistence.

    Tokens whose HMAC hash does not match this instance's ``delegation.token.secret.key``
    are ignored (as after a key rotation); all instances must share the key, as Kafka's
    brokers must.
    """

    def __init__(self, topic: SecurityTopic, secret_key: str | bytes) -> None:  # no file to watch: no super()
        key = secret_key.encode("utf-8") if isinstance(secret_key, str) else bytes(secret_key)
        if not key:
            raise ValueError("delegation.token.secret.key is empty: delegation tokens are disabled")
        self._secret_key = key
        self._topic = topic
        self._path = f"topic {topic.settings.topic}"  # type: ignore[assignment]
        self._lock = threading.Lock()
        self._local = threading.local()  # the snapshot a thread's read-modify-write started from
        self._valid_cache: tuple[Mapping[str, TokenEntry], dict[str, TokenEntry]] | None = None

    def __repr__(self) -> str:
        return f"TopicTokenStore(topic={self._topic.settings.topic!r}, tokens={len(self._tokens)})"

    @property
    def _tokens(self) -> dict[str, TokenEntry]:
        """The tokens valid under this key, recomputed only when the snapshot changed."""
        current = self._topic.snapshot.tokens
        cached = self._valid_cache
        if cached is None or cached[0] is not current:
            cached = self._valid_cache = (current, self._valid(current))
        return cached[1]

    def _maybe_reload(self) -> None:
        pass

    def reload_if_changed(self) -> bool:
        return False

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        with self._lock:  # one writer per instance; across instances the log orders the writes
            yield

    def _read_for_update(self) -> dict[str, TokenEntry]:
        self._local.before = self._topic.snapshot.tokens
        return dict(self._local.before)

    def _commit(self, entries: Mapping[str, TokenEntry]) -> None:
        before: Mapping[str, TokenEntry] = self._local.before
        records = [token_record(t, entries.get(t)) for t in {**before, **entries} if entries.get(t) != before.get(t)]
        self._topic.append(records)


class TopicQuotaStore:
    """gateway.stores.file_quotas.QuotaStore over the security topic: one record per changed entity."""

    def __init__(self, topic: SecurityTopic) -> None:
        self._topic = topic
        self.path = f"topic {topic.settings.topic}"

    def quotas(self) -> QuotaState:
        return self._topic.snapshot.quotas

    def alter(self, changes: Sequence[QuotaChange]) -> None:
        before = self._topic.snapshot.quotas
        after = apply_changes(before, changes)
        touched = dict.fromkeys(entity for entity, _ in changes)
        records = [quota_record(e, after.get(e)) for e in touched if after.get(e) != before.get(e)]
        try:
            self._topic.append(records)
        except StoreWriteError as exc:
            raise QuotaStoreError(str(exc)) from None

    def subscribe(self, callback: QuotaListener) -> Callable[[], None]:
        def on_applied(applied: AppliedRecords) -> None:
            if applied.quotas_changed:
                callback(applied.state.quotas)

        return self._topic.subscribe(on_applied)

    def load_and_subscribe(self, callback: QuotaListener) -> None:
        """The current quotas, then every later change, with no change slipping in between."""
        with self._topic.lock:
            callback(self.quotas())
            self.subscribe(callback)

    def reload_if_changed(self) -> bool:
        return False  # the topic's tail applies changes as they arrive
