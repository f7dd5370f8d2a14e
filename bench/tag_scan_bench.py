"""Micro-benchmark: finding node_endpoints by tag_scan vs decoding a whole Produce/Fetch response.

Run: ``PYTHONPATH=. python bench/tag_scan_bench.py``; prints microseconds per call (one core, no sockets).
"""

from __future__ import annotations

import timeit
import uuid
from typing import Any

from gateway.session.address_rewrite import body_names_endpoints
from protocol.api_keys import ApiKey
from protocol.registry import api


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


if __name__ == "__main__":
    _measure("Fetch v16, 50 partitions x 20 KB records", ApiKey.FETCH, 16, _fetch_body(50, 20_000))
    _measure("Fetch v16, 1000 partitions x 1 KB records", ApiKey.FETCH, 16, _fetch_body(1000, 1_000))
    _measure("Produce v10, 1000 partitions", ApiKey.PRODUCE, 10, _produce_body(1000))
    _measure("Produce v10, 10 partitions", ApiKey.PRODUCE, 10, _produce_body(10))
