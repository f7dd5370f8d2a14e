"""ksgate.security.store.fetch.max.wait.ms reaches the store's tail: on a broker that holds every Fetch for its
whole wait (Tansu), it bounds how soon an instance sees a change (bench/availability/store_propagation.py)."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, build_config
from gateway.stores.setup import security_topic

KAFKA_STORE = {"upstream.bootstrap.servers": "b:9092", "ksgate.security.store": "KAFKA",
               "authorizer.class.name": "StandardAuthorizer"}


def test_the_tail_waits_as_configured() -> None:
    topic = security_topic(build_config({**KAFKA_STORE, "ksgate.security.store.fetch.max.wait.ms": 50}), None)
    assert topic is not None and topic.settings.fetch_max_wait_ms == 50


def test_the_default_wait_is_kafkas_fetch_max_wait() -> None:
    topic = security_topic(build_config(KAFKA_STORE), None)
    assert topic is not None and topic.settings.fetch_max_wait_ms == 500


@pytest.mark.parametrize("wait", [0, -1])
def test_a_wait_that_is_not_positive_is_refused(wait: int) -> None:
    # 0 would make Tansu answer with no partitions at all: the tail would never learn the topic's end.
    with pytest.raises(ConfigError, match=r"fetch\.max\.wait\.ms: must be positive"):
        build_config({**KAFKA_STORE, "ksgate.security.store.fetch.max.wait.ms": wait})
