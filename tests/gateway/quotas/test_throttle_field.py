"""throttle_time_ms set in relayed response bytes: in place after the header, or by re-encoding Produce."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from gateway.quotas.throttle_field import with_throttle
from protocol.api_keys import ApiKey
from protocol.messages import decode_response, response_frame
from tests.authz.test_policies_data import response


def _pieces(wire: bytes) -> list[Any]:
    view = memoryview(wire)
    return [view[:4], b"\x00\x00\x00\x07", view[8:]]  # as the relay hands them on (correlation id swapped)


def _body(pieces: list[Any], key: int, version: int) -> dict[str, Any]:
    whole = b"".join(bytes(p) for p in pieces)
    return decode_response(whole[4:], key, version)[1]


@pytest.mark.parametrize("version", [1, 4, 11, 12, 16])
def test_a_fetch_response_gets_the_throttle_without_its_records_being_copied(version: int) -> None:
    records = b"R" * 4096
    body = response(ApiKey.FETCH, version, "responses", [{
        "topic": "t", "topic_id": None, "partitions": [{
            "partition_index": 0, "error_code": 0, "high_watermark": 1, "last_stable_offset": 1, "log_start_offset": 0,
            "aborted_transactions": None, "preferred_read_replica": -1, "records": records}]}], throttle_time_ms=3)
    if version >= 13:
        body["responses"][0]["topic_id"] = uuid.uuid4()
    pieces = _pieces(response_frame(ApiKey.FETCH, version, 1, body))
    patched = with_throttle(ApiKey.FETCH, version, pieces, 250)
    decoded = _body(patched, ApiKey.FETCH, version)
    assert decoded["throttle_time_ms"] == 250
    assert decoded["responses"][0]["partitions"][0]["records"] == records
    # the big piece is sliced, not copied
    assert any(isinstance(p, memoryview) and p.obj is pieces[2].obj and len(p) > 4000 for p in patched)


def test_a_larger_upstream_value_is_kept() -> None:
    body = response(ApiKey.FETCH, 12, "responses", [], throttle_time_ms=900)
    pieces = _pieces(response_frame(ApiKey.FETCH, 12, 1, body))
    assert with_throttle(ApiKey.FETCH, 12, pieces, 250) is pieces


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_a_produce_response_is_re_encoded_with_the_throttle(version: int) -> None:
    body = response(ApiKey.PRODUCE, version, "responses", [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], throttle_time_ms=0)
    patched = with_throttle(ApiKey.PRODUCE, version, _pieces(response_frame(ApiKey.PRODUCE, version, 1, body)), 77)
    decoded = _body(patched, ApiKey.PRODUCE, version)
    assert decoded["throttle_time_ms"] == 77
    assert decoded["responses"][0]["partition_responses"][0]["base_offset"] == 42
    assert b"".join(bytes(p) for p in patched)[4:8] == b"\x00\x00\x00\x07"  # the client's correlation id stays


def test_a_response_without_the_field_is_left_alone() -> None:
    body = response(ApiKey.FETCH, 0, "responses", [])
    pieces = _pieces(response_frame(ApiKey.FETCH, 0, 1, body))
    assert with_throttle(ApiKey.FETCH, 0, pieces, 100) is pieces
