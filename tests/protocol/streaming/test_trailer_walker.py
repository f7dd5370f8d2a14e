"""The streamed-response walker: chunk boundaries anywhere, records never held, malformed frames refused."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.api_keys import ApiKey
from protocol.entities.endpoints import endpoint_places
from protocol.errors import DecodeError
from protocol.header import response_header_version
from protocol.messages import response_frame
from protocol.primitives import Writer
from protocol.registry import all_apis, api
from protocol.streaming.trailer_walker import TRAILER_LIMIT, TrailerWalker, walk_plan
from tests.protocol.spec_strategies import message_bodies

ENDPOINT = {"node_id": 2, "host": "broker-2.internal", "port": 9092, "rack": None}


def _partition(index: int, records: bytes | None, **extra: Any) -> dict[str, Any]:
    return {"partition_index": index, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
            "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
            "records": records, **extra}


def fetch_body(records: bytes | None = b"\x07" * 300, endpoints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    leader = {"leader_id": 2, "leader_epoch": 5}
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 9, "node_endpoints": endpoints or [],
            "responses": [{"topic_id": uuid.UUID(int=1), "partitions": [
                _partition(0, records),
                _partition(1, None, error_code=6, current_leader=leader,
                           aborted_transactions=[{"producer_id": 4, "first_offset": 1}]),
                _partition(2, records[:17] if records else b"", diverging_epoch={"epoch": 3, "end_offset": 8})]}]}


def payload_of(version: int, body: dict[str, Any], api_key: int = ApiKey.FETCH) -> bytes:
    return response_frame(api_key, version, 77, body)[4:]


def tag_section(version: int, body: dict[str, Any], api_key: int = ApiKey.FETCH) -> bytes:
    """The body's top-level tag section, as the codec writes it (the end of the encoded body)."""
    schema = api(api_key)
    assert schema is not None
    codec = schema.response_codec(version)
    untagged = {f.name: body[f.name] for f in schema.response.fields
                if version in f.versions and not (f.tag is not None and version in f.tagged_versions)}
    encoded, bare = bytes(codec.encode(body)), bytes(codec.encode(untagged))
    assert encoded.startswith(bare[:-1])
    return encoded[len(bare) - 1 :]


def walk(version: int, payload: bytes, cuts: list[int], api_key: int = ApiKey.FETCH,
         limit: int = TRAILER_LIMIT) -> tuple[bytes, bytes]:
    schema = api(api_key)
    assert schema is not None
    plan = walk_plan(api_key, version, response_header_version(api_key, schema.is_flexible(version)))
    walker = TrailerWalker(plan, len(payload), limit)
    view, forwarded, last = memoryview(payload), bytearray(), 0
    for cut in [*cuts, len(payload)]:
        forwarded += walker.feed(view[last:cut])
        last = cut
    return bytes(forwarded), walker.trailer()


@pytest.mark.parametrize("version", [16, 17, 18])
@pytest.mark.parametrize("endpoints", [None, [ENDPOINT]], ids=["no-endpoints", "endpoints"])
def test_every_split_point_forwards_the_body_and_keeps_exactly_the_tag_section(
        version: int, endpoints: list[dict[str, Any]] | None) -> None:
    body = fetch_body(endpoints=endpoints)
    payload, section = payload_of(version, body), tag_section(version, body)
    assert (section == b"\x00") == (endpoints is None)
    for cut in range(len(payload) + 1):
        forwarded, trailer = walk(version, payload, [cut])
        assert trailer == section and forwarded + trailer == payload, cut


def test_random_chunkings_of_every_size_agree() -> None:
    rng = random.Random(16)
    body = fetch_body(endpoints=[ENDPOINT, {**ENDPOINT, "node_id": 3, "rack": "r1"}])
    payload, section = payload_of(17, body), tag_section(17, body)
    for _ in range(300):
        cuts = sorted(rng.sample(range(len(payload) + 1), rng.randint(1, 40)))
        assert walk(17, payload, cuts) == (payload[: len(payload) - len(section)], section)


# Every response whose endpoints sit only in its top-level tag section (node_endpoints, KIP-951).
TRAILER_RESPONSES = [(key, version) for key, schema in sorted(all_apis().items())
                     for version in range(schema.min_version, schema.max_version + 1)
                     if version in schema.response.flexible
                     and (places := endpoint_places(schema.response, version))
                     and all(place.tag is not None for place in places)]


def test_the_sweep_covers_fetch_v16_to_v18_and_produce_v10_up() -> None:
    assert {(ApiKey.FETCH, v) for v in (16, 17, 18)} | {(ApiKey.PRODUCE, 10)} <= set(TRAILER_RESPONSES)


@pytest.mark.parametrize(("api_key", "version"), TRAILER_RESPONSES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_body_of_any_such_response_splits_at_its_tag_section(api_key: int, version: int, data: Any) -> None:
    schema = api(api_key)
    assert schema is not None
    body = data.draw(message_bodies(schema.response, version))
    payload = payload_of(version, body, api_key)
    section = tag_section(version, body, api_key)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(payload)), max_size=6)))
    assert walk(version, payload, cuts, api_key) == (payload[: len(payload) - len(section)], section)


def test_records_pass_through_and_are_never_held() -> None:
    records = bytes(range(256)) * 4096  # 1 MiB in one partition
    payload = payload_of(16, fetch_body(records=records))
    plan = walk_plan(ApiKey.FETCH, 16, 1)
    walker = TrailerWalker(plan, len(payload))
    view = memoryview(payload)
    for start in range(0, len(payload) - 4096, 4096):
        chunk = view[start : start + 4096]
        assert walker.feed(chunk) is chunk  # forwarded whole, the caller's own view: nothing copied
        assert walker.held == 0
    forwarded = walker.feed(view[start + 4096 :])
    assert walker.held == 1 and walker.trailer() == b"\x00" and len(forwarded) == len(payload) - start - 4096 - 1


def _walk_all(version: int, payload: bytes, limit: int = TRAILER_LIMIT) -> None:
    walk(version, payload, [len(payload) // 2], limit=limit)


def test_a_records_length_past_the_frame_is_refused() -> None:
    payload = bytearray(payload_of(16, fetch_body(records=b"\x01" * 100)))
    at = bytes(payload).index(b"\x01" * 100) - 1  # the compact length (101) before the records
    assert payload[at] == 101
    payload[at] = 0x7F  # 126 bytes: more than remain
    with pytest.raises(DecodeError, match=r"left in the frame|ended"):
        _walk_all(16, bytes(payload))


@pytest.mark.parametrize("tail", [b"\xff\xff\xff\xff\xff\x01", b"\x80"], ids=["varint-too-long", "cut-varint"])
def test_a_malformed_varint_is_refused(tail: bytes) -> None:
    header = bytes(payload_of(16, fetch_body())[:16])  # correlation id, header tags, throttle, error, session
    with pytest.raises(DecodeError):
        _walk_all(16, header + tail)


def test_an_array_longer_than_the_frame_can_hold_is_refused() -> None:
    w = Writer()
    w.int32(77)
    w.uvarint(0)
    w.raw(bytes(10))  # throttle, error, session
    w.uvarint(1_000_000)  # responses: a million topics in a few bytes
    w.raw(bytes(20))
    with pytest.raises(DecodeError, match="cannot fit"):
        _walk_all(16, bytes(w.out))


def test_bytes_beyond_the_announced_size_are_refused() -> None:
    payload = payload_of(16, fetch_body())
    walker = TrailerWalker(walk_plan(ApiKey.FETCH, 16, 1), len(payload) - 1)
    with pytest.raises(DecodeError, match="past the frame"):
        walker.feed(memoryview(payload))


def test_a_frame_that_ends_before_its_tag_section_is_refused() -> None:
    payload = payload_of(16, fetch_body())
    walker = TrailerWalker(walk_plan(ApiKey.FETCH, 16, 1), len(payload) - 1)
    walker.feed(memoryview(payload)[:-1])
    with pytest.raises(DecodeError):
        walker.trailer()


def test_a_tag_section_over_the_limit_is_refused() -> None:
    body = fetch_body(endpoints=[{**ENDPOINT, "node_id": n} for n in range(50)])
    payload = payload_of(16, body)
    section = tag_section(16, body)
    _walk_all(16, payload, limit=len(section))
    with pytest.raises(DecodeError, match="exceeds the limit"):
        _walk_all(16, payload, limit=len(section) - 1)
