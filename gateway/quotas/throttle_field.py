"""Setting ``throttle_time_ms`` in a response frame the gateway relays as bytes.

Most responses that carry the field have it first in the body, right after the response header,
so it is patched in place without decoding the body (a multi-megabyte Fetch stays untouched bytes:
the frame's pieces are split around the 4 bytes). Produce has it after its responses array; its
responses are small, so it is decoded and re-encoded. The upstream's own value is never lowered.
"""

from __future__ import annotations

import struct
from functools import lru_cache

from gateway.session.response_queue import WireBytes
from protocol.errors import DecodeError
from protocol.framing import frame as framed
from protocol.header import decode_response_header, response_header_version
from protocol.registry import api

_I32 = struct.Struct(">i")
_HEAD_BYTES = 64  # enough for the size, correlation id and any tagged fields a response header has
_FIELD = "throttle_time_ms"


def with_throttle(api_key: int, version: int, pieces: list[WireBytes], throttle_ms: int) -> list[WireBytes]:
    """The response frame (``pieces``, size prefix included) with throttle_time_ms at least ``throttle_ms``.

    Unchanged when the response has no such field at this version, or already says as much.
    """
    where = _placement(api_key, version)
    if where is None or throttle_ms <= 0:
        return pieces
    if where == "first":
        return _patch_first(api_key, version, pieces, throttle_ms)
    return _patch_decoded(api_key, version, pieces, throttle_ms)


@lru_cache(maxsize=1024)
def _placement(api_key: int, version: int) -> str | None:
    """"first" (right after the header), "inside" (anywhere else), or None (no such field)."""
    schema = api(api_key)
    if schema is None or not schema.supports(version):
        return None
    present = [f for f in schema.response.fields
               if version in f.versions and (f.tag is None or version not in f.tagged_versions)]
    names = [f.name for f in present]
    if _FIELD not in names:
        return None
    return "first" if names[0] == _FIELD else "inside"


def _patch_first(api_key: int, version: int, pieces: list[WireBytes], throttle_ms: int) -> list[WireBytes]:
    schema = api(api_key)
    assert schema is not None
    header_version = response_header_version(api_key, schema.is_flexible(version))
    head = _head(pieces, _HEAD_BYTES)
    try:
        _, header_size = decode_response_header(memoryview(head)[4:], header_version)
        offset = 4 + header_size
        if offset + 4 > len(head):  # a header with unusually many tagged fields: read it all
            head = b"".join(bytes(p) for p in pieces)
            _, header_size = decode_response_header(memoryview(head)[4:], header_version)
            offset = 4 + header_size
        current = _I32.unpack_from(head, offset)[0]
    except (DecodeError, struct.error) as exc:
        raise DecodeError(f"response too short for its throttle_time_ms: {exc}") from None
    if current >= throttle_ms:
        return pieces
    return _replace(pieces, offset, _I32.pack(throttle_ms))


def _patch_decoded(api_key: int, version: int, pieces: list[WireBytes], throttle_ms: int) -> list[WireBytes]:
    schema = api(api_key)
    assert schema is not None
    whole = memoryview(b"".join(bytes(p) for p in pieces))
    header_version = response_header_version(api_key, schema.is_flexible(version))
    _, header_size = decode_response_header(whole[4:], header_version)
    codec = schema.response_codec(version)
    body = codec.decode(whole[4 + header_size :])
    if body.get(_FIELD, 0) >= throttle_ms:
        return pieces
    body[_FIELD] = throttle_ms
    return [framed(bytes(whole[4 : 4 + header_size]) + codec.encode(body))]


def _head(pieces: list[WireBytes], n: int) -> bytes:
    out = bytearray()
    for piece in pieces:
        out += piece[: n - len(out)]
        if len(out) >= n:
            break
    return bytes(out)


def _replace(pieces: list[WireBytes], offset: int, data: bytes) -> list[WireBytes]:
    """``pieces`` with ``len(data)`` bytes at ``offset`` replaced: views are split, never copied."""
    out: list[WireBytes] = []
    start = 0
    end = offset + len(data)
    for piece in pieces:
        size = len(piece)
        lo, hi = start, start + size
        if hi <= offset or lo >= end:
            out.append(piece)
        else:
            view = memoryview(piece)
            if lo < offset:
                out.append(view[: offset - lo])
            if lo <= offset < hi:
                out.append(data)
            if hi > end:
                out.append(view[end - lo :])
        start = hi
    return out
