"""Whether a session reads its client, why not, and the frames read that wait to be handled.

Reading pauses for named reasons (the upstream is connecting, a socket is full, too many
requests are queued, a job runs, shutdown); it resumes when none is left. Frames already read
while a job runs or no request slot is free wait here, in order: at most one read's worth,
since reading is paused meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class ReadGate:
    # A tuple, not a set: a handful of reasons at most, and an idle connection's empty set was 216 bytes
    # (the empty tuple is shared).
    reasons: tuple[str, ...] = ()
    paused: bool = False  # as last told to the adapter
    # The off-loop job later frames wait for (a password check, a large request decided in the worker).
    waiting_for: str | None = None
    # Never edited in place, replaced (the empty tuple is shared: no list kept by every idle connection).
    held: Sequence[memoryview] = ()

    def set(self, reason: str, paused: bool) -> bool | None:
        """Add or drop ``reason``; the new paused state if it changed (tell the adapter), else None."""
        if not paused and not self.reasons:  # the usual call, after each answer: nothing to resume
            return None  # (paused is always bool(reasons) once set() returns, so it is False too)
        if paused and reason not in self.reasons:
            self.reasons += (reason,)
        elif not paused and reason in self.reasons:
            self.reasons = tuple(r for r in self.reasons if r != reason)
        want = bool(self.reasons)
        if want == self.paused:
            return None
        self.paused = want
        return want

    def hold(self, frames: Sequence[memoryview]) -> None:
        """Frames that wait, behind any that already do."""
        self.held = [*self.held, *frames] if self.held else frames

    def take_held(self) -> Sequence[memoryview]:
        held, self.held = self.held, ()
        return held
