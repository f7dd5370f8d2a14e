"""Where the latency added at a fixed rate goes, hop by hop, read off the loopback wire.

A benchmark, not a test.  It starts Tansu and one ``ksgate run`` (PLAINTEXT, no authorizer) and runs
bench/latency.py's fixed-rate producer and consumer (``--load single``: throughput.py's one record
produced and flushed at a time instead, no consumer), direct and through the gateway in alternating
order, while a process of the bench captures every TCP segment on ``lo`` (an AF_PACKET socket: needs
root or CAP_NET_RAW; kernel timestamps, SO_TIMESTAMPNS, so a late capture process does not move them).
From the segments it rebuilds each connection's Kafka frames (4-byte size, then api key, version and
correlation id in requests, the correlation id in responses) and prints, per api key (Produce, Fetch),
p50/p99/max in ms of:

* ``gateway_request``: the gateway's delay on a request, its last byte in from the client to its last
  byte out to the broker (client connections are paired with the upstream connection that carries
  their requests next, requests in order per connection; answers by the gateway's correlation ids);
* ``gateway_response``: the same for the response, broker -> gateway to gateway -> client;
* ``broker``: the broker's turnaround, the request's last byte in to the response's last byte out;
* ``client_rtt``: the round trip as the client's socket sees it (request out to response in);
* ``client_send`` / ``gateway_send``: a request's first to last byte on the client's and on the upstream leg;

the client's pattern (requests per second, bytes per request, requests in flight when one is sent);
per record of the fixed-rate producer, from the send time latency.py stamps into each value (read from
the Produce on the wire, decoded once the capture is over): produce() to the request leaving the
client, to its answer arriving, and to the delivery report; and the gateway's and the broker's CPU and
run-queue wait per wake-up (/proc/<pid>/task/*/schedstat).  Only what happens after ``--warmup``
seconds counts.

``--load fetch`` runs throughput.py's produce phase (not captured) and then its fetch phase (its
consumer, its settings) with the wire captured, and prints per data-carrying Fetch (FETCH_TIMES): the
client's round trip, the gateway's request hop, the broker's time to the response's first and last
byte, the response's first to last byte and its longest pause on each leg, the gateway's lag on the
first and on the last byte, the client's gap to its next Fetch, bytes per Fetch, each process's CPU
and run-queue wait, and what the capture cost.  There the kernel copies only the first ``--snap``
bytes of each segment (a BPF filter), as the records themselves are not needed.

    sudo .venv/bin/python bench/anchors/hops.py [--rates 5000,50000] [--seconds 5] [--repeat 2]
    sudo .venv/bin/python bench/anchors/hops.py --load single [--size 1024]
    sudo .venv/bin/python bench/anchors/hops.py --load fetch [--records 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import itertools
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.queues import SimpleQueue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from bench.latency import STAMP, Spec, consume, produce  # noqa: E402
from bench.throughput import (  # noqa: E402
    LATENCY_SETTINGS,
    GatewayProcess,
    Pids,
    create_topic,
    delete_topic,
    fetch_throughput,
    loadavg,
    machine,
    parse_settings,
    percentile,
    produce_throughput,
)
from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from protocol.header import decode_request_header  # noqa: E402
from protocol.record_batch import decode_batches  # noqa: E402

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4  # lo shows each segment twice (sent and received): the sent copy is kept
SO_TIMESTAMPNS = 35  # Linux: a struct timespec per packet, taken by the kernel
SO_ATTACH_FILTER = 26
SOL_PACKET, PACKET_STATISTICS = 263, 6
_TIMESPEC = struct.Struct("@qq")
HEADER_BYTES = 12  # size, api key, api version, correlation id: enough of either direction
API_NAMES = {0: "Produce", 1: "Fetch"}
KEEP_BYTES = 256 << 20  # Produce requests kept for their record stamps (the fixed rate's first seconds at 50,000/s)

FlowKey = tuple[int, int]  # (source port, destination port): one direction of one loopback connection


# --- the capture (a process of its own): segments -> Kafka frames ---------------------------------

@dataclass(slots=True)
class FrameOnWire:
    """One Kafka frame seen in one direction of one connection."""

    flow: FlowKey
    first_ns: int  # kernel time of the segment with its first byte
    last_ns: int  # ... and of the segment with its last byte
    size: int  # the 4-byte size field
    head: bytes  # up to HEADER_BYTES from the size field on
    sent_ns: list[int] = field(default_factory=list)  # a client's Produce: each record's produce() time (its stamp)
    raw: bytes = b""  # a client's Produce, kept until the capture ends (decoding it meanwhile would compete)
    max_gap_ns: int = 0  # the longest time between two segments of the frame (a stalled stream shows here)
    segments: int = 1


@dataclass(slots=True)
class StreamState:
    """Where one direction of a connection stands: the next byte expected and the frame being read."""

    base: int  # sequence number of the first data byte (ISN + 1)
    next_offset: int = 0
    frame_offset: int = 0  # stream offset of the frame being read (or of the next one)
    head: bytearray = field(default_factory=bytearray)
    frame_end: int = -1  # known once 4 header bytes are in
    first_ns: int = 0
    reading: bool = False
    broken: bool = False  # a segment was missed: the framing is lost for this direction
    keep: bool = False  # a client's requests: whole frames kept, for the stamps in Produce records
    body: bytearray = field(default_factory=bytearray)
    last_ns: int = 0  # kernel time of the last segment
    max_gap_ns: int = 0  # of the frame being read
    segments: int = 0


def feed(state: StreamState, flow: FlowKey, seq: int, data: memoryview, ts_ns: int,
         out: list[FrameOnWire], length: int = -1) -> None:
    """Advance one direction by one segment, appending every frame it completes.

    ``length``: the segment's payload length when ``data`` holds only its first bytes (a capture with a
    short snap length); a frame header in the bytes not captured loses the direction's framing."""
    offset = (seq - state.base) & 0xFFFFFFFF
    if length < 0:
        length = len(data)
    if state.broken or not length:
        return
    if offset < state.next_offset:  # a retransmission (or its overlap): keep the new part only
        skip = state.next_offset - offset
        if skip >= length:
            return
        data, offset, length = data[skip:], state.next_offset, length - skip
    elif offset > state.next_offset:
        state.broken = True
        return
    end = offset + length
    state.next_offset = end
    if state.reading:  # the frame being read goes on: how long its bytes stopped coming
        state.max_gap_ns = max(state.max_gap_ns, ts_ns - state.last_ns)
        state.segments += 1
    state.last_ns = ts_ns
    while True:
        if not state.reading:
            if state.frame_offset >= end:
                return
            state.reading, state.first_ns, state.frame_end = True, ts_ns, -1
            state.max_gap_ns, state.segments = 0, 1
            state.head.clear()
            state.body.clear()
        if state.keep:
            at = state.frame_offset + len(state.body) - offset
            state.body += data[at:(state.frame_end if state.frame_end >= 0 else end) - offset]
        want = HEADER_BYTES if state.frame_end < 0 else min(HEADER_BYTES, state.frame_end - state.frame_offset)
        if len(state.head) < want:
            at = state.frame_offset + len(state.head) - offset
            state.head += data[at:at + want - len(state.head)]
            if len(state.head) < want and state.frame_offset + len(state.head) < end:
                state.broken = True  # the header's bytes are in this segment but past the snap length
                return
        if state.frame_end < 0:
            if len(state.head) < 4:
                return
            state.frame_end = state.frame_offset + 4 + int.from_bytes(state.head[:4], "big")
            del state.body[state.frame_end - state.frame_offset:]  # the next frame's bytes, if any
            continue  # the header may be shorter than HEADER_BYTES for a tiny frame
        if state.frame_end > end:
            return
        produce = state.keep and state.head[4:6] == b"\0\0"
        out.append(FrameOnWire(flow, state.first_ns, ts_ns, state.frame_end - state.frame_offset - 4,
                               bytes(state.head), raw=bytes(state.body) if produce else b"",
                               max_gap_ns=state.max_gap_ns, segments=state.segments))
        state.frame_offset, state.reading = state.frame_end, False


def record_stamps(frame: bytes) -> list[int]:
    """The send times latency.py's producer stamped on the records of a Produce request (else none)."""
    if len(frame) < HEADER_BYTES or frame[4:6] != b"\0\0":
        return []
    payload = memoryview(frame)[4:]
    header, schema = decode_request_header(payload)
    body = schema.request_codec(header.api_version).decode(payload[header.size:])
    return [sent for topic in body["topic_data"] for partition in topic["partition_data"]
            for record in decode_batches(partition["records"], verify_crc=False)
            if record.value is not None and len(record.value) >= STAMP.size
            and (sent := STAMP.unpack_from(record.value)[0]) != 0]  # 0: the producer's warm-up record


@dataclass(slots=True)
class CaptureCost:
    """What the capture itself took: its CPU while capturing, segments read, drops the kernel counted
    (PACKET_STATISTICS), directions whose framing was lost; and, per direction, the kernel times of its
    zero-window advertisements (the sender of that direction's socket had no room left to receive)."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    segments: int = 0
    dropped: int = 0
    broken: int = 0
    zero_windows: dict[FlowKey, list[int]] = field(default_factory=lambda: defaultdict(list))


def snap_filter(snap: int) -> bytes:
    """A classic BPF program for SO_ATTACH_FILTER: outgoing IPv4 TCP only, each cut to ``snap`` bytes, so the
    kernel copies headers and the first bytes of each segment, not the records of a 64 KB one."""
    ld_w_abs, ld_h_abs, ld_b_abs, jeq_k, ret_k = 0x20, 0x28, 0x30, 0x15, 0x06
    skf_ad_pkttype = 0xFFFFF000 + 4

    def op(code: int, jt: int, jf: int, k: int) -> bytes:
        return struct.pack("HBBI", code, jt, jf, k)

    return b"".join([op(ld_w_abs, 0, 0, skf_ad_pkttype), op(jeq_k, 0, 5, PACKET_OUTGOING),
                     op(ld_h_abs, 0, 0, 12), op(jeq_k, 0, 3, 0x0800),
                     op(ld_b_abs, 0, 0, 23), op(jeq_k, 0, 1, 6),
                     op(ret_k, 0, 0, snap), op(ret_k, 0, 0, 0)])


def attach_snap_filter(sock: socket.socket, snap: int) -> None:
    program = snap_filter(snap)
    code = ctypes.create_string_buffer(program)
    fprog = struct.pack("HL", len(program) // 8, ctypes.addressof(code))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)  # the kernel copies the program


def capture(ports: set[int], client_ports: set[int], ready: Event, stop: Event,
            out: SimpleQueue[tuple[list[FrameOnWire], CaptureCost]], snap: int = 0) -> None:
    """Read every segment sent on lo to or from ``ports`` until ``stop``; put the frames found (whole
    frames kept on connections to ``client_ports``, where the clients send, unless ``snap`` cuts each
    segment to its first ``snap`` bytes) and what the capture cost."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: root may exceed rmem_max
    if snap:
        attach_snap_filter(sock, snap)
    sock.bind(("lo", 0))
    sock.settimeout(0.1)
    buffer = bytearray(262144)
    view = memoryview(buffer)
    states: dict[FlowKey, StreamState] = {}
    frames: list[FrameOnWire] = []
    kept = 0  # bytes of Produce requests held for their stamps, at most KEEP_BYTES
    cost = CaptureCost()
    times, began = os.times(), time.monotonic()
    ready.set()
    while not stop.is_set():
        try:
            length, ancillary, _flags, address = sock.recvmsg_into([buffer], 64)
        except TimeoutError:
            continue
        if address[2] != PACKET_OUTGOING or length < 54 or buffer[12:14] != b"\x08\x00":
            continue  # IPv4 only: every bench socket is on 127.0.0.1
        ip_len = (buffer[14] & 0x0F) * 4
        if buffer[23] != 6:  # not TCP
            continue
        tcp = 14 + ip_len
        src, dst, seq = struct.unpack_from(">HHI", buffer, tcp)
        if src not in ports and dst not in ports:
            continue
        cost.segments += 1
        flags = buffer[tcp + 13]
        data_at = tcp + (buffer[tcp + 12] >> 4) * 4
        total = 14 + int.from_bytes(buffer[16:18], "big")
        ts_ns = time.time_ns()
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanos = _TIMESPEC.unpack_from(payload)
                ts_ns = seconds * 1_000_000_000 + nanos
        flow = (src, dst)
        if flags & 0x17 == 0x10 and buffer[tcp + 14:tcp + 16] == b"\0\0":  # an ACK (no SYN, RST, FIN), window 0
            cost.zero_windows[flow].append(ts_ns)
        if flags & 0x02:  # SYN (or SYN-ACK): a new direction, data starts at ISN + 1
            states[flow] = StreamState(base=(seq + 1) & 0xFFFFFFFF,
                                       keep=not snap and kept <= KEEP_BYTES and dst in client_ports
                                       and not flags & 0x10)
            continue
        state = states.get(flow)
        if state is not None:
            found = len(frames)
            feed(state, flow, seq, view[data_at:min(length, total)], ts_ns, frames, max(0, total - data_at))
            if state.keep and len(frames) > found:
                kept += sum(len(f.raw) for f in frames[found:])
                if kept > KEEP_BYTES:  # no more, on any connection (new ones included)
                    print(f"capture: record stamps only up to {KEEP_BYTES >> 20} MiB of Produce requests",
                          file=sys.stderr)
                    for other in states.values():
                        other.keep = False
    after = os.times()
    cost.cpu_s, cost.wall_s = after.user + after.system - times.user - times.system, time.monotonic() - began
    with suppress(OSError):
        cost.dropped = struct.unpack("II", sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))[1]
    for f in frames:  # the capture is over: decoding competes with nothing measured now
        if f.raw:
            f.sent_ns, f.raw = record_stamps(f.raw), b""
    cost.broken = sum(1 for s in states.values() if s.broken)
    cost.zero_windows = dict(cost.zero_windows)  # a lambda's factory does not pickle
    if cost.broken:
        print(f"capture: lost the framing of {cost.broken} directions (segments missed)", file=sys.stderr)
    out.put((frames, cost))


# --- where a process's time went: /proc/<pid>/task/*/schedstat -------------------------------

@dataclass(slots=True)
class Sched:
    """Summed over a process's threads: ns on a CPU, ns runnable but waiting for one, times scheduled in,
    and of the times it left a CPU those it was made to (preempted, nonvoluntary_ctxt_switches)."""

    on_cpu_ns: int = 0
    waiting_ns: int = 0
    slices: int = 0
    preempted: int = 0

    def __sub__(self, other: Sched) -> Sched:
        return Sched(self.on_cpu_ns - other.on_cpu_ns, self.waiting_ns - other.waiting_ns, self.slices - other.slices,
                     self.preempted - other.preempted)


def sched(pid: int) -> Sched:
    total = Sched()
    for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            on_cpu, waiting, slices = (int(v) for v in task.read_text().split())
        except (OSError, ValueError):  # a thread that ended meanwhile
            continue
        total.on_cpu_ns, total.waiting_ns, total.slices = (total.on_cpu_ns + on_cpu, total.waiting_ns + waiting,
                                                           total.slices + slices)
        with suppress(OSError, ValueError, StopIteration):
            status = (task.parent / "status").read_text().splitlines()
            total.preempted += int(next(line for line in status if line.startswith("nonvoluntary")).split()[1])
    return total


# --- from frames to hops ------------------------------------------------------------------------

@dataclass(slots=True)
class Exchange:
    """One request and its response on one connection, as seen on the wire."""

    api_key: int
    correlation_id: int
    request: FrameOnWire
    response: FrameOnWire | None = None
    in_flight: int = 0  # requests of the connection outstanding when this one was sent


def exchanges(frames: Iterable[FrameOnWire], client_side: FlowKey) -> list[Exchange]:
    """The requests of the connection whose request direction is ``client_side``, with their responses."""
    requests = [f for f in frames if f.flow == client_side]
    responses = {int.from_bytes(f.head[4:8], "big", signed=True): f
                 for f in frames if f.flow == (client_side[1], client_side[0])}
    found = [Exchange(int.from_bytes(f.head[4:6], "big"), int.from_bytes(f.head[8:12], "big", signed=True), f)
             for f in requests if len(f.head) >= HEADER_BYTES]
    for e in found:
        e.response = responses.get(e.correlation_id)
    for i, e in enumerate(found):  # answered later than this one was sent, among the earlier ones
        e.in_flight = sum(1 for p in found[max(0, i - 64):i]
                          if p.response is None or p.response.last_ns > e.request.last_ns)
    return found


@dataclass(slots=True)
class Hops:
    """Per api key, delays in ms (lists), and the client's request pattern."""

    gateway_request: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    gateway_response: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    broker: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    client_rtt: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    # A request's first to last byte on the wire: from the client, and from the gateway to the broker
    client_send: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    gateway_send: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    sched: dict[str, Sched] = field(default_factory=dict)  # gateway, broker: over the measured window
    # Per record of the fixed-rate producer: produce() to its request's first byte leaving the client,
    # to its response's last byte reaching the client, and to the delivery report (latency.py's publish).
    batching: list[float] = field(default_factory=list)
    on_wire: list[float] = field(default_factory=list)
    publish: list[float] = field(default_factory=list)
    request_bytes: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    in_flight: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    unpaired: int = 0


def connections(frames: list[FrameOnWire], server_ports: set[int]) -> list[FlowKey]:
    """Request directions (client port, server port) of the connections to ``server_ports``."""
    return sorted({f.flow for f in frames if f.flow[1] in server_ports})


def analyse(frames: list[FrameOnWire], from_ns: int, gateway_ports: set[int], broker_port: int) -> Hops:
    hops = Hops()
    by_flow: dict[FlowKey, list[FrameOnWire]] = defaultdict(list)
    for f in frames:
        by_flow[f.flow].append(f)

    def of(flow: FlowKey) -> list[FrameOnWire]:
        return by_flow[flow] + by_flow[(flow[1], flow[0])]

    client_ports = gateway_ports if gateway_ports else {broker_port}
    client_conns = {c: exchanges(of(c), c) for c in connections(frames, client_ports)}
    for conn in client_conns.values():
        for e in conn:
            if e.request.last_ns < from_ns:
                continue
            hops.request_bytes[e.api_key].append(e.request.size + 4)
            hops.client_send[e.api_key].append((e.request.last_ns - e.request.first_ns) / 1e6)
            for sent in e.request.sent_ns:
                if sent < from_ns:
                    continue
                hops.batching.append((e.request.first_ns - sent) / 1e6)
                if e.response is not None:
                    hops.on_wire.append((e.response.last_ns - sent) / 1e6)
            hops.in_flight[e.api_key].append(e.in_flight)
            if e.response is not None:
                hops.client_rtt[e.api_key].append((e.response.last_ns - e.request.last_ns) / 1e6)
    # Through the gateway only it sends Produce and Fetch to the broker (the bench's admin client
    # connected before the capture began): every connection to the broker is a candidate.
    upstream_conns = {c: exchanges(of(c), c) for c in connections(frames, {broker_port})}
    for conn in upstream_conns.values():
        for e in conn:
            if e.request.last_ns >= from_ns and e.response is not None:
                hops.broker[e.api_key].append((e.response.last_ns - e.request.last_ns) / 1e6)
    if gateway_ports:
        pair_through_gateway(client_conns, upstream_conns, from_ns, hops)
    return hops


def upstream_requests(upstream_conns: dict[FlowKey, list[Exchange]]) -> dict[int, list[tuple[int, FlowKey]]]:
    """Per api key, every upstream request's last byte and its connection, by time."""
    starts: dict[int, list[tuple[int, FlowKey]]] = defaultdict(list)
    for up, conn in upstream_conns.items():
        for e in conn:
            starts[e.api_key].append((e.request.last_ns, up))
    for times in starts.values():
        times.sort()
    return starts


def twins(conn: list[Exchange], upstream_conns: dict[FlowKey, list[Exchange]],
          starts: dict[int, list[tuple[int, FlowKey]]]) -> list[tuple[Exchange, Exchange | None]]:
    """Each request of a client connection with the upstream request that relays it (None: the gateway
    answered it itself, or no upstream connection carries this client's requests)."""
    votes: dict[FlowKey, int] = defaultdict(int)
    for e in conn[:50]:  # the first upstream request of the same api key sent after it
        times = starts[e.api_key]
        at = bisect.bisect_left(times, (e.request.last_ns,))
        if at < len(times):
            votes[times[at][1]] += 1
    if not votes:
        return [(e, None) for e in conn]
    upstream = upstream_conns[max(votes, key=lambda k: votes[k])]
    found: list[tuple[Exchange, Exchange | None]] = []
    j = 0
    for e in conn:  # in order; requests the gateway answers itself have no upstream twin
        k = j
        while k < len(upstream) and (upstream[k].api_key != e.api_key
                                     or upstream[k].request.last_ns < e.request.last_ns):
            k += 1
        if k == len(upstream):
            found.append((e, None))
            continue
        found.append((e, upstream[k]))
        j = k + 1
    return found


def pair_through_gateway(client_conns: dict[FlowKey, list[Exchange]], upstream_conns: dict[FlowKey, list[Exchange]],
                         from_ns: int, hops: Hops) -> None:
    """Pair each client connection with the upstream connection that carries its requests, then each request."""
    starts = upstream_requests(upstream_conns)
    for conn in client_conns.values():
        for e, u in twins(conn, upstream_conns, starts):
            if u is None:
                hops.unpaired += 1
                continue
            if e.request.last_ns < from_ns:
                continue
            hops.gateway_request[e.api_key].append((u.request.last_ns - e.request.last_ns) / 1e6)
            hops.gateway_send[e.api_key].append((u.request.last_ns - u.request.first_ns) / 1e6)
            if u.response is not None and e.response is not None:
                hops.gateway_response[e.api_key].append((e.response.last_ns - u.response.last_ns) / 1e6)


# --- per Fetch, in the throughput phase ---------------------------------------------------------

FETCH_TIMES = {  # name -> what it is (ms), in the order printed
    "client_rtt": "client: request's last byte out -> response's last byte in",
    "gateway_request": "gateway: request's last byte in -> last byte out to the broker",
    "broker_first": "broker: request's last byte in -> response's first byte out",
    "broker_last": "broker: request's last byte in -> response's last byte out",
    "upstream_stream": "upstream leg: response's first -> last byte",
    "client_stream": "client leg: response's first -> last byte",
    "gateway_first": "gateway: response's first byte in -> first byte out",
    "gateway_last": "gateway: response's last byte in -> last byte out",
    "upstream_gap": "upstream leg: longest pause between two segments of a response",
    "client_gap": "client leg: longest pause between two segments of a response",
    "next_fetch": "client: response's last byte in -> next Fetch's first byte out",
}


@dataclass(slots=True)
class FetchTimes:
    """Per data-carrying Fetch (ms, by FETCH_TIMES' names), its response's bytes, and the Fetches left unpaired."""

    ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    response_bytes: list[int] = field(default_factory=list)
    # TCP segments per response on each leg: through the gateway, about its reads (upstream) and writes (client)
    segments: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    unpaired: int = 0


def fetch_times(frames: list[FrameOnWire], gateway_ports: set[int], broker_port: int,
                min_bytes: int = 16384) -> FetchTimes:
    """Every Fetch whose response carries at least ``min_bytes`` (the long polls that found nothing
    do not count), timed on the client's connection and, through the gateway, on its upstream twin."""
    by_flow: dict[FlowKey, list[FrameOnWire]] = defaultdict(list)
    for f in frames:
        by_flow[f.flow].append(f)

    def conns(server_ports: set[int]) -> dict[FlowKey, list[Exchange]]:
        return {c: exchanges(by_flow[c] + by_flow[(c[1], c[0])], c) for c in connections(frames, server_ports)}

    client_conns = conns(gateway_ports or {broker_port})
    upstream_conns = conns({broker_port}) if gateway_ports else {}
    starts = upstream_requests(upstream_conns)
    times = FetchTimes()
    for conn in client_conns.values():
        fetches = [e for e in conn if e.api_key == 1]
        after = {id(e): nxt for e, nxt in itertools.pairwise(fetches)}
        pairs = twins(fetches, upstream_conns, starts) if gateway_ports else [(e, e) for e in fetches]
        for e, u in pairs:
            if e.response is None or e.response.size + 4 < min_bytes:
                continue
            if u is None or u.response is None:
                times.unpaired += 1
                continue
            ms = times.ms
            ms["client_rtt"].append((e.response.last_ns - e.request.last_ns) / 1e6)
            ms["broker_first"].append((u.response.first_ns - u.request.last_ns) / 1e6)
            ms["broker_last"].append((u.response.last_ns - u.request.last_ns) / 1e6)
            ms["client_stream"].append((e.response.last_ns - e.response.first_ns) / 1e6)
            ms["client_gap"].append(e.response.max_gap_ns / 1e6)
            if u is not e:
                ms["gateway_request"].append((u.request.last_ns - e.request.last_ns) / 1e6)
                ms["upstream_stream"].append((u.response.last_ns - u.response.first_ns) / 1e6)
                ms["upstream_gap"].append(u.response.max_gap_ns / 1e6)
                ms["gateway_first"].append((e.response.first_ns - u.response.first_ns) / 1e6)
                ms["gateway_last"].append((e.response.last_ns - u.response.last_ns) / 1e6)
            if (nxt := after.get(id(e))) is not None:
                ms["next_fetch"].append((nxt.request.first_ns - e.response.last_ns) / 1e6)
            times.response_bytes.append(e.response.size + 4)
            times.segments["client leg"].append(e.response.segments)
            if u is not e:
                times.segments["upstream leg"].append(u.response.segments)
    return times


# --- the load ----------------------------------------------------------------------------------

def single_requests(spec: Spec) -> list[float]:
    """throughput.py's latency pass: one record, flushed, one at a time, for the run's time (ms each)."""
    producer = Producer({**spec.config, **LATENCY_SETTINGS})
    value, times = b"\0" * spec.size, []
    end = time.monotonic() + spec.warmup_s + spec.seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        producer.produce(spec.topic, value, partition=0)
        if producer.flush(10) != 0:
            raise RuntimeError("single request: a record was not delivered")
        times.append((time.perf_counter() - t0) * 1000)
    return times[int(len(times) * spec.warmup_s / (spec.warmup_s + spec.seconds)):]


# --- one run ------------------------------------------------------------------------------------

def run_once(path: str, config: dict[str, Any], rate: int, args: argparse.Namespace, admin: AdminClient,
             gateway: GatewayProcess | None, broker_port: int, broker_pid: int) -> Hops:
    topic = f"hops-{path}-{rate}-{uuid.uuid4().hex[:8]}"
    create_topic(admin, topic, 1)
    spec = Spec(config, topic, rate, args.size, args.warmup, args.seconds, args.linger_ms, args.fetch_wait_ms)
    gateway_ports = ({gateway.port, *(gateway.node_port_base + o for o in gateway.node_port_offsets)}
                     if gateway else set())
    context = multiprocessing.get_context("spawn")
    ready, stop, frames_out = context.Event(), context.Event(), context.SimpleQueue()
    capturer = context.Process(target=capture, args=({broker_port, *gateway_ports}, gateway_ports or {broker_port},
                                                     ready, stop, frames_out),
                               daemon=True)
    capturer.start()
    consumer_ready, consumed = context.Event(), context.SimpleQueue()
    consumer = context.Process(target=consume, args=(spec, consumer_ready, consumed), daemon=True)
    try:
        if not ready.wait(30):
            raise RuntimeError("the capture did not start (AF_PACKET needs root or CAP_NET_RAW)")
        if args.load == "fixed-rate":
            consumer.start()
            if not consumer_ready.wait(60):
                raise RuntimeError(f"{path}: the consumer did not start")
        from_ns = time.time_ns() + int(args.warmup * 1e9)
        pids = {"broker": broker_pid, **({"gateway": gateway.pid} if gateway else {})}
        before: dict[str, Sched] = {}
        window = threading.Timer(args.warmup, lambda: before.update({k: sched(p) for k, p in pids.items()}))
        window.start()
        publish, errors, _ = produce(spec) if args.load == "fixed-rate" else (single_requests(spec), 0, 0.0)
        window.join()
        used = {k: sched(p) - before[k] for k, p in pids.items()}
        if args.load == "fixed-rate":
            consumer.join(timeout=120)
        stop.set()
        frames, _cost = frames_out.get()
        capturer.join(timeout=30)
    finally:
        for child in (consumer, capturer):
            if child.is_alive():
                child.terminate()
        delete_topic(admin, topic)
    print(f"  {path} {rate}/s: publish p50 {percentile(publish, 50):.2f} p99 {percentile(publish, 99):.2f} ms, "
          f"errors {errors}, {len(frames)} frames", file=sys.stderr, flush=True)
    hops = analyse(frames, from_ns, gateway_ports, broker_port)
    hops.sched = used
    hops.publish = publish
    return hops


@dataclass(slots=True)
class FetchRun:
    """One fetch phase: the per-Fetch times, the phase's rate, and what each process used during it."""

    times: FetchTimes
    mb_s: float
    seconds: float
    sched: dict[str, Sched]
    capture: CaptureCost
    gateway_ports: set[int]  # empty: direct
    broker_port: int

    def zero_windows(self, by_client: bool) -> int:
        """Zero windows the client advertised (on its connections), or the gateway on its upstream ones."""
        if by_client:
            return sum(len(t) for f, t in self.capture.zero_windows.items()
                       if f[1] in (self.gateway_ports or {self.broker_port}))
        return sum(len(t) for f, t in self.capture.zero_windows.items()
                   if self.gateway_ports and f[1] == self.broker_port)


def run_fetch(path: str, config: dict[str, Any], args: argparse.Namespace, admin: AdminClient,
              gateway: GatewayProcess, through: bool, broker_port: int, broker_pid: int) -> FetchRun:
    """throughput.py's produce phase (not captured), then its fetch phase with the wire captured."""
    tag = uuid.uuid4().hex[:8]
    topic, warm = f"hops-fetch-{path}-{tag}", f"hops-warm-{path}-{tag}"
    for name in (topic, warm):
        create_topic(admin, name, 1)
    gateway_ports = ({gateway.port, *(gateway.node_port_base + o for o in gateway.node_port_offsets)}
                     if through else set())
    pids = Pids(broker=broker_pid, gateway=gateway.pid)
    context = multiprocessing.get_context("spawn")
    ready, stop, frames_out = context.Event(), context.Event(), context.SimpleQueue()
    capturer = context.Process(target=capture, args=({broker_port, *gateway_ports}, gateway_ports or {broker_port},
                                                     ready, stop, frames_out, args.snap), daemon=True)
    try:
        produce_throughput(config, topic, warm, args.records, args.size, pids)
        capturer.start()
        if not ready.wait(30):
            raise RuntimeError("the capture did not start (AF_PACKET needs root or CAP_NET_RAW)")
        processes = {"client": os.getpid(), "broker": broker_pid, **({"gateway": gateway.pid} if through else {})}
        before = {k: sched(p) for k, p in processes.items()}
        seconds, _first, nbytes, _cpu = fetch_throughput(config, topic, warm, 1, args.records, pids)
        used = {k: sched(p) - before[k] for k, p in processes.items()}
        stop.set()
        frames, cost = frames_out.get()
        capturer.join(timeout=30)
    finally:
        if capturer.is_alive():
            capturer.terminate()
        for name in (topic, warm):
            delete_topic(admin, name)
    run = FetchRun(fetch_times(frames, gateway_ports, broker_port), nbytes / 1e6 / seconds, seconds, used, cost,
                   gateway_ports, broker_port)
    print(f"  {path}: fetch {run.mb_s:.0f} MB/s in {seconds:.3f} s, {len(run.times.response_bytes)} data-carrying "
          f"Fetches, capture {cost.segments} segments ({cost.dropped} dropped), {cost.cpu_s:.2f} s of CPU",
          file=sys.stderr, flush=True)
    return run


# --- report -------------------------------------------------------------------------------------

def distribution(values: list[float]) -> str:
    if not values:
        return f"{'-':>24}"
    return f"{percentile(values, 50):>7.3f} {percentile(values, 99):>7.3f} {max(values):>8.3f}"


def report(rate: int, seconds: float, results: dict[str, list[Hops]]) -> str:
    load = f"{rate}/s" if rate else "one request at a time"
    lines = [f"{load}  (ms: p50 p99 max over every exchange of the runs; n = exchanges)",
             f"  {'path':<10}{'api':<9}{'hop':<12}{'p50':>7} {'p99':>7} {'max':>8} {'n':>7}"]
    for path, runs in results.items():
        for api_key in (0, 1):
            for hop in ("client_rtt", "broker", "gateway_request", "gateway_response", "client_send", "gateway_send"):
                values = [v for h in runs for v in getattr(h, hop)[api_key]]
                if values:
                    lines.append(f"  {path:<10}{API_NAMES[api_key]:<9}{hop:<12}{distribution(values)} {len(values):>7}")
            sizes = [v for h in runs for v in h.request_bytes[api_key]]
            flight = [v for h in runs for v in h.in_flight[api_key]]
            if sizes:
                lines.append(f"  {path:<10}{API_NAMES[api_key]:<9}requests/s {len(sizes) / seconds / len(runs):>7.0f}, "
                             f"bytes p50 {percentile([float(s) for s in sizes], 50):>7.0f}, in flight when sent "
                             f"p50 {statistics.median(flight):.0f} max {max(flight)}")
        for what, label in (("batching", "produce() -> request out"), ("on_wire", "produce() -> response in"),
                            ("publish", "produce() -> delivery report")):
            values = [v for h in runs for v in getattr(h, what)]
            if values:
                lines.append(f"  {path:<10}records  {label:<29}{distribution(values)} {len(values):>7}")
        for name in ("gateway", "broker"):
            used = [h.sched[name] for h in runs if name in h.sched]
            if used and (slices := sum(u.slices for u in used)):
                cpu, wait = sum(u.on_cpu_ns for u in used), sum(u.waiting_ns for u in used)
                lines.append(f"  {path:<10}{name} process: {cpu / 1e6 / seconds / len(runs) / 10:.1f}% of a core, "
                             f"{slices / seconds / len(runs):.0f} wake-ups/s, per wake-up {cpu / slices / 1e3:.0f} us "
                             f"on a CPU and {wait / slices / 1e3:.0f} us runnable waiting for one; "
                             f"{sum(u.preempted for u in used) / seconds / len(runs):.0f} preemptions/s")
        unpaired = sum(h.unpaired for h in runs)
        if unpaired:
            lines.append(f"  {path:<10}{unpaired} client requests without an upstream twin (answered by the gateway)")
    return "\n".join(lines)


def fetch_report(results: dict[str, list[FetchRun]]) -> str:
    lines = ["throughput.py's fetch phase  (ms: p50 p99 max over every data-carrying Fetch of the runs; n = Fetches)",
             f"  {'path':<10}{'':<66}{'p50':>7} {'p99':>7} {'max':>8} {'n':>5}"]
    for path, runs in results.items():
        rates = ", ".join(f"{r.mb_s:.0f}" for r in runs)
        lines.append(f"  {path:<10}fetch MB/s per run (capture running): {rates}")
        for name, label in FETCH_TIMES.items():
            values = [v for r in runs for v in r.times.ms[name]]
            if values:
                lines.append(f"  {path:<10}{label:<66}{distribution(values)} {len(values):>5}")
        sizes = [float(b) for r in runs for b in r.times.response_bytes]
        if sizes:
            lines.append(f"  {path:<10}bytes per Fetch response p50 {percentile(sizes, 50):,.0f}, "
                         f"Fetches per run {len(sizes) / len(runs):.0f}")
        for leg in ("upstream leg", "client leg"):
            counts = [c for r in runs for c in r.times.segments[leg]]
            if counts:
                lines.append(f"  {path:<10}{leg}: TCP segments per response p50 {percentile(counts, 50):.0f} "
                             f"(p1 {percentile(counts, 1):.0f}, p99 {percentile(counts, 99):.0f})")
        fetches = len(sizes) or 1
        for name in ("client", "gateway", "broker"):  # from the consumer's creation to its close
            used = [r.sched[name] for r in runs if name in r.sched]
            if used and sum(u.slices for u in used):
                cpu, wait = sum(u.on_cpu_ns for u in used), sum(u.waiting_ns for u in used)
                lines.append(f"  {path:<10}{name} process per data-carrying Fetch: {cpu / 1e6 / fetches:.2f} ms on a "
                             f"CPU, {wait / 1e6 / fetches:.2f} ms runnable waiting for one, "
                             f"{sum(u.slices for u in used) / fetches:.0f} wake-ups, "
                             f"{sum(u.preempted for u in used) / fetches:.1f} preemptions")
        for label, by_client in (("client to its server", True), ("gateway to the broker", False)):
            zeros = sum(r.zero_windows(by_client) for r in runs)
            if zeros or by_client:
                lines.append(f"  {path:<10}zero windows advertised by the {label}: {zeros} "
                             f"({zeros / fetches:.2f} per data-carrying Fetch)")
        cpu_s, wall = sum(r.capture.cpu_s for r in runs), sum(r.capture.wall_s for r in runs)
        lines.append(f"  {path:<10}capture: {cpu_s / len(runs):.2f} s of CPU per run ({100 * cpu_s / wall:.0f}% of a "
                     f"core over its {wall / len(runs):.1f} s), {sum(r.capture.segments for r in runs)} segments, "
                     f"{sum(r.capture.dropped for r in runs)} dropped, "
                     f"{sum(r.capture.broken for r in runs)} directions' framing lost; "
                     f"{sum(r.times.unpaired for r in runs)} Fetches unpaired")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rates", default="5000,50000", help="records per second, comma-separated")
    parser.add_argument("--size", type=int, default=1024, help="record value size in bytes (at least 16)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds at the start of a run")
    parser.add_argument("--repeat", type=int, default=2, help="repeats (direct and gateway alternate)")
    parser.add_argument("--linger-ms", type=float, default=5.0, help="the producer's linger.ms (as latency.py)")
    parser.add_argument("--fetch-wait-ms", type=int, default=5, help="the consumer's fetch.wait.max.ms (as latency.py)")
    parser.add_argument("--paths", default="direct,plaintext", help="subset of direct,plaintext")
    parser.add_argument("--load", choices=("fixed-rate", "single", "fetch"), default="fixed-rate",
                        help="fixed-rate: latency.py's producer at each rate and its consumer; single: "
                             "throughput.py's latency pass (one record produced and flushed at a time, no consumer); "
                             "fetch: throughput.py's fetch phase (its consumer settings), --records of --size")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra gateway configuration key (repeatable), as throughput.py's --set")
    parser.add_argument("--records", type=int, default=200_000, help="--load fetch: records fetched per run")
    parser.add_argument("--snap", type=int, default=None,
                        help="bytes of each segment the kernel copies to the capture (0: all); default 0, "
                             "with --load fetch 1024 (headers and the first bytes of each frame)")
    args = parser.parse_args(argv)
    args.rates = [int(r) for r in args.rates.split(",") if r]
    args.paths = [p for p in args.paths.split(",") if p]
    if args.snap is None:
        args.snap = 1024 if args.load == "fetch" else 0
    if args.snap and args.load != "fetch":
        parser.error("--snap: the fixed-rate and single loads read the records' stamps, so they capture everything")
    if args.snap and args.snap < 128:
        parser.error("--snap: at least 128 (Ethernet, IP and TCP headers, then a frame's first bytes)")
    if set(args.paths) - {"direct", "plaintext"} or args.size < 16 or args.repeat < 1:
        parser.error("--paths: direct, plaintext; --size at least 16; --repeat at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"machine: {machine()}  load average before: {loadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ksgate-hops-") as tmp, EmbeddedBroker() as broker:
        broker_port = int(broker.bootstrap.rsplit(":", 1)[1])
        broker_pid = broker.process.pid
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        node_ids = sorted(admin.list_topics(timeout=10).brokers)
        with GatewayProcess(broker.bootstrap, Path(tmp) / "plaintext", parse_settings(args.set),
                            node_ids=node_ids) as gateway:
            if args.load == "fetch":
                fetch_runs: dict[str, list[FetchRun]] = {path: [] for path in args.paths}
                for repeat in range(args.repeat):
                    for path in args.paths if repeat % 2 == 0 else args.paths[::-1]:
                        through = path == "plaintext"
                        config = {"bootstrap.servers": gateway.bootstrap if through else broker.bootstrap}
                        fetch_runs[path].append(run_fetch(path, config, args, admin, gateway, through, broker_port,
                                                          broker_pid))
                print(fetch_report(fetch_runs), flush=True)
                print(f"load average after: {loadavg()}")
                return 0
            for rate in args.rates if args.load == "fixed-rate" else [0]:
                results: dict[str, list[Hops]] = {path: [] for path in args.paths}
                for repeat in range(args.repeat):
                    paths = args.paths if repeat % 2 == 0 else args.paths[::-1]
                    for path in paths:
                        config = {"bootstrap.servers": gateway.bootstrap if path == "plaintext" else broker.bootstrap}
                        results[path].append(run_once(path, config, rate, args, admin,
                                                      gateway if path == "plaintext" else None, broker_port,
                                                      broker_pid))
                print(report(rate, args.seconds, results), flush=True)
    print(f"load average after: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
