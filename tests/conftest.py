"""Shared fixtures: a real Tansu broker and a real gateway in front of it; a real Apache Kafka.

Every test that reaches the ``broker`` fixture is marked ``broker`` here (every test that reaches
``kafka`` ``kafka``, and every test that reaches tests/pipeline's ``spark`` fixture ``spark``), so
that ``pytest -m "not broker"`` runs the rest without starting Tansu, and ``-m "not broker and not
kafka and not spark"`` without a JVM either."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from tests.apache_kafka import KafkaBroker, kafka_lib
from tests.harness import GatewayThread

# A run that deselects these tests must not start a broker or Spark by accident (a test that
# starts its own but lacks the marker): it then fails loudly on these paths, in this process
# and in the processes that tests start.
TRIPWIRES = {
    "broker": ("KSGATE_TANSU_BIN", "/nonexistent/tansu (broker tests deselected: mark the test pytest.mark.broker)"),
    "spark": ("SPARK_HOME", "/nonexistent/spark (spark tests deselected: mark the test pytest.mark.spark)"),
    "kafka": ("REFERENCE_KAFKA_LIB", "/nonexistent/kafka (kafka tests deselected: mark the test pytest.mark.kafka)"),
}
# A test that uses one of these fixtures (``broker`` also behind ``gateway``) gets the marker of that name.
MARKED_FIXTURES = ("broker", "spark", "kafka")


def pytest_configure(config: pytest.Config) -> None:
    for marker, (variable, path) in TRIPWIRES.items():
        if f"not {marker}" in (config.option.markexpr or ""):
            os.environ[variable] = path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test whose fixture closure starts a shared broker (Tansu, Kafka) or a Spark session."""
    for item in items:
        for fixture in MARKED_FIXTURES:
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(fixture)


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


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """One Apache Kafka (tests/apache_kafka) for the whole session, started on first use; tests
    must not stop or reconfigure it (a test that restarts a broker starts its own)."""
    lib = kafka_lib()
    if lib is None:
        pytest.skip("no Apache Kafka jars: set REFERENCE_KAFKA_LIB (scripts/test.sh does) or make "
                    "scripts/kafka/fetch.sh runnable (java and mvn on PATH)")
    with KafkaBroker(lib, tmp_path_factory.mktemp("kafka")) as running:
        yield running
