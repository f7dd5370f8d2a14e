"""The session's jobs off the event loop (password checks, store writes, large requests), by id.

The adapter runs each RunJob and reports ``job_done(job_id, result)``; the continuation waits
here until then, so a connection closed meanwhile simply never finds it run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from auth.sasl.mechanism import HashClaim
from gateway.session import actions as act

JobThen = Callable[[Any], None]


@dataclass(slots=True)
class OffLoopJobs:
    # Made for the first job and dropped once none runs: an idle connection keeps no dict (nor a counter object).
    _then: dict[int, JobThen] | None = None
    _last_id: int = 0

    def start(self, kind: act.JobKind, work: Callable[[], Any], then: JobThen,
              claim: HashClaim | None = None) -> act.RunJob:
        """The action that runs ``work``; ``then`` gets its result when it is reported done."""
        self._last_id = job_id = self._last_id + 1
        if self._then is None:
            self._then = {}
        self._then[job_id] = then
        return act.RunJob(job_id, kind, work, claim)

    def finish(self, job_id: int) -> JobThen | None:
        """The continuation of a finished job (None: unknown, or already finished)."""
        if self._then is None:
            return None
        then = self._then.pop(job_id, None)
        if not self._then:
            self._then = None
        return then

    def __len__(self) -> int:
        return len(self._then) if self._then is not None else 0
