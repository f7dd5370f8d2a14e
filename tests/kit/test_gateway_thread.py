"""The tests' gateway thread leaves no temporary directory behind: removed when it stops, when its start
fails and when its configuration is refused; a directory the caller passes is the caller's and is kept."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.config import ConfigError
from tests.harness import GatewayThread


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where tempfile makes directories for the duration of the test (so that they can be counted)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_stopped_gateway_leaves_no_temporary_directory(broker: EmbeddedBroker, scratch: Path) -> None:
    gateway = GatewayThread(broker.bootstrap).start()
    assert (gateway.directory / "audit.log").exists() and gateway.directory.parent == scratch
    gateway.stop()
    assert list(scratch.iterdir()) == []


def test_a_refused_configuration_leaves_no_temporary_directory(scratch: Path) -> None:
    with pytest.raises(ConfigError):
        GatewayThread("127.0.0.1:9", {"listeners": "NOT_A_PROTOCOL://127.0.0.1:1"})
    assert list(scratch.iterdir()) == []


def test_a_failed_start_leaves_no_temporary_directory(scratch: Path) -> None:
    with pytest.raises(Exception):  # noqa: B017 - whichever error the start-up probe reports
        GatewayThread("127.0.0.1:9", {"ksgate.upstream.startup.timeout.ms": 100}).start()
    assert list(scratch.iterdir()) == []


def test_a_directory_the_caller_passes_is_kept(broker: EmbeddedBroker, tmp_path: Path) -> None:
    gateway = GatewayThread(broker.bootstrap, directory=tmp_path).start()
    gateway.stop()
    assert (tmp_path / "audit.log").exists()
