"""TokenStore: Kafka's delegation-token lifecycle over a JSON file that never holds an HMAC, and SCRAM tokenauth."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import re
import stat
from pathlib import Path

import pytest

from auth.credentials import ScramCredential
from auth.sasl.mechanism import Done, Failure, Outcome, SaslContext, SaslMechanismServer
from auth.sasl.scram import ScramClient, ScramMechanism
from gateway.stores.file_tokens import (
    DEFAULT_EXPIRY_TIME_MS,
    DEFAULT_MAX_LIFETIME_MS,
    TokenFileError,
    TokenStore,
    TokenStoreError,
    hmac_password,
    open_token_store,
    token_hmac,
    token_lookup,
)
from protocol.kafka_errors import KafkaError

NOW = 1_700_000_000_000
SECRET = "the-delegation-token-secret"
ALICE, BOB, CAROL, OPS = "User:alice", "User:bob", "User:carol", "User:ops"
HOUR = 3_600_000


class NoUsers:
    """A CredentialStore with nobody in it: tokens must not need users."""

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return None

    def plain_credential(self, user: str) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "tokens.json"


@pytest.fixture
def store(path: Path) -> TokenStore:
    return TokenStore(path, SECRET)


def context(now_ms: int) -> SaslContext:
    return SaslContext(listener="SASL_SSL", client_host="127.0.0.1", tls=True, now_ms=lambda: now_ms)


def run_exchange(server: SaslMechanismServer, client: ScramClient) -> Outcome:
    first = server.evaluate(client.first_message())
    assert not isinstance(first, (Done, Failure)), first
    return server.evaluate(client.final_message(first.data))


def authenticate(store: TokenStore, mechanism: str, token_id: str, password: str, now_ms: int) -> Outcome:
    lookup = token_lookup(store, clock=lambda: now_ms)
    server = ScramMechanism(mechanism, NoUsers(), token_lookup=lookup).create(context(now_ms))
    client = ScramClient(mechanism, token_id, password, extensions={"tokenauth": "true"})
    outcome = run_exchange(server, client)
    if isinstance(outcome, Done):
        client.verify_server_final(outcome.final)
    return outcome


# --- create -------------------------------------------------------------------------------


def test_create_uses_kafkas_default_lifetimes(store: TokenStore) -> None:
    info, _ = store.create(ALICE, ALICE, [BOB], -1, NOW)
    assert (info.owner, info.requester, info.renewers) == (ALICE, ALICE, (BOB,))
    assert info.issue_timestamp_ms == NOW
    assert info.expiry_timestamp_ms == NOW + DEFAULT_EXPIRY_TIME_MS == NOW + 86_400_000
    assert info.max_timestamp_ms == NOW + DEFAULT_MAX_LIFETIME_MS == NOW + 604_800_000


def test_requested_max_lifetime_is_capped_by_the_configured_maximum(store: TokenStore) -> None:
    short, _ = store.create(ALICE, ALICE, [], HOUR, NOW, expiry_time_ms=2 * HOUR, max_lifetime_cap_ms=10 * HOUR)
    assert (short.expiry_timestamp_ms, short.max_timestamp_ms) == (NOW + HOUR, NOW + HOUR)  # expiry ≤ max
    long, _ = store.create(ALICE, ALICE, [], 100 * HOUR, NOW, expiry_time_ms=2 * HOUR, max_lifetime_cap_ms=10 * HOUR)
    assert (long.expiry_timestamp_ms, long.max_timestamp_ms) == (NOW + 2 * HOUR, NOW + 10 * HOUR)
    zero, _ = store.create(ALICE, ALICE, [], 0, NOW, expiry_time_ms=2 * HOUR, max_lifetime_cap_ms=10 * HOUR)
    assert zero.max_timestamp_ms == NOW + 10 * HOUR  # ≤ 0 means "the configured maximum"


def test_token_hmac_is_hmac_sha512_of_the_token_id_under_the_secret_key(store: TokenStore) -> None:
    info, mac = store.create(ALICE, ALICE, [], -1, NOW)
    assert mac == hmac.new(SECRET.encode(), info.token_id.encode(), hashlib.sha512).digest()
    assert mac == token_hmac(SECRET.encode(), info.token_id) == store.hmac(info.token_id)
    assert len(mac) == 64


def test_token_ids_are_random_22_character_base64url_like_kafkas_uuids(store: TokenStore) -> None:
    ids = {store.create(ALICE, ALICE, [], -1, NOW)[0].token_id for _ in range(5)}
    assert len(ids) == 5
    for token_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", token_id) and not token_id.startswith("-")


def test_renewers_must_be_user_principals(store: TokenStore) -> None:
    with pytest.raises(TokenStoreError) as raised:
        store.create(ALICE, ALICE, [BOB, "Group:admins"], -1, NOW)
    assert raised.value.code == KafkaError.INVALID_PRINCIPAL_TYPE
    assert store.describe(None, NOW) == []


def test_malformed_principals_are_refused(store: TokenStore) -> None:
    with pytest.raises(TokenStoreError):
        store.create("alice", ALICE, [], -1, NOW)


def test_an_empty_secret_key_is_refused_and_means_tokens_are_off(path: Path) -> None:
    with pytest.raises(ValueError, match="disabled"):
        TokenStore(path, "")
    assert open_token_store(path, None) is None
    assert open_token_store(path, "") is None
    assert isinstance(open_token_store(path, SECRET), TokenStore)


# --- what the file holds ------------------------------------------------------------------


def test_the_file_never_holds_the_hmac_or_the_secret(store: TokenStore, path: Path) -> None:
    info, mac = store.create(ALICE, ALICE, [BOB], -1, NOW)
    text = path.read_text()
    raw = path.read_bytes()
    for form in (base64.b64encode(mac).decode(), base64.urlsafe_b64encode(mac).decode(), mac.hex(),
                 base64.b64encode(mac).decode().rstrip("="), SECRET):
        assert form not in text
    assert mac not in raw
    record = json.loads(text)["tokens"][info.token_id]
    assert set(record) == {"owner", "requester", "renewers", "issue_timestamp_ms", "expiry_timestamp_ms",
                           "max_timestamp_ms", "hmac_sha256", "credentials"}
    assert base64.b64decode(record["hmac_sha256"]) == hashlib.sha256(mac).digest()
    assert set(record["credentials"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert {c["iterations"] for c in record["credentials"].values()} == {4096}
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_repr_shows_neither_secret_nor_keys(store: TokenStore) -> None:
    store.create(ALICE, ALICE, [], -1, NOW)
    assert SECRET not in repr(store)
    assert "tokens=1" in repr(store)


# --- SCRAM tokenauth ------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_hmac_authenticates_as_the_owner_with_tokenauth(store: TokenStore, mechanism: str) -> None:
    info, mac = store.create(ALICE, OPS, [BOB], -1, NOW)
    done = authenticate(store, mechanism, info.token_id, hmac_password(mac), NOW + 1)
    assert isinstance(done, Done)
    assert (done.authorization_id, done.token_authenticated, done.credential_expiry_ms) == (
        "alice", True, info.expiry_timestamp_ms)


def test_a_wrong_hmac_does_not_authenticate(store: TokenStore) -> None:
    info, _ = store.create(ALICE, ALICE, [], -1, NOW)
    forged = hmac_password(token_hmac(b"another secret", info.token_id))
    assert isinstance(authenticate(store, "SCRAM-SHA-256", info.token_id, forged, NOW), Failure)


def test_an_expired_token_is_refused(store: TokenStore) -> None:
    info, mac = store.create(ALICE, ALICE, [], HOUR, NOW)
    assert store.token_lookup(info.token_id, "SCRAM-SHA-256", info.expiry_timestamp_ms + 1) is None
    outcome = authenticate(store, "SCRAM-SHA-256", info.token_id, hmac_password(mac), info.expiry_timestamp_ms + 1)
    assert isinstance(outcome, Failure)


def test_lookup_of_an_unknown_token_or_mechanism_is_none(store: TokenStore) -> None:
    info, _ = store.create(ALICE, ALICE, [], -1, NOW)
    assert store.token_lookup("nosuchtoken", "SCRAM-SHA-256", NOW) is None
    assert store.token_lookup(info.token_id, "PLAIN", NOW) is None


def test_an_expired_token_id_cannot_log_in_as_a_user_either(store: TokenStore) -> None:
    # Without tokenauth the user store is asked, which knows no token ids.
    info, mac = store.create(ALICE, ALICE, [], -1, NOW)
    server = ScramMechanism("SCRAM-SHA-256", NoUsers(), token_lookup(store, lambda: NOW)).create(context(NOW))
    outcome = run_exchange(server, ScramClient("SCRAM-SHA-256", info.token_id, hmac_password(mac)))
    assert isinstance(outcome, Failure)


# --- renew ----------------------------------------------------------------------------------


def test_owner_and_renewers_may_renew_never_past_the_max(store: TokenStore) -> None:
    info, mac = store.create(ALICE, OPS, [BOB], 10 * HOUR, NOW, expiry_time_ms=4 * HOUR)
    by_owner = store.renew(mac, ALICE, 2 * HOUR, NOW + HOUR, expiry_time_ms=4 * HOUR)
    assert (by_owner.error, by_owner.expiry_timestamp_ms) == (KafkaError.NONE, NOW + 3 * HOUR)
    by_renewer = store.renew(mac, BOB, 4 * HOUR, NOW + 3 * HOUR, expiry_time_ms=4 * HOUR)
    assert (by_renewer.error, by_renewer.expiry_timestamp_ms) == (KafkaError.NONE, NOW + 7 * HOUR)
    capped = store.renew(mac, ALICE, 4 * HOUR, NOW + 7 * HOUR, expiry_time_ms=4 * HOUR)
    assert (capped.error, capped.expiry_timestamp_ms) == (KafkaError.NONE, info.max_timestamp_ms)
    assert store.describe(None, NOW + 8 * HOUR)[0].expiry_timestamp_ms == info.max_timestamp_ms


def test_a_renew_period_is_at_most_the_configured_expiry_time(store: TokenStore) -> None:
    # DelegationTokenControlManager: min(delegation.token.expiry.time.ms, period); ≤ 0 means the configured one.
    _, mac = store.create(ALICE, ALICE, [], -1, NOW, expiry_time_ms=HOUR)
    assert store.renew(mac, ALICE, 5 * HOUR, NOW, expiry_time_ms=HOUR).expiry_timestamp_ms == NOW + HOUR
    assert store.renew(mac, ALICE, -1, NOW + 10, expiry_time_ms=HOUR).expiry_timestamp_ms == NOW + 10 + HOUR
    assert store.renew(mac, ALICE, 0, NOW + 20, expiry_time_ms=HOUR).expiry_timestamp_ms == NOW + 20 + HOUR


def test_others_may_not_renew_not_even_the_requester(store: TokenStore) -> None:
    _, mac = store.create(ALICE, OPS, [BOB], -1, NOW)
    assert store.renew(mac, CAROL, -1, NOW).error == KafkaError.DELEGATION_TOKEN_OWNER_MISMATCH
    assert store.renew(mac, OPS, -1, NOW).error == KafkaError.DELEGATION_TOKEN_OWNER_MISMATCH


def test_renewing_an_unknown_or_expired_token(store: TokenStore) -> None:
    info, mac = store.create(ALICE, ALICE, [], -1, NOW)
    assert store.renew(b"\0" * 64, ALICE, -1, NOW).error == KafkaError.DELEGATION_TOKEN_NOT_FOUND
    late = store.renew(mac, ALICE, -1, info.expiry_timestamp_ms + 1)
    assert (late.error, late.expiry_timestamp_ms) == (KafkaError.DELEGATION_TOKEN_EXPIRED, 0)
    # Kafka checks expiry before ownership.
    assert store.renew(mac, CAROL, -1, info.expiry_timestamp_ms + 1).error == KafkaError.DELEGATION_TOKEN_EXPIRED


# --- expire ---------------------------------------------------------------------------------


def test_a_negative_period_expires_the_token_now(store: TokenStore) -> None:
    info, mac = store.create(ALICE, ALICE, [BOB], -1, NOW)
    outcome = store.expire(mac, BOB, -1, NOW + 5)
    assert (outcome.error, outcome.expiry_timestamp_ms) == (KafkaError.NONE, NOW + 5)
    assert store.describe(None, NOW + 5) == []
    assert store.token_lookup(info.token_id, "SCRAM-SHA-256", NOW + 5) is None
    assert store.expire(mac, ALICE, -1, NOW + 6).error == KafkaError.DELEGATION_TOKEN_NOT_FOUND


def test_a_positive_period_moves_the_expiry_never_past_the_max(store: TokenStore) -> None:
    info, mac = store.create(ALICE, ALICE, [], 10 * HOUR, NOW)
    soon = store.expire(mac, ALICE, HOUR, NOW)
    assert (soon.error, soon.expiry_timestamp_ms) == (KafkaError.NONE, NOW + HOUR)
    later = store.expire(mac, ALICE, 100 * HOUR, NOW)  # Kafka: min(now + period, max), so it may extend
    assert later.expiry_timestamp_ms == info.max_timestamp_ms


def test_expire_checks_ownership_before_expiry(store: TokenStore) -> None:
    info, mac = store.create(ALICE, OPS, [], HOUR, NOW)
    after = info.expiry_timestamp_ms + 1
    assert store.expire(mac, OPS, -1, NOW).error == KafkaError.DELEGATION_TOKEN_OWNER_MISMATCH
    assert store.expire(mac, CAROL, 0, after).error == KafkaError.DELEGATION_TOKEN_OWNER_MISMATCH
    assert store.expire(mac, ALICE, 0, after).error == KafkaError.DELEGATION_TOKEN_EXPIRED
    assert store.expire(mac, ALICE, -1, after).error == KafkaError.NONE  # removal works on expired tokens


# --- describe and purge -------------------------------------------------------------------


def test_describe_filters_by_owner_requester_or_renewer(store: TokenStore) -> None:
    mine, _ = store.create(ALICE, ALICE, [], -1, NOW)
    for_bob, _ = store.create(BOB, ALICE, [], -1, NOW + 1)
    renewed_by_carol, _ = store.create(BOB, BOB, [CAROL], -1, NOW + 2)

    def ids(owners: list[str] | None) -> list[str]:
        return [i.token_id for i in store.describe(owners, NOW + 3)]

    assert ids(None) == [mine.token_id, for_bob.token_id, renewed_by_carol.token_id]
    assert ids([]) == []
    assert ids([ALICE]) == [mine.token_id, for_bob.token_id]
    assert ids([CAROL]) == [renewed_by_carol.token_id]
    assert ids([CAROL, ALICE]) == [mine.token_id, for_bob.token_id, renewed_by_carol.token_id]
    assert ids(["User:nobody"]) == []


def test_describe_leaves_out_expired_tokens(store: TokenStore) -> None:
    short, _ = store.create(ALICE, ALICE, [], HOUR, NOW)
    long, _ = store.create(ALICE, ALICE, [], -1, NOW)
    assert [i.token_id for i in store.describe(None, NOW + HOUR + 1)] == [long.token_id]
    assert {i.token_id for i in store.describe(None, NOW + HOUR)} == {short.token_id, long.token_id}


def test_purge_removes_expired_tokens_from_the_file(store: TokenStore, path: Path) -> None:
    store.create(ALICE, ALICE, [], HOUR, NOW)
    long, _ = store.create(ALICE, ALICE, [], -1, NOW)
    assert store.purge_expired(NOW + HOUR) == 0
    assert store.purge_expired(NOW + HOUR + 1) == 1
    assert set(json.loads(path.read_text())["tokens"]) == {long.token_id}
    assert store.purge_expired(NOW + HOUR + 2) == 0


# --- reloading and the secret key ---------------------------------------------------------


def test_another_writer_is_seen_after_the_reload_interval(path: Path) -> None:
    clock = Clock()
    gateway = TokenStore(path, SECRET, clock=clock)
    operator = TokenStore(path, SECRET)
    info, mac = operator.create(ALICE, ALICE, [], -1, NOW)
    assert gateway.token_lookup(info.token_id, "SCRAM-SHA-256", NOW) is None  # not yet re-read
    clock.now = 1.5
    found = gateway.token_lookup(info.token_id, "SCRAM-SHA-256", NOW)
    assert found is not None and found.owner == "alice"
    # Mutations always work on the file, never on a stale cache.
    assert gateway.renew(mac, ALICE, -1, NOW).error == KafkaError.NONE


def test_tokens_of_a_rotated_secret_no_longer_work(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = TokenStore(path, SECRET)
    info, mac = old.create(ALICE, ALICE, [], -1, NOW)
    with caplog.at_level(logging.WARNING, "ksgate.auth"):
        new = TokenStore(path, "a new secret")
    assert "another delegation.token.secret.key" in caplog.text
    assert new.token_lookup(info.token_id, "SCRAM-SHA-256", NOW) is None
    assert new.describe(None, NOW) == []
    assert new.renew(mac, ALICE, -1, NOW).error == KafkaError.DELEGATION_TOKEN_NOT_FOUND
    assert new.expire(mac, ALICE, -1, NOW).error == KafkaError.DELEGATION_TOKEN_NOT_FOUND
    assert new.purge_expired(NOW) == 1


def test_a_corrupt_file_is_an_error_at_start_and_ignored_on_reload(path: Path) -> None:
    path.write_text("{not json")
    with pytest.raises(TokenFileError, match="not valid JSON"):
        TokenStore(path, SECRET)
    path.unlink()
    clock = Clock()
    store = TokenStore(path, SECRET, clock=clock)
    info, _ = store.create(ALICE, ALICE, [], -1, NOW)
    path.write_text(json.dumps({"version": 1, "tokens": {"x": {"owner": 5}}}))
    clock.now = 2.0
    assert store.token_lookup(info.token_id, "SCRAM-SHA-256", NOW) is not None  # previous content kept


def test_a_missing_file_is_an_empty_store(path: Path) -> None:
    store = TokenStore(path, SECRET)
    assert store.describe(None, NOW) == []
    assert store.renew(b"x" * 64, ALICE, -1, NOW).error == KafkaError.DELEGATION_TOKEN_NOT_FOUND
    assert store.purge_expired(NOW) == 0
    assert not path.exists()
