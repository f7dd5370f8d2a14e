"""The generated walk (protocol/entities/topic_prepass.py) answers what the decoder and the topic plan do.

For every message and version the walk compiles for: sampled bodies give the same topic names and ids
(as names_and_ids finds them in the decoded body), the same kept fields and the same bytes used; truncated,
padded, byte-flipped bodies and bodies with tag sections fail with the decoder's DecodeError message, word for
word, where it fails.  Produce, the one route that uses it, is checked at every version with more samples, and
with ANY_TRANSACTIONAL kept (the walk with an authorizer) against the policy's reading of the decoded records.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.codec import compile_message
from protocol.entities.topic_prepass import ANY_TRANSACTIONAL, compile_prepass, prepass_for
from protocol.entities.topics import names_and_ids
from protocol.errors import DecodeError
from protocol.record_batch import encode_batch, is_transactional
from protocol.registry import all_apis, api, codec_for
from protocol.schema import MessageSpec
from tests.protocol.sample_values import sample_message
from tests.protocol.test_straight_decode import _mutations

_CASES = [(spec, version) for schema in all_apis().values() for spec in (schema.request, schema.response)
          for version in range(spec.versions.low, spec.versions.high + 1)]
_PRODUCE = api(ApiKey.PRODUCE)
assert _PRODUCE is not None
_PRODUCE_VERSIONS = range(_PRODUCE.request.versions.low, _PRODUCE.max_version + 1)


def _scalars(spec: MessageSpec, version: int) -> tuple[str, ...]:
    """The top-level scalars of ``spec`` (every version's), the fields a route may keep."""
    return tuple(f.name for f in spec.fields if not (f.is_struct or f.is_struct_array or f.element_type)
                 and not (f.tag is not None and version in f.tagged_versions))


def _decoded(spec: MessageSpec, version: int, keep: tuple[str, ...], data: bytes) -> tuple[Any, ...]:
    try:
        body, used = codec_for(spec, version).decode_prefix(data)
    except DecodeError as exc:
        return ("refused", str(exc))
    names, ids = names_and_ids(spec, version, body)
    return ("walked", names, ids, {name: _plain(_kept(body, name)) for name in keep}, used)


def _kept(body: dict[str, Any], name: str) -> Any:
    if name != ANY_TRANSACTIONAL:
        return body[name]
    # What authorize_produce reads of the decoded records.
    return any(is_transactional(p["records"]) for t in body["topic_data"] for p in t["partition_data"])


def _walked(spec: MessageSpec, version: int, keep: tuple[str, ...], data: bytes) -> tuple[Any, ...]:
    names: list[str] = []
    ids: list[Any] = []
    try:
        kept, used = compile_prepass(spec, version, keep)(memoryview(data), names, ids)
    except DecodeError as exc:
        return ("refused", str(exc))
    return ("walked", names, ids, {name: _plain(value) for name, value in kept.items()}, used)


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, memoryview) else value


def _with_tags(data: bytes, spec: MessageSpec, version: int) -> list[bytes]:
    """The body with its last (top-level) tag section replaced: unknown tags, tags out of order, a short tag."""
    if version not in spec.flexible or not data or data[-1] != 0:
        return []
    head = data[:-1]
    return [head + bytes([1, 9, 2]) + b"ab", head + bytes([2, 9, 0, 3, 0]), head + bytes([1, 9, 5]) + b"ab",
            head + bytes([1, 0x80]), head + bytes([0x80, 0x80, 0x80, 0x80, 0x80, 0x01])]


def _check(spec: MessageSpec, version: int, keep: tuple[str, ...], samples: int) -> None:
    rng = random.Random(f"prepass {spec.name} {version}")
    interpreted = compile_message(spec, version)
    for _ in range(samples):
        data = bytes(interpreted.encode(sample_message(spec, version, rng)))
        expected = _decoded(spec, version, keep, data)
        assert expected[0] == "walked"
        assert _walked(spec, version, keep, data) == expected
        for broken in [*_mutations(data, rng), *_with_tags(data, spec, version)]:
            assert _walked(spec, version, keep, broken) == _decoded(spec, version, keep, broken), broken.hex()


@pytest.mark.parametrize("version", _PRODUCE_VERSIONS)
def test_the_produce_walk_matches_the_decoder_at_every_version(version: int) -> None:
    _check(_PRODUCE.request, version, ("transactional_id", "acks", "timeout_ms"), samples=40)


@pytest.mark.parametrize(("spec", "version"), _CASES, ids=[f"{s.name}-v{v}" for s, v in _CASES])
def test_every_walk_that_compiles_matches_the_decoder(spec: MessageSpec, version: int) -> None:
    keep = _scalars(spec, version)
    try:
        compile_prepass(spec, version, keep)
    except ValueError:
        pytest.skip("the walk refuses this message (a topic in a tagged field or a config resource)")
    # One sample and all its mutations per message version: every shape the emitter meets, within CI's budget
    # (3 samples were 76 s of the suite); Produce, the route that is walked, gets 40 at every version above.
    _check(spec, version, keep, samples=1)


def test_a_produce_with_records_of_every_length_width_walks_as_it_decodes() -> None:
    # Records lengths of one, two and three varint bytes (the walk inlines the first two as Reader.uvarint does).
    codec = _PRODUCE.request_codec(11)
    for size in (0, 1, 126, 127, 128, 16382, 16383, 16384, 70000):
        body = {"transactional_id": "t", "acks": -1, "timeout_ms": 5, "topic_data": [
            {"name": "a", "partition_data": [{"index": 3, "records": b"r" * size}, {"index": 4, "records": None}]},
            {"name": "b", "partition_data": []}]}
        data = bytes(codec.encode(body))
        walked = _walked(_PRODUCE.request, 11, ("acks",), data)
        assert walked == ("walked", ["a", "b"], [], {"acks": -1}, len(data))
        assert walked == _decoded(_PRODUCE.request, 11, ("acks",), data)


def _transactional_batch(value: bytes) -> bytes:
    raw = bytearray(encode_batch([(None, value)], timestamp_ms=0))
    raw[22] |= 0x10  # the attributes' transactional bit (the CRC is not read by either side)
    return bytes(raw)


_PLAIN, _TXN = encode_batch([(None, b"p" * 30)], timestamp_ms=0), _transactional_batch(b"t" * 30)
_RECORD_SETS = [None, b"", _PLAIN, _TXN, _PLAIN + _TXN, _TXN[:-1], _PLAIN + _TXN[:70], b"\x00" * 61,
                _TXN[:16] + b"\x01" + _TXN[17:]]  # null, empty, plain, transactional, truncated, magic 1


@pytest.mark.parametrize("version", _PRODUCE_VERSIONS)
def test_the_produce_walk_reads_the_transactional_bit_as_the_policy_reads_the_decoded_records(version: int) -> None:
    keep = ("acks", "transactional_id", ANY_TRANSACTIONAL)
    codec = _PRODUCE.request_codec(version)
    rng = random.Random(f"transactional walk v{version}")
    topic = {"topic_id": uuid.UUID(int=7)} if version >= 13 else {"name": "t"}
    seen = set()
    for _ in range(60):
        body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 5, "topic_data": [
            {**topic, "partition_data": [{"index": i, "records": rng.choice(_RECORD_SETS)}
                                         for i in range(rng.randrange(4))]} for _ in range(rng.randrange(3))]}
        data = bytes(codec.encode(body))
        expected = _decoded(_PRODUCE.request, version, keep, data)
        assert _walked(_PRODUCE.request, version, keep, data) == expected
        seen.add(expected[3][ANY_TRANSACTIONAL])
        for broken in _mutations(data, rng)[-26:]:  # the flipped bytes and padding (cuts are checked above)
            assert _walked(_PRODUCE.request, version, keep, broken) == _decoded(_PRODUCE.request, version, keep,
                                                                                broken), broken.hex()
    assert seen == {False, True}


def test_a_kept_field_absent_at_a_version_holds_its_default() -> None:
    data = bytes(_PRODUCE.request_codec(2).encode({"acks": 1, "timeout_ms": 5, "topic_data": []}))
    kept, used = prepass_for(_PRODUCE.request, 2, ("transactional_id", "acks"))(memoryview(data), [], [])
    assert kept == {"transactional_id": None, "acks": 1} and used == len(data)


def test_the_walk_refuses_to_compile_what_it_cannot_answer() -> None:
    with pytest.raises(ValueError, match="no top-level field"):
        compile_prepass(_PRODUCE.request, 11, ("index",))
    with pytest.raises(ValueError, match="only scalars"):
        compile_prepass(_PRODUCE.request, 11, ("topic_data",))


def test_a_request_and_a_response_of_one_api_and_version_are_cached_apart() -> None:
    request = prepass_for(_PRODUCE.request, 11, ())
    response = prepass_for(_PRODUCE.response, 11, ())
    assert request.__code__.co_filename == "<prepass ProduceRequest v11>"
    assert response.__code__.co_filename == "<prepass ProduceResponse v11>"
