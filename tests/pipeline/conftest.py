"""One local[2] SparkSession per test module (the JVM itself is started once per process)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TEST_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("Spark needs Java 17+")
    from pipeline.session import build_session

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = build_session("local[2]", TEST_CONF)
    yield session
    session.stop()


@pytest.fixture
def log_gone_once_surveyed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``events.mixed_log``, deleted as soon as a command has said what its survey found ("read N lines: …"):
    a command that read the log again after its survey fails."""
    from pipeline.progress import Progress
    from tests.pipeline.events import mixed_log

    log = Path(mixed_log(tmp_path / "in"))
    said = Progress.stage

    def stage(progress: Progress, text: str) -> None:
        said(progress, text)
        if text.startswith("read "):
            log.unlink()

    monkeypatch.setattr(Progress, "stage", stage)
    return log
