"""Counting the Python lines a block of code executes (a deterministic measure of work).

Wall time varies with the machine's load; the number of line events a decoder executes for
a given input does not, so bounded-work proofs count steps instead of timing them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any


@contextmanager
def line_steps() -> Iterator[list[int]]:
    """Yields a list that receives the number of Python line events the block executed
    (in every Python frame it calls, on this thread).  C code counts as the one line that
    called it, so pair this with a heap bound for work done inside builtins."""
    count = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            count[0] += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local

    previous = sys.gettrace()
    result: list[int] = []
    sys.settrace(calls)
    try:
        yield result
    finally:
        sys.settrace(previous)
        result.append(count[0])
