"""Progress of a long audit job: one line per stage, with counts and the elapsed time, on stderr.

Kept apart from stdout, which carries only the command's one-line result.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Prints ``<prefix>: <stage> [<seconds>s]``; a Progress without a stream prints nothing (library use)."""

    __slots__ = ("_prefix", "_start", "_stream")

    def __init__(self, prefix: str, stream: TextIO | None = None) -> None:
        self._prefix, self._stream = prefix, stream
        self._start = time.monotonic()

    @classmethod
    def to_stderr(cls, prefix: str) -> Progress:
        return cls(prefix, sys.stderr)

    def stage(self, text: str) -> None:
        """A stage is done: say what it produced."""
        self._say(f"{text} [{time.monotonic() - self._start:.1f}s]")

    def note(self, text: str) -> None:
        """Something the user should know about the input (no time: it is not a stage)."""
        self._say(text)

    def _say(self, text: str) -> None:
        if self._stream is not None:
            print(f"{self._prefix}: {text}", file=self._stream, flush=True)


QUIET = Progress("")
