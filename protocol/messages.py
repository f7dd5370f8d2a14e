"""Whole-message helpers: a request or response frame from a body dict, and back."""

from __future__ import annotations

import struct
from typing import Any

from protocol.errors import DecodeError
from protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    request_header_version,
    response_header_version,
)
from protocol.registry import ApiSchema, api

_SIZE = struct.Struct(">i")


def _schema(api_key: int) -> ApiSchema:
    schema = api(api_key)
    if schema is None:
        raise DecodeError(f"no schema for api key {api_key}")
    return schema


def request_frame(api_key: int, version: int, correlation_id: int, body: dict[str, Any],
                  client_id: str | None = "ksgate") -> bytes:
    """A complete request frame (size prefix included)."""
    schema = _schema(api_key)
    header = RequestHeader(api_key, version, correlation_id, client_id, request_header_version(schema, version), 0)
    payload = encode_request_header(header) + bytes(schema.request_codec(version).encode(body))
    return _SIZE.pack(len(payload)) + payload


def response_frame(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> bytes:
    """A complete response frame (size prefix included)."""
    schema = _schema(api_key)
    header = encode_response_header(correlation_id, response_header_version(api_key, schema.is_flexible(version)))
    payload = header + bytes(schema.response_codec(version).encode(body))
    return _SIZE.pack(len(payload)) + payload


def decode_response(payload: memoryview | bytes, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
    """Correlation id and body of a response payload (the frame without its size prefix)."""
    schema = _schema(api_key)
    view = memoryview(payload)
    header_version = response_header_version(api_key, schema.is_flexible(version))
    correlation_id, offset = decode_response_header(view, header_version)
    return correlation_id, schema.response_codec(version).decode(view[offset:])
