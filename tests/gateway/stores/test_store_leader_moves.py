"""The security store against the session's Tansu, while the topic's leader moves.

A Kafka client retries NOT_LEADER_OR_FOLLOWER and its kin once it has found the leader again (a
broker restarting, a new topic's leader being elected): an admin write must not fail for it, and a
tail that meets one must not warn as if the store were broken. The broker cannot be made to move a
leader on cue, so the first answers of a real Produce or Fetch are replaced by the refusal a moving
leader gives; everything else is the real exchange with the broker.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.config import UpstreamConfig
from gateway.stores.security_records import StoreRecord, acl_record
from gateway.stores.security_topic import SecurityTopic, StoreTopicSettings, StoreWriteError
from gateway.upstream.client import UpstreamClient
from tests.authz.helpers import acl

NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE = 6, 10


class MovingLeader(SecurityTopic):
    """Answers its first ``produce_refusals`` Produces and ``fetch_refusals`` Fetches with ``error``."""

    def __init__(self, broker: EmbeddedBroker, *, produce_refusals: int = 0, fetch_refusals: int = 0,
                 error: int = NOT_LEADER_OR_FOLLOWER) -> None:
        host, port = broker.bootstrap.rsplit(":", 1)
        settings = StoreTopicSettings(topic=f"_ksgate_security_{uuid.uuid4().hex[:8]}", fetch_max_wait_ms=50)
        super().__init__(UpstreamConfig(bootstrap_servers=((host, int(port)),)), None, settings)
        self.produce_refusals, self.fetch_refusals, self.error = produce_refusals, fetch_refusals, error
        self.produces = self.fetch_answers = 0

    async def _produce_on(self, client: UpstreamClient, batch: bytes, count: int) -> int:
        self.produces += 1
        if self.produces <= self.produce_refusals:  # refused before anything was written
            client = cast(UpstreamClient, _Refusing(self.error))
        return await super()._produce_on(client, batch, count)

    async def _fetch(self, client: UpstreamClient) -> dict[str, Any] | None:
        partition = await super()._fetch(client)
        self.fetch_answers += 1
        if partition is not None and self.fetch_answers <= self.fetch_refusals:
            return {**partition, "error_code": self.error, "records": None}
        return partition


class _Refusing:
    """Stands for the writer's connection: the leader it reached no longer leads the partition."""

    def __init__(self, error: int) -> None:
        self.error = error

    async def request(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        return {"responses": [{"partition_responses": [{"index": 0, "error_code": self.error, "base_offset": -1}]}]}


@pytest.fixture
def started() -> Iterator[list[SecurityTopic]]:
    topics: list[SecurityTopic] = []
    yield topics
    for topic in topics:
        topic.stop()


def _start(topics: list[SecurityTopic], topic: MovingLeader) -> MovingLeader:
    topics.append(topic)
    topic.start()
    assert topic.wait_loaded(30), "the store did not load"
    return topic


def _record(name: str) -> StoreRecord:
    return acl_record(acl(name))


def test_a_write_that_meets_a_moving_leader_is_retried_and_applied(
        broker: EmbeddedBroker, started: list[SecurityTopic]) -> None:
    topic = _start(started, MovingLeader(broker, produce_refusals=2))
    topic.append([_record("after-a-move")], timeout_s=20)
    assert acl("after-a-move") in topic.snapshot.acls
    assert topic.produces == 3


def test_a_refusal_a_client_does_not_retry_fails_the_write_at_once(
        broker: EmbeddedBroker, started: list[SecurityTopic]) -> None:
    topic = _start(started, MovingLeader(broker, produce_refusals=5, error=MESSAGE_TOO_LARGE))
    with pytest.raises(StoreWriteError, match="error code 10"):
        topic.append([_record("too-large")], timeout_s=20)
    assert topic.produces == 1 and acl("too-large") not in topic.snapshot.acls


def test_a_leader_that_keeps_moving_fails_the_write_after_its_retries(
        broker: EmbeddedBroker, started: list[SecurityTopic]) -> None:
    topic = _start(started, MovingLeader(broker, produce_refusals=1_000))
    with pytest.raises(StoreWriteError, match="error code 6"):
        topic.append([_record("never")], timeout_s=20)
    assert 1 < topic.produces < 1_000


def test_a_tail_that_meets_a_moving_leader_loads_and_warns_only_when_it_keeps_moving(
        broker: EmbeddedBroker, started: list[SecurityTopic], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ksgate.store")
    topic = _start(started, MovingLeader(broker, fetch_refusals=4))
    moves = [r for r in caplog.records if "finding the leader again" in r.getMessage()]
    assert [r.levelno for r in moves] == [logging.INFO] * 3 + [logging.WARNING]
    assert topic.fetch_answers >= 5
