"""KafkaPrincipal and the principal builder that turns an authenticated connection into one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

USER_TYPE = "User"


@dataclass(slots=True, frozen=True)
class KafkaPrincipal:
    """Who a connection acts as; ``str()`` gives Kafka's ``User:name`` form used in ACLs."""

    principal_type: str
    name: str
    token_authenticated: bool = False

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """Parse ``Type:name`` (as in super.users and ACLs)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"expected 'Type:name', got {text!r}")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


@dataclass(slots=True, frozen=True)
class PlaintextAuthContext:
    listener: str
    client_host: str


@dataclass(slots=True, frozen=True)
class SslAuthContext:
    listener: str
    client_host: str
    peer_subject: str | None  # the client certificate's subject, RFC 2253 form; None if none


@dataclass(slots=True, frozen=True)
class SaslAuthContext:
    listener: str
    client_host: str
    mechanism: str
    authorization_id: str
    token_authenticated: bool = False
    tls: bool = False


AuthContext = PlaintextAuthContext | SslAuthContext | SaslAuthContext


class PrincipalBuilder(Protocol):
    """Kafka's KafkaPrincipalBuilder: pluggable, given what authentication established."""

    def build(self, context: AuthContext) -> KafkaPrincipal: ...
