"""What a proxy session asks its adapter to do: the session's only way to touch the world.

The session (gateway/session/session.py) never holds a socket, a thread or a timer. Each event
it is given returns a list of these actions, in the order they must be carried out; the
asyncio adapter (gateway/transport/client_connection.py) performs them and reports back
with further events (``upstream_ready``, ``job_done``, ``timer_fired`` …).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from auth.sasl.mechanism import HashClaim
from gateway.session.response_queue import WireBytes


@dataclass(slots=True)
class SendToClient:
    pieces: list[WireBytes]


@dataclass(slots=True)
class SendToUpstream:
    pieces: list[WireBytes]


@dataclass(slots=True, frozen=True)
class OpenUpstream:
    """Connect to the first reachable target and log in as the gateway's service principal;
    then report ``upstream_ready`` (or ``upstream_failed``)."""

    targets: tuple[tuple[str, int], ...]


@dataclass(slots=True, frozen=True)
class ReauthenticateUpstream:
    """Log in again on the live upstream link before the broker's session lifetime ends (KIP-368);
    then report ``upstream_logged_in(new lifetime)`` (or ``upstream_failed``)."""


@dataclass(slots=True, frozen=True)
class PauseClientReading:
    paused: bool


@dataclass(slots=True, frozen=True)
class PauseUpstreamReading:
    paused: bool


class JobKind(Enum):
    VERIFY = "verify"  # a password hash: the bounded verification pool (may refuse: report QueueFull)
    STORE = "store"  # a store write (fsync, PBKDF2, a round trip to the security topic): any thread
    LARGE = "large"  # a large request or response: the one worker thread, collector paused


class QueueFull(Exception):
    """The job's pool refused it (its queue is full); reported as the job's result."""


class HashSkipped(Exception):
    """The hash budget answered the attempt without hashing (auth.hash_budget); the job's result.

    ``failure_class`` is what audit and metrics record: ``bad_credentials`` for a user that does
    not exist (nothing to check), ``throttled`` when the same user already had its share waiting.
    """

    def __init__(self, reason: str, failure_class: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.failure_class = failure_class


@dataclass(slots=True)
class RunJob:
    """Run ``work`` off the event loop, then report ``job_done(job_id, result or exception)``."""

    job_id: int
    kind: JobKind
    work: Callable[[], Any] = field(repr=False)
    claim: HashClaim | None = None  # VERIFY: whom the hash is for, to budget it per address and user


@dataclass(slots=True, frozen=True)
class StartTimer:
    """Report ``timer_fired(name)`` after ``delay_s``, unless cancelled first."""

    name: str
    delay_s: float


@dataclass(slots=True, frozen=True)
class CancelTimer:
    name: str


@dataclass(slots=True, frozen=True)
class WakeReaders:
    """Memory this connection released was granted to others: give each ``memory_granted``
    (call each, soon: never from inside this connection's event)."""

    wakes: tuple[Callable[[], None], ...]


@dataclass(slots=True, frozen=True)
class Discovered:
    """What this connection's traffic taught about the upstream cluster, for the server to apply to
    its shared view (gateway/upstream/cluster_view.py): brokers a response named (a new one may
    need a node listener), topic ids a response revealed, and whether a request named a topic id
    nobody knows yet (ask the upstream, rate-limited). The session never changes that view itself."""

    nodes: tuple[tuple[int, str, int], ...] = ()  # (node id, host, port), as the upstream advertised them
    topic_ids: tuple[tuple[uuid.UUID, str], ...] = ()
    refresh_topic_ids: bool = False
    partition_counts: tuple[tuple[str, int], ...] = ()  # (topic name, partitions), from Metadata responses


@dataclass(slots=True, frozen=True)
class Close:
    """Close both sockets. A farewell (the failed-authentication answer, after Kafka's delay) is written
    before, as a SendToClient: by then the session has stopped reading, so nothing else comes between."""

    reason: str | None = None  # logged as connection_refused when set


Action = (SendToClient | SendToUpstream | OpenUpstream | ReauthenticateUpstream | PauseClientReading
          | PauseUpstreamReading | RunJob | StartTimer | CancelTimer | WakeReaders | Discovered | Close)
