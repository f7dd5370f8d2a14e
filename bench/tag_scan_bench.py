"""Micro-benchmark: finding node_endpoints by tag_scan vs decoding a whole Produce/Fetch response, and
walking a streamed Fetch response in 64 KiB chunks to its tag section (protocol/streaming/trailer_walker.py).

Run: ``PYTHONPATH=. python bench/tag_scan_bench.py``; prints microseconds per call (one core, no sockets).
"""

from __future__ import annotations

import timeit
import uuid
from typing import Any

from gateway.session.address_rewrite import body_names_endpoints
from protocol.api_keys import ApiKey
from protocol.header import response_header_version
from protocol.registry import api
from protocol.streaming.trailer_walker import TrailerWalker, walk_plan


def _fetch_body(partitions: int, records_bytes: int) -> dict[str, Any]:
    part = {"partition_index": 0, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
            "log_start_offset": 0, "aborted_transactions": [], "preferred_read_replica": -1,
            "records": b"\x00" * records_bytes}
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic_id": uuid.uuid4(), "partitions": [dict(part, partition_index=i)
                                                                   for i in range(partitions)]}]}


def _produce_body(partitions: int) -> dict[str, Any]:
    part = {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0,
            "record_errors": [], "error_message": None}
    return {"responses": [{"name": "orders", "partition_responses": [dict(part, index=i) for i in range(partitions)]}],
            "throttle_time_ms": 0}


def _measure(label: str, key: ApiKey, version: int, body: dict[str, Any]) -> None:
    schema = api(key)
    assert schema is not None
    codec = schema.response_codec(version)
    data = bytes(codec.encode(body))
    assert not body_names_endpoints(key, version, data)
    runs = 200
    scan = min(timeit.repeat(lambda: body_names_endpoints(key, version, data), number=runs, repeat=5)) / runs
    decode = min(timeit.repeat(lambda: codec.decode(data), number=runs, repeat=5)) / runs
    print(f"{label}: {len(data):,} bytes; scan {scan * 1e6:.1f} µs, full decode {decode * 1e6:.1f} µs "
          f"({decode / scan:.1f}x)")


def _measure_walk(label: str, body: dict[str, Any], chunk: int = 64 * 1024) -> None:
    """The streamed path's cost: a header and tag section per response, nothing per records byte."""
    schema = api(ApiKey.FETCH)
    assert schema is not None
    payload = memoryview(b"\0\0\0\1\0" + bytes(schema.response_codec(16).encode(body)))  # correlation id, header tags
    chunks = [payload[i : i + chunk] for i in range(0, len(payload), chunk)]
    plan = walk_plan(ApiKey.FETCH, 16, response_header_version(ApiKey.FETCH, True))

    def walk() -> None:
        walker = TrailerWalker(plan, len(payload))
        for piece in chunks:
            walker.feed(piece)
        walker.trailer()

    runs = 200
    took = min(timeit.repeat(walk, number=runs, repeat=5)) / runs
    print(f"{label}: {len(payload):,} bytes in {len(chunks)} chunks; walked in {took * 1e6:.1f} µs "
          f"({took * 1e9 / (len(payload) / 1e6) / 1e6:.3f} ms per MB)")


if __name__ == "__main__":
    _measure_walk("streamed Fetch v16, 1 partition x 1 MB records", _fetch_body(1, 1_000_000))
    _measure_walk("streamed Fetch v16, 16 partitions x 64 KB records", _fetch_body(16, 64_000))
    _measure_walk("streamed Fetch v16, 256 partitions x 4 KB records", _fetch_body(256, 4_000))
    _measure_walk("streamed Fetch v16, 1000 partitions x 1 KB records", _fetch_body(1000, 1_000))
    _measure("Fetch v16, 50 partitions x 20 KB records", ApiKey.FETCH, 16, _fetch_body(50, 20_000))
    _measure("Fetch v16, 1000 partitions x 1 KB records", ApiKey.FETCH, 16, _fetch_body(1000, 1_000))
    _measure("Produce v10, 1000 partitions", ApiKey.PRODUCE, 10, _produce_body(1000))
    _measure("Produce v10, 10 partitions", ApiKey.PRODUCE, 10, _produce_body(10))
