"""The Apache Kafka test kit's server.properties: extra keys set after the layout's ports are known (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.apache_kafka import KafkaBroker


def test_set_properties_writes_the_lines_after_the_kits_own(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path / "lib", tmp_path / "kafka")
    listeners = f"{broker.layout.address('PLAINTEXT')},EXTRA://127.0.0.1:1"
    broker.set_properties({"listeners": listeners, "num.io.threads": 3})
    lines = broker.layout.server_properties.read_text().splitlines()
    assert lines[-2:] == [f"listeners={listeners}", "num.io.threads=3"]
    # The kit's own listeners line is still there, earlier: Kafka reads the later one.
    assert sum(line.startswith("listeners=") for line in lines) == 2


def test_set_properties_replaces_what_was_set_before(tmp_path: Path) -> None:
    broker = KafkaBroker(tmp_path / "lib", tmp_path / "kafka", extra_properties={"num.io.threads": 3})
    broker.set_properties({"num.network.threads": 2})
    text = broker.layout.server_properties.read_text()
    assert "num.network.threads=2\n" in text and "num.io.threads" not in text


def test_set_properties_refuses_a_running_broker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = KafkaBroker(tmp_path / "lib", tmp_path / "kafka")
    monkeypatch.setattr(KafkaBroker, "running", property(lambda self: True))
    with pytest.raises(RuntimeError):
        broker.set_properties({"num.io.threads": 3})
