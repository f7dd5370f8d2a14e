"""The two sides of the Produce comparisons (kit.py), one gateway and one set of topics per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.apache_kafka import KafkaBroker
from tests.gateway.upstream.produce_vs_kafka.kit import Sides, Topics, new_topics, started


@pytest.fixture(scope="module")
def sides(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sides]:
    yield from started(kafka, tmp_path_factory.mktemp("produce-vs-kafka"))


@pytest.fixture(scope="module")
def topics(kafka: KafkaBroker) -> Topics:
    return new_topics(kafka)
