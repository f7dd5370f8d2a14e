"""A store's change listeners (gateway/stores/listeners.py): one broken listener does not stop the others."""

from __future__ import annotations

import logging
import threading

import pytest

from gateway.stores.listeners import Listeners


def test_a_failing_listener_is_logged_and_the_next_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    listeners: Listeners[[int]] = Listeners(threading.RLock(), "test listener", logging.getLogger("ksgate.test"))
    seen: list[int] = []

    def broken(value: int) -> None:
        raise RuntimeError("boom")

    listeners.subscribe(broken)
    listeners.subscribe(seen.append)
    with caplog.at_level(logging.ERROR, "ksgate.test"):
        listeners.notify(7)
    assert seen == [7]
    assert [r.getMessage().startswith("test listener") for r in caplog.records] == [True]


def test_unsubscribe_stops_the_calls_and_may_be_called_twice() -> None:
    listeners: Listeners[[int]] = Listeners(threading.RLock(), "test listener", logging.getLogger("ksgate.test"))
    seen: list[int] = []
    unsubscribe = listeners.subscribe(seen.append)
    listeners.notify(1)
    unsubscribe()
    unsubscribe()
    listeners.notify(2)
    assert seen == [1]
