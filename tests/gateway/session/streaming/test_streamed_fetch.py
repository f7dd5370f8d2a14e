"""Fetch v16+ responses stream: everything before their tag section goes on as it arrives, and
node_endpoints (KIP-951) are rewritten at the end to the gateway's addresses, in the length already sent."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.server import Gateway
from gateway.session import actions as act
from gateway.session.session import LARGE_BYTES, STREAM_MIN_BYTES
from protocol.api_keys import ApiKey
from protocol.messages import decode_response, request_frame, response_frame
from tests.authz.test_policies_data import request
from tests.gateway.session.session_driver import Driver, UpstreamRequest, gateway_for

RECORDS = bytes(range(256)) * (STREAM_MIN_BYTES // 256 + 1)  # one partition's records: large enough to stream
LONG_UPSTREAM_HOST = "broker-2.kafka.internal.example.com"  # longer than gw.example: the rewrite is shorter
SHORT_UPSTREAM_HOST = "b2"  # shorter than gw.example: the rewrite would be longer


@pytest.fixture
def plaintext(tmp_path: Path) -> Gateway:
    return gateway_for(tmp_path)


def fetch_answer(host: str | None) -> dict[str, Any]:
    """A Fetch answer: records in partition 0, NOT_LEADER in partition 1 (and the new leader's address)."""
    endpoints = [] if host is None else [{"node_id": 2, "host": host, "port": 9092, "rack": "r1"}]
    partition = {"error_code": 0, "high_watermark": 10, "last_stable_offset": 10, "log_start_offset": 0,
                 "aborted_transactions": None, "preferred_read_replica": -1}
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "node_endpoints": endpoints,
            "responses": [{"topic_id": uuid.UUID(int=7), "partitions": [
                {**partition, "partition_index": 0, "records": RECORDS},
                {**partition, "partition_index": 1, "error_code": 6, "records": None,
                 "current_leader": {"leader_id": 2, "leader_epoch": 4}}]}]}


def fetched(driver: Driver, version: int, correlation_id: int = 5) -> UpstreamRequest:
    driver.send(request_frame(ApiKey.FETCH, version, correlation_id, request(ApiKey.FETCH, version, topics=[])))
    [relayed] = driver.upstream_requests()
    return relayed


def stream(driver: Driver, upstream_id: int, wire: bytes, chunk: int = 997, end: bool = True) -> None:
    """The upstream link's part: the head as the frame splitter hands it over, then chunks as they arrive."""
    driver.record(driver.session.stream_started(upstream_id, bytearray(wire[:chunk])))
    for start in range(chunk, len(wire), chunk):
        driver.record(driver.session.stream_chunk(memoryview(wire)[start : start + chunk]))
    if end:
        driver.record(driver.session.stream_ended())


def with_client_id(wire: bytes, correlation_id: int) -> bytes:
    return wire[:4] + struct.pack(">i", correlation_id) + wire[8:]


@pytest.mark.parametrize("version", [16, 17, 18])
def test_a_large_fetch_v16_up_streams_and_its_tag_section_goes_out_with_the_last_chunk(
        plaintext: Gateway, version: int) -> None:
    driver = Driver.connect(plaintext)
    relayed = fetched(driver, version)
    wire = response_frame(ApiKey.FETCH, version, relayed.upstream_id, fetch_answer(None))
    assert driver.session.may_stream(relayed.upstream_id, len(wire) - 4)
    stream(driver, relayed.upstream_id, wire[:-10], end=False)
    assert bytes(driver.client_bytes) == with_client_id(wire, 5)[:-10]  # every byte so far, sent as it came
    last = driver.session.stream_chunk(memoryview(wire)[-10:])
    assert [b"".join(bytes(p) for p in a.pieces) for a in last if isinstance(a, act.SendToClient)] == [wire[-10:]]
    driver.record(last)
    driver.record(driver.session.stream_ended())
    assert bytes(driver.client_bytes) == with_client_id(wire, 5) and driver.closed is None
    assert plaintext.ctx.counters.streamed_responses == 1


@pytest.mark.parametrize("chunk", [9, 1000, 65_536])
def test_node_endpoints_are_rewritten_to_the_gateway_and_padded_to_the_length_already_sent(
        plaintext: Gateway, chunk: int) -> None:
    driver = Driver.connect(plaintext)
    relayed = fetched(driver, 17)
    wire = response_frame(ApiKey.FETCH, 17, relayed.upstream_id, fetch_answer(LONG_UPSTREAM_HOST))
    stream(driver, relayed.upstream_id, wire, chunk)
    sent = bytes(driver.client_bytes)
    assert len(sent) == len(wire) and LONG_UPSTREAM_HOST.encode() not in sent
    correlation_id, body = decode_response(sent[4:], ApiKey.FETCH, 17)
    assert correlation_id == 5 and driver.closed is None
    [endpoint] = body["node_endpoints"]
    assert (endpoint["node_id"], endpoint["host"], endpoint["port"], endpoint["rack"]) == (
        2, "gw.example", plaintext.ctx.config.node_port(plaintext.ctx.config.listeners[0], 2), "r1")
    assert body["responses"][0]["partitions"][0]["records"] == RECORDS
    assert (2, LONG_UPSTREAM_HOST, 9092) in [n for found in driver.discovered for n in found.nodes]


def test_node_endpoints_that_would_grow_are_left_out_and_counted(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    relayed = fetched(driver, 16)
    wire = response_frame(ApiKey.FETCH, 16, relayed.upstream_id, fetch_answer(SHORT_UPSTREAM_HOST))
    stream(driver, relayed.upstream_id, wire)
    sent = bytes(driver.client_bytes)
    assert len(sent) == len(wire) and b"\x03b2" not in sent  # (the compact string "b2")
    _, body = decode_response(sent[4:], ApiKey.FETCH, 16)
    assert body["node_endpoints"] == [] and body["responses"][0]["partitions"][1]["error_code"] == 6
    assert 'ksgate_streamed_endpoints_dropped_total{api="Fetch"} 1' in plaintext.ctx.metrics.render()
    assert driver.closed is None


def test_a_stream_that_cannot_be_followed_closes_the_connection_and_sends_nothing_more(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    relayed = fetched(driver, 16)
    wire = bytearray(response_frame(ApiKey.FETCH, 16, relayed.upstream_id, fetch_answer(LONG_UPSTREAM_HOST)))
    at = bytes(wire).index(RECORDS) - 3  # the records' 3-byte compact length: made to overrun the frame
    wire[at : at + 3] = b"\xff\xff\x7f"
    stream(driver, relayed.upstream_id, bytes(wire), chunk=4096)
    assert driver.closed is not None and "upstream response refused" in str(driver.closed.reason)
    assert len(driver.client_bytes) < at + 3 + 4096  # nothing after the chunk that failed
    assert LONG_UPSTREAM_HOST.encode() not in bytes(driver.client_bytes)


def test_a_malformed_tag_section_closes_the_connection_and_is_never_sent(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    relayed = fetched(driver, 16)
    wire = bytearray(response_frame(ApiKey.FETCH, 16, relayed.upstream_id, fetch_answer(LONG_UPSTREAM_HOST)))
    at = bytes(wire).rindex(LONG_UPSTREAM_HOST.encode()) - 1
    wire[at] += 1  # the host's length overruns its tagged field
    stream(driver, relayed.upstream_id, bytes(wire))
    assert driver.closed is not None
    assert len(driver.client_bytes) < len(wire) and LONG_UPSTREAM_HOST.encode() not in bytes(driver.client_bytes)


def test_a_small_fetch_v16_response_is_held_and_rewritten_whole(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    relayed = fetched(driver, 16)
    answer = fetch_answer(SHORT_UPSTREAM_HOST)
    answer["responses"][0]["partitions"][0]["records"] = b"tiny"
    driver.answer(relayed, answer)
    [(correlation_id, body)] = driver.responses(ApiKey.FETCH, 16)
    assert correlation_id == 5 and [e["host"] for e in body["node_endpoints"]] == ["gw.example"]


@pytest.mark.parametrize("host", [None, LONG_UPSTREAM_HOST], ids=["no-endpoints", "endpoints"])
def test_a_held_large_fetch_v16_goes_to_the_worker_only_when_it_names_brokers(
        plaintext: Gateway, host: str | None) -> None:
    driver = Driver.connect(plaintext)
    relayed = fetched(driver, 16)
    answer = fetch_answer(host)
    answer["responses"][0]["partitions"][0]["records"] = RECORDS[: LARGE_BYTES + 1000]  # large, below streaming
    wire = response_frame(ApiKey.FETCH, 16, relayed.upstream_id, answer)
    assert LARGE_BYTES < len(wire) - 4 < STREAM_MIN_BYTES
    driver.record(driver.session.upstream_frames([memoryview(wire)]))
    assert bool(driver.jobs) == (host is not None)  # a tag scan on the loop; decoding, when needed, off it
    if driver.jobs:
        driver.run_job(act.JobKind.LARGE)
    [(correlation_id, body)] = driver.responses(ApiKey.FETCH, 16)
    assert correlation_id == 5
    assert [e["host"] for e in body["node_endpoints"]] == ([] if host is None else ["gw.example"])
