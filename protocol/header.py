"""Request headers (v0-v2) and response headers (v0-v1).

The header version follows from the API's body version: flexible versions use request
header v2 and response header v1, except that ApiVersions responses always use header v0
(a client must be able to read them before it knows what the broker speaks).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.primitives import Reader, Writer
from protocol.registry import ApiSchema, api

SHORT_HEADER = "request shorter than the fixed header"
# api_key, api_version, correlation_id: the fixed start of every request header (after the frame's size)
FIXED_HEADER = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int
    size: int  # bytes the header occupies at the start of the payload
    unknown_tags: list[tuple[int, bytes]] = field(default_factory=list)


def peek_api(payload: memoryview, offset: int = 0) -> tuple[int, int, int]:
    """api key, api version and correlation id of the header at ``offset`` (4: a frame's wire bytes, size prefix
    first): readable even for unknown APIs."""
    if len(payload) - offset < FIXED_HEADER.size:
        raise DecodeError(SHORT_HEADER)
    key, version, correlation_id = FIXED_HEADER.unpack_from(payload, offset)
    return key, version, correlation_id


def request_header_version(schema: ApiSchema, api_version: int) -> int:
    return 2 if schema.is_flexible(api_version) else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if flexible else 0


def decode_request_header(payload: memoryview) -> tuple[RequestHeader, ApiSchema]:
    """Parse the header; raises DecodeError for unknown APIs or unsupported versions."""
    key, version, correlation_id = peek_api(payload)
    schema, header_version, client_id, size, unknown_tags = read_request_header(payload, key, version)
    return RequestHeader(key, version, correlation_id, client_id, header_version, size, unknown_tags), schema


def read_request_header(payload: memoryview, key: int, version: int) -> tuple[ApiSchema, int, str | None, int,
                                                                                list[tuple[int, bytes]]]:
    """The header after peek_api: its schema, header version, client id, size and unknown tags, checked as
    decode_request_header checks them, without a RequestHeader (the request stage reads only the size)."""
    known = _KNOWN_VERSIONS.get((key, version)) or _known_version(key, version)
    schema, header_version = known
    # The cursor stays a local and the usual shapes (a short client id, no header tags) are read
    # inline: this runs once per request (measured: 368 bytecodes before, see bench/README.md).
    end = len(payload)
    if end < 10:
        raise DecodeError(f"need 2 bytes at offset {FIXED_HEADER.size}, have {end - FIXED_HEADER.size}")
    n: int = _I16.unpack_from(payload, FIXED_HEADER.size)[0]
    pos = FIXED_HEADER.size + 2
    if n < -1:
        raise DecodeError(f"invalid client id length {n}")
    client_id = None
    if n >= 0:
        if pos + n > end:
            raise DecodeError(f"need {n} bytes at offset {pos}, have {end - pos}")
        try:
            client_id = str(payload[pos:pos + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid UTF-8 in string: {exc.reason}") from None
        pos += n
    unknown_tags: list[tuple[int, bytes]] = []
    if header_version >= 2:
        if pos < end and payload[pos] == 0:
            pos += 1
        else:
            reader = Reader(payload, pos)
            count = reader.count(reader.uvarint(), 2)
            for _ in range(count):
                tag = reader.uvarint()
                unknown_tags.append((tag, bytes(reader.view(reader.uvarint()))))
            pos = reader.pos
    return schema, header_version, client_id, pos, unknown_tags


# (api key, version) → its schema and request header version, for the pairs ksgate parses only
# (so bounded by the schemas, whatever a client sends).
_KNOWN_VERSIONS: dict[tuple[int, int], tuple[ApiSchema, int]] = {}


def _known_version(key: int, version: int) -> tuple[ApiSchema, int]:
    schema = api(key)
    if schema is None:
        raise DecodeError(f"unknown or unsupported api key {key}")
    if not schema.supports(version):
        raise DecodeError(f"{schema.name} v{version} is outside the parsable range")
    known = _KNOWN_VERSIONS[(key, version)] = (schema, request_header_version(schema, version))
    return known


def encode_request_header(header: RequestHeader) -> bytes:
    w = Writer()
    w.int16(header.api_key)
    w.int16(header.api_version)
    w.int32(header.correlation_id)
    if header.client_id is None:
        w.int16(-1)
    else:
        data = header.client_id.encode("utf-8")
        w.int16(len(data))
        w.raw(data)
    if header.header_version >= 2:
        w.uvarint(len(header.unknown_tags))
        for tag, body in header.unknown_tags:
            w.uvarint(tag)
            w.uvarint(len(body))
            w.raw(body)
    return bytes(w.out)


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    head = struct.pack(">i", correlation_id)
    return head + b"\x00" if header_version >= 1 else head


def decode_response_header(payload: memoryview, header_version: int) -> tuple[int, int]:
    """Correlation id and header size of a response."""
    # The usual shape (no header tags) inline; anything else through the Reader's checks.
    if len(payload) >= 5 and header_version >= 1 and payload[4] == 0:
        return _I32.unpack_from(payload, 0)[0], 5
    reader = Reader(payload)
    correlation_id = reader.int32()
    if header_version >= 1:
        for _ in range(reader.count(reader.uvarint(), 2)):
            reader.uvarint()
            reader.view(reader.uvarint())
    return correlation_id, reader.pos
