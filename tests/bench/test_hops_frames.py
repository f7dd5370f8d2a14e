"""bench/anchors/hops.py: Kafka frames rebuilt from TCP segments, and the hops paired through the gateway."""

from __future__ import annotations

import itertools
import struct

from bench.anchors.hops import FrameOnWire, StreamState, analyse, feed

ISN = 0xFFFF_FFF0  # near the wrap: offsets must be taken modulo 2^32


def request(api_key: int, correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhi", api_key, 11, correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def response(correlation_id: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">i", correlation_id) + body
    return struct.pack(">i", len(payload)) + payload


def segments(stream: bytes, cuts: list[int]) -> list[tuple[int, bytes]]:
    """(sequence number, data) of ``stream`` cut at ``cuts``."""
    edges = [0, *cuts, len(stream)]
    return [((ISN + 1 + a) & 0xFFFFFFFF, stream[a:b]) for a, b in itertools.pairwise(edges)]


def rebuild(stream: bytes, cuts: list[int], flow: tuple[int, int] = (1, 2)) -> list[FrameOnWire]:
    state, out = StreamState(base=(ISN + 1) & 0xFFFFFFFF), list[FrameOnWire]()
    for t, (seq, data) in enumerate(segments(stream, cuts)):
        feed(state, flow, seq, memoryview(data), t, out)
    return out


def test_frames_split_across_segments_and_sharing_one_are_found_with_their_first_and_last_segment() -> None:
    stream = request(0, 1, b"x" * 100) + request(1, 2) + request(0, 3, b"y" * 30)
    # a cut inside the first size field, one inside a header, one mid-body, one at a frame edge
    frames = rebuild(stream, [2, 60, 114, 118])
    assert [(f.head[4:6], f.size, f.first_ns, f.last_ns) for f in frames] == [
        (b"\x00\x00", 108, 0, 2), (b"\x00\x01", 8, 2, 4), (b"\x00\x00", 38, 4, 4)]
    assert [int.from_bytes(f.head[8:12], "big") for f in frames] == [1, 2, 3]


def test_a_retransmitted_segment_is_not_read_twice_and_a_missed_one_stops_the_direction() -> None:
    stream = request(0, 1, b"x" * 20) + request(0, 2, b"x" * 20)
    state, out = StreamState(base=(ISN + 1) & 0xFFFFFFFF), list[FrameOnWire]()
    first, second, third = segments(stream, [20, 40])
    for t, (seq, data) in enumerate([first, second, first, third]):
        feed(state, (1, 2), seq, memoryview(data), t, out)
    assert [int.from_bytes(f.head[8:12], "big") for f in out] == [1, 2]

    state, out = StreamState(base=(ISN + 1) & 0xFFFFFFFF), list[FrameOnWire]()
    first, _lost, third = segments(stream * 2, [20, 40])
    for t, (seq, data) in enumerate([first, third]):
        feed(state, (1, 2), seq, memoryview(data), t, out)
    assert state.broken and out == []


def frame(flow: tuple[int, int], at_ns: int, wire: bytes) -> FrameOnWire:
    return FrameOnWire(flow, at_ns, at_ns, len(wire) - 4, wire[:12])


def test_the_gateway_hops_pair_a_client_request_with_its_upstream_twin_by_order_and_the_answer_by_id() -> None:
    gateway, broker = 9092, 9000
    client, upstream = (50_000, gateway), (50_001, broker)
    back = (upstream[1], upstream[0])
    to_client = (client[1], client[0])
    ms = 1_000_000
    frames = [
        frame(client, 10 * ms, request(0, 7)), frame(upstream, 11 * ms, request(0, 100)),
        frame(back, 15 * ms, response(100)), frame(to_client, 17 * ms, response(7)),
        frame(client, 20 * ms, request(18, 8)), frame(to_client, 21 * ms, response(8)),  # answered by the gateway
        frame(client, 30 * ms, request(0, 9)), frame(upstream, 34 * ms, request(0, 101)),
        frame(back, 40 * ms, response(101)), frame(to_client, 41 * ms, response(9)),
    ]
    hops = analyse(frames, 0, {gateway}, broker)
    assert hops.gateway_request[0] == [1.0, 4.0]
    assert hops.gateway_response[0] == [2.0, 1.0]
    assert hops.broker[0] == [4.0, 6.0]
    assert hops.client_rtt[0] == [7.0, 11.0]
    assert hops.unpaired == 1
