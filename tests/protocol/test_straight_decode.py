"""The generated straight-line decoders accept and refuse exactly what the interpreted codec does.

Every request and response at every version: sampled bodies decode to the same dicts (same keys in
the same order), and truncated, padded or byte-flipped frames fail (DecodeError) where the
interpreted decoder fails, with its message (except the offset of a short read, which a run of
fixed-size fields reports for the run).
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from protocol.codec import MessageCodec, compile_message
from protocol.errors import DecodeError
from protocol.registry import all_apis
from protocol.schema import MessageSpec
from protocol.straight_decode import compile_straight_decoder
from protocol.tag_scan import compile_tag_scan
from tests.protocol.sample_values import sample_message

_CASES = [(spec, version) for schema in all_apis().values() for spec in (schema.request, schema.response)
          for version in range(spec.versions.low, spec.versions.high + 1)]


def _plain(value: Any) -> Any:
    """A comparable form that keeps dict key order and turns record views into bytes."""
    if isinstance(value, dict):
        return [(key, _plain(item)) for key, item in value.items()]
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, memoryview):
        return ("view", bytes(value))
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))  # NaN is not equal to itself
    return value


def _outcome(codec: MessageCodec, data: bytes) -> tuple[Any, ...]:
    try:
        value, used = codec.decode_prefix(data)
    except DecodeError as exc:
        message = str(exc)
        return ("refused", "short read" if message.startswith("need ") else message)
    return ("decoded", _plain(value), used)


def _mutations(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = range(len(data)) if len(data) <= 80 else sorted(rng.sample(range(len(data)), 80))
    out = [data[:cut] for cut in cuts] + [data + b"\x00", data + b"\xff\xff"]
    for _ in range(24):
        if not data:
            break
        at = rng.randrange(len(data))
        out.append(data[:at] + bytes([rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFF, rng.randrange(256)))])
                   + data[at + 1:])
    return out


@pytest.mark.parametrize(("spec", "version"), _CASES, ids=[f"{s.name}-v{v}" for s, v in _CASES])
def test_generated_decoder_matches_the_interpreted_one(spec: MessageSpec, version: int) -> None:
    rng = random.Random(f"straight {spec.name} {version}")
    interpreted = compile_message(spec, version)
    generated = MessageCodec(spec.name, version, interpreted.flexible,
                             compile_straight_decoder(spec, version), interpreted.encode_into)
    for _ in range(6):
        data = bytes(interpreted.encode(sample_message(spec, version, rng)))
        assert _outcome(generated, data) == _outcome(interpreted, data)
        for broken in _mutations(data, rng):
            assert _outcome(generated, broken) == _outcome(interpreted, broken), broken.hex()


def test_the_registry_hands_out_the_generated_decoders() -> None:
    # What the relay uses (e.g. Produce v11 in `decide`) is the generated code, not the interpreter.
    for schema in all_apis().values():
        for codec in (schema.request_codec(schema.max_version), schema.response_codec(schema.max_version)):
            assert codec.decode_from.__code__.co_filename.startswith("<decode "), codec.name


def test_long_varints_and_bad_utf8_fail_as_in_the_interpreter() -> None:
    spec = all_apis()[0].request  # Produce: transactional_id, a compact nullable string at v9+
    interpreted = compile_message(spec, 11)
    generated = MessageCodec(spec.name, 11, True, compile_straight_decoder(spec, 11), interpreted.encode_into)
    frames = [
        b"\x80\x80\x80\x80\x80\x01",  # a varint longer than five bytes
        b"\xff\xff\xff\xff\x7f",  # a varint beyond 32 bits
        b"\x83\x00" + b"ab",  # a two-byte length (130) with too few bytes behind it
        b"\x03\xc3\x28",  # invalid UTF-8 in the transactional id
        b"\x00\xff\xff",  # a null id, then a truncated acks
    ]
    for frame in frames:
        outcome = _outcome(generated, frame)
        assert outcome[0] == "refused"
        assert outcome == _outcome(interpreted, frame), frame.hex()


def _scan_outcome(scan: Any, data: bytes) -> tuple[Any, ...]:
    try:
        return ("scanned", scan(data))
    except DecodeError:
        return ("refused",)


@pytest.mark.parametrize(("spec", "version"), _CASES, ids=[f"{s.name}-v{v}" for s, v in _CASES])
def test_generated_tag_scan_matches_the_interpreted_walk(spec: MessageSpec, version: int) -> None:
    rng = random.Random(f"scan {spec.name} {version}")
    codec = compile_message(spec, version)
    generated = compile_tag_scan(spec, version)
    interpreted = compile_tag_scan(spec, version, straight=False)
    for _ in range(6):
        data = bytes(codec.encode(sample_message(spec, version, rng)))
        assert _scan_outcome(generated, data) == _scan_outcome(interpreted, data)
        for broken in _mutations(data, rng):
            assert _scan_outcome(generated, broken) == _scan_outcome(interpreted, broken), broken.hex()


def test_the_tag_scan_is_the_generated_walk() -> None:
    # Fails if compile_tag_scan fell back to the interpreted walk (a Fetch v17 response, as relayed).
    spec = all_apis()[1].response
    scan = compile_tag_scan(spec, 17)
    assert scan.__code__.co_filename == "<scan FetchResponse v17>"


def test_the_generated_scan_reads_long_varints_and_nested_tags_as_the_interpreted_walk() -> None:
    # A Produce v11 answer: error messages whose lengths take one, two and three varint bytes, and a
    # partition's tag section holding current_leader (the generated scan makes a Reader only for these).
    spec = all_apis()[0].response
    codec = compile_message(spec, 11)
    generated, interpreted = compile_tag_scan(spec, 11), compile_tag_scan(spec, 11, straight=False)
    for size in (0, 126, 127, 128, 16382, 16383, 16384, 70000):
        partition = {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1, "log_start_offset": 0,
                     "record_errors": [], "error_message": "m" * size,
                     "current_leader": {"leader_id": 3, "leader_epoch": 7}}
        data = bytes(codec.encode({"responses": [{"name": "t", "partition_responses": [partition]}],
                                   "throttle_time_ms": 0, "node_endpoints": [
                                       {"node_id": 3, "host": "h", "port": 1, "rack": None}]}))
        assert _scan_outcome(generated, data) == ("scanned", frozenset({0}))
        for broken in (data[:-1], data + b"\x00", data[:len(data) // 2]):
            assert _scan_outcome(generated, broken) == _scan_outcome(interpreted, broken) == ("refused",)
