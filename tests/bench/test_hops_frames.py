"""bench/anchors/hops.py: Kafka frames rebuilt from TCP segments, and the hops paired through the gateway."""

from __future__ import annotations

import itertools
import struct

from bench.anchors.hops import FrameOnWire, StreamState, analyse, feed, fetch_times

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


def test_a_short_snap_length_keeps_the_frames_whose_headers_were_captured_and_loses_the_rest() -> None:
    stream = response(1, b"r" * 5000) + response(2, b"s" * 10)
    state, out = StreamState(base=(ISN + 1) & 0xFFFFFFFF), list[FrameOnWire]()
    # three segments, each captured to its first 64 bytes: the second frame starts at byte 5008 of the
    # stream, 8 bytes into the last segment, so its header was captured
    for t, (seq, data) in enumerate(segments(stream, [2000, 5000])):
        feed(state, (2, 1), seq, memoryview(data)[:64], t, out, len(data))
    assert [(f.size, f.first_ns, f.last_ns, f.head[4:8]) for f in out] == [
        (5004, 0, 2, b"\0\0\0\x01"), (14, 2, 2, b"\0\0\0\x02")]
    assert not state.broken

    state, out = StreamState(base=(ISN + 1) & 0xFFFFFFFF), list[FrameOnWire]()
    for t, (seq, data) in enumerate(segments(stream, [2000])):  # the second header 3008 bytes into a segment
        feed(state, (2, 1), seq, memoryview(data)[:64], t, out, len(data))
    assert state.broken and [f.size for f in out] == [5004]  # the frame before it is whole


def test_a_frame_records_its_segments_and_the_longest_pause_between_two_of_them() -> None:
    stream = response(1, b"r" * 300) + response(2)
    state, out = StreamState(base=(ISN + 1) & 0xFFFFFFFF), list[FrameOnWire]()
    for (seq, data), at in zip(segments(stream, [100, 200, 308]), [0, 5, 12, 13], strict=True):
        feed(state, (2, 1), seq, memoryview(data), at, out)
    assert [(f.segments, f.max_gap_ns) for f in out] == [(3, 7), (1, 0)]


def exchange_frames(client: tuple[int, int], at_ms: float, request_id: int, response_ms: tuple[float, float],
                    response_size: int, response_gap_ms: float = 0.0, api_key: int = 1,
                    response_segments: int = 1) -> list[FrameOnWire]:
    ms = 1_000_000
    back = (client[1], client[0])
    wire = response(request_id, b"\0" * response_size)
    answer = FrameOnWire(back, int(response_ms[0] * ms), int(response_ms[1] * ms), len(wire) - 4, wire[:12],
                         max_gap_ns=int(response_gap_ms * ms), segments=response_segments)
    return [frame(client, int(at_ms * ms), request(api_key, request_id)), answer]


def test_each_data_carrying_fetch_is_timed_on_both_legs_and_empty_long_polls_do_not_count() -> None:
    gateway, broker = 9092, 9000
    client, upstream = (50_000, gateway), (50_001, broker)
    frames = [
        *exchange_frames(client, 10, 7, (20, 25), 100_000, 1.5, response_segments=30),
        *exchange_frames(upstream, 11, 100, (18, 22), 100_000, 0.5, response_segments=12),
        *exchange_frames(client, 26, 8, (130, 130), 10), *exchange_frames(upstream, 26.5, 101, (127, 127), 10),  # empty
        *exchange_frames(client, 131, 9, (140, 150), 200_000),
        *exchange_frames(upstream, 131.25, 102, (138, 149), 200_000),
        *exchange_frames(client, 151, 10, (152, 153), 20_000, api_key=3),  # no Fetch: answered by the gateway
    ]
    times = fetch_times(frames, {gateway}, broker)
    assert dict(times.ms) == {
        "client_rtt": [15.0, 19.0], "broker_first": [7.0, 6.75], "broker_last": [11.0, 17.75],
        "client_stream": [5.0, 10.0], "client_gap": [1.5, 0.0], "gateway_request": [1.0, 0.25],
        "upstream_stream": [4.0, 11.0], "upstream_gap": [0.5, 0.0], "gateway_first": [2.0, 2.0],
        "gateway_last": [3.0, 1.0], "next_fetch": [1.0]}
    assert times.response_bytes == [100_008, 200_008] and times.unpaired == 0
    assert times.segments == {"client leg": [30, 1], "upstream leg": [12, 1]}

    direct = fetch_times([f for f in frames if gateway not in f.flow], set(), broker)
    assert direct.ms["client_rtt"] == [11.0, 17.75] and direct.ms["broker_first"] == [7.0, 6.75]
    assert direct.ms["next_fetch"] == [4.5] and "gateway_last" not in direct.ms
