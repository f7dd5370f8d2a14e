"""Kafka's DefaultKafkaPrincipalBuilder: the principal of a PLAINTEXT, SSL or SASL connection."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from auth.principal import (
    ANONYMOUS,
    USER_TYPE,
    AuthContext,
    KafkaPrincipal,
    PlaintextAuthContext,
    SaslAuthContext,
    SslAuthContext,
)


def _unchanged(name: str) -> str:
    return name


@dataclass(slots=True, frozen=True)
class DefaultPrincipalBuilder:
    """SASL: the authorization id (GSSAPI ids shortened by the Kerberos rules);
    SSL: the certificate subject through ssl.principal.mapping.rules; otherwise ANONYMOUS."""

    ssl_mapper: Callable[[str], str] = _unchanged
    kerberos_short_name: Callable[[str], str] = _unchanged

    def build(self, context: AuthContext) -> KafkaPrincipal:
        if isinstance(context, SaslAuthContext):
            name = context.authorization_id
            if context.mechanism == "GSSAPI":
                name = self.kerberos_short_name(name)
            return KafkaPrincipal(USER_TYPE, name, context.token_authenticated)
        if isinstance(context, SslAuthContext):
            if context.peer_subject is None:
                return ANONYMOUS
            return KafkaPrincipal(USER_TYPE, self.ssl_mapper(context.peer_subject))
        assert isinstance(context, PlaintextAuthContext)
        return ANONYMOUS
