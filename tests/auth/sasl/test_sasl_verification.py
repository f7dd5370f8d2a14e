"""The SASL state machine's off-loop verification step, driven without threads; no address is ever refused."""

from __future__ import annotations

import struct

from auth.credentials import PlainCredential
from auth.principal import KafkaPrincipal
from auth.principal_builder import DefaultPrincipalBuilder
from auth.sasl.mechanism import Challenge, Done, HashClaim, SaslContext, Verify
from auth.sasl.plain import INVALID_CREDENTIALS_MESSAGE, PlainMechanism, plain_credential
from auth.sasl.server import (
    Authenticated,
    Refused,
    Respond,
    SaslServerAuthenticator,
    SaslServerConfig,
    SaslState,
    Verifying,
)
from auth.sasl.verified_passwords import VerifiedPasswordCache
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from tests.auth.sasl.test_sasl_server import ScriptedMechanism, ScriptedServer, _authenticate, _decode, _handshake


class Store:
    def __init__(self, users: dict[str, PlainCredential]) -> None:
        self.users = users

    def scram_credential(self, user: str, mechanism: str) -> None:
        return None

    def plain_credential(self, user: str) -> PlainCredential | None:
        return self.users.get(user)


def _plain(cache: VerifiedPasswordCache | None = None) -> PlainMechanism:
    return PlainMechanism(Store({"alice": plain_credential("s3cret", iterations=1000)}), cache)


def _machine(*mechanisms: object) -> SaslServerAuthenticator:
    config = SaslServerConfig({m.name: m for m in mechanisms},  # type: ignore[attr-defined]
                              DefaultPrincipalBuilder())
    return SaslServerAuthenticator(config, SaslContext("SASL_SSL", "192.0.2.7", True),
                                   lambda _, cid, v: (struct.pack(">ii", 4, cid), True))


def test_plain_asks_for_verification_and_answers_once_the_result_is_fed_back() -> None:
    m = _machine(_plain())
    m.on_frame(_handshake(1, "PLAIN"))
    step = m.on_frame(_authenticate(b"\0alice\0s3cret", cid=7))
    assert isinstance(step, Verifying)
    assert m.state is SaslState.AUTHENTICATE and m.principal is None
    done = m.on_verified(step.job())  # the gateway runs the job on a worker thread
    assert isinstance(done, Authenticated) and done.principal == KafkaPrincipal("User", "alice")
    cid, body = _decode(done.frame, ApiKey.SASL_AUTHENTICATE, 2)
    assert (cid, body["error_code"]) == (7, 0)  # the answer belongs to the request that carried the token


def test_a_wrong_password_fails_after_verification_with_the_failure_frame() -> None:
    m = _machine(_plain())
    m.on_frame(_handshake(1, "PLAIN"))
    step = m.on_frame(_authenticate(b"\0alice\0wrong", cid=4))
    assert isinstance(step, Verifying)
    closed = m.on_verified(step.job())
    assert isinstance(closed, Refused) and closed.failure_class == "bad_credentials" and closed.frame is not None
    cid, body = _decode(closed.frame, ApiKey.SASL_AUTHENTICATE, 2)
    assert (cid, body["error_code"]) == (4, KafkaError.SASL_AUTHENTICATION_FAILED)
    assert m.state is SaslState.FAILED


def test_handshake_v0_raw_tokens_also_verify_off_the_loop() -> None:
    m = _machine(_plain())
    m.on_frame(_handshake(0, "PLAIN"))
    step = m.on_frame(memoryview(b"\0alice\0s3cret"))
    assert isinstance(step, Verifying)
    done = m.on_verified(step.job())
    assert isinstance(done, Authenticated) and done.frame == struct.pack(">i", 0)


def test_a_frame_arriving_while_verification_is_pending_fails_the_exchange() -> None:
    m = _machine(_plain())
    m.on_frame(_handshake(1, "PLAIN"))
    assert isinstance(m.on_frame(_authenticate(b"\0alice\0s3cret")), Verifying)
    assert isinstance(m.on_frame(_authenticate(b"\0alice\0s3cret", cid=3)), Refused)
    assert m.state is SaslState.FAILED


def test_a_result_without_a_pending_verification_fails() -> None:
    m = _machine(_plain())
    m.on_frame(_handshake(1, "PLAIN"))
    assert isinstance(m.on_verified(b"x" * 64), Refused)


def test_a_refused_verification_fails_closed_with_its_class() -> None:
    m = _machine(_plain())
    m.on_frame(_handshake(1, "PLAIN"))
    assert isinstance(m.on_frame(_authenticate(b"\0alice\0s3cret", cid=5)), Verifying)
    closed = m.on_verification_refused("queue full", "overloaded")
    assert isinstance(closed, Refused) and closed.failure_class == "overloaded" and closed.authentication_failure
    assert closed.frame is not None
    assert _decode(closed.frame, ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"] == KafkaError.SASL_AUTHENTICATION_FAILED
    assert m.principal is None


def test_a_cached_login_needs_no_verification_step() -> None:
    plain = _plain()  # one mechanism factory per listener: its cache outlives connections
    first = _machine(plain)
    first.on_frame(_handshake(1, "PLAIN"))
    step = first.on_frame(_authenticate(b"\0alice\0s3cret"))
    assert isinstance(step, Verifying) and isinstance(first.on_verified(step.job()), Authenticated)
    second = _machine(plain)  # the client reconnects
    second.on_frame(_handshake(1, "PLAIN"))
    assert isinstance(second.on_frame(_authenticate(b"\0alice\0s3cret")), Authenticated)


def _fail_plain(plain: PlainMechanism, password: bytes) -> Refused:
    m = _machine(plain)
    m.on_frame(_handshake(1, "PLAIN"))
    step = m.on_frame(_authenticate(b"\0bob\0" + password))
    closed = m.on_verified(step.job()) if isinstance(step, Verifying) else step
    assert isinstance(closed, Refused) and closed.failure_class == "bad_credentials"
    return closed


def test_no_number_of_failures_from_an_address_refuses_another_users_right_password() -> None:
    plain = _plain()
    for attempt in range(30):  # bob guesses from 192.0.2.7, as a stale client would retry
        _fail_plain(plain, f"guess-{attempt}".encode())
    m = _machine(plain)
    m.on_frame(_handshake(1, "PLAIN"))
    step = m.on_frame(_authenticate(b"\0alice\0s3cret"))
    assert isinstance(step, Verifying)  # checked, not refused
    assert isinstance(m.on_verified(step.job()), Authenticated)


def test_cheap_mechanisms_see_every_token_whatever_failed_before() -> None:
    failing = ScriptedMechanism("SCRAM-SHA-512", lambda: ScriptedServer([(b"client-first", Challenge(b"x"))]))
    for _ in range(30):
        m = _machine(failing)
        m.on_frame(_handshake(1, "SCRAM-SHA-512"))
        assert isinstance(m.on_frame(_authenticate(b"client-first")), Respond)
    m = _machine(_user_done())
    m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    assert isinstance(m.on_frame(_authenticate(b"client-first")), Authenticated)


def _claim(plain: PlainMechanism, token: bytes) -> HashClaim:
    m = _machine(plain)
    m.on_frame(_handshake(1, "PLAIN"))
    step = m.on_frame(_authenticate(token))
    assert isinstance(step, Verifying) and step.claim is not None
    return step.claim


def test_a_plain_verification_says_whom_the_hash_is_for_and_which_hash_it_is() -> None:
    plain = _plain()
    alice = _claim(plain, b"\0alice\0s3cret")
    assert (alice.source, alice.user, alice.known) == ("192.0.2.7", "alice", True)
    mallory = _claim(plain, b"\0mallory\0guess")
    assert (mallory.source, mallory.user, mallory.known) == ("192.0.2.7", "mallory", False)
    assert alice.key and alice.key == _claim(plain, b"\0alice\0s3cret").key  # the same hash: shareable
    assert alice.key != _claim(plain, b"\0alice\0other").key
    assert b"s3cret" not in alice.key  # a keyed MAC, never the password


def test_a_budget_refusal_fails_closed_with_its_class_and_the_claimed_user() -> None:
    m = _machine(_plain())
    m.on_frame(_handshake(1, "PLAIN"))
    assert isinstance(m.on_frame(_authenticate(b"\0mallory\0guess", cid=6)), Verifying)
    closed = m.on_verification_refused("over budget", "throttled")
    assert isinstance(closed, Refused) and closed.failure_class == "throttled" and closed.authentication_failure
    assert closed.frame is not None
    cid, body = _decode(closed.frame, ApiKey.SASL_AUTHENTICATE, 2)
    assert (cid, body["error_code"]) == (6, KafkaError.SASL_AUTHENTICATION_FAILED)
    # Word for word what a hashed failure says: an unhashed answer must not read differently.
    assert body["error_message"] == INVALID_CREDENTIALS_MESSAGE
    assert m.attempted_user == "mallory"  # still audited with the claimed name


def _user_done() -> ScriptedMechanism:
    return ScriptedMechanism("SCRAM-SHA-512", lambda: ScriptedServer([(b"client-first", Done("bob"))]))


def test_a_verify_step_may_be_followed_by_a_challenge() -> None:
    """Nothing limits Verify to PLAIN: a multi-step mechanism may verify, then challenge."""
    server = ScriptedServer([(b"t1", Verify(lambda: b"r", lambda r: Challenge(b"c-" + r)))])
    m = _machine(ScriptedMechanism("SCRAM-SHA-512", lambda: server))
    m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    step = m.on_frame(_authenticate(b"t1", cid=8))
    assert isinstance(step, Verifying)
    answer = m.on_verified(step.job())
    assert isinstance(answer, Respond)
    assert _decode(answer.frame, ApiKey.SASL_AUTHENTICATE, 2)[1]["auth_bytes"] == b"c-r"
