"""The change listeners of a store: subscribe/unsubscribe under the store's lock, and a call to each in turn.

A listener that raises is logged and the others still run: one broken subscriber must not stop the
authorizer (or the quota enforcer) from seeing a change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Generic, ParamSpec

P = ParamSpec("P")


class Listeners(Generic[P]):
    """Callbacks taking ``P``; ``lock`` is the store's (held by the caller of ``notify``)."""

    def __init__(self, lock: AbstractContextManager[object], what: str,
                 log: logging.Logger) -> None:
        self._lock, self._what, self._log = lock, what, log
        self._callbacks: list[Callable[P, object]] = []

    def subscribe(self, callback: Callable[P, object]) -> Callable[[], None]:
        """Add ``callback``; returns the function that removes it (harmless to call twice)."""
        with self._lock:
            self._callbacks.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return unsubscribe

    def notify(self, *args: P.args, **kwargs: P.kwargs) -> None:
        for callback in list(self._callbacks):
            try:
                callback(*args, **kwargs)
            except Exception:
                self._log.exception("%s %r failed", self._what, callback)
