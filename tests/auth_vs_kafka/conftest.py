"""The two sides of the authentication-phase comparisons (kit.py): one gateway per module, the session's Kafka."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.apache_kafka import KafkaBroker
from tests.auth_vs_kafka.kit import Sides, started


@pytest.fixture(scope="module")
def sides(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sides]:
    yield from started(kafka, tmp_path_factory.mktemp("auth-vs-kafka"))
