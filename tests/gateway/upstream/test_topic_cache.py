"""The cluster view's learned topic maps stay bounded: a topic listing replaces them (deleted topics are
forgotten, a recreated topic's smaller partition count replaces its old one), and between listings at most
ksgate.topic.cache.max.topics are known."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.upstream import client as upstream_client
from gateway.upstream.cluster_view import RELIST_AFTER_LEARNING, ClusterView
from protocol.api_keys import ApiKey
from protocol.messages import decode_response
from tests.harness import GatewayThread


def _listed(name: str, topic_id: uuid.UUID, partitions: int) -> dict[str, object]:
    return {"error_code": 0, "name": name, "topic_id": topic_id, "partitions": [{}] * partitions}


def test_a_listing_forgets_deleted_topics_and_replaces_partition_counts() -> None:
    cluster = ClusterView()
    kept, gone, old = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    cluster.learn_topic_ids([(kept, "kept"), (gone, "gone"), (old, "again")])
    cluster.learn_partition_counts([("kept", 3), ("gone", 4), ("again", 50)])
    since = cluster.learned_so_far()
    again = uuid.uuid4()  # "again" deleted and recreated with fewer partitions
    cluster.relist([_listed("kept", kept, 3), _listed("again", again, 2)], since)
    assert dict(cluster.topic_names) == {kept: "kept", again: "again"}
    assert dict(cluster.partition_counts) == {"kept": 3, "again": 2}


def test_what_was_learned_while_the_listing_was_asked_for_is_kept() -> None:
    cluster = ClusterView()
    before = uuid.uuid4()
    cluster.learn_topic_ids([(before, "before")])
    since = cluster.learned_so_far()
    during = uuid.uuid4()  # created after the listing was asked for: a client's Metadata showed it
    cluster.learn_topic_ids([(during, "during")])
    cluster.learn_partition_counts([("during", 6)])
    cluster.relist([], since)
    assert dict(cluster.topic_names) == {during: "during"} and dict(cluster.partition_counts) == {"during": 6}


def test_between_listings_no_topic_beyond_the_cap_is_learned() -> None:
    cluster = ClusterView(max_topics=3)
    ids = [uuid.uuid4() for _ in range(5)]
    cluster.relist([_listed("t0", ids[0], 1), _listed("t1", ids[1], 1)], cluster.learned_so_far())
    cluster.learn_topic_ids([(ids[2], "t2"), (ids[3], "t3"), (ids[4], "t4")])
    cluster.learn_partition_counts([("t2", 1), ("t3", 1), ("t0", 9)])
    assert sorted(cluster.topic_names.values()) == ["t0", "t1", "t2"]
    # A new count of a known topic is no new entry: it replaces the old one even at the cap.
    assert dict(cluster.partition_counts) == {"t0": 9, "t1": 1, "t2": 1}
    assert cluster.topic_names.get(ids[4]) is None  # a miss: UNKNOWN_TOPIC_ID and a listing


def test_a_listing_longer_than_the_cap_is_cut_and_says_so() -> None:
    cluster = ClusterView(max_topics=2)
    listing = [_listed(f"t{i}", uuid.uuid4(), 1) for i in range(3)]
    assert cluster.relist(listing, cluster.learned_so_far())
    assert len(cluster.topic_names) == 2 and len(cluster.partition_counts) == 2
    assert not cluster.relist(listing[:2], cluster.learned_so_far())


def test_learning_copies_what_was_learned_since_the_listing_not_the_listing() -> None:
    cluster = ClusterView()
    cluster.relist([_listed(f"t{i}", uuid.uuid4(), 1) for i in range(100)], cluster.learned_so_far())
    listed, snapshot = cluster.topic_names.listed, cluster.topic_names
    new = uuid.uuid4()
    assert not cluster.learn_topic_ids([(new, "new")])
    assert cluster.topic_names.listed is listed and dict(cluster.topic_names.learned) == {new: "new"}
    assert new not in snapshot and len(snapshot) == 100 and len(cluster.topic_names) == 101  # never edited


def test_enough_learning_since_the_listing_asks_for_another() -> None:
    cluster = ClusterView()
    assert cluster.learn_topic_ids([(uuid.uuid4(), f"t{i}") for i in range(RELIST_AFTER_LEARNING)])


def _topic_refreshed(gateway: GatewayThread) -> None:
    assert gateway.loop is not None
    asyncio.run_coroutine_threadsafe(gateway.gateway._refresh_topics(), gateway.loop).result(timeout=15)


def _learn_through(gateway: GatewayThread, name: str) -> None:
    """A client's Metadata answer, passing through the gateway, teaches it the topic's id and partitions."""
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    assert name in admin.list_topics(topic=name, timeout=10).topics


@pytest.fixture()
def refreshing(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    running = GatewayThread(broker.bootstrap, {"ksgate.topic.cache.refresh.ms": 200}).start()
    yield running
    running.stop()


def _names(gateway: GatewayThread) -> set[str]:
    return set(gateway.call(lambda: dict(gateway.gateway.ctx.cluster.topic_names)).values())


def test_a_topic_deleted_on_the_cluster_is_forgotten_at_the_next_listing(gateway: GatewayThread,
                                                                        broker: EmbeddedBroker) -> None:
    name = f"churn-{uuid.uuid4().hex[:8]}"
    upstream = AdminClient({"bootstrap.servers": broker.bootstrap})
    upstream.create_topics([NewTopic(name, 4, 1)])[name].result(timeout=10)
    _learn_through(gateway, name)
    assert name in _names(gateway)
    assert gateway.call(lambda: gateway.gateway.ctx.cluster.partition_counts.get(name)) == 4
    upstream.delete_topics([name])[name].result(timeout=10)
    _topic_refreshed(gateway)
    assert name not in _names(gateway)
    assert gateway.call(lambda: gateway.gateway.ctx.cluster.partition_counts.get(name)) is None
    upstream.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10)  # recreated, fewer partitions
    _topic_refreshed(gateway)
    assert gateway.call(lambda: gateway.gateway.ctx.cluster.partition_counts.get(name)) == 1


def test_the_listing_is_decoded_off_the_event_loop(gateway: GatewayThread, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every topic's Metadata can take a large cluster half a second to decode: never on the loop serving clients."""
    decoded_on: list[int] = []

    def recording(payload: memoryview, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
        if api_key == ApiKey.METADATA:
            decoded_on.append(threading.get_ident())
        return decode_response(payload, api_key, version)

    monkeypatch.setattr(upstream_client, "decode_response", recording)
    loop_thread = gateway.call(threading.get_ident)
    _topic_refreshed(gateway)
    assert decoded_on and loop_thread not in decoded_on


def test_the_gateway_lists_every_topic_each_refresh_interval(refreshing: GatewayThread,
                                                             broker: EmbeddedBroker) -> None:
    name = f"listed-{uuid.uuid4().hex[:8]}"
    upstream = AdminClient({"bootstrap.servers": broker.bootstrap})
    upstream.create_topics([NewTopic(name, 1, 1)])[name].result(timeout=10)
    # Nobody asks the gateway about the topic: only the periodic listing can teach it. Polled (the listing
    # is a timer, no event to wait on), for far longer than the 200 ms interval.
    deadline = time.monotonic() + 20
    while name not in _names(refreshing) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert name in _names(refreshing)
    upstream.delete_topics([name])[name].result(timeout=10)
    deadline = time.monotonic() + 20
    while name in _names(refreshing) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert name not in _names(refreshing)


def test_a_finished_topic_refresh_leaves_no_task_behind(gateway: GatewayThread) -> None:
    """A refresh asked for by a miss (at most one a second, for as long as the gateway runs) is not kept."""
    server, loop = gateway.gateway, gateway.loop
    assert loop is not None

    def ask() -> tuple[int, asyncio.Task[None]]:
        before = len(server._tasks)
        server._last_topic_refresh = float("-inf")  # not rate limited by an earlier one
        server._request_topic_refresh()
        return before, server._tasks[-1]

    before, task = gateway.call(ask)
    asyncio.run_coroutine_threadsafe(asyncio.wait([task]), loop).result(timeout=15)
    assert task.done() and gateway.call(lambda: len(server._tasks)) == before
