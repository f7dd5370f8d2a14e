"""The authenticate stage: how a connection gets its principal before anything is relayed.

PLAINTEXT and SSL connections get their principal at connect time (ANONYMOUS, or the
client certificate's mapped subject); SASL connections get a SASL state machine
(auth/sasl/server.py) that the session feeds every frame until it completes, and again
for KIP-368 re-authentication. Pure functions: no connection object comes here.
"""

from __future__ import annotations

import ssl
from functools import partial
from typing import TYPE_CHECKING, Any

from auth.client_address import ClientAddress
from auth.listener_security import ListenerSecurity
from auth.principal import KafkaPrincipal, PlaintextAuthContext, SslAuthContext
from auth.sasl.mechanism import SaslContext
from auth.sasl.server import Authenticated, Refused, SaslServerAuthenticator
from gateway.ops.audit import REASON_CHARS, bounded_name
from gateway.session.api_versions import api_versions_reply

if TYPE_CHECKING:
    from gateway.config import ListenerConfig
    from gateway.context import GatewayContext


def principal_at_connect(listener: ListenerConfig, client_host: str, ssl_object: ssl.SSLObject | None,
                         security: ListenerSecurity) -> KafkaPrincipal | None:
    """The principal of a non-SASL connection, known as soon as it is established."""
    if listener.uses_sasl:
        return None
    if listener.uses_tls:
        from auth.peer_identity import peer_subject

        subject = peer_subject(ssl_object) if ssl_object is not None else None
        return security.principal_builder.build(SslAuthContext(listener.name, client_host, subject))
    return security.principal_builder.build(PlaintextAuthContext(listener.name, client_host))


def new_authenticator(ctx: GatewayContext, listener: ListenerConfig, client_host: str,
                      security: ListenerSecurity) -> SaslServerAuthenticator:
    assert security.sasl is not None
    context = SaslContext(listener.name, client_host, listener.uses_tls, server_host=listener.advertised.host)
    # Kept by every logged-in connection (for KIP-368): one partial shared by all (72 bytes each otherwise).
    answer = ctx.sasl_api_versions
    if answer is None:
        answer = ctx.sasl_api_versions = partial(_api_versions_frame, ctx)
    return SaslServerAuthenticator(security.sasl, context, answer)


def _api_versions_frame(ctx: GatewayContext, request: memoryview, correlation_id: int,
                        version: int) -> tuple[bytes, bool]:
    """ApiVersions answered during authentication, size-prefixed, and whether it was answered without an error.
    Kafka's SASL authenticator checks the request as KafkaApis does (ApiVersionsRequest.isValid: the v3+ software
    name and version, a v5 cluster and node both or neither), but not which broker it reaches: that is checked
    once the client has logged in (request_stage), where KafkaApis does."""
    payload, answered = api_versions_reply(request, correlation_id, version, ctx.negotiated, ctx.cluster.features)
    return len(payload).to_bytes(4, "big") + payload, answered


def looks_like_kafka(wire: memoryview) -> bool:
    """A first frame (size prefix + payload) that could be a Kafka request header (api key < 0x7F00, any version)."""
    return len(wire) >= 12 and wire[4] == 0 and wire[5] < 0x7F


# --- what a login leaves behind: metrics, counters, audit events, log lines ---------------------

def record_login(ctx: GatewayContext, listener: ListenerConfig, client: ClientAddress, principal: KafkaPrincipal,
                 mechanism: str | None = None) -> None:
    ctx.metrics.authentication(mechanism or listener.security_protocol, "success")
    key = str(principal)
    ctx.counters.authenticated[key] = ctx.counters.authenticated.get(key, 0) + 1
    if ctx.authorization is not None:
        ctx.authorization.audit.authentication(
            principal=key, attempted_user=None, client_host=client.host, client_port=client.port,
            listener=listener.name, mechanism=mechanism or listener.security_protocol, succeeded=True)


def record_login_failure(ctx: GatewayContext, log: Any, listener: ListenerConfig, client: ClientAddress,
                         authenticator: SaslServerAuthenticator | None, step: Refused) -> None:
    if step.quiet:  # a repeat, or answered unhashed under a flood: not a warning per attempt (audited below)
        log.debug("authentication_failed", reason=bounded_name(step.reason, REASON_CHARS),
                  mechanism_failure=step.authentication_failure)
    else:
        # The reason may quote the user name the client claimed, whatever its size or content.
        log.warning("authentication_failed", reason=bounded_name(step.reason, REASON_CHARS),
                    mechanism_failure=step.authentication_failure)
    ctx.counters.authentication_failures += 1
    mechanism = authenticator.mechanism if authenticator else None
    ctx.metrics.authentication(mechanism, step.failure_class)
    if ctx.authorization is not None:
        ctx.authorization.audit.authentication(
            principal=None, attempted_user=authenticator.attempted_user if authenticator else None,
            client_host=client.host, client_port=client.port, listener=listener.name, mechanism=mechanism,
            succeeded=False, failure=step.failure_class)


def record_certificate_failure(ctx: GatewayContext, listener: ListenerConfig, client: ClientAddress,
                               failure: str) -> None:
    """A TLS handshake refused over the client's certificate (none, unknown CA, expired…): an
    authentication failure of mechanism SSL, on any TLS listener (SASL_SSL too: its TLS layer refused)."""
    ctx.counters.authentication_failures += 1
    ctx.metrics.authentication("SSL", failure)
    if ctx.authorization is not None:
        ctx.authorization.audit.authentication(
            principal=None, attempted_user=None, client_host=client.host, client_port=client.port,
            listener=listener.name, mechanism="SSL", succeeded=False, failure=failure)


def note_legacy_nonce(ctx: GatewayContext, log: Any, step: Authenticated) -> None:
    """Counted every time; logged once per connection (at its first login; re-authentication
    comes from the same client library), so an old client is visible without flooding the log."""
    ctx.metrics.scram_legacy_nonce(step.mechanism)
    if not step.reauthenticated:
        log.info("scram_legacy_nonce_accepted", mechanism=step.mechanism,
                 detail="the client repeats its SCRAM nonce (librdkafka before 2.6.1); accepted because "
                        "ksgate.sasl.scram.legacy.librdkafka.nonce.enable is true; upgrading the client "
                        "removes the need")
