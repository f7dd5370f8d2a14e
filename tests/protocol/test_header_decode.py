"""The inline header decodes read and refuse exactly what the Reader-based ones did.

The reference below is the header decode as it was before the inline path (Reader calls, field by
field); the inline one must agree on every sampled header and on every truncation and byte flip.
"""

from __future__ import annotations

import random
from typing import Any

from protocol.errors import DecodeError
from protocol.header import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    peek_api,
    request_header_version,
)
from protocol.primitives import Reader
from protocol.registry import all_apis, api


def _reference(payload: memoryview) -> tuple[Any, ...]:
    key, version, correlation_id = peek_api(payload)
    schema = api(key)
    if schema is None or not schema.supports(version):
        raise DecodeError("unparsable api or version")
    reader = Reader(payload, 8)
    n = reader.int16()
    if n < -1:
        raise DecodeError(f"invalid client id length {n}")
    client_id = None if n == -1 else reader.text(n)
    tags = []
    if request_header_version(schema, version) >= 2:
        for _ in range(reader.count(reader.uvarint(), 2)):
            tag = reader.uvarint()
            tags.append((tag, bytes(reader.view(reader.uvarint()))))
    return (key, version, correlation_id, client_id, request_header_version(schema, version), reader.pos,
            tags, schema.api_key)


def _outcome(decode: Any, payload: bytes) -> tuple[Any, ...]:
    try:
        result = decode(memoryview(payload))
    except DecodeError:
        return ("refused",)
    if isinstance(result[0], RequestHeader):
        header, schema = result
        result = (header.api_key, header.api_version, header.correlation_id, header.client_id,
                  header.header_version, header.size, header.unknown_tags, schema.api_key)
    return ("decoded", result)


def _headers(rng: random.Random) -> list[bytes]:
    out = []
    for schema in all_apis().values():
        for version in (schema.min_version, schema.max_version):
            client_id = rng.choice((None, "", "rdkafka", "é-client", "x" * 200))
            tags = rng.choice(([], [(0, b"a")], [(1, b""), (5, b"xyz" * 50)]))
            header_version = request_header_version(schema, version)
            header = RequestHeader(schema.api_key, version, rng.randrange(-2**31, 2**31), client_id,
                                   header_version, 0, tags if header_version >= 2 else [])
            out.append(encode_request_header(header) + rng.choice((b"", b"\x00body")))
    return out


def test_inline_header_decode_matches_the_reader_based_one() -> None:
    rng = random.Random("request headers")
    checked = 0
    for payload in _headers(rng):
        variants = [payload[:cut] for cut in range(len(payload) + 1)]
        for _ in range(12):
            at = rng.randrange(len(payload))
            variants.append(payload[:at] + bytes([rng.choice((0, 0x7F, 0x80, 0xFF, rng.randrange(256)))])
                            + payload[at + 1:])
        for variant in variants:
            assert _outcome(decode_request_header, variant) == _outcome(_reference, variant), variant.hex()
            checked += 1
    assert checked > 1000


def test_header_refusals_keep_their_reasons() -> None:
    produce = b"\x00\x00\x00\x0b\x00\x00\x00\x07"
    for payload, reason in ((b"\x00\x00\x00", "shorter than the fixed header"),
                            (b"\x7f\x00\x00\x00\x00\x00\x00\x01\xff\xff\x00", "unknown or unsupported api key"),
                            (b"\x00\x00\x00\x63\x00\x00\x00\x01\xff\xff\x00", "outside the parsable range"),
                            (produce + b"\xff\xfe\x00", "invalid client id length -2"),
                            (produce + b"\x00\x05ab", "need 5 bytes"),
                            (produce + b"\x00\x02\xc3\x28\x00", "invalid UTF-8")):
        try:
            decode_request_header(memoryview(payload))
        except DecodeError as exc:
            assert reason in str(exc), (payload.hex(), str(exc))
        else:
            raise AssertionError(f"{payload.hex()} was accepted")


def _response_reference(payload: memoryview, header_version: int) -> tuple[int, int]:
    reader = Reader(payload)
    correlation_id = reader.int32()
    if header_version >= 1:
        for _ in range(reader.count(reader.uvarint(), 2)):
            reader.uvarint()
            reader.view(reader.uvarint())
    return correlation_id, reader.pos


def test_inline_response_header_decode_matches_the_reader_based_one() -> None:
    rng = random.Random("response headers")
    heads = [b"\x00\x00\x00\x07\x00", b"\xff\xff\xff\xff\x00body", b"\x00\x00\x00\x07\x01\x03\x02ab",
             b"\x00\x00\x00\x07\x02\x00\x00\x01\x00", b"\x00\x00\x00\x07\x80\x01", b"\x00\x00\x00\x07"]
    checked = 0
    for head in heads:
        for variant in [head[:cut] for cut in range(len(head) + 1)] + [
                head[:at] + bytes([rng.randrange(256)]) + head[at + 1:] for at in range(len(head)) for _ in range(4)]:
            for header_version in (0, 1):
                got = _outcome(lambda p, v=header_version: decode_response_header(p, v), variant)
                want = _outcome(lambda p, v=header_version: _response_reference(p, v), variant)
                assert got == want, (variant.hex(), header_version)
                checked += 1
    assert checked > 200
