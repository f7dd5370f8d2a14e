"""Shared fixtures: a real Tansu broker and a real gateway in front of it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from tests.harness import GatewayThread


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with EmbeddedBroker(log_path=log) as running:
        yield running


@pytest.fixture(scope="module")
def gateway(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    running = GatewayThread(broker.bootstrap).start()
    yield running
    running.stop()
