"""SCRAM-SHA-256/512 server: the RFC 7677 vector, round trips, and every way an exchange must fail."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable

import pytest

from auth.credentials import ScramCredential
from auth.sasl.mechanism import Challenge, Done, Failure, Outcome, SaslContext, SaslMechanismServer
from auth.sasl.scram import (
    AUTHZID_MISMATCH_MESSAGE,
    ScramClient,
    ScramMechanism,
    TokenCredential,
    generic_failure_message,
    scram_credential,
)

NOW_MS = 1_700_000_000_000
CONTEXT = SaslContext(listener="SASL_SSL", client_host="127.0.0.1", tls=True, now_ms=lambda: NOW_MS)

# RFC 7677 §3
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


class DictStore:
    """An in-memory CredentialStore keyed by (user, mechanism)."""

    def __init__(self, scram: dict[tuple[str, str], ScramCredential] | None = None) -> None:
        self.scram = scram or {}
        self.lookups: list[tuple[str, str]] = []

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        self.lookups.append((user, mechanism))
        return self.scram.get((user, mechanism))

    def plain_credential(self, user: str) -> None:
        return None


def store_with(user: str, password: str, mechanism: str, iterations: int = 4096) -> DictStore:
    return DictStore({(user, mechanism): scram_credential(mechanism, password, iterations=iterations)})


def challenge(outcome: Outcome) -> bytes:
    assert isinstance(outcome, Challenge), outcome
    return outcome.data


def run_exchange(server: SaslMechanismServer, client: ScramClient) -> Outcome:
    server_first = challenge(server.evaluate(client.first_message()))
    return server.evaluate(client.final_message(server_first))


# --- RFC 7677 ---------------------------------------------------------------------------


def rfc_server() -> SaslMechanismServer:
    store = DictStore({("user", "SCRAM-SHA-256"): scram_credential("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)})
    return ScramMechanism("SCRAM-SHA-256", store, nonce_factory=lambda: RFC_SERVER_NONCE).create(CONTEXT)


def test_server_reproduces_rfc7677_exchange_byte_for_byte() -> None:
    server = rfc_server()
    assert server.evaluate(RFC_CLIENT_FIRST) == Challenge(RFC_SERVER_FIRST)
    assert server.evaluate(RFC_CLIENT_FINAL) == Done(authorization_id="user", final=RFC_SERVER_FINAL)


def test_client_reproduces_rfc7677_exchange_byte_for_byte() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify_server_final(RFC_SERVER_FINAL)


def test_rfc7677_proof_with_one_flipped_bit_fails() -> None:
    server = rfc_server()
    challenge(server.evaluate(RFC_CLIENT_FIRST))
    proof = bytearray(base64.b64decode(RFC_CLIENT_FINAL.rsplit(b",p=", 1)[1]))
    proof[0] ^= 1
    tampered = RFC_CLIENT_FINAL.rsplit(b",p=", 1)[0] + b",p=" + base64.b64encode(bytes(proof))
    assert isinstance(server.evaluate(tampered), Failure)


# --- round trips ------------------------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_authenticates_and_server_signature_verifies(mechanism: str) -> None:
    server = ScramMechanism(mechanism, store_with("alice", "s3cret", mechanism)).create(CONTEXT)
    client = ScramClient(mechanism, "alice", "s3cret")
    done = run_exchange(server, client)
    assert isinstance(done, Done)
    assert done.authorization_id == "alice"
    assert not done.token_authenticated and done.credential_expiry_ms is None
    client.verify_server_final(done.final)


def test_a_client_logging_in_again_with_the_same_salt_derives_its_key_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's upstream re-authentications (KIP-368) run PBKDF2 on the event loop: only when the salt
    or the password changed. Each login still authenticates (a fresh nonce, the server's signature checked)."""
    derived: list[bytes] = []
    real = hashlib.pbkdf2_hmac

    def counting(name: str, password: bytes, salt: bytes, iterations: int, dklen: int | None = None) -> bytes:
        derived.append(password)
        return real(name, password, salt, iterations, dklen)

    store = store_with("gw-reauth", "first-secret", "SCRAM-SHA-512")  # its salt: random, seen by no other test
    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counting)
    for _ in range(3):
        client = ScramClient("SCRAM-SHA-512", "gw-reauth", "first-secret")
        done = run_exchange(ScramMechanism("SCRAM-SHA-512", store).create(CONTEXT), client)
        assert isinstance(done, Done)
        client.verify_server_final(done.final)
    assert derived == [b"first-secret"]
    wrong = run_exchange(ScramMechanism("SCRAM-SHA-512", store).create(CONTEXT),
                         ScramClient("SCRAM-SHA-512", "gw-reauth", "other-secret"))
    assert isinstance(wrong, Failure) and derived == [b"first-secret", b"other-secret"]


def test_sha512_credential_does_not_serve_sha256() -> None:
    store = store_with("alice", "s3cret", "SCRAM-SHA-512")
    server = ScramMechanism("SCRAM-SHA-256", store).create(CONTEXT)
    assert isinstance(run_exchange(server, ScramClient("SCRAM-SHA-256", "alice", "s3cret")), Failure)


def test_server_nonce_is_random_base64_of_at_least_18_bytes_appended_to_client_nonce() -> None:
    mechanism = ScramMechanism("SCRAM-SHA-256", store_with("alice", "pw", "SCRAM-SHA-256"))
    nonces = set()
    for _ in range(2):
        text = challenge(mechanism.create(CONTEXT).evaluate(b"n,,n=alice,r=clientnonce")).decode()
        nonce = text.split(",")[0][2:]
        assert nonce.startswith("clientnonce")
        server_part = nonce[len("clientnonce"):]
        assert len(base64.b64decode(server_part, validate=True)) >= 18
        nonces.add(server_part)
    assert len(nonces) == 2


def test_saslname_escapes_decode_to_the_stored_user_name() -> None:
    store = store_with("a,b=c", "pw", "SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "a,b=c", "pw", nonce="abc")
    assert client.first_message() == b"n,,n=a=2Cb=3Dc,r=abc"
    done = run_exchange(ScramMechanism("SCRAM-SHA-256", store).create(CONTEXT), client)
    assert isinstance(done, Done) and done.authorization_id == "a,b=c"


def test_authzid_equal_to_username_is_accepted() -> None:
    store = store_with("alice", "pw", "SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", authzid="alice")
    assert client.first_message().startswith(b"n,a=alice,n=alice,")
    done = run_exchange(ScramMechanism("SCRAM-SHA-256", store).create(CONTEXT), client)
    assert isinstance(done, Done) and done.authorization_id == "alice"


def test_unknown_extensions_are_ignored() -> None:
    store = store_with("alice", "pw", "SCRAM-SHA-256")
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", extensions={"foo": "bar"})
    assert isinstance(run_exchange(ScramMechanism("SCRAM-SHA-256", store).create(CONTEXT), client), Done)


# --- failures ---------------------------------------------------------------------------


def test_wrong_password_fails_with_kafkas_generic_message() -> None:
    server = ScramMechanism("SCRAM-SHA-256", store_with("alice", "right", "SCRAM-SHA-256")).create(CONTEXT)
    outcome = run_exchange(server, ScramClient("SCRAM-SHA-256", "alice", "wrong"))
    assert isinstance(outcome, Failure)
    assert outcome.client_message == generic_failure_message("SCRAM-SHA-256")
    assert "wrong" not in outcome.reason and "right" not in outcome.reason


SERVER_FIRST_SHAPE = re.compile(r"r=cnonce[A-Za-z0-9+/]{24},s=[A-Za-z0-9+/]{43}=,i=4096")


def test_unknown_user_gets_a_normal_server_first_and_the_same_failure_as_a_wrong_password() -> None:
    mechanism = ScramMechanism("SCRAM-SHA-256", store_with("alice", "right", "SCRAM-SHA-256"))
    known = mechanism.create(CONTEXT)
    unknown = mechanism.create(CONTEXT)
    known_first = challenge(known.evaluate(b"n,,n=alice,r=cnonce")).decode()
    unknown_first = challenge(unknown.evaluate(b"n,,n=mallory,r=cnonce")).decode()
    assert SERVER_FIRST_SHAPE.fullmatch(known_first)
    assert SERVER_FIRST_SHAPE.fullmatch(unknown_first)

    wrong = ScramClient("SCRAM-SHA-256", "alice", "guess", nonce="cnonce")
    wrong.first_message()
    ghost = ScramClient("SCRAM-SHA-256", "mallory", "guess", nonce="cnonce")
    ghost.first_message()
    known_outcome = known.evaluate(wrong.final_message(known_first.encode()))
    unknown_outcome = unknown.evaluate(ghost.final_message(unknown_first.encode()))
    assert isinstance(known_outcome, Failure) and isinstance(unknown_outcome, Failure)
    assert known_outcome.client_message == unknown_outcome.client_message


def salt_of(server_first: bytes) -> str:
    return server_first.decode().split(",")[1]


def test_unknown_user_salt_is_stable_per_user_and_differs_between_users() -> None:
    mechanism = ScramMechanism("SCRAM-SHA-256", DictStore())
    first = salt_of(challenge(mechanism.create(CONTEXT).evaluate(b"n,,n=mallory,r=x")))
    again = salt_of(challenge(mechanism.create(CONTEXT).evaluate(b"n,,n=mallory,r=y")))
    other = salt_of(challenge(mechanism.create(CONTEXT).evaluate(b"n,,n=trudy,r=x")))
    assert first == again
    assert first != other


def test_unknown_user_salt_is_stable_across_restarts_with_a_persistent_decoy_key() -> None:
    key = b"k" * 32
    salts = {salt_of(challenge(ScramMechanism("SCRAM-SHA-256", DictStore(), decoy_key=key)
                               .create(CONTEXT).evaluate(b"n,,n=mallory,r=x"))) for _ in range(2)}
    assert len(salts) == 1


def first_then_final(server: SaslMechanismServer, client: ScramClient,
                     edit: Callable[[bytes], bytes]) -> Outcome:
    server_first = challenge(server.evaluate(client.first_message()))
    return server.evaluate(edit(client.final_message(server_first)))


def alice_server() -> SaslMechanismServer:
    return ScramMechanism("SCRAM-SHA-256", store_with("alice", "pw", "SCRAM-SHA-256")).create(CONTEXT)


def test_client_final_with_a_different_nonce_fails() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    outcome = first_then_final(alice_server(), client, lambda final: final.replace(b",r=", b",r=X", 1))
    assert isinstance(outcome, Failure) and "nonce" in outcome.reason


def test_client_final_echoing_only_the_client_nonce_fails() -> None:
    server = alice_server()
    challenge(server.evaluate(b"n,,n=alice,r=cnonce"))
    proof = base64.b64encode(bytes(32)).decode()
    assert isinstance(server.evaluate(f"c=biws,r=cnonce,p={proof}".encode()), Failure)


def test_client_final_with_another_channel_binding_fails() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    outcome = first_then_final(alice_server(), client, lambda final: final.replace(b"c=biws", b"c=eSws", 1))
    assert isinstance(outcome, Failure) and "channel binding" in outcome.reason


@pytest.mark.parametrize("client_first", [
    b"p=tls-unique,,n=alice,r=abc",  # the client requires channel binding
    b"y,,n=alice,r=abc",  # Kafka accepts only 'n'
])
def test_channel_binding_flags_other_than_n_are_refused(client_first: bytes) -> None:
    outcome = alice_server().evaluate(client_first)
    assert isinstance(outcome, Failure)
    assert outcome.client_message == generic_failure_message("SCRAM-SHA-256")


def test_authzid_different_from_username_fails_before_any_lookup() -> None:
    store = store_with("alice", "pw", "SCRAM-SHA-256")
    server = ScramMechanism("SCRAM-SHA-256", store).create(CONTEXT)
    outcome = server.evaluate(b"n,a=admin,n=alice,r=abc")
    assert isinstance(outcome, Failure)
    assert outcome.client_message == AUTHZID_MISMATCH_MESSAGE
    assert store.lookups == []


def test_replayed_client_final_after_success_fails() -> None:
    server = alice_server()
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    server_first = challenge(server.evaluate(client.first_message()))
    final = client.final_message(server_first)
    assert isinstance(server.evaluate(final), Done)
    assert isinstance(server.evaluate(final), Failure)


def test_retry_after_a_failed_client_final_fails_even_with_the_right_proof() -> None:
    server = alice_server()
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    final = client.final_message(challenge(server.evaluate(client.first_message())))
    assert isinstance(server.evaluate(final.replace(b"c=biws", b"c=eSws")), Failure)
    assert isinstance(server.evaluate(final), Failure)


@pytest.mark.parametrize("iterations", [4095, 1000, 16385])
def test_credentials_with_iterations_outside_4096_to_16384_are_refused(iterations: int) -> None:
    store = store_with("alice", "pw", "SCRAM-SHA-256", iterations=iterations)
    server = ScramMechanism("SCRAM-SHA-256", store).create(CONTEXT)
    server_first = challenge(server.evaluate(b"n,,n=alice,r=abc"))
    assert server_first.endswith(b",i=4096")  # the stored count is not disclosed
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="abc")
    client.first_message()
    outcome = server.evaluate(client.final_message(server_first))
    assert isinstance(outcome, Failure) and "iterations" in outcome.reason


@pytest.mark.parametrize("iterations", [4096, 16384])
def test_iteration_bounds_are_inclusive(iterations: int) -> None:
    store = store_with("alice", "pw", "SCRAM-SHA-256", iterations=iterations)
    server = ScramMechanism("SCRAM-SHA-256", store).create(CONTEXT)
    assert isinstance(run_exchange(server, ScramClient("SCRAM-SHA-256", "alice", "pw")), Done)


@pytest.mark.parametrize("client_first", [
    b"",
    b"n,,",
    b"n,,r=abc,n=alice",
    b"n,,n=alice",
    b"n,,n=,r=abc",
    b"n,,n=al=2Xice,r=abc",  # '=' must be =2C or =3D
    b"n,,n=alice,r=",
    b"n,,n=alice,r=a\x7fb",
    b"n,,m=ext,n=alice,r=abc",  # mandatory extensions are not understood
    b"n,,n=alice,r=abc,=x",
    b"n,x,n=alice,r=abc",
    b"\xff\xfe",
])
def test_malformed_client_first_fails(client_first: bytes) -> None:
    outcome = alice_server().evaluate(client_first)
    assert isinstance(outcome, Failure)
    assert outcome.client_message == generic_failure_message("SCRAM-SHA-256")


@pytest.mark.parametrize("edit", [
    lambda final: final.rsplit(b",p=", 1)[0],  # no proof
    lambda final: final + b"==",  # proof not base64
    lambda final: final.rsplit(b",p=", 1)[0] + b",p=AAAA",  # proof of the wrong length
    lambda final: b"r=x," + final,
])
def test_malformed_client_final_fails(edit: Callable[[bytes], bytes]) -> None:
    outcome = first_then_final(alice_server(), ScramClient("SCRAM-SHA-256", "alice", "pw"), edit)
    assert isinstance(outcome, Failure)


def test_store_errors_fail_the_attempt_instead_of_raising() -> None:
    class BrokenStore(DictStore):
        def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
            raise OSError("disk on fire")

    outcome = ScramMechanism("SCRAM-SHA-256", BrokenStore()).create(CONTEXT).evaluate(b"n,,n=alice,r=abc")
    assert isinstance(outcome, Failure) and "disk on fire" in outcome.reason


def test_unknown_mechanism_name_is_rejected() -> None:
    with pytest.raises(ValueError):
        ScramMechanism("SCRAM-SHA-1", DictStore())


def test_factory_name_is_the_mechanism_name() -> None:
    assert ScramMechanism("SCRAM-SHA-512", DictStore()).name == "SCRAM-SHA-512"


def test_credential_and_token_reprs_hide_key_material() -> None:
    credential = scram_credential("SCRAM-SHA-256", "pw")
    token = TokenCredential(credential, "alice", NOW_MS)
    for text in (repr(credential), repr(token), str(token)):
        for secret in (credential.salt, credential.stored_key, credential.server_key):
            assert base64.b64encode(secret).decode() not in text
            assert repr(secret) not in text


# --- delegation tokens (tokenauth=true) -------------------------------------------------

TOKEN_ID = "tokenID123"
TOKEN_HMAC = "lAYYSFmLs4bTjf+lTZ1LCHR/ZZFNA=="


def token_client(mechanism: str = "SCRAM-SHA-256", secret: str = TOKEN_HMAC) -> ScramClient:
    return ScramClient(mechanism, TOKEN_ID, secret, extensions={"tokenauth": "true"})


def token_lookup(expiry_ms: int) -> Callable[[str, str], TokenCredential | None]:
    def lookup(token_id: str, mechanism: str) -> TokenCredential | None:
        if token_id != TOKEN_ID:
            return None
        return TokenCredential(scram_credential(mechanism, TOKEN_HMAC), owner="alice", expiry_ms=expiry_ms)
    return lookup


def test_tokenauth_is_refused_when_delegation_tokens_are_not_enabled() -> None:
    server = ScramMechanism("SCRAM-SHA-256", DictStore()).create(CONTEXT)
    outcome = server.evaluate(token_client().first_message())
    assert isinstance(outcome, Failure) and "tokenauth" in outcome.reason


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_tokenauth_authenticates_as_the_token_owner_until_the_token_expires(mechanism: str) -> None:
    store = DictStore()
    server = ScramMechanism(mechanism, store, token_lookup(NOW_MS + 60_000)).create(CONTEXT)
    client = token_client(mechanism)
    done = run_exchange(server, client)
    assert isinstance(done, Done)
    assert (done.authorization_id, done.token_authenticated, done.credential_expiry_ms) == (
        "alice", True, NOW_MS + 60_000)
    client.verify_server_final(done.final)
    assert store.lookups == []  # the user store is not consulted for tokens


def test_tokenauth_value_is_case_insensitive_like_javas_parse_boolean() -> None:
    server = ScramMechanism("SCRAM-SHA-256", DictStore(), token_lookup(NOW_MS + 1)).create(CONTEXT)
    client = ScramClient("SCRAM-SHA-256", TOKEN_ID, TOKEN_HMAC, extensions={"tokenauth": "TRUE"})
    outcome = run_exchange(server, client)
    assert isinstance(outcome, Done) and outcome.token_authenticated


def test_tokenauth_with_a_wrong_token_secret_fails() -> None:
    server = ScramMechanism("SCRAM-SHA-256", DictStore(), token_lookup(NOW_MS + 1)).create(CONTEXT)
    assert isinstance(run_exchange(server, token_client(secret="forged")), Failure)


def test_tokenauth_with_an_expired_token_fails() -> None:
    server = ScramMechanism("SCRAM-SHA-256", DictStore(), token_lookup(NOW_MS)).create(CONTEXT)
    outcome = run_exchange(server, token_client())
    assert isinstance(outcome, Failure) and "expired" in outcome.reason


def test_tokenauth_with_an_unknown_token_id_fails_like_a_wrong_password() -> None:
    server = ScramMechanism("SCRAM-SHA-256", DictStore(), token_lookup(NOW_MS + 1)).create(CONTEXT)
    client = ScramClient("SCRAM-SHA-256", "nosuchtoken", TOKEN_HMAC, extensions={"tokenauth": "true"})
    outcome = run_exchange(server, client)
    assert isinstance(outcome, Failure)
    assert outcome.client_message == generic_failure_message("SCRAM-SHA-256")


def test_user_credentials_do_not_authenticate_as_a_token() -> None:
    # A user whose name equals a token id must not get in through tokenauth with the user's password.
    store = store_with(TOKEN_ID, "userpw", "SCRAM-SHA-256")
    server = ScramMechanism("SCRAM-SHA-256", store, token_lookup(NOW_MS + 1)).create(CONTEXT)
    assert isinstance(run_exchange(server, token_client(secret="userpw")), Failure)


# --- a real client: kafka-python's SCRAM implementation --------------------------------


def kafka_python_scram_client() -> type:
    try:
        from kafka.net.sasl.scram import ScramClient as KafkaPythonScramClient  # kafka-python >= 3
    except ImportError:
        try:
            from kafka.sasl.scram import ScramClient as KafkaPythonScramClient  # kafka-python 2.x
        except ImportError:
            pytest.skip("kafka-python's SCRAM client is not importable")
    return KafkaPythonScramClient  # type: ignore[no-any-return]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_scram_client_authenticates_and_accepts_our_signature(mechanism: str) -> None:
    client = kafka_python_scram_client()("alice", "s3cret", mechanism)
    server = ScramMechanism(mechanism, store_with("alice", "s3cret", mechanism)).create(CONTEXT)
    client.process_server_first_message(challenge(server.evaluate(client.first_message())))
    done = server.evaluate(client.final_message())
    assert isinstance(done, Done) and done.authorization_id == "alice"
    client.process_server_final_message(done.final)  # raises if our signature were wrong


def test_kafka_python_scram_client_with_a_wrong_password_is_refused() -> None:
    client = kafka_python_scram_client()("alice", "nope", "SCRAM-SHA-256")
    server = alice_server()
    client.process_server_first_message(challenge(server.evaluate(client.first_message())))
    assert isinstance(server.evaluate(client.final_message()), Failure)


# --- librdkafka before 2.6.1: the client nonce repeated in client-final (librdkafka PR #4895) ---


def legacy_final(client_nonce: str, server_first: bytes) -> str:
    """The nonce field librdkafka 2.0.2 sends: its own nonce, then the whole server-first nonce."""
    return f"r={client_nonce}{server_first.decode().split(',')[0][2:]}"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_librdkafka_legacy_nonce_is_accepted_by_default_and_reported(mechanism: str) -> None:
    server = ScramMechanism(mechanism, store_with("alice", "pw", mechanism)).create(CONTEXT)
    client = ScramClient(mechanism, "alice", "pw", nonce="cnonce", repeat_client_nonce=True)
    server_first = challenge(server.evaluate(client.first_message()))
    final = client.final_message(server_first)
    assert legacy_final("cnonce", server_first) in final.decode()
    outcome = server.evaluate(final)
    assert isinstance(outcome, Done) and outcome.legacy_nonce
    assert outcome.authorization_id == "alice"
    client.verify_server_final(outcome.final)


def test_rfc_nonce_is_not_reported_as_legacy() -> None:
    outcome = run_exchange(alice_server(), ScramClient("SCRAM-SHA-256", "alice", "pw"))
    assert isinstance(outcome, Done) and not outcome.legacy_nonce


def test_librdkafka_legacy_nonce_is_refused_as_a_nonce_mismatch_when_switched_off() -> None:
    mechanism = ScramMechanism("SCRAM-SHA-256", store_with("alice", "pw", "SCRAM-SHA-256"), legacy_nonce=False)
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", repeat_client_nonce=True)
    outcome = run_exchange(mechanism.create(CONTEXT), client)
    assert isinstance(outcome, Failure)
    assert outcome.failure_class == "nonce_mismatch"
    assert "ksgate.sasl.scram.legacy.librdkafka.nonce.enable" in outcome.reason
    assert outcome.client_message == generic_failure_message("SCRAM-SHA-256")
    # The RFC form still works with the switch off.
    assert isinstance(run_exchange(mechanism.create(CONTEXT), ScramClient("SCRAM-SHA-256", "alice", "pw")), Done)


@pytest.mark.parametrize("nonce_field", [
    lambda c, s: f"r={c}{c}{s}",  # the client nonce three times
    lambda c, s: f"r={s}{c}",  # appended instead of prepended
    lambda c, s: f"r={s[len(c):]}",  # only the server's part
    lambda c, s: f"r=other{s}",  # another prefix
    lambda c, s: f"r={c}{s}x",  # a suffix
])
def test_only_the_exact_legacy_form_is_accepted(nonce_field: Callable[[str, str], str]) -> None:
    server = alice_server()
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="cnonce")
    server_first = challenge(server.evaluate(client.first_message()))
    full = server_first.decode().split(",")[0]
    final = client.final_message(server_first).replace(full.encode(), nonce_field("cnonce", full[2:]).encode(), 1)
    outcome = server.evaluate(final)
    assert isinstance(outcome, Failure) and outcome.failure_class == "nonce_mismatch"


def test_legacy_nonce_with_a_wrong_password_is_bad_credentials() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "guess", repeat_client_nonce=True)
    outcome = run_exchange(alice_server(), client)
    assert isinstance(outcome, Failure) and outcome.failure_class == "bad_credentials"


def test_legacy_client_final_replayed_on_a_new_exchange_is_refused() -> None:
    mechanism = ScramMechanism("SCRAM-SHA-256", store_with("alice", "pw", "SCRAM-SHA-256"))
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="fixed", repeat_client_nonce=True)
    first = mechanism.create(CONTEXT)
    final = client.final_message(challenge(first.evaluate(client.first_message())))
    assert isinstance(first.evaluate(final), Done)
    replay = mechanism.create(CONTEXT)
    challenge(replay.evaluate(client.first_message()))  # a fresh server nonce
    outcome = replay.evaluate(final)
    assert isinstance(outcome, Failure) and outcome.failure_class == "nonce_mismatch"


def test_unknown_user_with_the_legacy_nonce_fails_like_a_wrong_password() -> None:
    mechanism = ScramMechanism("SCRAM-SHA-256", store_with("alice", "pw", "SCRAM-SHA-256"))
    ghost = run_exchange(mechanism.create(CONTEXT), ScramClient("SCRAM-SHA-256", "mallory", "pw",
                                                                 repeat_client_nonce=True))
    wrong = run_exchange(mechanism.create(CONTEXT), ScramClient("SCRAM-SHA-256", "alice", "guess",
                                                                 repeat_client_nonce=True))
    assert isinstance(ghost, Failure) and isinstance(wrong, Failure)
    assert (ghost.client_message, ghost.failure_class) == (wrong.client_message, wrong.failure_class)
