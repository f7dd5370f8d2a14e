"""Micro-benchmark: our schema codec against kio's on the gateway's hot-path messages.

Run: ``PYTHONPATH=. python bench/codec_compare.py [--repeat 7]``; prints, per message, the
median CPU microseconds of a decode and of an encode with each codec (one core, no sockets).
Bodies are built once as our dicts, encoded by us, and decoded once by kio to get its
objects; both codecs then decode the same bytes and encode equal values.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
import timeit
import uuid
from collections.abc import Callable
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from protocol.api_keys import ApiKey
from protocol.codec import default_value
from protocol.registry import api
from protocol.schema import FieldSpec


def _complete(fields: list[FieldSpec], version: int, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with every other field of the version at its default (nested dicts completed too)."""
    out: dict[str, Any] = {}
    for spec in fields:
        if version not in spec.versions:
            continue
        value = given.get(spec.name, default_value(spec, version))
        if spec.is_struct_array and value:
            value = [_complete(spec.fields, version, item) for item in value]
        elif spec.is_struct and value is not None:
            value = _complete(spec.fields, version, value)
        out[spec.name] = value
    return out


def _topic(name: str) -> dict[str, Any]:
    """Both ways of naming a topic; _complete keeps the one the version has."""
    return {"name": name, "topic_id": uuid.uuid5(uuid.NAMESPACE_URL, name)}


def produce_request(version: int) -> dict[str, Any]:
    records = bytes(1_000_000)
    return {"transactional_id": None, "acks": -1, "timeout_ms": 30_000,
            "topic_data": [{**_topic("orders"), "partition_data": [{"index": 0, "records": records}]}]}


def fetch_response(version: int) -> dict[str, Any]:
    parts = [{"partition_index": i, "high_watermark": 1000, "last_stable_offset": 1000,
              "preferred_read_replica": -1, "records": bytes(100_000)} for i in range(10)]
    return {"responses": [{**_topic("orders"), "partitions": parts}]}


def metadata_response(version: int) -> dict[str, Any]:
    brokers = [{"node_id": n, "host": f"broker-{n}.kafka.internal", "port": 9092, "rack": "a"} for n in range(3)]
    topics = [{**_topic(f"topic-{t:03d}"), "partitions": [
        {"partition_index": p, "leader_id": p % 3, "replica_nodes": [0, 1, 2], "isr_nodes": [0, 1, 2]}
        for p in range(3)]} for t in range(100)]
    return {"brokers": brokers, "cluster_id": "c-1", "controller_id": 0, "topics": topics}


def api_versions_response(version: int) -> dict[str, Any]:
    return {"api_keys": [{"api_key": k, "min_version": 0, "max_version": 9} for k in range(70)]}


def api_versions_request(version: int) -> dict[str, Any]:
    return {"client_software_name": "librdkafka", "client_software_version": "2.6.0"}


CASES: list[tuple[str, ApiKey, str, range, Callable[[int], dict[str, Any]]]] = [
    ("Produce request, 1 MB records", ApiKey.PRODUCE, "request", range(9, 14), produce_request),
    ("Fetch response, 10 x 100 KB records", ApiKey.FETCH, "response", range(12, 19), fetch_response),
    ("Metadata response, 100 topics x 3 partitions", ApiKey.METADATA, "response", range(9, 14), metadata_response),
    ("ApiVersions request", ApiKey.API_VERSIONS, "request", range(3, 5), api_versions_request),
    ("ApiVersions response, 70 APIs", ApiKey.API_VERSIONS, "response", range(3, 5), api_versions_response),
]


def _median_us(fn: Callable[[], object], repeat: int) -> float:
    """Median CPU time of one call: process time, so that other processes on a busy machine do not count."""
    number = 1
    while min(timeit.repeat(fn, number=number, repeat=1, timer=time.process_time)) < 0.02:  # ≥ 20 ms a run
        number *= 4
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeat, timer=time.process_time)) / number * 1e6


def _kio_write(writer: Callable[[io.BytesIO, Any], None], value: Any) -> bytes:
    buffer = io.BytesIO()
    writer(buffer, value)
    return buffer.getvalue()


def measure(label: str, key: ApiKey, kind: str, version: int, body: dict[str, Any], repeat: int) -> None:
    schema = api(key)
    assert schema is not None
    codec = schema.request_codec(version) if kind == "request" else schema.response_codec(version)
    spec = schema.request if kind == "request" else schema.response
    value = _complete(spec.fields, version, body)
    wire = bytes(codec.encode(value))
    kio_type = load_request_schema(key, version) if kind == "request" else load_response_schema(key, version)
    read, write = entity_reader(kio_type), entity_writer(kio_type)
    kio_value, used = read(wire, 0)
    assert used == len(wire) and _kio_write(write, kio_value) == wire, "the codecs disagree"
    view = memoryview(wire)
    ours_dec = _median_us(lambda: codec.decode(view), repeat)
    ours_enc = _median_us(lambda: codec.encode(value), repeat)
    kio_dec = _median_us(lambda: read(wire, 0), repeat)
    kio_enc = _median_us(lambda: _kio_write(write, kio_value), repeat)
    print(f"{label + f' v{version}':<52} {len(wire):>9,}  {ours_dec:>9.1f} {kio_dec:>9.1f} "
          f"{kio_dec / ours_dec:>6.2f}x  {ours_enc:>9.1f} {kio_enc:>9.1f} {kio_enc / ours_enc:>6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per figure; the median is printed")
    args = parser.parse_args()
    print(f"{'message':<52} {'bytes':>9}  {'dec ours':>9} {'dec kio':>9} {'kio/us':>7}  "
          f"{'enc ours':>9} {'enc kio':>9} {'kio/us':>7}   (CPU µs, median of {args.repeat})")
    for label, key, kind, versions, build in CASES:
        for version in versions:
            measure(label, key, kind, version, build(version), args.repeat)


if __name__ == "__main__":
    main()
