"""The effective-configuration writer: what it writes starts the same gateway, or it refuses to write."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.commands.effective_config import render_effective_config, write_effective_config
from gateway.config import ConfigError, load_config

SETTINGS = {"upstream.bootstrap.servers": "b:9092", "listeners": "PLAINTEXT://127.0.0.1:19092",
            "ksgate.audit.log.allowed": True, "queued.max.requests": 7, "advertised.listeners": None,
            "listener.name.plaintext.node.port.base": 20000}


def test_written_file_loads_to_the_same_settings(tmp_path: Path) -> None:
    path = write_effective_config(tmp_path / "gateway.yaml", SETTINGS, header=("made by a test", ""))
    text = path.read_text()
    assert text.startswith("# made by a test\n#\n")
    assert path.stat().st_mode & 0o777 == 0o600
    config = load_config(path, env={})
    assert config.queued_max_requests == 7 and config.settings["ksgate.audit.log.allowed"] is True
    assert config.listeners[0].node_port_base == 20000
    assert "advertised.listeners" not in text  # unset keys are left to their defaults


def test_values_that_would_not_read_back_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"queued\.max\.requests"):
        render_effective_config({**SETTINGS, "queued.max.requests": 1.5})
    with pytest.raises(ConfigError, match="unknown configuration key"):
        write_effective_config(tmp_path / "gateway.yaml", {**SETTINGS, "queued.max.request": 3})
    assert not (tmp_path / "gateway.yaml").exists()
