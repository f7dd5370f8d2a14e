"""The Kafka SASL server state machine (Kafka's SaslServerAuthenticator), sans-IO.

Feed it each frame payload a connection receives before authentication completes (and
SaslHandshake/SaslAuthenticate frames afterwards, for KIP-368 re-authentication); it
returns a Step telling the gateway what to send, whether the client is now authenticated,
or that the connection must close.  States follow Kafka:

    INITIAL_REQUEST → HANDSHAKE_OR_VERSIONS_REQUEST → HANDSHAKE_REQUEST → AUTHENTICATE
        → COMPLETE | FAILED;   COMPLETE → REAUTH_PROCESS_HANDSHAKE → AUTHENTICATE → COMPLETE
                                                   ↘ REAUTH_BAD_MECHANISM
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from auth.principal import KafkaPrincipal, PrincipalBuilder, SaslAuthContext
from auth.sasl.mechanism import (
    Challenge,
    Done,
    Failure,
    HashClaim,
    MechanismFactory,
    Outcome,
    SaslContext,
    SaslMechanismServer,
    Verify,
)
from auth.sasl.reauthentication import session_lifetime_ms
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.header import decode_request_header, peek_api
from protocol.kafka_errors import KafkaError
from protocol.messages import response_frame

_SIZE = struct.Struct(">i")
MIN_REAUTH_INTERVAL_MS = 1000  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


class SaslState(enum.Enum):
    INITIAL_REQUEST = "INITIAL_REQUEST"
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"


@dataclass(slots=True, frozen=True)
class Respond:
    """Send ``frame`` (a complete frame: size prefix included) and keep going."""

    frame: bytes


@dataclass(slots=True, frozen=True)
class Authenticated:
    """Send ``frame``; the connection now acts as ``principal`` until ``session_expiry_ms``."""

    frame: bytes
    principal: KafkaPrincipal
    mechanism: str
    session_expiry_ms: int | None  # wall clock; None = no re-authentication required
    reauthenticated: bool = False
    legacy_nonce: bool = False  # SCRAM's nonce came in librdkafka's pre-2.6.1 form (Done.legacy_nonce)


@dataclass(slots=True, frozen=True)
class Refused:
    """The authentication is refused: send ``frame`` if any (after the failure delay), then close;
    ``reason`` is for logs. (A step of this machine; the session turns it into its own actions.)"""

    reason: str
    frame: bytes | None = None
    authentication_failure: bool = False
    # A short, stable class for audit and metrics: bad_credentials, nonce_mismatch, unsupported_mechanism,
    # illegal_state, reauthentication_refused, malformed, throttled, overloaded.
    failure_class: str = "illegal_state"
    quiet: bool = False  # logged at debug (a repeat, or an answer without a hash under a flood); audited anyway


@dataclass(slots=True, frozen=True)
class Verifying:
    """Run ``job`` off the event loop, then feed its result to ``on_verified`` (or call
    ``on_verification_refused`` if it cannot run); the connection reads no frames meanwhile.
    ``claim``: whom the hash is for, so the gateway can budget it (auth.hash_budget)."""

    job: Callable[[], bytes]
    claim: HashClaim | None = None


Step = Respond | Authenticated | Refused | Verifying
# What a mechanism's outcome becomes on the wire, for the request that carried its token.
_StepFor = Callable[[Challenge | Done | Failure], Step]


@dataclass(slots=True)
class SaslServerConfig:
    mechanisms: Mapping[str, MechanismFactory]  # enabled mechanisms, by name
    principal_builder: PrincipalBuilder
    connections_max_reauth_ms: int = 0
    # PLAIN sends the password in clear; Kafka allows it anywhere, ksgate only on TLS
    # unless the operator says otherwise (ksgate.sasl.plain.allow.insecure).
    allow_plain_without_tls: bool = False


def claimed_user(mechanism: str, first_token: bytes) -> str | None:
    """The user name in a PLAIN or SCRAM first message, unvalidated; None otherwise."""
    try:
        if mechanism == "PLAIN":
            parts = first_token.split(b"\x00")
            return parts[1].decode("utf-8")[:256] if len(parts) == 3 else None
        if mechanism.startswith("SCRAM-"):
            for part in first_token.split(b","):
                if part.startswith(b"n="):
                    return part[2:].decode("utf-8").replace("=2C", ",").replace("=3D", "=")[:256]
    except UnicodeDecodeError:
        return None
    return None


def principal_change_message(before: KafkaPrincipal, after: KafkaPrincipal) -> str:
    """Kafka's SaslAuthenticate error message (ReauthInfo.ensurePrincipalUnchanged), sent with error 58."""
    return (f"Cannot change principals during re-authentication from {before.principal_type}.{before.name}: "
            f"{after.principal_type}.{after.name}")


def _framed(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


class SaslServerAuthenticator:
    """One per connection on a SASL listener."""

    # Slots: every logged-in connection keeps its authenticator (KIP-368 re-authentication).
    __slots__ = ("_api_versions", "_attempted_user", "_bad_mechanism", "_config", "_context", "_kafka_headers",
                 "_mechanism_name", "_reauth_started_ms", "_server", "_verifying", "principal", "session_expiry_ms",
                 "state")

    def __init__(self, config: SaslServerConfig, context: SaslContext,
                 api_versions: Callable[[memoryview, int, int], tuple[bytes, bool]]) -> None:
        self._config = config
        self._context = context
        # (request, correlation id, version) -> the response frame, and whether it answered without an error
        self._api_versions = api_versions
        self.state = SaslState.INITIAL_REQUEST
        self._mechanism_name: str | None = None
        self._server: SaslMechanismServer | None = None
        self._kafka_headers = True  # False after SaslHandshake v0: raw tokens follow
        self._attempted_user: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.session_expiry_ms: int | None = None
        self._verifying: tuple[Verify, _StepFor] | None = None
        self._bad_mechanism: str | None = None  # what a re-authentication's handshake asked for instead
        self._reauth_started_ms: int | None = None  # when the last re-authentication began (KIP-368's 1 s spacing)

    @property
    def mechanism(self) -> str | None:
        return self._mechanism_name

    @property
    def enabled_mechanisms(self) -> list[str]:
        return [name for name in self._config.mechanisms
                if name != "PLAIN" or self._context.tls or self._config.allow_plain_without_tls]

    # --- entry points ------------------------------------------------------------------

    def on_frame(self, payload: memoryview) -> Step:
        """A frame received while not authenticated (or a re-authentication frame)."""
        if self._verifying is not None:  # the gateway must hold frames while a Verifying step runs
            return self._fail_state("frame received while a credential verification was pending")
        try:
            return self._dispatch(payload)
        except DecodeError as exc:
            self.state = SaslState.FAILED
            return Refused(f"unparsable frame during authentication: {exc}", failure_class="malformed")

    @property
    def takes_every_frame(self) -> bool:
        """After a re-authentication's handshake asked for another mechanism, every frame is this machine's (it
        closes the connection on it), as Kafka's authenticator takes every frame of a re-authentication."""
        return self.state is SaslState.REAUTH_BAD_MECHANISM

    def takes_after_login(self, api_key: int) -> bool:
        """Whether a SASL request after the login is this machine's: a re-authentication in progress, or a
        SaslHandshake starting one (KIP-368) on a session that expires.  Otherwise Kafka's request handler answers
        it ILLEGAL_SASL_STATE and keeps the connection (measured against Kafka 4.4: a SaslAuthenticate after the
        login, a SaslHandshake without connections.max.reauth.ms)."""
        if self.state is not SaslState.COMPLETE:
            return True
        if api_key != ApiKey.SASL_HANDSHAKE or self.session_expiry_ms is None:
            return False
        # Kafka begins no re-authentication within a second of the last one's start (KafkaChannel's
        # MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS): that handshake is answered ILLEGAL_SASL_STATE, the session kept.
        # A clock set back counts as a second passed.
        started = self._reauth_started_ms
        return started is None or not 0 <= self._context.now_ms() - started < MIN_REAUTH_INTERVAL_MS

    def session_expired(self, now_ms: int) -> bool:
        """Whether the session may serve no more requests: it expired, or a re-authentication asked for another
        mechanism (Kafka's authenticator takes every frame after that handshake, and closes on it)."""
        if self.state is SaslState.REAUTH_BAD_MECHANISM:
            return True
        return self.session_expiry_ms is not None and now_ms >= self.session_expiry_ms

    # --- state dispatch ----------------------------------------------------------------

    def _dispatch(self, payload: memoryview) -> Step:
        state = self.state
        if state is SaslState.REAUTH_BAD_MECHANISM:
            return self._changed_mechanism()
        if state is SaslState.AUTHENTICATE and not self._kafka_headers:
            return self._raw_token(bytes(payload))
        key, version, correlation_id = peek_api(payload)
        if state is SaslState.INITIAL_REQUEST:
            self.state = state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        if state is SaslState.COMPLETE:
            if key != ApiKey.SASL_HANDSHAKE:  # re-authentication must start with a handshake
                return self._illegal_authenticate(payload, version, correlation_id, state)
            self.state = state = SaslState.REAUTH_PROCESS_HANDSHAKE
            self._reauth_started_ms = self._context.now_ms()
        if key == ApiKey.API_VERSIONS:
            if state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
                return self._unexpected(ApiKey.API_VERSIONS, version, correlation_id,
                                        {"api_keys": [], "throttle_time_ms": 0}, state)
            frame, answered = self._api_versions(payload, correlation_id, version)
            if answered:  # after an error (an unsupported or invalid request) Kafka waits for another ApiVersions
                self.state = SaslState.HANDSHAKE_REQUEST
            return Respond(frame)
        if key == ApiKey.SASL_HANDSHAKE:
            if state not in (SaslState.HANDSHAKE_OR_VERSIONS_REQUEST, SaslState.HANDSHAKE_REQUEST,
                             SaslState.REAUTH_PROCESS_HANDSHAKE):
                return self._unexpected(ApiKey.SASL_HANDSHAKE, version, correlation_id, {"mechanisms": []}, state)
            return self._handshake(payload, version, correlation_id)
        if key == ApiKey.SASL_AUTHENTICATE:
            if state is not SaslState.AUTHENTICATE:
                return self._illegal_authenticate(payload, version, correlation_id, state)
            return self._authenticate(payload, version, correlation_id)
        self.state = SaslState.FAILED
        return Refused(f"api key {key} before authentication completed (state {state.value})")

    def _changed_mechanism(self) -> Refused:
        self.state = SaslState.FAILED
        return Refused(f"re-authentication changed mechanism {self._mechanism_name} → {self._bad_mechanism}",
                       authentication_failure=True, failure_class="reauthentication_refused")

    def _fail_state(self, reason: str) -> Refused:
        self.state = SaslState.FAILED
        return Refused(reason)

    def _unexpected(self, api_key: int, version: int, correlation_id: int, body: dict[str, Any],
                    state: SaslState) -> Refused:
        """An ApiVersions or SaslHandshake out of turn: closed, as on Kafka 4.4 (measured, tests/auth_vs_kafka),
        which answers it ILLEGAL_SASL_STATE first only while it awaits a SaslAuthenticate."""
        self.state = SaslState.FAILED
        reason = f"{ApiKey(api_key).name} in state {state.value}"
        if state is not SaslState.AUTHENTICATE:
            return Refused(reason)
        frame = self._response(api_key, version, correlation_id, {"error_code": KafkaError.ILLEGAL_SASL_STATE, **body})
        return Refused(reason, frame)

    # --- SaslHandshake -----------------------------------------------------------------

    def _handshake(self, payload: memoryview, version: int, correlation_id: int) -> Step:
        header, schema = decode_request_header(payload)
        body = schema.request_codec(version).decode(payload[header.size :])
        mechanism = body["mechanism"]
        enabled = self.enabled_mechanisms
        reauth = self.state is SaslState.REAUTH_PROCESS_HANDSHAKE
        if reauth and version == 0:
            self.state = SaslState.FAILED
            frame = self._response(ApiKey.SASL_HANDSHAKE, version, correlation_id,
                                   {"error_code": KafkaError.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled})
            return Refused("re-authentication with SaslHandshake v0", frame,
                         authentication_failure=True, failure_class="reauthentication_refused")
        if mechanism not in enabled:
            self.state = SaslState.FAILED
            frame = self._response(ApiKey.SASL_HANDSHAKE, version, correlation_id,
                                   {"error_code": KafkaError.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled})
            return Refused(f"mechanism {mechanism!r} is not enabled on this listener", frame,
                         authentication_failure=True, failure_class="unsupported_mechanism")
        if reauth and mechanism != self._mechanism_name:
            # As Kafka 4.4 (ReauthInfo.saslMechanismUnchanged, measured in tests/auth_vs_kafka): the handshake is
            # answered without an error, and the next frame, whatever it is, closes the connection unanswered.
            self.state = SaslState.REAUTH_BAD_MECHANISM
            self._bad_mechanism = mechanism
            return Respond(self._response(ApiKey.SASL_HANDSHAKE, version, correlation_id,
                                          {"error_code": KafkaError.NONE, "mechanisms": enabled}))
        self._mechanism_name = mechanism
        self._server = self._config.mechanisms[mechanism].create(self._context)
        self._kafka_headers = version >= 1
        self.state = SaslState.AUTHENTICATE
        return Respond(self._response(ApiKey.SASL_HANDSHAKE, version, correlation_id,
                                      {"error_code": KafkaError.NONE, "mechanisms": enabled}))

    # --- SaslAuthenticate --------------------------------------------------------------

    def _illegal_authenticate(self, payload: memoryview, version: int, correlation_id: int,
                              state: SaslState) -> Step:
        self.state = SaslState.FAILED
        if state in (SaslState.HANDSHAKE_OR_VERSIONS_REQUEST, SaslState.HANDSHAKE_REQUEST):
            # Before a handshake Kafka takes it for any other request (measured against Kafka 4.4): no answer.
            return Refused(f"SaslAuthenticate in state {state.value}")
        frame = self._response(ApiKey.SASL_AUTHENTICATE, version, correlation_id, {
            "error_code": KafkaError.ILLEGAL_SASL_STATE,
            "error_message": f"Unexpected SaslAuthenticate request in state {state.value}",
            "auth_bytes": b"", "session_lifetime_ms": 0})
        return Refused(f"SaslAuthenticate in state {state.value}", frame)

    def _authenticate(self, payload: memoryview, version: int, correlation_id: int) -> Step:
        header, schema = decode_request_header(payload)
        body = schema.request_codec(version).decode(payload[header.size :])

        def reply(error: int, message: str | None, data: bytes, lifetime: int = 0) -> bytes:
            return self._response(ApiKey.SASL_AUTHENTICATE, version, correlation_id, {
                "error_code": error, "error_message": message, "auth_bytes": data,
                "session_lifetime_ms": lifetime})

        def step_for(outcome: Challenge | Done | Failure) -> Step:
            if isinstance(outcome, Challenge):
                return Respond(reply(KafkaError.NONE, "", outcome.data))
            if isinstance(outcome, Failure):
                self.state = SaslState.FAILED
                answer = reply(KafkaError.SASL_AUTHENTICATION_FAILED, outcome.client_message, b"")
                return Refused(outcome.reason, answer, authentication_failure=True,
                               failure_class=outcome.failure_class, quiet=outcome.quiet)
            final = outcome.final
            # Kafka's answer without an error carries an empty message, not a null one (measured on Kafka 4.4).
            return self._complete(outcome, lambda lifetime: reply(KafkaError.NONE, "", final, lifetime),
                                  lambda message: reply(KafkaError.SASL_AUTHENTICATION_FAILED, message, b""))

        return self._settle(self._evaluate(bytes(body["auth_bytes"])), step_for)

    def _raw_token(self, token: bytes) -> Step:
        """SaslHandshake v0: tokens travel as bare length-prefixed frames."""

        def step_for(outcome: Challenge | Done | Failure) -> Step:
            if isinstance(outcome, Challenge):
                return Respond(_framed(outcome.data))
            if isinstance(outcome, Failure):
                self.state = SaslState.FAILED
                return Refused(outcome.reason, None, authentication_failure=True, failure_class=outcome.failure_class,
                             quiet=outcome.quiet)
            final = outcome.final
            # No refusal frame: re-authentication needs SaslHandshake v1+, so never reaches here.
            return self._complete(outcome, lambda _lifetime: _framed(final), lambda _message: None)

        return self._settle(self._evaluate(token), step_for)

    def _evaluate(self, token: bytes) -> Outcome:
        assert self._server is not None
        if self._attempted_user is None and self._mechanism_name is not None:
            self._attempted_user = claimed_user(self._mechanism_name, token)
        # No address is refused for its failures (one client's stale password would lock out every
        # user behind the same NAT): costly hashes are budgeted per address by the gateway instead.
        return self._server.evaluate(token)

    # --- costly verification, run by the gateway off its event loop ----------------------

    def _settle(self, outcome: Outcome, step_for: _StepFor) -> Step:
        if isinstance(outcome, Verify):
            self._verifying = (outcome, step_for)
            return Verifying(outcome.job, outcome.claim)
        return step_for(outcome)

    def on_verified(self, result: bytes) -> Step:
        """The result of the job of the last Verifying step."""
        pending, self._verifying = self._verifying, None
        if pending is None:
            return self._fail_state("verification result without a pending verification")
        verify, step_for = pending
        return self._settle(verify.resume(result), step_for)

    def on_verification_refused(self, reason: str, failure_class: str, quiet: bool = False) -> Step:
        """The job of the last Verifying step could not run (e.g. the pool is full): fail closed."""
        pending, self._verifying = self._verifying, None
        if pending is None:
            return self._fail_state("verification refused without a pending verification")
        verify, step_for = pending
        message = verify.refusal_message or self._generic_failure_message()
        return step_for(Failure(reason, message, failure_class=failure_class, quiet=quiet))

    def _generic_failure_message(self) -> str:
        """Kafka's text for a mechanism failure that carries no message of its own."""
        return f"Authentication failed during authentication due to invalid credentials with SASL mechanism " \
               f"{self._mechanism_name}"

    @property
    def attempted_user(self) -> str | None:
        return self._attempted_user

    def _complete(self, done: Done, frame_for: Callable[[int], bytes],
                  refusal_for: Callable[[str], bytes | None]) -> Step:
        assert self._mechanism_name is not None
        principal = self._config.principal_builder.build(SaslAuthContext(
            listener=self._context.listener, client_host=self._context.client_host,
            mechanism=self._mechanism_name, authorization_id=done.authorization_id,
            token_authenticated=done.token_authenticated, tls=self._context.tls))
        reauthenticated = self.principal is not None
        if reauthenticated and principal != self.principal:
            assert self.principal is not None
            self.state = SaslState.FAILED
            return Refused(f"re-authentication as {principal} on a connection of {self.principal}",
                         refusal_for(principal_change_message(self.principal, principal)),
                         authentication_failure=True, failure_class="reauthentication_refused")
        now = self._context.now_ms()
        lifetime = session_lifetime_ms(self._config.connections_max_reauth_ms, done.credential_expiry_ms, now)
        self.principal = principal
        self.session_expiry_ms = now + lifetime if lifetime else None
        self.state = SaslState.COMPLETE
        self._server = None
        return Authenticated(frame_for(lifetime), principal, self._mechanism_name, self.session_expiry_ms,
                             reauthenticated, done.legacy_nonce)

    # --- encoding ----------------------------------------------------------------------

    def _response(self, api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
        return response_frame(api_key, version, correlation_id, body)
