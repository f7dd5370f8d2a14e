"""Which master the audit jobs use, and the local parallelism they size shuffles from."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark import SparkContext

from pipeline.session import local_cores, master_is_configured


def test_local_cores() -> None:
    assert local_cores("local[2]") == 2
    assert local_cores("local") == 1
    assert local_cores("local[3,2]") == 3
    assert (local_cores("local[*]") or 0) >= 1
    assert local_cores("yarn") is None
    assert local_cores("spark://host:7077") is None


def test_an_existing_master_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SparkContext, "_active_spark_context", None)
    assert not master_is_configured({})
    assert master_is_configured({"PYSPARK_GATEWAY_PORT": "40000"})  # launched by spark-submit
    assert master_is_configured({"PYSPARK_SUBMIT_ARGS": "--master yarn pyspark-shell"})
    assert master_is_configured({"MASTER": "spark://host:7077"})
    assert not master_is_configured({"PYSPARK_SUBMIT_ARGS": "--driver-memory 4g pyspark-shell"})
