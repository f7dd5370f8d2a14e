"""controller_mutation_rate in the proxy session (no sockets): over the quota, CreateTopics and the
other mutations are answered by the gateway with THROTTLING_QUOTA_EXCEEDED, never relayed.

The PLAINTEXT listener's principal is User:ANONYMOUS; a fake clock drives the buckets.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from authz.model import AclOperation
from gateway.quotas.lookup import DictQuotas
from gateway.quotas.sensors import QuotaSensors
from gateway.server import Gateway
from gateway.stores.file_acls import FileAclStore
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from protocol.messages import request_frame
from tests.authz.helpers import PREFIXED, acl
from tests.authz.test_policies_data import request, response
from tests.gateway.quotas.test_enforcement import Clock
from tests.gateway.session.session_driver import Driver, gateway_for

CREATE_V = 7
REFUSED = 89


@pytest.fixture
def gateway(tmp_path: Path) -> Gateway:
    gw = gateway_for(tmp_path)
    gw.ctx.quota_sensors = QuotaSensors(clock=Clock())
    gw.ctx.quotas = DictQuotas({("user=ANONYMOUS", "controller_mutation_rate"): 1.0})
    return gw


def create(names: list[str], partitions: int, validate_only: bool = False) -> dict[str, Any]:
    return request(ApiKey.CREATE_TOPICS, CREATE_V, timeout_ms=1000, validate_only=validate_only, topics=[
        {"name": n, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
        for n in names])


def created(names: list[str]) -> dict[str, Any]:
    return response(ApiKey.CREATE_TOPICS, CREATE_V, "topics", [
        {"name": n, "topic_id": uuid.uuid4(), "error_code": 0, "error_message": None, "num_partitions": 20,
         "replication_factor": 1, "configs": []} for n in names], throttle_time_ms=0)


def test_over_the_quota_creates_are_answered_locally_with_89_on_every_topic(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 5, create(["a"], 20)))  # 11 − 20 = −9
    (first,) = driver.upstream_requests()
    driver.answer(first, created(["a"]))
    assert not driver.reading_paused  # the request that empties the bucket is not throttled
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 6, create(["b", "c"], 1)))
    assert driver.upstream_requests() == []  # never relayed
    (_, ok), (_, refused) = driver.responses(ApiKey.CREATE_TOPICS, CREATE_V)
    assert [t["error_code"] for t in ok["topics"]] == [0] and ok["throttle_time_ms"] == 0
    assert [(t["name"], t["error_code"], t["error_message"]) for t in refused["topics"]] \
        == [("b", REFUSED, None), ("c", REFUSED, None)]
    assert refused["throttle_time_ms"] == 9000
    assert driver.reading_paused and driver.timers["quota"] == pytest.approx(9.0)  # muted as Kafka mutes
    totals = gateway.ctx.quota_sensors.totals[("controller_mutation_rate", "user=ANONYMOUS")]  # /metrics' series
    assert (totals.throttled, totals.throttle_ms, totals.bound) == (1, 9000, 1.0)


def test_validate_only_creates_are_counted_as_kafka_4_4_counts_them(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 5, create(["a"], 20, validate_only=True)))  # −9
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 6, create(["b"], 1)))
    assert len(driver.upstream_requests()) == 1  # the second was refused


def test_the_topic_that_finds_the_bucket_negative_is_refused_and_the_others_relayed(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 5, create(["m", "n", "o", "p"], 4)))  # 11 → 7 → 3 → −1
    (relayed,) = driver.upstream_requests()
    assert [t["name"] for t in relayed.body["topics"]] == ["m", "n", "o"]
    assert driver.reading_paused and driver.timers["quota"] == pytest.approx(1.0)
    driver.answer(relayed, created(["o", "m", "n"]))  # whatever order the upstream answers in
    ((_, answer),) = driver.responses(ApiKey.CREATE_TOPICS, CREATE_V)
    assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [("m", 0), ("n", 0), ("o", 0), ("p", REFUSED)]
    assert answer["throttle_time_ms"] == 1000


def test_old_versions_are_relayed_and_throttled_instead(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    body = request(ApiKey.CREATE_TOPICS, 5, timeout_ms=1000, validate_only=False, topics=[
        {"name": "a", "num_partitions": 13, "replication_factor": 1, "assignments": [], "configs": []}])
    driver.send(request_frame(ApiKey.CREATE_TOPICS, 5, 5, body))  # 11 − 13 = −2: 2 s to refill
    (relayed,) = driver.upstream_requests()
    assert driver.reading_paused
    driver.answer(relayed, response(ApiKey.CREATE_TOPICS, 5, "topics", [
        {"name": "a", "error_code": 0, "error_message": None, "num_partitions": 13, "replication_factor": 1,
         "configs": []}], throttle_time_ms=0))
    ((_, answer),) = driver.responses(ApiKey.CREATE_TOPICS, 5)
    assert answer["throttle_time_ms"] == 2000 and answer["topics"][0]["error_code"] == 0


def test_delete_topics_counts_and_is_refused_by_name(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    version = 6
    topics = [{"name": f"t{i}", "topic_id": uuid.UUID(int=0)} for i in range(12)]  # 12 topics: 11 − 12 = −1
    driver.send(request_frame(ApiKey.DELETE_TOPICS, version, 5, request(ApiKey.DELETE_TOPICS, version,
                                                                       topics=topics, timeout_ms=1000)))
    driver.send(request_frame(ApiKey.DELETE_TOPICS, version, 6, request(ApiKey.DELETE_TOPICS, version,
                                                                       topics=topics[:1], timeout_ms=1000)))
    (relayed,) = driver.upstream_requests()
    driver.answer(relayed, response(ApiKey.DELETE_TOPICS, version, "responses", [
        {"name": t["name"], "topic_id": uuid.uuid4(), "error_code": 0, "error_message": None} for t in topics],
        throttle_time_ms=0))
    (_, refused) = driver.responses(ApiKey.DELETE_TOPICS, version)[-1]  # in order: after the relayed answer
    assert [(t["name"], t["error_code"]) for t in refused["responses"]] == [("t0", REFUSED)]
    assert refused["throttle_time_ms"] == 1000


def test_create_partitions_counts_the_assignments(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    grow = [{"name": "t", "count": 20, "assignments": [{"broker_ids": [1]}] * 12}]
    body = request(ApiKey.CREATE_PARTITIONS, 3, topics=grow, timeout_ms=1000, validate_only=False)
    driver.send(request_frame(ApiKey.CREATE_PARTITIONS, 3, 5, body))
    driver.send(request_frame(ApiKey.CREATE_PARTITIONS, 3, 6, body))
    (relayed,) = driver.upstream_requests()
    driver.answer(relayed, response(ApiKey.CREATE_PARTITIONS, 3, "results", [
        {"name": "t", "error_code": 0, "error_message": None}], throttle_time_ms=0))
    (_, refused) = driver.responses(ApiKey.CREATE_PARTITIONS, 3)[-1]
    assert refused["results"] == [{"name": "t", "error_code": REFUSED, "error_message": None}]


def test_without_a_mutation_quota_nothing_is_counted(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=bob", "controller_mutation_rate"): 1.0})
    driver = Driver.connect(gateway)
    for correlation_id in (5, 6, 7):
        driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, correlation_id, create(["a"], 20)))
    assert len(driver.upstream_requests()) == 3 and not driver.reading_paused


def _metadata_shows(driver: Driver, name: str, partitions: int) -> None:
    """A client's Metadata request, answered by the upstream with ``name`` of ``partitions`` partitions."""
    driver.send(request_frame(ApiKey.METADATA, 12, 90, request(ApiKey.METADATA, 12, allow_auto_topic_creation=False,
                                                               topics=[{"topic_id": uuid.UUID(int=0), "name": name}])))
    (asked,) = driver.upstream_requests()
    driver.answer(asked, response(ApiKey.METADATA, 12, "topics", [{
        "error_code": 0, "name": name, "topic_id": uuid.uuid4(), "is_internal": False,
        "topic_authorized_operations": -2147483648, "partitions": [
            {"error_code": 0, "partition_index": i, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1],
             "isr_nodes": [1], "offline_replicas": []} for i in range(partitions)]}],
        brokers=[{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}], cluster_id="c",
        controller_id=1))
    ((_, shown),) = driver.responses(ApiKey.METADATA, 12)  # consumed: the rest are the mutations' answers
    assert len(shown["topics"][0]["partitions"]) == partitions


def test_deleting_a_topic_counts_the_partitions_metadata_showed(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    _metadata_shows(driver, "big", 20)
    assert gateway.ctx.cluster.partition_counts == {"big": 20}
    delete = request(ApiKey.DELETE_TOPICS, 6, topics=[{"name": "big", "topic_id": uuid.UUID(int=0)}], timeout_ms=1000)
    driver.send(request_frame(ApiKey.DELETE_TOPICS, 6, 5, delete))  # 11 − 20 = −9
    driver.send(request_frame(ApiKey.DELETE_TOPICS, 6, 6, delete))
    (relayed,) = driver.upstream_requests()
    driver.answer(relayed, response(ApiKey.DELETE_TOPICS, 6, "responses", [
        {"name": "big", "topic_id": uuid.uuid4(), "error_code": 0, "error_message": None}], throttle_time_ms=0))
    (_, refused) = driver.responses(ApiKey.DELETE_TOPICS, 6)[-1]
    assert refused["responses"][0]["error_code"] == REFUSED and refused["throttle_time_ms"] == 9000


def test_adding_partitions_counts_the_new_total_minus_the_known_count(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    _metadata_shows(driver, "t", 3)
    grow = request(ApiKey.CREATE_PARTITIONS, 3, topics=[{"name": "t", "count": 15, "assignments": None}],
                   timeout_ms=1000, validate_only=False)
    driver.send(request_frame(ApiKey.CREATE_PARTITIONS, 3, 5, grow))  # 11 − (15 − 3) = −1
    driver.send(request_frame(ApiKey.CREATE_PARTITIONS, 3, 6, grow))
    (relayed,) = driver.upstream_requests()
    driver.answer(relayed, response(ApiKey.CREATE_PARTITIONS, 3, "results", [
        {"name": "t", "error_code": 0, "error_message": None}], throttle_time_ms=0))
    (_, refused) = driver.responses(ApiKey.CREATE_PARTITIONS, 3)[-1]
    assert refused["results"][0]["error_code"] == REFUSED and refused["throttle_time_ms"] == 1000


def test_delete_topics_v5_names_topics_and_is_refused_by_name(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    names = [f"t{i}" for i in range(12)]  # 11 − 12 = −1
    for correlation_id, count in ((5, 12), (6, 2)):
        driver.send(request_frame(ApiKey.DELETE_TOPICS, 5, correlation_id, request(
            ApiKey.DELETE_TOPICS, 5, topic_names=names[:count], timeout_ms=1000)))
    (relayed,) = driver.upstream_requests()
    driver.answer(relayed, response(ApiKey.DELETE_TOPICS, 5, "responses", [
        {"name": n, "error_code": 0, "error_message": None} for n in names], throttle_time_ms=0))
    (_, first), (_, second) = driver.responses(ApiKey.DELETE_TOPICS, 5)
    assert first["throttle_time_ms"] == 0
    assert [(t["name"], t["error_code"]) for t in second["responses"]] == [("t0", REFUSED), ("t1", REFUSED)]
    assert second["throttle_time_ms"] == 1000


def test_delete_topics_v4_is_counted_and_throttled(gateway: Gateway) -> None:
    driver = Driver.connect(gateway)
    names = [f"t{i}" for i in range(13)]  # 11 − 13 = −2: 2 s to refill
    driver.send(request_frame(ApiKey.DELETE_TOPICS, 4, 5, request(ApiKey.DELETE_TOPICS, 4, topic_names=names,
                                                                  timeout_ms=1000)))
    (relayed,) = driver.upstream_requests()
    assert driver.reading_paused and driver.timers["quota"] == pytest.approx(2.0)
    driver.answer(relayed, response(ApiKey.DELETE_TOPICS, 4, "responses", [
        {"name": n, "error_code": 0, "error_message": None} for n in names], throttle_time_ms=0))
    ((_, answer),) = driver.responses(ApiKey.DELETE_TOPICS, 4)
    assert answer["throttle_time_ms"] == 2000 and {t["error_code"] for t in answer["responses"]} == {0}


def test_topics_the_authorizer_denied_keep_their_error_among_the_quotas_refusals(tmp_path: Path) -> None:
    FileAclStore(tmp_path / "acls.json").add([acl("ok-", AclOperation.CREATE, principal="User:ANONYMOUS",
                                                  pattern=PREFIXED)])
    gateway = gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer",
                                       "ksgate.acl.file": str(tmp_path / "acls.json")})
    gateway.ctx.quota_sensors = QuotaSensors(clock=Clock())
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS", "controller_mutation_rate"): 1.0})
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 5, request(
        ApiKey.CREATE_TOPICS, CREATE_V, timeout_ms=1000, validate_only=False, topics=[
            {"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
            for n, p in (("ok-a", 12), ("no-x", 1), ("ok-b", 1))])))  # ok-a: 11 → −1; no-x is not counted
    (relayed,) = driver.upstream_requests()
    assert [t["name"] for t in relayed.body["topics"]] == ["ok-a"]
    driver.answer(relayed, created(["ok-a"]))
    ((_, answer),) = driver.responses(ApiKey.CREATE_TOPICS, CREATE_V)
    assert [(t["name"], t["error_code"]) for t in answer["topics"]] \
        == [("ok-a", 0), ("no-x", KafkaError.TOPIC_AUTHORIZATION_FAILED), ("ok-b", REFUSED)]


def test_topics_the_upstream_refuses_are_given_back(gateway: Gateway) -> None:
    """Kafka 4.4 counts only the topics it creates: one that already exists costs nothing."""
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 5, create(["a", "b"], 10)))  # 11 → 1 → −9
    (relayed,) = driver.upstream_requests()
    answer = created(["a", "b"])
    answer["topics"][0].update(error_code=KafkaError.TOPIC_ALREADY_EXISTS, error_message="exists")
    driver.answer(relayed, answer)
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 6, create(["c"], 1)))  # −9 + 10 = 1: passes
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 7, create(["d"], 1)))  # 0: passes
    driver.send(request_frame(ApiKey.CREATE_TOPICS, CREATE_V, 8, create(["e"], 1)))  # −1: refused
    assert [[t["name"] for t in r.body["topics"]] for r in driver.upstream_requests()] == [["c"], ["d"]]


def test_deletions_by_topic_id_are_counted_merged_and_given_back_by_id(gateway: Gateway) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    gateway.ctx.cluster.learn_topic_ids([(a, "a")])
    gateway.ctx.cluster.learn_partition_counts([("a", 12)])
    driver = Driver.connect(gateway)
    by_id = [{"name": None, "topic_id": a}, {"name": None, "topic_id": b}]
    driver.send(request_frame(ApiKey.DELETE_TOPICS, 6, 5, request(ApiKey.DELETE_TOPICS, 6, topics=by_id,
                                                                  timeout_ms=1000)))  # a: 11 → −1, b refused
    (relayed,) = driver.upstream_requests()
    assert relayed.body["topics"] == by_id[:1]
    driver.answer(relayed, response(ApiKey.DELETE_TOPICS, 6, "responses", [  # the upstream names it, and refuses it
        {"name": "a", "topic_id": a, "error_code": KafkaError.UNKNOWN_TOPIC_ID, "error_message": None}],
        throttle_time_ms=0))
    ((_, answer),) = driver.responses(ApiKey.DELETE_TOPICS, 6)
    assert [(t["topic_id"], t["error_code"]) for t in answer["responses"]] \
        == [(a, KafkaError.UNKNOWN_TOPIC_ID), (b, REFUSED)]
    buckets = gateway.ctx.quota_sensors.mutations
    assert buckets.tokens("user=ANONYMOUS", 1.0) == -1  # given back when the next mutation is counted
    clock = gateway.ctx.quota_sensors._clock
    assert isinstance(clock, Clock)
    clock.now += 1  # the mute is over, the bucket back at 0
    driver.fire("quota")
    driver.send(request_frame(ApiKey.DELETE_TOPICS, 6, 6, request(ApiKey.DELETE_TOPICS, 6, topics=by_id[:1],
                                                                  timeout_ms=1000)))
    assert len(driver.upstream_requests()) == 1
    assert buckets.tokens("user=ANONYMOUS", 1.0) == 11 - 12  # a's 12 given back (to the burst, 11), then counted
