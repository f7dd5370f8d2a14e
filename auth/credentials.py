"""Stored credentials and the narrow interface every credential store implements.

Stores hold derived keys only (SCRAM's StoredKey/ServerKey, a salted hash for PLAIN),
never passwords, and keep key material out of reprs and logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(slots=True, frozen=True)
class ScramCredential:
    """RFC 5802 server-side credential for one user and one mechanism."""

    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int = 4096


@dataclass(slots=True, frozen=True)
class PlainCredential:
    """A salted, iterated hash of a PLAIN password (PBKDF2-HMAC-SHA512)."""

    salt: bytes = field(repr=False)
    hash: bytes = field(repr=False)
    iterations: int = 4096


class CredentialStore(Protocol):
    """Looks up credentials; returns None for an unknown user (callers must not reveal it)."""

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def plain_credential(self, user: str) -> PlainCredential | None: ...
