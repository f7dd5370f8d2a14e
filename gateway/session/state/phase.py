"""The phase of a proxy session, as a value, and the table of what each phase accepts.

Like h11's _state.py: the session (gateway/session/session.py) asks this table whether an
event is handled, ignored (a late report, e.g. a job that finishes after the connection was
refused) or impossible in its phase, and moves from phase to phase only along the table's
transitions. An impossible event or move is a gateway bug: PhaseError, and the session closes
that one connection.

What is not a phase is a gate: reading paused (ReadGate), off-loop jobs (OffLoopJobs), admin
answers in order (LocalAnswers), a full client (ClientOutbox).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Phase(Enum):
    NEW = "new"  # made; connected() (after the TLS handshake) not yet called
    AUTHENTICATING = "authenticating"  # a SASL listener: frames go to the authenticator; nothing is relayed
    AUTHENTICATED = "authenticated"  # requests are decided, relayed or answered
    REAUTHENTICATING = "reauthenticating"  # KIP-368: a new SASL exchange, requests still served meanwhile
    DRAINING = "draining"  # graceful shutdown: nothing new is read; closes once the answers owed are out
    # Refused as Kafka refuses a request, by closing once it is handled (an acks=0 Produce with an error): nothing
    # after it is read or relayed; what came before is relayed and answered, then the connection closes.
    REFUSED = "refused"
    FAREWELL = "farewell"  # a login failed: nothing more is read; the refusal goes out after Kafka's delay
    CLOSING = "closing"  # Close was asked of the adapter; only the client's loss is still expected
    CLOSED = "closed"  # the client's socket is gone

    # Members are their own identity (Enum has no __eq__), so the identity hash is correct, and in C: Enum's
    # own __hash__ is Python, paid on every table lookup of every event (bench/README.md, relay_cost opcodes).
    __hash__ = object.__hash__


class Event(Enum):
    """What the adapter reports to the session (its public methods)."""

    CONNECTED = "connected"
    CLIENT_BYTES = "received"
    MEMORY_GRANTED = "memory_granted"
    CLIENT_WRITE_PAUSED = "client_write_paused"
    CLIENT_LOST = "client_lost"
    DRAIN = "drain"
    ABORT = "abort"
    UPSTREAM_READY = "upstream_ready"
    UPSTREAM_LOGGED_IN = "upstream_logged_in"  # the gateway's re-authentication on the live link (KIP-368)
    UPSTREAM_FAILED = "upstream_failed"
    UPSTREAM_WRITE_PAUSED = "upstream_write_paused"
    UPSTREAM_FRAMES = "upstream_frames"
    UPSTREAM_ERROR = "upstream_error"
    UPSTREAM_LOST = "upstream_lost"
    STREAM = "stream"  # stream_started, stream_chunk, stream_ended
    JOB_DONE = "job_done"
    AUTHENTICATION_TIMEOUT = "authentication timer"
    FAREWELL_DUE = "farewell timer"
    QUOTA_UNMUTED = "quota timer"  # a client muted for its quota (KIP-219) may be read again
    UPSTREAM_LOGIN_DUE = "upstream login timer"  # the upstream link's session lifetime nears its end (KIP-368)

    __hash__ = object.__hash__  # as Phase's, for the same reason


class Move(Enum):
    """What the session decided, moving it to another phase."""

    MUST_LOG_IN = "must log in"  # connected on a SASL listener
    KNOWN_AT_CONNECT = "known at connect"  # connected: TLS or the listener named the principal
    LOGGED_IN = "logged in"
    REAUTHENTICATION = "reauthentication"  # a SASL frame after the login
    LOGIN_FAILED = "login failed"
    DRAIN = "drain"
    REFUSE_IN_TURN = "refuse in turn"  # a request Kafka answers by closing, once the earlier ones are answered
    CLOSE = "close"  # refused, answered everything while draining or refused in turn, or the farewell is out
    LOST = "lost"


E = Event
_ALWAYS_LATE = frozenset({E.JOB_DONE, E.MEMORY_GRANTED, E.DRAIN, E.ABORT})  # may arrive after any close
_CLIENT = frozenset({E.CLIENT_BYTES, E.MEMORY_GRANTED, E.CLIENT_WRITE_PAUSED, E.CLIENT_LOST, E.DRAIN, E.ABORT,
                     E.JOB_DONE})
_UPSTREAM = frozenset({E.UPSTREAM_READY, E.UPSTREAM_LOGGED_IN, E.UPSTREAM_FAILED, E.UPSTREAM_WRITE_PAUSED,
                       E.UPSTREAM_FRAMES, E.UPSTREAM_ERROR, E.UPSTREAM_LOST, E.STREAM})
# quotas bind to a principal, and an upstream link exists, only once logged in
_SERVING = _CLIENT | _UPSTREAM | {E.QUOTA_UNMUTED, E.UPSTREAM_LOGIN_DUE}
_AFTER_CLOSE = _ALWAYS_LATE | _UPSTREAM | {E.CLIENT_BYTES, E.CLIENT_WRITE_PAUSED, E.AUTHENTICATION_TIMEOUT,
                                           E.FAREWELL_DUE, E.QUOTA_UNMUTED, E.UPSTREAM_LOGIN_DUE}

# Once a request is refused in turn: frames read after it, memory for the next one, a quota's end of mute (all
# about reading, which is over), and a drain (the phase closes by itself once the answers owed are out).
_NOT_AFTER_REFUSAL = frozenset({E.CLIENT_BYTES, E.MEMORY_GRANTED, E.QUOTA_UNMUTED, E.DRAIN})

# Per phase: the events it handles, and those it ignores (reports that come late). Any other is impossible.
HANDLES: dict[Phase, frozenset[Event]] = {
    Phase.NEW: frozenset({E.CONNECTED, E.CLIENT_LOST, E.DRAIN, E.ABORT}),
    # No upstream exists before the login: an upstream event here would be a bug.
    Phase.AUTHENTICATING: _CLIENT | {E.AUTHENTICATION_TIMEOUT},
    Phase.AUTHENTICATED: _SERVING,
    Phase.REAUTHENTICATING: _SERVING,
    Phase.DRAINING: _SERVING,
    # Answers already owed still go out before the refusal: their upstream answers are served.
    Phase.FAREWELL: frozenset({E.UPSTREAM_FRAMES, E.STREAM, E.UPSTREAM_WRITE_PAUSED, E.CLIENT_WRITE_PAUSED,
                               E.CLIENT_LOST, E.FAREWELL_DUE}),
    # The answers owed still come (jobs, the upstream, its re-login); the client's frames and quota are over.
    Phase.REFUSED: _SERVING - _NOT_AFTER_REFUSAL,
    Phase.CLOSING: frozenset({E.CLIENT_LOST}),
    Phase.CLOSED: frozenset(),
}
IGNORES: dict[Phase, frozenset[Event]] = {
    Phase.NEW: frozenset(),
    Phase.AUTHENTICATING: frozenset(),
    # The timer is cancelled at the login, but one already due may still be delivered.
    Phase.AUTHENTICATED: frozenset({E.AUTHENTICATION_TIMEOUT}),
    Phase.REAUTHENTICATING: frozenset({E.AUTHENTICATION_TIMEOUT}),
    Phase.DRAINING: frozenset({E.AUTHENTICATION_TIMEOUT}),
    # The connection closes anyway once the farewell is out: a failing upstream, an abort change nothing.
    # Nothing new is relayed either, so the upstream link is not logged in again (KIP-368).
    Phase.FAREWELL: _ALWAYS_LATE | {E.CLIENT_BYTES, E.AUTHENTICATION_TIMEOUT, E.UPSTREAM_READY,
                                    E.UPSTREAM_FAILED, E.UPSTREAM_ERROR, E.UPSTREAM_LOST, E.QUOTA_UNMUTED,
                                    E.UPSTREAM_LOGIN_DUE, E.UPSTREAM_LOGGED_IN},
    Phase.REFUSED: _NOT_AFTER_REFUSAL | {E.AUTHENTICATION_TIMEOUT},
    Phase.CLOSING: _AFTER_CLOSE,
    Phase.CLOSED: _AFTER_CLOSE | {E.CLIENT_LOST},
}

_M = Move
_CLOSE_OR_LOSE = {_M.CLOSE: Phase.CLOSING, _M.LOST: Phase.CLOSED}
TRANSITIONS: dict[Phase, dict[Move, Phase]] = {
    Phase.NEW: {_M.MUST_LOG_IN: Phase.AUTHENTICATING, _M.KNOWN_AT_CONNECT: Phase.AUTHENTICATED, **_CLOSE_OR_LOSE},
    Phase.AUTHENTICATING: {_M.LOGGED_IN: Phase.AUTHENTICATED, _M.LOGIN_FAILED: Phase.FAREWELL, **_CLOSE_OR_LOSE},
    Phase.AUTHENTICATED: {_M.REAUTHENTICATION: Phase.REAUTHENTICATING, _M.DRAIN: Phase.DRAINING,
                          _M.REFUSE_IN_TURN: Phase.REFUSED, **_CLOSE_OR_LOSE},
    # A refusal in turn during a re-authentication ends it: nothing after the refused request is handled.
    Phase.REAUTHENTICATING: {_M.LOGGED_IN: Phase.AUTHENTICATED, _M.LOGIN_FAILED: Phase.FAREWELL,
                             _M.DRAIN: Phase.DRAINING, _M.REFUSE_IN_TURN: Phase.REFUSED, **_CLOSE_OR_LOSE},
    # A re-authentication may complete while draining: the connection keeps draining.
    Phase.DRAINING: {_M.REAUTHENTICATION: Phase.DRAINING, _M.LOGGED_IN: Phase.DRAINING,
                     _M.LOGIN_FAILED: Phase.FAREWELL, _M.REFUSE_IN_TURN: Phase.REFUSED, **_CLOSE_OR_LOSE},
    Phase.REFUSED: dict(_CLOSE_OR_LOSE),
    Phase.FAREWELL: dict(_CLOSE_OR_LOSE),
    Phase.CLOSING: {_M.CLOSE: Phase.CLOSING, _M.LOST: Phase.CLOSED},  # closing twice is one close
    Phase.CLOSED: {},
}

CLOSING_PHASES = frozenset({Phase.FAREWELL, Phase.CLOSING, Phase.CLOSED})  # nothing more is read or relayed
# The client's frames are no longer handled (those read are dropped); in REFUSED earlier ones are still answered.
FRAMES_DROPPED = CLOSING_PHASES | {Phase.REFUSED}
SERVING_PHASES = frozenset({Phase.AUTHENTICATED, Phase.REAUTHENTICATING, Phase.DRAINING})  # a principal is set


class PhaseError(Exception):
    """An event or a move the table does not allow in the current phase: a gateway bug."""


# The phase a relaying connection spends its life in: the session's per-request events test for it with one
# identity check and ask the table only in the other phases. So it must handle them all (checked here, once).
STEADY = Phase.AUTHENTICATED
STEADY_EVENTS = frozenset({Event.CLIENT_BYTES, Event.UPSTREAM_FRAMES})
if not HANDLES[STEADY] >= STEADY_EVENTS:
    raise PhaseError(f"{STEADY.value} must handle {sorted(e.value for e in STEADY_EVENTS - HANDLES[STEADY])}")


@dataclass(slots=True)
class SessionPhase:
    phase: Phase = Phase.NEW

    def handles(self, event: Event) -> bool:
        """True: handle ``event``; False: ignore it (it came late). PhaseError: it cannot happen here."""
        if event in HANDLES[self.phase]:
            return True
        if event in IGNORES[self.phase]:
            return False
        raise PhaseError(f"{event.value} cannot happen while {self.phase.value}")

    def move(self, move: Move) -> Phase:
        """Take ``move`` to the phase the table names; PhaseError if it names none."""
        target = TRANSITIONS[self.phase].get(move)
        if target is None:
            raise PhaseError(f"{move.value} is not a move from {self.phase.value}")
        self.phase = target
        return target

    @property
    def closing(self) -> bool:
        return self.phase in CLOSING_PHASES
