"""FileCredentialStore: atomic writes, live reload, corrupt files, and no secrets in the file or reprs."""

from __future__ import annotations

import base64
import json
import logging
import os
import stat
from pathlib import Path

import pytest

import auth.sasl.plain
import gateway.stores.file_users
from auth.sasl.mechanism import Challenge, Done, SaslContext, run_inline
from auth.sasl.plain import PlainMechanism
from auth.sasl.scram import ScramClient, ScramMechanism
from gateway.stores.file_users import CredentialFileError, FileCredentialStore

CONTEXT = SaslContext(listener="SASL_SSL", client_host="127.0.0.1", tls=True)
PASSWORD = "correct-horse-battery-staple"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "users.json"


@pytest.fixture(autouse=True)
def fast_plain_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """PLAIN's 100 000 PBKDF2 rounds would dominate these tests; the format is what they pin."""
    real = auth.sasl.plain.plain_credential
    monkeypatch.setattr(gateway.stores.file_users, "plain_credential",
                        lambda password: real(password, iterations=1000))


def test_missing_file_is_an_empty_store(path: Path) -> None:
    store = FileCredentialStore(path)
    assert store.users() == []
    assert store.scram_credential("alice", "SCRAM-SHA-256") is None
    assert store.plain_credential("alice") is None


def test_upserted_user_authenticates_with_every_mechanism(path: Path) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", PASSWORD)
    assert store.users() == ["alice"]
    assert store.mechanisms("alice") == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    plain = PlainMechanism(store).create(CONTEXT)
    assert run_inline(plain.evaluate(f"\0alice\0{PASSWORD}".encode())) == Done(authorization_id="alice")
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        server = ScramMechanism(mechanism, store).create(CONTEXT)
        client = ScramClient(mechanism, "alice", PASSWORD)
        first = server.evaluate(client.first_message())
        done = server.evaluate(client.final_message(first.data))  # type: ignore[union-attr]
        assert isinstance(done, Done) and done.authorization_id == "alice"


def test_upsert_replaces_the_users_password_and_mechanisms(path: Path) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", "old")
    old = store.scram_credential("alice", "SCRAM-SHA-512")
    store.upsert_user("alice", "new", mechanisms=("SCRAM-SHA-512",), iterations=8192)
    new = store.scram_credential("alice", "SCRAM-SHA-512")
    assert new is not None and new != old and new.iterations == 8192
    assert store.mechanisms("alice") == ["SCRAM-SHA-512"]
    assert store.plain_credential("alice") is None


def test_users_are_listed_sorted(path: Path) -> None:
    store = FileCredentialStore(path)
    for user in ("carol", "alice", "bob"):
        store.upsert_user(user, PASSWORD, mechanisms=("SCRAM-SHA-256",))
    assert store.users() == ["alice", "bob", "carol"]


def test_delete_user_reports_whether_the_user_existed(path: Path) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", PASSWORD, mechanisms=("PLAIN",))
    assert store.delete_user("alice") is True
    assert store.delete_user("alice") is False
    assert store.users() == []


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"iterations": 4095}, "iterations"),
    ({"iterations": 16385}, "iterations"),
    ({"mechanisms": ("SCRAM-SHA-1",)}, "mechanisms"),
    ({"mechanisms": ()}, "mechanisms"),
])
def test_upsert_refuses_invalid_parameters(path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FileCredentialStore(path).upsert_user("alice", PASSWORD, **kwargs)  # type: ignore[arg-type]
    assert not path.exists()


@pytest.mark.parametrize(("user", "password"), [("", "pw"), ("a\0b", "pw"), ("a\nb", "pw"), ("alice", "")])
def test_upsert_refuses_empty_or_control_character_names_and_empty_passwords(path: Path, user: str,
                                                                            password: str) -> None:
    with pytest.raises(ValueError):
        FileCredentialStore(path).upsert_user(user, password)


# --- what the file and the reprs contain ------------------------------------------------


def test_file_holds_derived_keys_only_and_is_private(path: Path) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", PASSWORD)
    raw = path.read_bytes()
    assert PASSWORD.encode() not in raw
    assert base64.b64encode(PASSWORD.encode()) not in raw
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    document = json.loads(raw)
    assert document["version"] == 1
    assert set(document["users"]["alice"]["SCRAM-SHA-256"]) == {"salt", "stored_key", "server_key", "iterations"}
    assert set(document["users"]["alice"]["PLAIN"]) == {"salt", "hash", "iterations"}


def test_reprs_of_store_and_credentials_reveal_no_key_material(path: Path) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", PASSWORD)
    scram = store.scram_credential("alice", "SCRAM-SHA-256")
    plain = store.plain_credential("alice")
    assert scram is not None and plain is not None
    secrets = [scram.salt, scram.stored_key, scram.server_key, plain.salt, plain.hash]
    texts = [repr(store), str(store), repr(scram), str(scram), repr(plain), repr(store._users)]
    for text in texts:
        assert PASSWORD not in text
        for secret in secrets:
            assert base64.b64encode(secret).decode() not in text
            assert repr(secret) not in text and secret.hex() not in text


# --- atomic writes ----------------------------------------------------------------------


def test_a_crash_before_the_rename_leaves_the_old_file_intact(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", PASSWORD, mechanisms=("SCRAM-SHA-256",))
    before = path.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        store.upsert_user("bob", PASSWORD, mechanisms=("SCRAM-SHA-256",))
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir() if not p.name.endswith(".lock")) == ["users.json"]
    assert FileCredentialStore(path).users() == ["alice"]


def test_writes_merge_with_changes_made_by_another_process(path: Path) -> None:
    first = FileCredentialStore(path)
    second = FileCredentialStore(path)
    first.upsert_user("alice", PASSWORD, mechanisms=("PLAIN",))
    second.upsert_user("bob", PASSWORD, mechanisms=("PLAIN",))  # its cache predates alice
    assert FileCredentialStore(path).users() == ["alice", "bob"]


# --- live reload ------------------------------------------------------------------------


def test_running_store_sees_new_and_deleted_users_within_a_second(path: Path) -> None:
    clock = FakeClock()
    gateway = FileCredentialStore(path, clock=clock)
    cli = FileCredentialStore(path)
    cli.upsert_user("alice", PASSWORD, mechanisms=("SCRAM-SHA-256",))

    assert gateway.scram_credential("alice", "SCRAM-SHA-256") is None  # checked at most once a second
    clock.now += 1.0
    assert gateway.scram_credential("alice", "SCRAM-SHA-256") is not None

    cli.delete_user("alice")
    clock.now += 0.5
    assert gateway.scram_credential("alice", "SCRAM-SHA-256") is not None
    clock.now += 0.5
    assert gateway.scram_credential("alice", "SCRAM-SHA-256") is None


def test_reload_if_changed_is_false_when_nothing_changed(path: Path) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", PASSWORD, mechanisms=("PLAIN",))
    assert store.reload_if_changed() is False
    FileCredentialStore(path).upsert_user("bob", PASSWORD, mechanisms=("PLAIN",))
    assert store.reload_if_changed() is True
    assert store.users() == ["alice", "bob"]


def test_corrupt_file_on_reload_keeps_the_previous_users_and_logs_once(
        path: Path, caplog: pytest.LogCaptureFixture) -> None:
    FileCredentialStore(path).upsert_user("alice", PASSWORD, mechanisms=("PLAIN",))
    gateway = FileCredentialStore(path)
    path.write_text('{"version": 1, "users": {"alice": ')
    with caplog.at_level(logging.ERROR, logger="ksgate.auth"):
        assert gateway.reload_if_changed() is False
        assert gateway.reload_if_changed() is False
    assert gateway.users() == ["alice"]
    assert gateway.plain_credential("alice") is not None
    errors = [r for r in caplog.records if r.name == "ksgate.auth" and r.levelno == logging.ERROR]
    assert len(errors) == 1 and "keeping the previous 1 users" in errors[0].getMessage()


def test_repaired_file_is_picked_up_after_a_corrupt_one(path: Path) -> None:
    FileCredentialStore(path).upsert_user("alice", PASSWORD, mechanisms=("PLAIN",))
    gateway = FileCredentialStore(path)
    path.write_text("garbage")
    gateway.reload_if_changed()
    FileCredentialStore(path.parent / "other.json").upsert_user("bob", PASSWORD, mechanisms=("PLAIN",))
    os.replace(path.parent / "other.json", path)
    assert gateway.reload_if_changed() is True
    assert gateway.users() == ["bob"]


@pytest.mark.parametrize("content", [
    "not json",
    "[]",
    '{"version": 2, "users": {}}',
    '{"version": 1, "users": []}',
    '{"version": 1, "users": {"alice": {"SCRAM-SHA-1": {}}}}',
    '{"version": 1, "users": {"alice": {"PLAIN": {"salt": "!!", "hash": "AA==", "iterations": 1}}}}',
    '{"version": 1, "users": {"alice": {"PLAIN": {"salt": "AA==", "hash": "AA==", "iterations": "1"}}}}',
])
def test_corrupt_file_at_startup_raises_a_credential_file_error(path: Path, content: str) -> None:
    path.write_text(content)
    with pytest.raises(CredentialFileError) as excinfo:
        FileCredentialStore(path)
    assert str(path) in str(excinfo.value)


def test_corrupt_file_error_does_not_quote_key_material(path: Path) -> None:
    path.write_text('{"version": 1, "users": {"alice": {"PLAIN": {"salt": "c2VjcmV0c2FsdA==", "hash": "!"}}}}')
    with pytest.raises(CredentialFileError) as excinfo:
        FileCredentialStore(path)
    assert "c2VjcmV0c2FsdA" not in str(excinfo.value)


def test_removed_file_empties_the_running_store(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    FileCredentialStore(path).upsert_user("alice", PASSWORD, mechanisms=("PLAIN",))
    gateway = FileCredentialStore(path)
    path.unlink()
    with caplog.at_level(logging.WARNING, logger="ksgate.auth"):
        assert gateway.reload_if_changed() is True
    assert gateway.users() == []
    assert any("removed" in r.getMessage() for r in caplog.records)


# --- the secret behind SCRAM's decoys for unknown users -------------------------------------


def _offer(mechanism: ScramMechanism, user: str) -> str:
    """``s=<salt>,i=<iterations>`` from the server-first message ``mechanism`` answers ``user`` with."""
    outcome = mechanism.create(CONTEXT).evaluate(f"n,,n={user},r=cnonce".encode())
    assert isinstance(outcome, Challenge)
    return outcome.data.decode().split(",", 1)[1]


def _decoy_offer(store: FileCredentialStore, user: str, mechanism: str = "SCRAM-SHA-256") -> str:
    """What a gateway started over ``store`` offers ``user``."""
    return _offer(ScramMechanism(mechanism, store, decoy_key=store.decoy_secret), user)


def test_the_first_write_creates_the_decoy_secret_and_later_writes_keep_it(path: Path) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", PASSWORD, mechanisms=("SCRAM-SHA-256",))
    secret = json.loads(path.read_text())["decoy_secret"]
    assert len(base64.b64decode(secret)) == 32
    store.upsert_user("bob", PASSWORD, mechanisms=("SCRAM-SHA-256",))
    store.delete_user("bob")
    store.alter_scram([], [("alice", "SCRAM-SHA-256")])
    assert json.loads(path.read_text())["decoy_secret"] == secret
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_an_unknown_users_decoy_is_the_same_after_a_restart(path: Path) -> None:
    FileCredentialStore(path).upsert_user("alice", PASSWORD, mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"))
    offers = [(_decoy_offer(FileCredentialStore(path), "mallory"),
               _decoy_offer(FileCredentialStore(path), "mallory", "SCRAM-SHA-512")) for _ in range(2)]
    assert offers[0] == offers[1]
    assert _decoy_offer(FileCredentialStore(path), "trudy") != offers[0][0]


def test_a_decoy_looks_like_a_real_users_salt_and_iterations(path: Path) -> None:
    store = FileCredentialStore(path)
    store.upsert_user("alice", PASSWORD, mechanisms=("SCRAM-SHA-512",))
    real_salt, real_iterations = _decoy_offer(store, "alice", "SCRAM-SHA-512").split(",")
    decoy_salt, decoy_iterations = _decoy_offer(store, "mallory", "SCRAM-SHA-512").split(",")
    assert len(base64.b64decode(decoy_salt[2:])) == len(base64.b64decode(real_salt[2:]))
    assert decoy_iterations == real_iterations == "i=4096"


def test_a_gateway_adds_the_secret_once_to_a_file_without_one(path: Path) -> None:
    FileCredentialStore(path).upsert_user("alice", PASSWORD, mechanisms=("SCRAM-SHA-256",))
    document = json.loads(path.read_text())
    del document["decoy_secret"]  # hand-made, or written by an older ksgate
    path.write_text(json.dumps(document))
    first = FileCredentialStore(path)
    secret = first.ensure_decoy_secret()
    assert secret is not None and base64.b64encode(secret).decode() == json.loads(path.read_text())["decoy_secret"]
    written = path.read_bytes()
    restarted = FileCredentialStore(path)
    assert restarted.ensure_decoy_secret() == secret
    assert path.read_bytes() == written  # found, not rewritten
    assert _decoy_offer(first, "mallory") == _decoy_offer(restarted, "mallory")
    assert restarted.users() == ["alice"]


def test_no_file_means_no_secret_and_no_file_is_created(path: Path) -> None:
    store = FileCredentialStore(path)
    assert store.ensure_decoy_secret() is None
    assert not path.exists()
    mechanism = ScramMechanism("SCRAM-SHA-256", store, decoy_key=store.decoy_secret)
    offers = {_offer(mechanism, "mallory") for _ in range(2)}
    assert len(offers) == 1  # stable for the life of the process


def test_a_file_that_cannot_be_written_leaves_decoys_per_process_and_says_so(
        path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    path.write_text(json.dumps({"version": 1, "users": {}}))

    def read_only(target: Path, data: bytes) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(gateway.stores.file_users, "_write_atomic", read_only)
    with caplog.at_level(logging.WARNING, logger="ksgate.auth"):
        assert FileCredentialStore(path).ensure_decoy_secret() is None
    assert "decoys" in caplog.text and "Permission denied" in caplog.text


def test_a_short_or_broken_decoy_secret_is_refused_without_showing_it(path: Path) -> None:
    for value in ("c2hvcnQ=", "!!not-base64"):
        path.write_text(json.dumps({"version": 1, "decoy_secret": value, "users": {}}))
        with pytest.raises(CredentialFileError) as error:
            FileCredentialStore(path)
        assert value not in str(error.value) and "decoy_secret" in str(error.value)


def test_the_decoy_secret_never_reaches_logs_or_reprs(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        FileCredentialStore(path).upsert_user("alice", PASSWORD, mechanisms=("SCRAM-SHA-256",))
        document = json.loads(path.read_text())
        del document["decoy_secret"]
        path.write_text(json.dumps(document))
        store = FileCredentialStore(path)
        secret = store.ensure_decoy_secret()
        assert secret is not None
        _decoy_offer(store, "mallory")
        store.upsert_user("bob", PASSWORD, mechanisms=("SCRAM-SHA-256",))
        store.reload_if_changed()
    assert "added the secret for SCRAM decoys" in caplog.text  # the log was captured
    texts = [caplog.text, repr(store), repr(store._watch.content)]
    for text in texts:
        for form in (base64.b64encode(secret).decode(), secret.hex(), repr(secret)):
            assert form not in text
