"""The contract between the SASL state machine and each mechanism.

A mechanism server is created per authentication attempt and fed the client's tokens one
by one; each call returns what to do next.  Mechanisms never see sockets or Kafka frames.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(slots=True, frozen=True)
class Challenge:
    """Send these bytes to the client and wait for its next token."""

    data: bytes


@dataclass(slots=True, frozen=True)
class Done:
    """The client proved its identity.

    ``final`` is the last server message (SCRAM's server-final), sent with the success.
    ``credential_expiry_ms`` (wall-clock ms) bounds the KIP-368 session lifetime, e.g. a
    JWT's ``exp`` or a delegation token's expiry.
    """

    authorization_id: str
    final: bytes = b""
    credential_expiry_ms: int | None = None
    token_authenticated: bool = False
    # The client sent SCRAM's nonce in librdkafka's pre-2.6.1 form, accepted for compatibility.
    legacy_nonce: bool = False


@dataclass(slots=True, frozen=True)
class Failure:
    """Authentication failed. ``reason`` is logged, never sent; the client gets a generic message.

    ``failure_class`` is the short, stable class audit and metrics record (auth.sasl.server.Refused).
    ``quiet``: a repeat answered from memory (the same password already failed), logged at debug
    so that a client retrying a stale password does not flood the log; audited all the same.
    """

    reason: str
    client_message: str = "Authentication failed: Invalid username or password"
    failure_class: str = "bad_credentials"
    quiet: bool = False


@dataclass(slots=True, frozen=True)
class HashClaim:
    """Whose attempt a costly hash checks: the gateway budgets hashes per address, fairly by user."""

    source: str  # the client's address
    user: str  # the name the client claimed
    known: bool  # whether that user has a credential (if not, no correct password can wait behind it)
    # Equal, non-empty keys mean the very same hash (same user, password and credential): computed once.
    # Opaque (a keyed MAC of the password, never the password); empty: never shared.
    key: bytes = b""


@dataclass(slots=True, frozen=True)
class Verify:
    """Costly, pure work (a password hash) that must not run on the gateway's event loop.

    ``job`` may run on any thread and touches no shared state; its result goes to
    ``resume``, on the caller's thread, which says what follows.  ``claim``: whom the hash
    is for, when the gateway should budget it (None: run it as soon as a thread is free).
    """

    job: Callable[[], bytes]
    resume: Callable[[bytes], Outcome]
    claim: HashClaim | None = None
    # What the client is told if the gateway answers without running ``job`` (over budget, pool full):
    # the mechanism's usual failure text, so that such an answer reads like any failure. None: Kafka's generic one.
    refusal_message: str | None = None


Outcome = Challenge | Done | Failure | Verify


def run_inline(outcome: Outcome) -> Challenge | Done | Failure:
    """Runs any Verify on the caller's thread (tools and tests; the gateway uses its pool)."""
    while isinstance(outcome, Verify):
        outcome = outcome.resume(outcome.job())
    return outcome


class SaslMechanismServer(Protocol):
    def evaluate(self, token: bytes) -> Outcome: ...


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True, frozen=True)
class SaslContext:
    """What a mechanism may know about the connection it authenticates."""

    listener: str
    client_host: str
    tls: bool
    server_host: str = "localhost"  # the host name clients use to reach this listener (GSSAPI)
    now_ms: Callable[[], int] = field(default=wall_clock_ms)


class MechanismFactory(Protocol):
    """Creates one server per authentication attempt; ``name`` is the SASL mechanism name."""

    @property
    def name(self) -> str: ...

    def create(self, context: SaslContext) -> SaslMechanismServer: ...
