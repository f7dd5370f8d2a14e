"""SASL/PLAIN server: Kafka's messages for each failure, and unknown users that look like wrong passwords."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from auth.credentials import PlainCredential
from auth.sasl.mechanism import Done, Failure, SaslContext, SaslMechanismServer, Verify, run_inline
from auth.sasl.plain import (
    AUTHZID_MISMATCH_MESSAGE,
    INVALID_CREDENTIALS_MESSAGE,
    PlainMechanism,
    plain_credential,
)
from auth.sasl.verified_passwords import VerifiedPasswordCache

CONTEXT = SaslContext(listener="SASL_SSL", client_host="127.0.0.1", tls=True)
FAST = 1000  # iterations for test credentials; production uses the 100 000 default


class PlainStore:
    def __init__(self, users: dict[str, PlainCredential]) -> None:
        self.users = users

    def scram_credential(self, user: str, mechanism: str) -> None:
        return None

    def plain_credential(self, user: str) -> PlainCredential | None:
        return self.users.get(user)


def server(users: dict[str, str] | None = None) -> SaslMechanismServer:
    store = PlainStore({name: plain_credential(pw, iterations=FAST)
                        for name, pw in (users or {"alice": "s3cret"}).items()})
    return PlainMechanism(store).create(CONTEXT)


def evaluate(message: bytes, users: dict[str, str] | None = None) -> Done | Failure:
    outcome = run_inline(server(users).evaluate(message))
    assert isinstance(outcome, Done | Failure)
    return outcome


def test_correct_password_authenticates_as_authcid() -> None:
    assert evaluate(b"\0alice\0s3cret") == Done(authorization_id="alice")


def test_authzid_equal_to_authcid_is_accepted() -> None:
    assert evaluate(b"alice\0alice\0s3cret") == Done(authorization_id="alice")


def test_utf8_names_and_passwords_work() -> None:
    users = {"jürgen": "pässwörd✓"}
    assert evaluate("\0jürgen\0pässwörd✓".encode(), users) == Done(authorization_id="jürgen")


def test_wrong_password_fails_with_kafkas_message() -> None:
    outcome = evaluate(b"\0alice\0wrong")
    assert isinstance(outcome, Failure)
    assert outcome.client_message == INVALID_CREDENTIALS_MESSAGE
    assert "wrong" not in outcome.reason


def test_unknown_user_fails_exactly_like_a_wrong_password() -> None:
    wrong = evaluate(b"\0alice\0wrong")
    unknown = evaluate(b"\0mallory\0wrong")
    assert isinstance(wrong, Failure) and isinstance(unknown, Failure)
    assert unknown.client_message == wrong.client_message


def test_unknown_user_still_pays_for_a_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    import auth.sasl.plain

    calls: list[int] = []
    real = auth.sasl.plain._derive

    def counting(password: str, salt: bytes, iterations: int, size: int) -> bytes:
        calls.append(iterations)
        return real(password, salt, 1, size)  # keep the test fast; only the call matters

    plain = server()
    monkeypatch.setattr(auth.sasl.plain, "_derive", counting)
    assert isinstance(run_inline(plain.evaluate(b"\0mallory\0whatever")), Failure)
    assert calls == [auth.sasl.plain.PLAIN_DEFAULT_ITERATIONS]


def test_authzid_different_from_authcid_fails_after_a_correct_password() -> None:
    outcome = evaluate(b"admin\0alice\0s3cret")
    assert isinstance(outcome, Failure) and outcome.client_message == AUTHZID_MISMATCH_MESSAGE


def test_authzid_mismatch_with_a_wrong_password_reveals_nothing_more() -> None:
    outcome = evaluate(b"admin\0alice\0wrong")
    assert isinstance(outcome, Failure) and outcome.client_message == INVALID_CREDENTIALS_MESSAGE


@pytest.mark.parametrize(("message", "client_message"), [
    (b"alice\0s3cret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"alices3cret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"\0alice\0s3cret\0extra", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\0\0\0\0\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\0\0s3cret", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"\0alice\0\xff", INVALID_CREDENTIALS_MESSAGE),
])
def test_malformed_messages_fail_with_kafkas_messages(message: bytes, client_message: str) -> None:
    outcome = evaluate(message)
    assert isinstance(outcome, Failure)
    assert outcome.client_message == client_message


def test_a_second_message_after_success_fails() -> None:
    plain = server()
    assert isinstance(run_inline(plain.evaluate(b"\0alice\0s3cret")), Done)
    assert isinstance(run_inline(plain.evaluate(b"\0alice\0s3cret")), Failure)


def test_plain_credential_is_pbkdf2_hmac_sha512_and_hides_its_bytes() -> None:
    import hashlib

    credential = plain_credential("pw", salt=b"salt" * 8, iterations=FAST)
    assert credential.hash == hashlib.pbkdf2_hmac("sha512", b"pw", b"salt" * 8, FAST)
    assert credential.iterations == FAST
    text = repr(credential)
    assert base64.b64encode(credential.hash).decode() not in text and repr(credential.hash) not in text


def test_plain_credentials_get_fresh_random_salts() -> None:
    assert plain_credential("pw", iterations=FAST).salt != plain_credential("pw", iterations=FAST).salt


def test_factory_name_is_plain() -> None:
    assert PlainMechanism(PlainStore({})).name == "PLAIN"


# --- the hash runs off the caller's thread; verified passwords are remembered ------------

class CountingDerive:
    """Counts PBKDF2 calls (the only costly step) while still computing the real hash."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import auth.sasl.plain

        self.calls = 0
        self._real = auth.sasl.plain._derive
        monkeypatch.setattr(auth.sasl.plain, "_derive", self)

    def __call__(self, password: str, salt: bytes, iterations: int, size: int) -> bytes:
        self.calls += 1
        return self._real(password, salt, iterations, size)


def _mechanism(users: dict[str, str], cache: VerifiedPasswordCache | None = None) -> tuple[PlainStore, PlainMechanism]:
    store = PlainStore({name: plain_credential(pw, iterations=FAST) for name, pw in users.items()})
    return store, PlainMechanism(store, cache)


def test_the_password_hash_is_a_verify_step_that_computes_nothing_until_run(monkeypatch: pytest.MonkeyPatch) -> None:
    _, mechanism = _mechanism({"alice": "s3cret"})
    derive = CountingDerive(monkeypatch)
    step = mechanism.create(CONTEXT).evaluate(b"\0alice\0s3cret")
    assert isinstance(step, Verify)
    assert derive.calls == 0
    computed = step.job()  # what the gateway runs on a worker thread
    assert derive.calls == 1
    assert step.resume(computed) == Done(authorization_id="alice")


def test_a_second_login_with_the_same_password_is_not_hashed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    _, mechanism = _mechanism({"alice": "s3cret"})
    derive = CountingDerive(monkeypatch)
    assert run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0s3cret")) == Done(authorization_id="alice")
    again = mechanism.create(CONTEXT).evaluate(b"\0alice\0s3cret")
    assert again == Done(authorization_id="alice")  # no Verify step: the cache vouched
    assert derive.calls == 1


def test_a_wrong_password_is_never_cached_as_verified_and_its_repeats_cost_no_hash(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = VerifiedPasswordCache()
    _, mechanism = _mechanism({"alice": "s3cret"}, cache)
    derive = CountingDerive(monkeypatch)
    for attempt in range(30):  # a client retrying a stale password
        outcome = run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0wrong"))
        assert isinstance(outcome, Failure) and outcome.failure_class == "bad_credentials"
        assert outcome.client_message == INVALID_CREDENTIALS_MESSAGE
        assert outcome.quiet == (attempt > 0)  # repeats are logged at debug (and audited as any failure)
    assert derive.calls == 1 and len(cache) == 0
    assert isinstance(mechanism.create(CONTEXT).evaluate(b"\0alice\0other"), Verify)  # another password: hashed
    assert run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0s3cret")) == Done(authorization_id="alice")


def test_a_refuted_password_is_checked_again_once_the_credential_changes() -> None:
    store, mechanism = _mechanism({"alice": "old"})
    assert isinstance(run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0new")), Failure)
    assert isinstance(mechanism.create(CONTEXT).evaluate(b"\0alice\0new"), Failure)  # remembered: no Verify
    store.users["alice"] = plain_credential("new", iterations=FAST)  # the operator set it
    outcome = mechanism.create(CONTEXT).evaluate(b"\0alice\0new")
    assert isinstance(outcome, Verify) and run_inline(outcome) == Done(authorization_id="alice")


def test_an_unknown_users_repeated_guess_is_hashed_once_until_the_user_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    store, mechanism = _mechanism({})
    derive = CountingDerive(monkeypatch)
    for _ in range(5):
        assert isinstance(run_inline(mechanism.create(CONTEXT).evaluate(b"\0carol\0pw")), Failure)
    assert derive.calls == 1
    store.users["carol"] = plain_credential("pw", iterations=FAST)
    assert run_inline(mechanism.create(CONTEXT).evaluate(b"\0carol\0pw")) == Done(authorization_id="carol")


def test_a_changed_credential_invalidates_the_cached_login() -> None:
    cache = VerifiedPasswordCache()
    store, mechanism = _mechanism({"alice": "old"}, cache)
    assert run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0old")) == Done(authorization_id="alice")
    store.users["alice"] = plain_credential("new", iterations=FAST)  # the store saw a password change
    outcome = mechanism.create(CONTEXT).evaluate(b"\0alice\0old")
    assert isinstance(outcome, Verify)  # not vouched for any more: hashed again, and refused
    assert isinstance(run_inline(outcome), Failure)
    assert len(cache) == 0  # the stale entry was dropped


def test_a_deleted_user_with_a_cached_login_is_refused() -> None:
    store, mechanism = _mechanism({"alice": "s3cret"})
    run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0s3cret"))
    del store.users["alice"]
    assert isinstance(run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0s3cret")), Failure)


def test_a_cached_login_still_checks_the_authzid() -> None:
    _, mechanism = _mechanism({"alice": "s3cret"})
    run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0s3cret"))
    outcome = mechanism.create(CONTEXT).evaluate(b"admin\0alice\0s3cret")
    assert isinstance(outcome, Failure) and outcome.client_message == AUTHZID_MISMATCH_MESSAGE


def test_a_password_changed_in_the_credential_file_drops_the_cached_login(tmp_path: Path) -> None:
    from gateway.stores.file_users import FileCredentialStore

    path = tmp_path / "users.json"
    FileCredentialStore(path).upsert_user("alice", "old", mechanisms=("PLAIN",))
    now = [0.0]
    store = FileCredentialStore(path, clock=lambda: now[0], reload_interval_s=1.0)
    mechanism = PlainMechanism(store)
    assert run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0old")) == Done(authorization_id="alice")
    assert mechanism.create(CONTEXT).evaluate(b"\0alice\0old") == Done(authorization_id="alice")  # cached
    FileCredentialStore(path).upsert_user("alice", "new", mechanisms=("PLAIN",))  # e.g. `ksgate users add`
    now[0] += 2  # the store's next signature check sees the new file
    outcome = mechanism.create(CONTEXT).evaluate(b"\0alice\0old")
    assert isinstance(outcome, Verify) and isinstance(run_inline(outcome), Failure)
    assert run_inline(mechanism.create(CONTEXT).evaluate(b"\0alice\0new")) == Done(authorization_id="alice")
