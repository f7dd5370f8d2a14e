"""The session's jobs off the event loop (password checks, store writes, large requests), by id.

The adapter runs each RunJob and reports ``job_done(job_id, result)``; the continuation waits
here until then, so a connection closed meanwhile simply never finds it run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from auth.sasl.mechanism import HashClaim
from gateway.session import actions as act

JobThen = Callable[[Any], None]


@dataclass(slots=True)
class OffLoopJobs:
    _then: dict[int, JobThen] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def start(self, kind: act.JobKind, work: Callable[[], Any], then: JobThen,
              claim: HashClaim | None = None) -> act.RunJob:
        """The action that runs ``work``; ``then`` gets its result when it is reported done."""
        job_id = next(self._ids)
        self._then[job_id] = then
        return act.RunJob(job_id, kind, work, claim)

    def finish(self, job_id: int) -> JobThen | None:
        """The continuation of a finished job (None: unknown, or already finished)."""
        return self._then.pop(job_id, None)

    def __len__(self) -> int:
        return len(self._then)
