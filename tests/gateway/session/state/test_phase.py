"""The session's phase table (gateway/session/state/phase.py), against an independent statement of
it: every phase × event (handled, ignored as late, or impossible) and every phase × move."""

from __future__ import annotations

import pytest

from gateway.session.state.phase import (
    FRAMES_DROPPED,
    HANDLES,
    IGNORES,
    TRANSITIONS,
    Event,
    Move,
    Phase,
    PhaseError,
    SessionPhase,
)

E, P, M = Event, Phase, Move
COLUMNS = (E.CONNECTED, E.CLIENT_BYTES, E.MEMORY_GRANTED, E.CLIENT_WRITE_PAUSED, E.CLIENT_LOST, E.DRAIN, E.ABORT,
           E.UPSTREAM_READY, E.UPSTREAM_LOGGED_IN, E.UPSTREAM_FAILED, E.UPSTREAM_WRITE_PAUSED, E.UPSTREAM_FRAMES,
           E.UPSTREAM_ERROR, E.UPSTREAM_LOST, E.STREAM, E.JOB_DONE, E.AUTHENTICATION_TIMEOUT, E.FAREWELL_DUE,
           E.QUOTA_UNMUTED, E.UPSTREAM_LOGIN_DUE)
# H: handled, I: ignored (a late report), X: impossible (a gateway bug). Columns as above; "relogin": the
# upstream link's own re-authentication is due (KIP-368).
#                         conn  client.........  upstream.........  job auth fare quota relogin
EXPECTED_EVENTS = {
    P.NEW:               "H    X X X H H H    X X X X X X X X    X   X    X  X     X",
    P.AUTHENTICATING:    "X    H H H H H H    X X X X X X X X    H   H    X  X     X",  # no upstream, no quota yet
    P.AUTHENTICATED:     "X    H H H H H H    H H H H H H H H    H   I    X  H     H",
    P.REAUTHENTICATING:  "X    H H H H H H    H H H H H H H H    H   I    X  H     H",
    P.DRAINING:          "X    H H H H H H    H H H H H H H H    H   I    X  H     H",
    P.REFUSED:           "X    I I H H I H    H H H H H H H H    H   I    X  I     H",  # owed answers still come
    P.FAREWELL:          "X    I I H H I I    I I I H H I I H    I   I    H  I     I",  # owed answers still go out
    P.CLOSING:           "X    I I I H I I    I I I I I I I I    I   I    I  I     I",
    P.CLOSED:            "X    I I I I I I    I I I I I I I I    I   I    I  I     I",
}
EXPECTED_MOVES = {
    P.NEW: {M.MUST_LOG_IN: P.AUTHENTICATING, M.KNOWN_AT_CONNECT: P.AUTHENTICATED, M.CLOSE: P.CLOSING,
            M.LOST: P.CLOSED},
    P.AUTHENTICATING: {M.LOGGED_IN: P.AUTHENTICATED, M.LOGIN_FAILED: P.FAREWELL, M.CLOSE: P.CLOSING,
                       M.LOST: P.CLOSED},
    P.AUTHENTICATED: {M.REAUTHENTICATION: P.REAUTHENTICATING, M.DRAIN: P.DRAINING, M.REFUSE_IN_TURN: P.REFUSED,
                      M.CLOSE: P.CLOSING, M.LOST: P.CLOSED},
    P.REAUTHENTICATING: {M.LOGGED_IN: P.AUTHENTICATED, M.LOGIN_FAILED: P.FAREWELL, M.DRAIN: P.DRAINING,
                         M.REFUSE_IN_TURN: P.REFUSED, M.CLOSE: P.CLOSING, M.LOST: P.CLOSED},
    P.DRAINING: {M.REAUTHENTICATION: P.DRAINING, M.LOGGED_IN: P.DRAINING, M.LOGIN_FAILED: P.FAREWELL,
                 M.REFUSE_IN_TURN: P.REFUSED, M.CLOSE: P.CLOSING, M.LOST: P.CLOSED},
    P.REFUSED: {M.CLOSE: P.CLOSING, M.LOST: P.CLOSED},
    P.FAREWELL: {M.CLOSE: P.CLOSING, M.LOST: P.CLOSED},
    P.CLOSING: {M.CLOSE: P.CLOSING, M.LOST: P.CLOSED},
    P.CLOSED: {},
}


def _expected(phase: Phase, event: Event) -> str:
    return EXPECTED_EVENTS[phase].split()[COLUMNS.index(event)]


def test_the_statement_covers_every_event_and_phase() -> None:
    assert set(COLUMNS) == set(Event) and len(COLUMNS) == len(Event)
    assert set(EXPECTED_EVENTS) == set(Phase) == set(HANDLES) == set(IGNORES) == set(TRANSITIONS)
    assert all(len(row.split()) == len(COLUMNS) for row in EXPECTED_EVENTS.values())


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("event", list(Event))
def test_each_phase_handles_ignores_or_refuses_each_event(phase: Phase, event: Event) -> None:
    state = SessionPhase(phase)
    expected = _expected(phase, event)
    if expected == "X":
        with pytest.raises(PhaseError, match=event.value):
            state.handles(event)
    else:
        assert state.handles(event) is (expected == "H")
    assert state.phase is phase  # asking never moves


@pytest.mark.parametrize("phase", list(Phase))
@pytest.mark.parametrize("move", list(Move))
def test_each_phase_takes_only_its_moves(phase: Phase, move: Move) -> None:
    state = SessionPhase(phase)
    target = EXPECTED_MOVES[phase].get(move)
    if target is None:
        with pytest.raises(PhaseError, match=move.value):
            state.move(move)
        assert state.phase is phase  # an illegal move changes nothing
    else:
        assert state.move(move) is target and state.phase is target


def test_no_phase_handles_and_ignores_the_same_event() -> None:
    assert all(not (HANDLES[phase] & IGNORES[phase]) for phase in Phase)


def test_every_phase_is_reached_from_new_and_every_phase_reaches_closed() -> None:
    def reachable(start: Phase) -> set[Phase]:
        seen, todo = {start}, [start]
        while todo:
            for target in TRANSITIONS[todo.pop()].values():
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        return seen

    assert reachable(Phase.NEW) == set(Phase)
    assert all(Phase.CLOSED in reachable(phase) for phase in Phase)


def test_the_phases_that_drop_frames_are_those_that_read_nothing_and_only_refused_still_relays() -> None:
    reading_nothing = {phase for phase in Phase if Event.CLIENT_BYTES not in HANDLES[phase] and phase is not P.NEW}
    assert reading_nothing == FRAMES_DROPPED
    # A refusal in turn still relays what came before it (its link may still be opening): not closing.
    assert {phase for phase in Phase if SessionPhase(phase).closing} == reading_nothing - {P.REFUSED}
