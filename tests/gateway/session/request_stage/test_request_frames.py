"""How the session reads request frames: each is the receiver's view of its wire bytes (size prefix included),
relayed as it came but for the gateway's correlation id, however the client's bytes were cut into reads."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from gateway.server import Gateway
from gateway.session import actions as act
from gateway.session.routes import ApiRoute, RouteTable
from gateway.session.session import LARGE_BYTES
from protocol.api_keys import ApiKey
from protocol.frame_receiver import FrameReceiver
from protocol.messages import request_frame
from tests.authz.test_policies_data import request
from tests.gateway.session.session_driver import Driver, gateway_for

PRODUCE_V = 9
METADATA_V = 12


@pytest.fixture
def plaintext(tmp_path: Path) -> Gateway:
    return gateway_for(tmp_path)  # no authorizer: every request is relayed


def _produce(correlation_id: int, acks: int = -1, records: bytes = b"x" * 61) -> bytes:
    return request_frame(ApiKey.PRODUCE, PRODUCE_V, correlation_id, request(
        ApiKey.PRODUCE, PRODUCE_V, acks=acks, timeout_ms=1000,
        topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": records}]}]), "producer-1")


def _metadata(correlation_id: int, *names: str) -> bytes:
    return request_frame(ApiKey.METADATA, METADATA_V, correlation_id, request(
        ApiKey.METADATA, METADATA_V, topics=[{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
        allow_auto_topic_creation=False))


def _as_relayed(sent: bytes, frames: list[bytes]) -> bytes:
    """``frames`` as the upstream must get them: byte for byte, each under the id the gateway gave it (read from
    ``sent``, the bytes the upstream got)."""
    out, pos = bytearray(), 0
    for wire in frames:
        relayed = bytearray(wire)
        relayed[8:12] = sent[pos + 8 : pos + 12]  # size(4) api_key(2) api_version(2), then the correlation id
        out += relayed
        pos += len(wire)
    return bytes(out)


def _read_by_read(driver: Driver, data: bytes, cuts: list[int]) -> None:
    """The client's bytes as socket reads ending at ``cuts``, then the rest."""
    start = 0
    for end in [*cuts, len(data)]:
        driver.send(data[start:end])
        start = end


def test_a_request_cut_into_two_reads_at_any_byte_is_relayed_as_it_came(plaintext: Gateway) -> None:
    wire = _produce(7)
    for cut in range(1, len(wire)):
        driver = Driver.connect(plaintext)
        _read_by_read(driver, wire, [cut])
        sent = bytes(driver.upstream_bytes)
        assert sent == _as_relayed(sent, [wire]), f"cut at {cut}"
        assert driver.closed is None and driver.session.receiver.held() == 0


def test_a_read_ending_inside_the_next_request_relays_the_complete_ones_and_the_rest_after_the_next_read(
        plaintext: Gateway) -> None:
    frames = [_produce(1), _metadata(2, "a", "b"), _produce(3, acks=0), _produce(4, records=b"y" * 700)]
    data = b"".join(frames)
    ends = [sum(map(len, frames[:i])) for i in range(1, len(frames) + 1)]
    for cuts in ([ends[1] + 5], [ends[0] - 1, ends[2] + 2], [3, ends[0] + 4, ends[1], ends[2] + 100]):
        driver = Driver.connect(plaintext)
        relayed_after: list[int] = []
        start = 0
        for end in [*cuts, len(data)]:
            driver.send(data[start:end])
            relayed_after.append(len(driver.upstream_bytes))
            start = end
        sent = bytes(driver.upstream_bytes)
        assert sent == _as_relayed(sent, frames), f"reads ending at {cuts}"
        # After each read exactly the requests it completed have gone upstream: none waits for a later read.
        assert relayed_after == [max((e for e in ends if e <= c), default=0) for c in [*cuts, len(data)]]


def test_a_large_request_is_decided_in_the_worker_on_the_frame_as_received(plaintext: Gateway) -> None:
    big = _metadata(5, *(f"topic-{i:06}" for i in range(LARGE_BYTES // 4)))
    assert len(big) > FrameReceiver.SCRATCH_BYTES  # received into a buffer of its own, moved there from the scratch
    small = _metadata(6, "small")
    driver = Driver.connect(plaintext)
    _read_by_read(driver, big + small, [40, 4000, len(big) - 1])  # the first 40 bytes moved to its own buffer
    assert driver.upstream_bytes == b"" and driver.session.held_frames == 1
    driver.run_job(act.JobKind.LARGE)
    sent = bytes(driver.upstream_bytes)
    assert sent == _as_relayed(sent, [big, small])


def test_a_large_produce_stays_on_the_loop_and_is_relayed_as_it_came(plaintext: Gateway) -> None:
    big = _produce(8, records=b"r" * (2 * LARGE_BYTES))
    driver = Driver.connect(plaintext)
    _read_by_read(driver, big, [100])
    assert not driver.jobs  # its records are never decoded: no thread hop
    sent = bytes(driver.upstream_bytes)
    assert sent == _as_relayed(sent, [big])


def test_a_request_of_exactly_socket_request_max_bytes_is_relayed_and_one_byte_more_refused_unread(
        tmp_path: Path) -> None:
    wire = _produce(9)
    gateway = gateway_for(tmp_path, **{"socket.request.max.bytes": len(wire) - 4})
    at_limit = Driver.connect(gateway)
    at_limit.send(wire)
    assert at_limit.closed is None and len(at_limit.upstream_bytes) == len(wire)
    over = Driver.connect(gateway)
    over.send(struct.pack(">i", len(wire) - 3))  # its size alone: refused before any of its body is buffered
    assert over.closed is not None and "socket.request.max.bytes" in str(over.closed.reason)
    assert over.upstream_bytes == b"" and over.session.receiver.held() <= 64 * 1024


def test_a_request_shorter_than_its_fixed_header_is_refused(plaintext: Gateway) -> None:
    # At most 7 of the 8 bytes of key, version and id; SASL keys too, though the session answers those itself.
    for payload in (b"", b"\x00\x03\x00\x0c\x00\x00\x00", b"\x00\x11\x00\x01", b"\x00\x24\x00\x02\x00\x00\x00"):
        driver = Driver.connect(plaintext)
        driver.send(struct.pack(">i", len(payload)) + payload)
        assert driver.closed is not None and "not a Kafka request" in str(driver.closed.reason)
        assert driver.upstream_bytes == b""


class _CountedRoutes(Mapping[int, ApiRoute]):
    """The gateway's route table, counting its lookups (``get`` and ``[]`` both come through ``__getitem__``)."""

    def __init__(self, routes: RouteTable) -> None:
        self.routes = routes
        self.lookups = 0

    def __getitem__(self, key: int) -> ApiRoute:
        self.lookups += 1
        return self.routes[key]

    def __iter__(self) -> Iterator[int]:
        return iter(self.routes)

    def __len__(self) -> int:
        return len(self.routes)


def test_each_request_looks_its_route_up_once_for_every_stage(plaintext: Gateway) -> None:
    counted = _CountedRoutes(plaintext.ctx.routes)
    plaintext.ctx.routes = counted
    driver = Driver.connect(plaintext)
    big = _metadata(3, *(f"topic-{i:06}" for i in range(LARGE_BYTES // 4)))  # decided in the worker
    for wire in (_produce(1), _metadata(2, "a"), big):
        before = counted.lookups
        driver.send(wire)
        if driver.jobs:
            driver.run_job(act.JobKind.LARGE)
        assert counted.lookups - before == 1, f"api key {int.from_bytes(wire[4:6], 'big')}"
    assert len(driver.upstream_requests()) == 3 and driver.closed is None
