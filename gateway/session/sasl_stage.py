"""The authenticate stage: turns a connection into a principal before anything is relayed.

PLAINTEXT and SSL connections get their principal at connect time (ANONYMOUS, or the
client certificate's mapped subject); SASL connections run the SASL state machine on
every frame until it completes, and again for KIP-368 re-authentication.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from auth.principal import KafkaPrincipal, PlaintextAuthContext, PrincipalBuilder, SslAuthContext
from auth.sasl.first_frame import diagnose_non_kafka
from auth.sasl.mechanism import SaslContext
from auth.sasl.server import (
    Authenticated,
    Close,
    Respond,
    SaslServerAuthenticator,
    SaslServerConfig,
    Step,
    Verifying,
)
from gateway.session.api_versions import api_versions_response
from protocol.framing import Frame

if TYPE_CHECKING:
    from auth.tls import TlsContextProvider
    from gateway.transport.client_connection import ClientConnection


@dataclass(slots=True)
class ListenerSecurity:
    """What one listener needs to authenticate its connections."""

    principal_builder: PrincipalBuilder
    sasl: SaslServerConfig | None = None
    tls: TlsContextProvider | None = field(default=None, repr=False)

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        # The provider's contexts hand every new handshake to the newest context (hot reload).
        return self.tls.context if self.tls is not None else None


def principal_at_connect(conn: ClientConnection, security: ListenerSecurity) -> KafkaPrincipal | None:
    """The principal of a non-SASL connection, known as soon as it is established."""
    if conn.listener.uses_sasl:
        return None
    if conn.listener.uses_tls:
        from auth.peer_identity import peer_subject

        ssl_object = conn.transport.get_extra_info("ssl_object") if conn.transport else None
        subject = peer_subject(ssl_object) if ssl_object is not None else None
        return security.principal_builder.build(SslAuthContext(conn.listener.name, conn.client_host, subject))
    return security.principal_builder.build(PlaintextAuthContext(conn.listener.name, conn.client_host))


def new_authenticator(conn: ClientConnection, security: ListenerSecurity) -> SaslServerAuthenticator:
    assert security.sasl is not None
    ctx = conn.ctx

    def api_versions(correlation_id: int, version: int) -> bytes:
        payload = api_versions_response(correlation_id, version, ctx.negotiated, ctx.cluster.features)
        return len(payload).to_bytes(4, "big") + payload

    context = SaslContext(conn.listener.name, conn.client_host, conn.listener.uses_tls,
                          server_host=conn.listener.advertised.host)
    return SaslServerAuthenticator(security.sasl, context, api_versions)


def authenticate_frame(conn: ClientConnection, frame: Frame) -> None:
    """Feed one frame to the SASL state machine and act on its decision."""
    authenticator = conn.authenticator
    assert authenticator is not None
    if authenticator.state.value == "INITIAL_REQUEST" and not _looks_like_kafka(frame):
        conn.abort(f"first frame is not a Kafka request: {diagnose_non_kafka(frame.wire)}")
        return
    apply_step(conn, authenticator.on_frame(frame.payload))


def _note_legacy_nonce(conn: ClientConnection, step: Authenticated) -> None:
    """Counted every time; logged once per connection (at its first login; re-authentication
    comes from the same client library), so an old client is visible without flooding the log."""
    conn.ctx.metrics.scram_legacy_nonce(step.mechanism)
    if not step.reauthenticated:
        conn.log.info("scram_legacy_nonce_accepted", mechanism=step.mechanism,
                      detail="the client repeats its SCRAM nonce (librdkafka before 2.6.1); accepted because "
                             "ksgate.sasl.scram.legacy.librdkafka.nonce.enable is true; upgrading the client "
                             "removes the need")


def _looks_like_kafka(frame: Frame) -> bool:
    payload = frame.payload
    return len(payload) >= 8 and payload[0] == 0 and payload[1] < 0x7F


def apply_step(conn: ClientConnection, step: Step) -> None:
    if isinstance(step, Respond):
        conn.responses.add_local(0, 0, 0, step.frame)
    elif isinstance(step, Authenticated):
        conn.responses.add_local(0, 0, 0, step.frame)
        conn.on_authenticated(step)
        if step.legacy_nonce:
            _note_legacy_nonce(conn, step)
    elif isinstance(step, Verifying):
        verify_off_loop(conn, step)
    else:
        assert isinstance(step, Close)
        conn.refuse_authentication(step)


def verify_off_loop(conn: ClientConnection, step: Verifying) -> None:
    """Run a password check on the verification pool, then feed its result to the state machine.

    The connection reads no frames meanwhile (a frame already received waits), so the
    SASL answers stay in request order.  A full pool fails the attempt: fail closed.
    """
    authenticator = conn.authenticator
    assert authenticator is not None
    ctx = conn.ctx

    def done(result: bytes | BaseException) -> None:
        conn.verifying = False
        conn.set_read_paused("verifying", False)
        if conn.closing:  # the client left or timed out while its password was checked
            return
        if isinstance(result, BaseException):
            conn.log.error("credential_verification_error", error=repr(result))
            apply_step(conn, authenticator.on_verification_refused(
                f"credential verification failed: {result!r}", "illegal_state"))
        else:
            ctx.metrics.password_hashed()
            apply_step(conn, authenticator.on_verified(result))
        conn.release_held_frames()

    conn.verifying = True
    conn.set_read_paused("verifying", True)
    if not ctx.verification_pool.submit(step.job, done):
        conn.verifying = False
        conn.set_read_paused("verifying", False)
        apply_step(conn, authenticator.on_verification_refused(
            "the credential verification queue is full (ksgate.authentication.verification.queue.size)",
            "overloaded"))
