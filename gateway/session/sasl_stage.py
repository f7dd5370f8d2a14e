"""The authenticate stage: how a connection gets its principal before anything is relayed.

PLAINTEXT and SSL connections get their principal at connect time (ANONYMOUS, or the
client certificate's mapped subject); SASL connections get a SASL state machine
(auth/sasl/server.py) that the session feeds every frame until it completes, and again
for KIP-368 re-authentication. Pure functions: no connection object comes here.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from auth.principal import KafkaPrincipal, PlaintextAuthContext, PrincipalBuilder, SslAuthContext
from auth.sasl.mechanism import SaslContext
from auth.sasl.server import SaslServerAuthenticator, SaslServerConfig
from gateway.session.api_versions import api_versions_response
from protocol.framing import Frame

if TYPE_CHECKING:
    from auth.tls import TlsContextProvider
    from gateway.config import ListenerConfig
    from gateway.context import GatewayContext


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

    def api_versions(correlation_id: int, version: int) -> bytes:
        payload = api_versions_response(correlation_id, version, ctx.negotiated, ctx.cluster.features)
        return len(payload).to_bytes(4, "big") + payload

    context = SaslContext(listener.name, client_host, listener.uses_tls, server_host=listener.advertised.host)
    return SaslServerAuthenticator(security.sasl, context, api_versions)


def looks_like_kafka(frame: Frame) -> bool:
    """A first frame that could be a Kafka request header (api key < 0x7F00, any version)."""
    payload = frame.payload
    return len(payload) >= 8 and payload[0] == 0 and payload[1] < 0x7F
