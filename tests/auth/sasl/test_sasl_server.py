"""The SASL server state machine, driven with byte frames (no sockets)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from auth.principal import KafkaPrincipal
from auth.principal_builder import DefaultPrincipalBuilder
from auth.sasl.mechanism import Challenge, Done, Failure, Outcome, SaslContext
from auth.sasl.server import Authenticated, Refused, Respond, SaslServerAuthenticator, SaslServerConfig, SaslState
from protocol.api_keys import ApiKey
from protocol.header import decode_response_header, response_header_version
from protocol.kafka_errors import KafkaError
from protocol.registry import api
from tests.wire_client import request_frame


@dataclass
class ScriptedServer:
    """A mechanism that expects tokens in order and answers from a script."""

    script: list[tuple[bytes, Outcome]]
    seen: list[bytes] = field(default_factory=list)

    def evaluate(self, token: bytes) -> Outcome:
        self.seen.append(token)
        expected, outcome = self.script.pop(0)
        return outcome if token == expected else Failure("unexpected token")


@dataclass
class ScriptedMechanism:
    name: str
    make: Any

    def create(self, context: SaslContext) -> ScriptedServer:
        server: ScriptedServer = self.make()
        return server


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _user(name: str, expiry: int | None = None) -> ScriptedMechanism:
    return ScriptedMechanism("SCRAM-SHA-512", lambda: ScriptedServer([
        (b"client-first", Challenge(b"server-first")),
        (b"client-final", Done(name, final=b"server-final", credential_expiry_ms=expiry)),
    ]))


def _machine(*mechanisms: ScriptedMechanism, tls: bool = True, reauth_ms: int = 0,
             clock: Clock | None = None) -> SaslServerAuthenticator:
    config = SaslServerConfig({m.name: m for m in mechanisms}, DefaultPrincipalBuilder(),
                              connections_max_reauth_ms=reauth_ms)
    context = SaslContext("SASL_SSL", "127.0.0.1", tls, now_ms=clock or Clock())
    return SaslServerAuthenticator(config, context, lambda _, cid, v: (struct.pack(">ii", 4, cid), True))


def _payload(frame: bytes) -> memoryview:
    return memoryview(frame)[4:]


def _handshake(version: int, mechanism: str, cid: int = 1) -> memoryview:
    return _payload(request_frame(ApiKey.SASL_HANDSHAKE, version, cid, {"mechanism": mechanism}))


def _authenticate(token: bytes, cid: int = 2, version: int = 2) -> memoryview:
    return _payload(request_frame(ApiKey.SASL_AUTHENTICATE, version, cid, {"auth_bytes": token}))


def _api_versions(version: int = 0, cid: int = 1) -> memoryview:
    body = {"client_software_name": "c", "client_software_version": "1"} if version >= 3 else {}
    return _payload(request_frame(ApiKey.API_VERSIONS, version, cid, body))


def _decode(frame: bytes, key: int, version: int) -> tuple[int, dict[str, Any]]:
    schema = api(key)
    assert schema is not None
    payload = memoryview(frame)[4:]
    cid, offset = decode_response_header(payload, response_header_version(key, schema.is_flexible(version)))
    return cid, schema.response_codec(version).decode(payload[offset:])


def test_full_exchange_with_api_versions_first_authenticates_the_principal() -> None:
    m = _machine(_user("alice"))
    api_versions = _payload(request_frame(ApiKey.API_VERSIONS, 3, 9, {"client_software_name": "c",
                                                                      "client_software_version": "1"}))
    assert isinstance(m.on_frame(api_versions), Respond)
    assert m.state is SaslState.HANDSHAKE_REQUEST
    step = m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    assert isinstance(step, Respond)
    assert _decode(step.frame, ApiKey.SASL_HANDSHAKE, 1)[1] == {"error_code": 0, "mechanisms": ["SCRAM-SHA-512"]}
    step = m.on_frame(_authenticate(b"client-first"))
    assert isinstance(step, Respond)
    assert _decode(step.frame, ApiKey.SASL_AUTHENTICATE, 2)[1]["auth_bytes"] == b"server-first"
    step = m.on_frame(_authenticate(b"client-final", cid=3))
    assert isinstance(step, Authenticated)
    assert step.principal == KafkaPrincipal("User", "alice")
    cid, body = _decode(step.frame, ApiKey.SASL_AUTHENTICATE, 2)
    assert (cid, body["error_code"], body["auth_bytes"], body["session_lifetime_ms"]) == (3, 0, b"server-final", 0)
    assert m.state is SaslState.COMPLETE


def test_handshake_v0_switches_to_raw_tokens() -> None:
    m = _machine(_user("bob"))
    assert isinstance(m.on_frame(_handshake(0, "SCRAM-SHA-512")), Respond)
    step = m.on_frame(memoryview(b"client-first"))
    assert isinstance(step, Respond) and step.frame == struct.pack(">i", 12) + b"server-first"
    step = m.on_frame(memoryview(b"client-final"))
    assert isinstance(step, Authenticated) and step.frame == struct.pack(">i", 12) + b"server-final"


def test_unknown_mechanism_gets_the_enabled_list_and_closes() -> None:
    m = _machine(_user("x"))
    step = m.on_frame(_handshake(1, "DIGEST-MD5"))
    assert isinstance(step, Refused) and step.frame is not None
    assert _decode(step.frame, ApiKey.SASL_HANDSHAKE, 1)[1] == {
        "error_code": KafkaError.UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["SCRAM-SHA-512"]}
    assert m.state is SaslState.FAILED


def test_plain_is_not_offered_without_tls_unless_allowed() -> None:
    plain = ScriptedMechanism("PLAIN", lambda: ScriptedServer([]))
    m = _machine(plain, _user("x"), tls=False)
    assert m.enabled_mechanisms == ["SCRAM-SHA-512"]
    assert isinstance(m.on_frame(_handshake(1, "PLAIN")), Refused)
    assert _machine(plain, tls=True).enabled_mechanisms == ["PLAIN"]


def test_authenticate_before_handshake_closes_without_answer() -> None:
    # As Kafka 4.4 does (tests/auth_vs_kafka): before a handshake it is any other request, unanswered.
    for first in ([], [_api_versions()]):
        m = _machine(_user("x"))
        for frame in first:
            assert isinstance(m.on_frame(frame), Respond)
        step = m.on_frame(_authenticate(b"client-first"))
        assert isinstance(step, Refused) and step.frame is None and m.state is SaslState.FAILED


def test_any_other_request_before_authentication_closes_without_answer() -> None:
    m = _machine(_user("x"))
    produce = _payload(request_frame(ApiKey.PRODUCE, 9, 1, {"transactional_id": None, "acks": 1,
                                                           "timeout_ms": 1, "topic_data": []}))
    step = m.on_frame(produce)
    assert isinstance(step, Refused) and step.frame is None
    assert m.state is SaslState.FAILED


def test_second_api_versions_is_refused() -> None:
    m = _machine(_user("x"))
    frame = _payload(request_frame(ApiKey.API_VERSIONS, 0, 1, {}))
    assert isinstance(m.on_frame(frame), Respond)
    assert isinstance(m.on_frame(frame), Refused)


def test_mechanism_failure_sends_authentication_failed_with_a_generic_message() -> None:
    m = _machine(ScriptedMechanism("SCRAM-SHA-512", lambda: ScriptedServer([
        (b"client-first", Failure("user mallory unknown"))])))
    m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    step = m.on_frame(_authenticate(b"client-first"))
    assert isinstance(step, Refused) and step.authentication_failure and step.frame is not None
    body = _decode(step.frame, ApiKey.SASL_AUTHENTICATE, 2)[1]
    assert body["error_code"] == KafkaError.SASL_AUTHENTICATION_FAILED
    assert "mallory" not in (body["error_message"] or "")


def test_garbage_frame_closes() -> None:
    m = _machine(_user("x"))
    assert isinstance(m.on_frame(memoryview(b"\x16\x03")), Refused)


def test_session_lifetime_is_min_of_reauth_and_credential_expiry() -> None:
    clock = Clock()
    m = _machine(_user("alice", expiry=clock.now + 5_000), reauth_ms=60_000, clock=clock)
    m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    m.on_frame(_authenticate(b"client-first"))
    step = m.on_frame(_authenticate(b"client-final"))
    assert isinstance(step, Authenticated)
    assert _decode(step.frame, ApiKey.SASL_AUTHENTICATE, 2)[1]["session_lifetime_ms"] == 5_000
    assert not m.session_expired(clock.now + 4_999)
    assert m.session_expired(clock.now + 5_000)


def _authenticated(clock: Clock, *mechs: ScriptedMechanism) -> SaslServerAuthenticator:
    m = _machine(*mechs, reauth_ms=10_000, clock=clock)
    m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    m.on_frame(_authenticate(b"client-first"))
    assert isinstance(m.on_frame(_authenticate(b"client-final")), Authenticated)
    return m


def test_reauthentication_as_the_same_principal_extends_the_session() -> None:
    clock = Clock()
    m = _authenticated(clock, _user("alice"))
    clock.now += 9_000
    assert isinstance(m.on_frame(_handshake(1, "SCRAM-SHA-512")), Respond)
    m.on_frame(_authenticate(b"client-first"))
    step = m.on_frame(_authenticate(b"client-final"))
    assert isinstance(step, Authenticated) and step.reauthenticated
    assert step.session_expiry_ms == clock.now + 10_000


def test_reauthentication_as_another_principal_is_refused() -> None:
    clock = Clock()
    names = iter(["alice", "mallory"])
    mech = ScriptedMechanism("SCRAM-SHA-512", lambda: ScriptedServer([
        (b"client-first", Challenge(b"s")), (b"client-final", Done(next(names)))]))
    m = _authenticated(clock, mech)
    m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    m.on_frame(_authenticate(b"client-first"))
    step = m.on_frame(_authenticate(b"client-final", cid=7))
    assert isinstance(step, Refused) and step.authentication_failure
    assert step.failure_class == "reauthentication_refused"
    assert m.principal == KafkaPrincipal("User", "alice")
    assert m.state is SaslState.FAILED
    # Kafka's answer (ReauthInfo.ensurePrincipalUnchanged): error 58 with its message, then the close.
    assert step.frame is not None
    cid, body = _decode(step.frame, ApiKey.SASL_AUTHENTICATE, 2)
    assert cid == 7
    assert body["error_code"] == KafkaError.SASL_AUTHENTICATION_FAILED
    assert body["error_message"] == "Cannot change principals during re-authentication from User.alice: User.mallory"
    assert body["auth_bytes"] == b"" and body["session_lifetime_ms"] == 0


def test_reauthentication_with_another_mechanism_is_refused_at_the_next_frame() -> None:
    clock = Clock()
    other = ScriptedMechanism("OAUTHBEARER", lambda: ScriptedServer([]))
    m = _authenticated(clock, _user("alice"), other)
    # Kafka 4.4 answers the handshake without an error, then closes on the next frame without an answer.
    step = m.on_frame(_handshake(1, "OAUTHBEARER"))
    assert isinstance(step, Respond)
    assert _decode(step.frame, ApiKey.SASL_HANDSHAKE, 1)[1]["error_code"] == KafkaError.NONE
    assert m.state is SaslState.REAUTH_BAD_MECHANISM
    assert m.session_expired(clock.now)  # no request is served meanwhile
    refused = m.on_frame(_authenticate(b"token"))
    assert isinstance(refused, Refused) and refused.frame is None and refused.authentication_failure
    assert refused.failure_class == "reauthentication_refused"
    assert m.state is SaslState.FAILED


def test_reauthentication_with_a_mechanism_not_enabled_is_refused_at_once() -> None:
    m = _authenticated(Clock(), _user("alice"))
    step = m.on_frame(_handshake(1, "GSSAPI"))
    assert isinstance(step, Refused) and step.frame is not None
    assert _decode(step.frame, ApiKey.SASL_HANDSHAKE, 1)[1]["error_code"] == KafkaError.UNSUPPORTED_SASL_MECHANISM


def test_a_mechanisms_failure_class_reaches_the_close_step() -> None:
    mech = ScriptedMechanism("SCRAM-SHA-256", lambda: ScriptedServer([
        (b"client-first", Challenge(b"s")),
        (b"client-final", Failure("nonce differs", "generic", failure_class="nonce_mismatch"))]))
    m = _machine(mech)
    m.on_frame(_handshake(1, "SCRAM-SHA-256"))
    m.on_frame(_authenticate(b"client-first"))
    step = m.on_frame(_authenticate(b"client-final"))
    assert isinstance(step, Refused) and step.failure_class == "nonce_mismatch"
    assert step.frame is not None
    assert _decode(step.frame, ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"] == KafkaError.SASL_AUTHENTICATION_FAILED


def test_a_legacy_nonce_login_is_reported_in_the_authenticated_step() -> None:
    mech = ScriptedMechanism("SCRAM-SHA-256", lambda: ScriptedServer([
        (b"client-first", Challenge(b"s")), (b"client-final", Done("alice", legacy_nonce=True))]))
    m = _machine(mech)
    m.on_frame(_handshake(1, "SCRAM-SHA-256"))
    m.on_frame(_authenticate(b"client-first"))
    step = m.on_frame(_authenticate(b"client-final"))
    assert isinstance(step, Authenticated) and step.legacy_nonce


def test_an_api_versions_answered_with_an_error_leaves_room_for_another() -> None:
    # KIP-511: a client told UNSUPPORTED_VERSION (or INVALID_REQUEST) asks again on the same connection,
    # and Kafka's SaslServerAuthenticator still waits for an ApiVersions or a handshake.
    answers = iter([(struct.pack(">ii", 4, 1), False), (struct.pack(">ii", 4, 2), True)])
    mechanism = _user("x")
    config = SaslServerConfig({mechanism.name: mechanism}, DefaultPrincipalBuilder())
    m = SaslServerAuthenticator(config, SaslContext("SASL_SSL", "127.0.0.1", True), lambda _, cid, v: next(answers))
    frame = _payload(request_frame(ApiKey.API_VERSIONS, 0, 1, {}))
    assert isinstance(m.on_frame(frame), Respond)
    assert m.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
    assert isinstance(m.on_frame(frame), Respond)
    assert m.state is SaslState.HANDSHAKE_REQUEST
    assert isinstance(m.on_frame(frame), Refused)


# --- measured against Kafka 4.4 on the raw wire (tests/auth_vs_kafka) ---------------------------------------------

def test_challenge_and_success_carry_an_empty_error_message() -> None:
    m = _machine(_user("x"))
    m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    for version in (0, 1, 2):  # v0 is not flexible either: "" and null differ on the wire
        challenge = _machine(_user("x"))
        challenge.on_frame(_handshake(1, "SCRAM-SHA-512"))
        step = challenge.on_frame(_authenticate(b"client-first", version=version))
        assert isinstance(step, Respond)
        assert _decode(step.frame, ApiKey.SASL_AUTHENTICATE, version)[1]["error_message"] == ""
    m.on_frame(_authenticate(b"client-first"))
    done = m.on_frame(_authenticate(b"client-final", cid=3))
    assert isinstance(done, Authenticated)
    assert _decode(done.frame, ApiKey.SASL_AUTHENTICATE, 2)[1]["error_message"] == ""


def test_api_versions_out_of_turn_before_the_handshake_closes_without_answer() -> None:
    m = _machine(_user("x"))
    assert isinstance(m.on_frame(_api_versions()), Respond)
    step = m.on_frame(_api_versions(cid=2))
    assert isinstance(step, Refused) and step.frame is None and m.state is SaslState.FAILED


def test_api_versions_or_handshake_awaiting_authenticate_is_answered_illegal_state_then_closed() -> None:
    cases = [([_api_versions(), _handshake(1, "SCRAM-SHA-512")], _api_versions(3, cid=3), ApiKey.API_VERSIONS, 3),
             ([_handshake(1, "SCRAM-SHA-512")], _handshake(1, "SCRAM-SHA-512", cid=2), ApiKey.SASL_HANDSHAKE, 1),
             ([_handshake(1, "SCRAM-SHA-512"), _authenticate(b"client-first")], _handshake(1, "SCRAM-SHA-512", cid=3),
              ApiKey.SASL_HANDSHAKE, 1)]
    for before, unexpected, key, version in cases:
        m = _machine(_user("x"))
        for frame in before:
            assert isinstance(m.on_frame(frame), Respond)
        step = m.on_frame(unexpected)
        assert isinstance(step, Refused) and step.frame is not None and m.state is SaslState.FAILED
        answer = _decode(step.frame, key, version)[1]
        assert answer["error_code"] == KafkaError.ILLEGAL_SASL_STATE
        assert answer.get("mechanisms", []) == [] and answer.get("api_keys", []) == []


def test_sasl_requests_after_a_login_without_expiry_are_not_the_machines() -> None:
    clock = Clock()
    m = _machine(_user("x"), clock=clock)  # connections.max.reauth.ms unset, no credential expiry
    m.on_frame(_handshake(1, "SCRAM-SHA-512"))
    m.on_frame(_authenticate(b"client-first"))
    assert isinstance(m.on_frame(_authenticate(b"client-final", cid=3)), Authenticated)
    assert not m.takes_after_login(ApiKey.SASL_HANDSHAKE)
    assert not m.takes_after_login(ApiKey.SASL_AUTHENTICATE)
    expiring = _machine(_user("x"), reauth_ms=60_000, clock=clock)
    expiring.on_frame(_handshake(1, "SCRAM-SHA-512"))
    expiring.on_frame(_authenticate(b"client-first"))
    assert isinstance(expiring.on_frame(_authenticate(b"client-final", cid=3)), Authenticated)
    assert expiring.takes_after_login(ApiKey.SASL_HANDSHAKE)  # KIP-368 starts with a handshake
    assert not expiring.takes_after_login(ApiKey.SASL_AUTHENTICATE)
    assert isinstance(expiring.on_frame(_handshake(1, "SCRAM-SHA-512", cid=4)), Respond)
    assert expiring.takes_after_login(ApiKey.SASL_AUTHENTICATE)  # a re-authentication in progress


def test_no_reauthentication_begins_within_a_second_of_the_last_ones_start() -> None:
    clock = Clock()
    m = _authenticated(clock, _user("alice"))  # connections.max.reauth.ms 10 s
    assert m.takes_after_login(ApiKey.SASL_HANDSHAKE)  # the first may begin at once after the login
    assert isinstance(m.on_frame(_handshake(1, "SCRAM-SHA-512")), Respond)
    m.on_frame(_authenticate(b"client-first"))
    clock.now += 400
    assert isinstance(m.on_frame(_authenticate(b"client-final")), Authenticated)
    clock.now += 599  # 999 ms after the re-authentication began: Kafka's request handler answers it instead
    assert not m.takes_after_login(ApiKey.SASL_HANDSHAKE)
    clock.now += 1
    assert m.takes_after_login(ApiKey.SASL_HANDSHAKE)
    clock.now -= 60_000  # a wall clock set back does not hold re-authentication off for a minute
    assert m.takes_after_login(ApiKey.SASL_HANDSHAKE)
