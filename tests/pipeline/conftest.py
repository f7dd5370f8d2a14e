"""One local[2] SparkSession per test module (the JVM itself is started once per process)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
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
