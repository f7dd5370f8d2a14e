"""Quota enforcement in the proxy session (no sockets): throttle_time_ms in the answer, a muted reader.

The PLAINTEXT listener's principal is User:ANONYMOUS; a fake clock drives the rates.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from gateway.quotas.lookup import DictQuotas
from gateway.quotas.sensors import QuotaSensors
from gateway.server import Gateway
from gateway.session import actions as act
from protocol.api_keys import ApiKey
from protocol.messages import request_frame
from tests.authz.test_policies_data import request, response
from tests.gateway.session.session_driver import Driver, gateway_for

PRODUCE_V = 9
FETCH_V = 12
RECORDS = 10_000  # bytes of records per Produce


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def produce(acks: int = 1) -> dict[str, Any]:
    return request(ApiKey.PRODUCE, PRODUCE_V, acks=acks, timeout_ms=1000,
                   topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": b"x" * RECORDS}]}])


def produced(throttle_ms: int = 0) -> dict[str, Any]:
    return response(ApiKey.PRODUCE, PRODUCE_V, "responses", [], throttle_time_ms=throttle_ms)


@pytest.fixture
def gateway(tmp_path: Path) -> Gateway:
    gw = gateway_for(tmp_path)
    gw.ctx.quota_sensors = QuotaSensors(clock=Clock())
    return gw


def quotas(gw: Gateway, **bounds: float) -> DictQuotas:
    book = DictQuotas({(entity.replace("__", ","), kind): bound
                       for key, bound in bounds.items() for entity, kind in [key.split(":")]})
    gw.ctx.quotas = book
    return book


def test_a_producer_over_its_byte_rate_is_answered_at_once_with_the_throttle_and_muted(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS", "producer_byte_rate"): 1500.0})
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 5, produce()))
    # ~10 KB over the 10 s a new rate is measured on: ~1010 B/s, within 1500 B/s; a second one is over
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 6, produce()))
    assert driver.reading_paused and "quota" in driver.timers
    first, second = driver.upstream_requests()
    driver.answer(first, produced())
    driver.answer(second, produced())
    (_, body_1), (_, body_2) = driver.responses(ApiKey.PRODUCE, PRODUCE_V)
    # Kafka's formula: rate = 2 frames / 10 s; throttle = (rate - 1500) / 1500 × 10 s
    size = len(request_frame(ApiKey.PRODUCE, PRODUCE_V, 6, produce()))
    assert body_2["throttle_time_ms"] == round((2 * size / 10 - 1500) / 1500 * 10_000) > 3000
    assert body_1["throttle_time_ms"] == 0  # the first one was within the quota
    assert driver.timers["quota"] == pytest.approx(body_2["throttle_time_ms"] / 1000)


def test_the_mute_ends_when_its_timer_fires_and_the_throttle_is_over(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS", "producer_byte_rate"): 1500.0})
    clock = gateway.ctx.quota_sensors._clock
    assert isinstance(clock, Clock)
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 5, produce()) * 1
                + request_frame(ApiKey.PRODUCE, PRODUCE_V, 6, produce()))
    delay = driver.timers["quota"]
    clock.now += delay / 2
    driver.fire("quota")  # early (a timer may fire late, never the mute end early): still muted
    assert driver.reading_paused and driver.timers["quota"] == pytest.approx(delay / 2)
    clock.now += delay / 2
    driver.fire("quota")
    assert not driver.reading_paused


def test_the_upstreams_own_larger_throttle_is_kept(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS", "producer_byte_rate"): 1500.0})
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 5, produce()) + request_frame(ApiKey.PRODUCE, PRODUCE_V, 6,
                                                                                       produce()))
    first, second = driver.upstream_requests()
    driver.answer(first, produced(7))
    driver.answer(second, produced(60_000))
    (_, body_1), (_, body_2) = driver.responses(ApiKey.PRODUCE, PRODUCE_V)
    assert body_1["throttle_time_ms"] == 7 and body_2["throttle_time_ms"] == 60_000


def test_an_acks_zero_producer_over_its_quota_is_muted_without_an_answer(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS", "producer_byte_rate"): 1500.0})
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 5, produce(acks=0)) * 2)
    assert driver.reading_paused and "quota" in driver.timers
    assert driver.session.in_flight == 0 and driver.client_bytes == b""


def test_a_consumer_over_its_byte_rate_gets_the_fetch_bytes_untouched_but_the_throttle(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS,client-id=<default>", "consumer_byte_rate"): 100.0})
    driver = Driver.connect(gateway)
    fetch = request(ApiKey.FETCH, FETCH_V, topics=[])
    driver.send(request_frame(ApiKey.FETCH, FETCH_V, 2, fetch))
    (relayed,) = driver.upstream_requests()
    assert not driver.reading_paused  # a Fetch request costs nothing: its response does
    records = b"r" * 5000
    answer = response(ApiKey.FETCH, FETCH_V, "responses", [{
        "topic": "t", "partitions": [{"partition_index": 0, "error_code": 0, "high_watermark": 1,
                                      "last_stable_offset": 1, "log_start_offset": 0, "aborted_transactions": None,
                                      "preferred_read_replica": -1, "records": records}]}])
    driver.answer(relayed, answer)
    wire = bytes(driver.client_bytes)
    (_, body), = driver.responses(ApiKey.FETCH, FETCH_V)
    assert body["throttle_time_ms"] > 0 and body["responses"][0]["partitions"][0]["records"] == records
    assert struct.unpack_from(">i", wire, 4)[0] == 2  # the client's correlation id
    assert driver.reading_paused and "quota" in driver.timers
    # the sensor is the client's own (client-id=<default> resolved to its id)
    assert gateway.ctx.quota_sensors.rate_of("consumer_byte_rate", "user=ANONYMOUS,client-id=ksgate") > 100


def test_without_a_quota_nothing_is_throttled_or_muted(gateway: Gateway) -> None:
    quotas(gateway, **{"user=bob:producer_byte_rate": 1.0})  # someone else's quota
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 5, produce()) * 20)
    for relayed in driver.upstream_requests():
        driver.answer(relayed, produced())
    assert all(body["throttle_time_ms"] == 0 for _, body in driver.responses(ApiKey.PRODUCE, PRODUCE_V))
    assert not driver.reading_paused and "quota" not in driver.timers
    assert not any(isinstance(a, act.StartTimer) and a.name == "quota" for a in driver.actions)


def test_only_the_offending_client_id_is_muted_not_another_connection_of_the_same_user(
        gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("client-id=greedy", "producer_byte_rate"): 1500.0})
    greedy, admin = Driver.connect(gateway), Driver.connect(gateway)
    greedy.send(b"".join(request_frame(ApiKey.PRODUCE, PRODUCE_V, i, produce(), client_id="greedy")
                         for i in range(3)))
    admin.send(b"".join(request_frame(ApiKey.PRODUCE, PRODUCE_V, i, produce(), client_id="admin")
                        for i in range(3)))
    assert greedy.reading_paused and not admin.reading_paused


def test_connections_of_one_entity_share_its_rate(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS", "producer_byte_rate"): 1500.0})
    one, two = Driver.connect(gateway), Driver.connect(gateway)
    one.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 1, produce()))
    assert not one.reading_paused
    two.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 1, produce()))  # alone within; with one's bytes, over
    assert two.reading_paused and not one.reading_paused


def test_a_quota_added_later_applies_to_an_open_connection(gateway: Gateway) -> None:
    book = DictQuotas()
    gateway.ctx.quotas = book
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 1, produce()) * 2)
    assert not driver.reading_paused
    book.set("user=ANONYMOUS", "producer_byte_rate", 1500.0)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 3, produce()) * 2)
    assert driver.reading_paused


def test_the_quota_follows_the_client_id_of_each_request_even_one_that_extends_another(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("client-id=app2", "producer_byte_rate"): 1500.0})
    driver = Driver.connect(gateway)
    driver.send(b"".join(request_frame(ApiKey.PRODUCE, PRODUCE_V, i, produce(), client_id="app") for i in range(3)))
    assert not driver.reading_paused
    driver.send(b"".join(request_frame(ApiKey.PRODUCE, PRODUCE_V, i, produce(), client_id="app2") for i in range(3)))
    assert driver.reading_paused


def test_request_percentage_counts_the_gateways_cpu_time_and_throttles_at_most_one_window(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS", "request_percentage"): 1e-9})
    driver = Driver.connect(gateway)
    body = request(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False)
    driver.send(request_frame(ApiKey.METADATA, 12, 3, body))
    (relayed,) = driver.upstream_requests()
    driver.answer(relayed, response(ApiKey.METADATA, 12, "topics", [], brokers=[]))
    ((_, answered),) = driver.responses(ApiKey.METADATA, 12)
    # any CPU time is far over 1e-9 % of a core; a request_percentage throttle lasts at most one window (1 s)
    assert answered["throttle_time_ms"] == 1000
    assert driver.reading_paused and driver.timers["quota"] == pytest.approx(1.0)
    cpu = gateway.ctx.quota_sensors.totals[("request_percentage", "user=ANONYMOUS")]
    assert cpu.recorded > 0 and cpu.throttled >= 1


def test_requests_read_after_the_one_that_earned_a_throttle_wait_for_the_mute_to_end(gateway: Gateway) -> None:
    gateway.ctx.quotas = DictQuotas({("user=ANONYMOUS", "producer_byte_rate"): 1500.0})
    clock = gateway.ctx.quota_sensors._clock
    assert isinstance(clock, Clock)
    driver = Driver.connect(gateway)
    driver.send(b"".join(request_frame(ApiKey.PRODUCE, PRODUCE_V, i, produce()) for i in range(4)))
    assert [r.body["acks"] for r in driver.upstream_requests()] == [1, 1]  # the 2nd is over: the rest wait
    clock.now += driver.timers["quota"]
    driver.fire("quota")
    assert len(driver.upstream_requests()) == 1  # the 3rd is read, relayed, and over again
    clock.now += driver.timers["quota"]
    driver.fire("quota")
    assert len(driver.upstream_requests()) == 1 and driver.session.in_flight == 4
