"""Malformed input is refused with DecodeError, and only DecodeError.

ksgate fails closed: whatever a peer sends, the codec either returns a value or raises
``protocol.errors.DecodeError`` (one except clause refuses the frame).  Any other exception
escaping would be a crash path; any allocation driven by a declared length rather than the
bytes actually present would be a memory-exhaustion path.  These tests pin both, for every
(api key, version, request/response) in ``all_apis()`` at collection time, plus the
primitives, the frame splitter and the request/response headers.
"""

from __future__ import annotations

import contextlib
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from protocol.codec import UNKNOWN_TAGS, MessageCodec, compile_message
from protocol.errors import DecodeError
from protocol.framing import FrameSplitter, FrameTooLarge, frame
from protocol.header import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    request_header_version,
)
from protocol.primitives import Reader, Writer
from protocol.registry import all_apis, codec_for
from protocol.schema import FieldSpec, MessageSpec
from tests.heap import heap_peak
from tests.protocol.sample_values import sample_message
from tests.steps import line_steps

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Decoding builds Python objects (a dict per struct, an int per array element ...), so the
# decoded form is legitimately larger than the wire form: measured at most ~100 bytes of heap
# per input byte for the densest messages.  What must never happen is allocation driven by a
# declared length or count (a 2**31-1 item array would be 16 GiB of list alone).
HEAP_PER_INPUT_BYTE = 512
HEAP_SLACK = 64 * 1024
# Work is bounded the same way, in Python line events rather than seconds (wall time varies
# with the machine's load; the step count does not).  What must never happen is a loop up to
# a declared length or count, even one that allocates nothing.  Measured over every case in
# this module: at most 8 line events per input byte plus 123 (the largest decode took 2732).
# The bound is four times the per-byte rate and eight times the fixed part, while a loop up to
# a declared 2**20 count would execute over a million lines.
STEPS_PER_INPUT_BYTE = 32
STEPS_SLACK = 1024


# --- the cases ------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    spec: MessageSpec
    version: int

    @property
    def codec(self) -> MessageCodec:
        return codec_for(self.spec, self.version)

    @property
    def flexible(self) -> bool:
        return self.version in self.spec.flexible

    @property
    def id(self) -> str:
        return f"{self.spec.name}-v{self.version}"


def _cases() -> list[Case]:
    return [
        Case(spec, version)
        for schema in all_apis().values()
        for spec in (schema.request, schema.response)
        for version in range(spec.versions.low, (spec.versions.high or 0) + 1)
    ]


CASES = _cases()
API_KEYS = sorted(all_apis())


def _ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


def _valid_wire(case: Case, rng: random.Random) -> bytes:
    return bytes(case.codec.encode(sample_message(case.spec, case.version, rng)))


# --- measuring ------------------------------------------------------------------------

def _decode_or_refuse(decode: Callable[[bytes], Any], data: bytes) -> Any:
    """Run a decoder on untrusted bytes: DecodeError is fine (returns None), any other
    exception propagates and fails the test; heap and work stay bounded by the input."""
    with heap_peak() as peak:
        try:
            value = decode(data)
        except DecodeError:
            value = None
    # A second, separate run: the tracer's own counting would otherwise show in the heap figure.
    with line_steps() as steps, contextlib.suppress(DecodeError):
        decode(data)
    assert peak[0] <= HEAP_PER_INPUT_BYTE * len(data) + HEAP_SLACK, \
        f"decoding {len(data)} bytes allocated {peak[0]} bytes"
    _assert_bounded_work(steps[0], len(data))
    return value


def _assert_bounded_work(steps: int, size: int) -> None:
    assert steps <= STEPS_PER_INPUT_BYTE * size + STEPS_SLACK, \
        f"decoding {size} bytes executed {steps} Python lines"


def _assert_reencodes_stably(codec: MessageCodec, value: dict[str, Any]) -> None:
    """Whatever decodes can be re-encoded, and that encoding decodes to itself."""
    wire = bytes(codec.encode(value))
    assert bytes(codec.encode(codec.decode(wire))) == wire


# --- (a) truncation, (b) corruption, (c) garbage: every message, every version -------

@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_every_truncation_of_a_valid_message_raises_decode_error(case: Case) -> None:
    rng = random.Random(f"truncate:{case.id}")
    codec = case.codec
    for sample in range(3):
        wire = _valid_wire(case, rng)
        codec.decode(wire)  # the untruncated message is fine
        cuts = range(len(wire)) if sample == 0 else rng.sample(range(len(wire)), min(len(wire), 16))
        for cut in cuts:
            with pytest.raises(DecodeError):
                codec.decode(wire[:cut])


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_corrupted_messages_raise_decode_error_or_decode_consistently(case: Case) -> None:
    """Deterministic sweep: flipped bytes, spliced garbage and appended bytes, every case."""
    rng = random.Random(f"corrupt:{case.id}")
    codec = case.codec
    for _ in range(12):
        wire = bytearray(_valid_wire(case, rng))
        mode = rng.randrange(3)
        if mode == 0 and wire:
            for _ in range(rng.randint(1, 4)):
                wire[rng.randrange(len(wire))] = rng.getrandbits(8)
        elif mode == 1:
            at = rng.randint(0, len(wire))
            wire[at:at + rng.randint(0, 8)] = rng.randbytes(rng.randint(0, 8))
        else:
            wire += rng.randbytes(rng.randint(1, 4))
        value = _decode_or_refuse(codec.decode, bytes(wire))
        if value is not None:
            _assert_reencodes_stably(codec, value)


def _draw_case(data: st.DataObject, api_key: int) -> Case:
    schema = all_apis()[api_key]
    spec = data.draw(st.sampled_from([schema.request, schema.response]), label="kind")
    version = data.draw(st.integers(spec.versions.low, spec.versions.high or 0), label="version")
    return Case(spec, version)


@pytest.mark.parametrize("api_key", API_KEYS)
@FUZZ
@given(data=st.data())
def test_random_byte_flips_raise_only_decode_error(api_key: int, data: st.DataObject) -> None:
    case = _draw_case(data, api_key)
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    wire = bytearray(_valid_wire(case, random.Random(seed)))
    assume(wire)
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(wire) - 1), st.integers(0, 255)),
                               min_size=1, max_size=6), label="flips")
    for index, byte in flips:
        wire[index] = byte
    value = _decode_or_refuse(case.codec.decode, bytes(wire))
    if value is not None:
        _assert_reencodes_stably(case.codec, value)


@pytest.mark.parametrize("api_key", API_KEYS)
@FUZZ
@given(data=st.data())
def test_valid_prefix_then_garbage_raises_only_decode_error(api_key: int, data: st.DataObject) -> None:
    """Garbage placed after a valid prefix reaches every field decoder, not just the first."""
    case = _draw_case(data, api_key)
    wire = _valid_wire(case, random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed")))
    cut = data.draw(st.integers(0, len(wire)), label="cut")
    garbage = data.draw(st.binary(max_size=64), label="garbage")
    value = _decode_or_refuse(case.codec.decode, wire[:cut] + garbage)
    if value is not None:
        _assert_reencodes_stably(case.codec, value)


@pytest.mark.parametrize("api_key", API_KEYS)
@FUZZ
@given(data=st.data(), blob=st.binary(max_size=512))
def test_arbitrary_bytes_raise_only_decode_error(api_key: int, data: st.DataObject, blob: bytes) -> None:
    case = _draw_case(data, api_key)
    value = _decode_or_refuse(case.codec.decode, blob)
    if value is not None:
        _assert_reencodes_stably(case.codec, value)


# --- targeted: one top-level field replaced by hand-made bytes ------------------------

def _tagged(spec: FieldSpec, version: int) -> bool:
    return spec.tag is not None and version in spec.tagged_versions


def _untagged(case: Case) -> list[FieldSpec]:
    return [f for f in case.spec.fields if case.version in f.versions and not _tagged(f, case.version)]


def _fields_wire(case: Case, fields: list[FieldSpec], rng: random.Random) -> bytes:
    """Valid bytes of just these (untagged, top-level) fields, in order, no tag section."""
    sub = MessageSpec(case.spec.kind, case.spec.name, case.spec.api_key, case.spec.versions,
                      case.spec.flexible, fields)
    wire = bytes(compile_message(sub, case.version).encode(sample_message(sub, case.version, rng)))
    if case.flexible:
        assert wire[-1:] == b"\x00", "an empty tag section ends a flexible struct"
        wire = wire[:-1]
    return wire


@dataclass(frozen=True)
class Site:
    """A message split around one top-level field: prefix + <field bytes> + suffix."""

    case: Case
    field: FieldSpec
    prefix: bytes
    valid: bytes  # a valid encoding of the field
    suffix: bytes  # the remaining fields and the (empty) top-level tag section

    def wire(self, middle: bytes) -> bytes:
        return self.prefix + middle + self.suffix

    @property
    def id(self) -> str:
        return f"{self.case.id}.{self.field.name}"


def _sites(case: Case) -> list[Site]:
    rng = random.Random(f"sites:{case.id}")
    fields = _untagged(case)
    sites = []
    for i, spec in enumerate(fields):
        tail = _fields_wire(case, fields[i + 1:], rng) + (b"\x00" if case.flexible else b"")
        sites.append(Site(case, spec, _fields_wire(case, fields[:i], rng),
                          _fields_wire(case, [spec], rng), tail))
    return sites


def _is_array(spec: FieldSpec) -> bool:
    return spec.type.startswith("[]")


def _length_prefixed(spec: FieldSpec) -> bool:
    return _is_array(spec) or spec.type in ("string", "bytes", "records")


def _length_bytes(site: Site, n: int) -> bytes:
    """The length/count prefix of the site's field, holding n (-1 is null)."""
    if site.case.flexible:
        w = Writer()
        w.uvarint(n + 1)
        return bytes(w.out)
    return struct.pack(">h" if site.field.type == "string" else ">i", n)


ALL_SITES = [site for case in CASES for site in _sites(case)]


def _site_params(predicate: Callable[[Site], bool]) -> list[Any]:
    return [pytest.param(site, id=site.id) for site in ALL_SITES if predicate(site)]


def _decodes(site: Site, middle: bytes) -> dict[str, Any]:
    return site.case.codec.decode(site.wire(middle))


LENGTH_SITES = _site_params(lambda s: _length_prefixed(s.field))
RIGID_LENGTH_SITES = _site_params(lambda s: _length_prefixed(s.field) and not s.case.flexible)
ARRAY_SITES = _site_params(lambda s: _is_array(s.field))
STRING_SITES = _site_params(lambda s: s.field.type == "string")
COMPACT_SITES = _site_params(lambda s: _length_prefixed(s.field) and s.case.flexible)
NULLABLE_STRUCT_SITES = _site_params(
    lambda s: s.field.is_struct and s.case.version in s.field.nullable)


def test_targeted_sites_exist_for_every_kind_of_check() -> None:
    """The parametrized targeted tests below cannot pass by having collected nothing."""
    for name, sites in [("length", LENGTH_SITES), ("rigid", RIGID_LENGTH_SITES),
                        ("array", ARRAY_SITES), ("string", STRING_SITES), ("compact", COMPACT_SITES)]:
        assert sites, f"no {name} sites in any schema"


@pytest.mark.parametrize("site", LENGTH_SITES)
def test_spliced_field_control_decodes(site: Site) -> None:
    """The harness itself: prefix + valid field + suffix is a valid message."""
    assert site.case.codec.decode(site.wire(site.valid))


@pytest.mark.parametrize("site", RIGID_LENGTH_SITES)
def test_negative_lengths_other_than_minus_one_raise(site: Site) -> None:
    lowest = -(2**15) if site.field.type == "string" else -(2**31)
    for n in (-2, -3, -128, lowest + 1, lowest):
        with pytest.raises(DecodeError):
            _decodes(site, _length_bytes(site, n))


@pytest.mark.parametrize("site", LENGTH_SITES)
def test_null_is_accepted_only_where_the_schema_allows_it(site: Site) -> None:
    null = _length_bytes(site, -1)
    if site.case.version in site.field.nullable:
        assert _decodes(site, null)[site.field.name] is None
    else:
        with pytest.raises(DecodeError):
            _decodes(site, null)


@pytest.mark.parametrize("site", NULLABLE_STRUCT_SITES)
def test_nullable_struct_marker_negative_is_null_and_others_decode_or_raise(site: Site) -> None:
    """KIP-893 nullable structs: a negative marker byte is null (as in Kafka's Java reader),
    1 is present; any other marker either decodes or raises DecodeError, nothing else."""
    name = site.field.name
    body = site.valid[1:] if site.valid[:1] == b"\x01" else b""  # the sample may be null
    assert _decodes(site, b"\xff")[name] is None
    if body:
        assert _decodes(site, b"\x01" + body)[name] is not None
    for marker in range(256):
        try:
            value = _decodes(site, bytes([marker]) + (body if marker < 128 else b""))
        except DecodeError:
            continue
        if marker >= 128:
            assert value[name] is None, f"marker {marker:#x}"


@pytest.mark.parametrize("site", LENGTH_SITES)
def test_huge_declared_lengths_raise_without_allocating(site: Site) -> None:
    """A length or count far beyond the bytes present is refused up front: nothing is built
    for it, not even the items that the bytes actually present could hold."""
    if site.case.flexible:
        huge = [2**32 - 2]  # the largest compact length a 5-byte varint can declare
    else:
        huge = [2**15 - 1] if site.field.type == "string" else [2**31 - 1, 2**20]
    codec = site.case.codec  # compiled outside the measured block
    filler = b"\x01" if site.case.flexible else b"\x00"  # empty strings/arrays, zero ints ...
    for n in huge:
        for tail in (b"\x00\x01\x02", site.suffix, filler * min(64 * 1024, n // 2)):
            data = site.prefix + _length_bytes(site, n) + tail
            peaks = []
            # The least of three tries: tracemalloc counts every thread's allocations (a thread an earlier
            # test left winding down, in a full run), while a decoder that builds for the declared
            # length does so on every try.
            for _ in range(3):
                with heap_peak() as peak, pytest.raises(DecodeError):
                    codec.decode(data)
                peaks.append(peak[0])
            assert min(peaks) < 16 * 1024, f"{peaks} bytes allocated for a {len(data)}-byte input"
            # Refused up front: the work grows neither with the declared length nor with the
            # bytes after it, so it is bounded by the bytes before the tail (one try: the step
            # count is deterministic, unlike the heap figure above).
            with line_steps() as steps, pytest.raises(DecodeError):
                codec.decode(data)
            _assert_bounded_work(steps[0], len(data) - len(tail))


@pytest.mark.parametrize("site", ARRAY_SITES)
def test_array_count_one_past_what_fits_raises(site: Site) -> None:
    """A count one larger than the bytes after it could hold is refused, not truncated."""
    remaining = len(site.suffix)
    data = site.wire(_length_bytes(site, remaining + 1))
    with pytest.raises(DecodeError):
        site.case.codec.decode(data)


INVALID_UTF8 = [b"\xff", b"\xc3\x28", b"\xe2\x28\xa1", b"\xc0\xaf", b"\xed\xa0\x80", b"ok\x80"]


@pytest.mark.parametrize("site", STRING_SITES)
def test_invalid_utf8_in_strings_raises(site: Site) -> None:
    for raw in INVALID_UTF8:
        with pytest.raises(DecodeError, match="UTF-8"):
            _decodes(site, _length_bytes(site, len(raw)) + raw)


@pytest.mark.parametrize("site", COMPACT_SITES)
def test_overlong_and_oversized_varints_raise(site: Site) -> None:
    for varint in (b"\x80\x80\x80\x80\x80\x00",  # six bytes (value 0)
                   b"\x81\x80\x80\x80\x80\x80\x80\x80\x80\x00",  # ten bytes
                   b"\xff\xff\xff\xff\x1f",  # 2**33 - 1: more than 32 bits
                   b"\x80\x80\x80\x80\x10",  # exactly 2**32
                   b"\xff\xff\xff\xff"):  # continuation bit set on the last byte present
        with pytest.raises(DecodeError):
            _decodes(site, varint)


FLEXIBLE_CASES = [c for c in CASES if c.flexible]


def _tag_section(entries: list[tuple[int, bytes]]) -> bytes:
    w = Writer()
    w.uvarint(len(entries))
    for tag, body in entries:
        w.uvarint(tag)
        w.uvarint(len(body))
        w.raw(body)
    return bytes(w.out)


def _untagged_wire(case: Case) -> bytes:
    """A valid message whose top-level tag section is empty: its last byte is that 0x00."""
    value = sample_message(case.spec, case.version, random.Random(f"tags:{case.id}"))
    for spec in case.spec.fields:
        if _tagged(spec, case.version):
            value.pop(spec.name, None)
    wire = bytes(case.codec.encode(value))
    assert wire[-1:] == b"\x00"
    return wire[:-1]


@pytest.mark.parametrize("case", FLEXIBLE_CASES, ids=_ids(FLEXIBLE_CASES))
def test_tagged_fields_out_of_order_or_repeated_raise(case: Case) -> None:
    body = _untagged_wire(case)
    unknown_a, unknown_b = 1000, 1001  # no schema uses tags this high
    ordered = case.codec.decode(body + _tag_section([(unknown_a, b"x"), (unknown_b, b"")]))
    assert ordered[UNKNOWN_TAGS] == [(unknown_a, b"x"), (unknown_b, b"")]
    for entries in ([(unknown_b, b""), (unknown_a, b"x")], [(unknown_a, b""), (unknown_a, b"")]):
        with pytest.raises(DecodeError, match="order"):
            case.codec.decode(body + _tag_section(entries))


@pytest.mark.parametrize("case", FLEXIBLE_CASES, ids=_ids(FLEXIBLE_CASES))
def test_malformed_tag_sections_raise(case: Case) -> None:
    body = _untagged_wire(case)
    for section in (b"\x02\x05\x00",  # two tags announced, one present
                    b"\x01\x05\x09abc",  # body shorter than its declared size
                    b"\xff\xff\xff\xff\x0f",  # 2**32-1 tags
                    b"\x01\x05\xff\xff\xff\xff\x0f"):  # a 4 GiB tag body
        with pytest.raises(DecodeError):
            case.codec.decode(body + section)


KNOWN_TAG_CASES = [c for c in FLEXIBLE_CASES
                   if any(_tagged(f, c.version) and c.version in f.versions for f in c.spec.fields)]


@pytest.mark.parametrize("case", KNOWN_TAG_CASES, ids=_ids(KNOWN_TAG_CASES))
def test_known_tagged_field_with_trailing_bytes_raises(case: Case) -> None:
    """A known tagged field's body must be consumed exactly."""
    rng = random.Random(f"known-tag:{case.id}")
    checked = 0
    for spec in case.spec.fields:
        if not (_tagged(spec, case.version) and case.version in spec.versions):
            continue
        for _ in range(20):  # find a sample value that differs from the default (so it is written)
            value = sample_message(case.spec, case.version, rng)
            plain = {k: v for k, v in value.items() if not _tagged_name(case, k)}
            body = bytes(case.codec.encode(plain))[:-1]
            reader = Reader(case.codec.encode({**plain, spec.name: value[spec.name]}), len(body))
            if reader.uvarint() == 1:
                break
        else:
            continue
        checked += 1
        tag, size = reader.uvarint(), reader.uvarint()
        tag_body = bytes(reader.view(size))
        case.codec.decode(body + _tag_section([(tag, tag_body)]))
        with pytest.raises(DecodeError):
            case.codec.decode(body + _tag_section([(tag, tag_body + b"\x00")]))
    assert checked


def _tagged_name(case: Case, name: str) -> bool:
    return any(f.name == name and _tagged(f, case.version) for f in case.spec.fields)


# --- primitives -----------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "value"), [
    (b"\x00", 0), (b"\x7f", 127), (b"\x80\x01", 128),
    (b"\xac\x02", 300), (b"\xff\x7f", 16383), (b"\x80\x80\x01", 16384),  # the two-byte path's edges
    (b"\x80\x00", 0),  # non-minimal two bytes
    (b"\xff\xff\xff\xff\x0f", 2**32 - 1),  # the largest 32-bit value, five bytes
    (b"\x80\x80\x80\x80\x00", 0),  # non-minimal but within five bytes (Kafka accepts it too)
])
def test_uvarint_accepts_up_to_five_bytes_and_32_bits(raw: bytes, value: int) -> None:
    reader = Reader(raw)
    assert reader.uvarint() == value
    assert reader.remaining() == 0


@pytest.mark.parametrize("raw", [
    b"\x80\x80\x80\x80\x80\x00", b"\xff\xff\xff\xff\xff\x01",  # longer than five bytes
    b"\xff\xff\xff\xff\x10", b"\xff\xff\xff\xff\x7f",  # five bytes, more than 32 bits
    b"", b"\x80", b"\xff\xff\xff\xff",  # truncated
])
def test_uvarint_longer_than_5_bytes_or_over_32_bits_raises(raw: bytes) -> None:
    with pytest.raises(DecodeError):
        Reader(raw).uvarint()
    with pytest.raises(DecodeError):
        Reader(raw).varint()


def test_a_two_byte_uvarint_inside_a_buffer_reads_only_its_bytes() -> None:
    reader = Reader(b"\x05\xac\x02\x7f\x80")
    assert reader.uvarint() == 5 and reader.uvarint() == 300 and reader.uvarint() == 127
    with pytest.raises(DecodeError):  # a first byte announcing more, and nothing after it
        reader.uvarint()


def test_reader_lengths_and_counts_are_checked_before_slicing() -> None:
    reader = Reader(b"abc")
    for n in (-1, -(2**31), 4, 2**31 - 1):
        with pytest.raises(DecodeError):
            reader.view(n)
        with pytest.raises(DecodeError):
            reader.text(n)
    with pytest.raises(DecodeError):
        reader.count(-1)
    with pytest.raises(DecodeError):
        reader.count(2, min_item_size=2)
    with pytest.raises(DecodeError):
        reader.count(2**31 - 1)
    assert reader.count(3) == 3
    assert reader.pos == 0  # failed reads consumed nothing
    with pytest.raises(DecodeError, match="UTF-8"):
        Reader(b"\xc3\x28").text(2)


_READS = ["int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "boolean", "uuid",
          "uvarint", "varint"]


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=24), ops=st.lists(st.sampled_from([*_READS, "view", "text"]), max_size=8),
       n=st.integers(-(2**31), 2**31))
def test_reader_raises_only_decode_error_on_any_bytes(blob: bytes, ops: list[str], n: int) -> None:
    reader = Reader(blob)
    for op in ops:
        try:
            if op in ("view", "text"):
                getattr(reader, op)(n % 8 if n >= 0 else n)
            else:
                getattr(reader, op)()
        except DecodeError:
            pass
        assert 0 <= reader.pos <= len(blob)


# --- frame splitter -------------------------------------------------------------------

def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(frame(p) for p in payloads)


def _feed_all(splitter: FrameSplitter, chunks: list[bytes | bytearray | memoryview]) -> list[bytes]:
    frames = []
    for chunk in chunks:
        frames.extend(splitter.feed(chunk))
    # Compared only after every feed: views handed out earlier must not have been overwritten.
    return [bytes(f[4:]) for f in frames]  # each frame is its wire bytes: size prefix, then payload


PAYLOADS = [b"", b"a", b"hello world", bytes(range(256)), b"\x00\x00\x00\x05", b"z" * 1000]


def test_frames_split_at_every_boundary_reassemble_identically() -> None:
    stream = _stream(PAYLOADS)
    for cut in range(len(stream) + 1):
        splitter = FrameSplitter(limit=4096)
        assert _feed_all(splitter, [stream[:cut], stream[cut:]]) == PAYLOADS, f"cut at {cut}"
        assert splitter.buffered() == 0
    splitter = FrameSplitter(limit=4096)
    assert _feed_all(splitter, [stream[i:i + 1] for i in range(len(stream))]) == PAYLOADS
    assert splitter.buffered() == 0


@settings(max_examples=200, deadline=None)
@given(payloads=st.lists(st.binary(max_size=80), max_size=8), data=st.data())
def test_frames_reassemble_identically_under_any_chunking(payloads: list[bytes], data: st.DataObject) -> None:
    stream = _stream(payloads)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(stream)), max_size=12), label="cuts"))
    bounds = [0, *cuts, len(stream)]
    kinds = data.draw(st.lists(st.sampled_from([bytes, bytearray, memoryview]),
                               min_size=len(bounds) - 1, max_size=len(bounds) - 1), label="kinds")
    chunks: list[bytes | bytearray | memoryview] = [
        kind(stream[a:b]) for kind, a, b in zip(kinds, bounds[:-1], bounds[1:], strict=True)]
    splitter = FrameSplitter(limit=128)
    assert _feed_all(splitter, chunks) == payloads
    assert splitter.buffered() == 0


@settings(max_examples=200, deadline=None)
@given(chunks=st.lists(st.binary(max_size=64), max_size=6))
def test_frame_splitter_raises_only_decode_error_on_any_stream(chunks: list[bytes]) -> None:
    splitter = FrameSplitter(limit=256)
    with heap_peak() as peak:
        for chunk in chunks:
            try:
                for f in splitter.feed(chunk):
                    assert len(f) - 4 <= 256
            except DecodeError:
                break
    assert peak[0] < 64 * 1024 + 4 * sum(map(len, chunks))


@pytest.mark.parametrize("size", [1025, 2**20, 2**31 - 1])
def test_frame_over_the_limit_raises_frame_too_large_before_buffering(size: int) -> None:
    head = struct.pack(">i", size)
    # The size alone, with no body at all, is enough to refuse the frame.
    with heap_peak() as peak, pytest.raises(FrameTooLarge) as info:
        FrameSplitter(limit=1024).feed(head)
    assert (info.value.size, info.value.limit) == (size, 1024)
    assert peak[0] < 16 * 1024
    # Also when the size arrives a byte at a time, or after a good frame in the same chunk.
    splitter = FrameSplitter(limit=1024)
    assert splitter.feed(head[:1]) == []
    assert splitter.feed(head[1:3]) == []
    with pytest.raises(FrameTooLarge):
        splitter.feed(head[3:])
    with pytest.raises(FrameTooLarge):
        FrameSplitter(limit=1024).feed(frame(b"ok") + head + b"\x00" * 8)


def test_announced_frame_size_is_not_preallocated() -> None:
    """Only bytes that arrived are buffered, however large the (allowed) announced frame."""
    splitter = FrameSplitter(limit=2**30)
    with heap_peak() as peak:
        assert splitter.feed(struct.pack(">i", 2**30) + b"0123456789") == []
    assert splitter.buffered() == 14
    assert peak[0] < 16 * 1024


def test_frame_at_exactly_the_limit_is_accepted() -> None:
    frames = FrameSplitter(limit=1024).feed(frame(b"x" * 1024))
    assert [len(f) for f in frames] == [4 + 1024]


@pytest.mark.parametrize("size", [-1, -2, -(2**31)])
def test_negative_frame_size_raises_decode_error(size: int) -> None:
    for splitter_input in ([struct.pack(">i", size)], [frame(b"ok"), struct.pack(">i", size)]):
        splitter = FrameSplitter(limit=1024)
        with pytest.raises(DecodeError) as info:
            for chunk in splitter_input:
                splitter.feed(chunk)
        assert not isinstance(info.value, FrameTooLarge)


def test_many_frames_in_one_chunk_are_zero_copy_views_of_it() -> None:
    payloads = [bytes([i]) * i for i in range(50)]
    chunk = bytearray(_stream(payloads))
    frames = FrameSplitter(limit=1024).feed(chunk)
    assert [bytes(f[4:]) for f in frames] == payloads
    assert all(f.obj is chunk for f in frames)
    chunk[4 + 4] = 0xAB  # the payload of the second frame (b"\x01"), in place
    assert bytes(frames[1][4:]) == b"\xab"
    as_bytes = bytes(_stream(payloads))
    assert all(f.obj is as_bytes for f in FrameSplitter(limit=1024).feed(as_bytes))


# --- headers --------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=64))
def test_request_header_decoding_of_arbitrary_bytes_raises_only_decode_error(blob: bytes) -> None:
    _decode_or_refuse(lambda b: decode_request_header(memoryview(b)), blob)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), tail=st.binary(max_size=48))
def test_request_header_after_a_known_api_raises_only_decode_error(data: st.DataObject, tail: bytes) -> None:
    """A real api key and version get parsing past the fixed part into client id and tags."""
    schema = all_apis()[data.draw(st.sampled_from(API_KEYS), label="api")]
    version = data.draw(st.integers(schema.min_version, schema.max_version), label="version")
    head = struct.pack(">hhi", schema.api_key, version, data.draw(st.integers(-(2**31), 2**31 - 1)))
    result = _decode_or_refuse(lambda b: decode_request_header(memoryview(b)), head + tail)
    if result is not None:
        header, _ = result
        assert header.size <= len(head + tail)


def _header_cases() -> list[tuple[int, int]]:
    return [(key, v) for key, schema in sorted(all_apis().items())
            for v in range(schema.min_version, schema.max_version + 1)]


@pytest.mark.parametrize(("api_key", "version"), _header_cases(),
                         ids=[f"key{k}-v{v}" for k, v in _header_cases()])
def test_every_truncation_of_a_request_header_raises_decode_error(api_key: int, version: int) -> None:
    schema = all_apis()[api_key]
    hv = request_header_version(schema, version)
    header = RequestHeader(api_key, version, 7, "client-é", hv, 0,
                           [(3, b"abc"), (9, b"")] if hv >= 2 else [])
    wire = encode_request_header(header)
    parsed, _ = decode_request_header(memoryview(wire))
    assert parsed.size == len(wire) and parsed.unknown_tags == header.unknown_tags
    for cut in range(len(wire)):
        with pytest.raises(DecodeError):
            decode_request_header(memoryview(wire[:cut]))


def test_unknown_api_key_or_version_raises_decode_error() -> None:
    unknown = [k for k in (-32768, -1, 999, 32767, *range(100)) if k not in all_apis()]
    assert unknown
    for key in unknown:
        with pytest.raises(DecodeError, match="api key"):
            decode_request_header(memoryview(struct.pack(">hhih", key, 0, 1, -1)))
    for schema in all_apis().values():
        for version in (-1, schema.max_version + 1, 32767):
            with pytest.raises(DecodeError):
                decode_request_header(memoryview(struct.pack(">hhih", schema.api_key, version, 1, -1)))


def test_bad_client_ids_raise_decode_error() -> None:
    key = API_KEYS[0]
    version = all_apis()[key].min_version
    for client_id in (struct.pack(">h", -2), struct.pack(">h", -32768), struct.pack(">h", 5) + b"abc",
                      struct.pack(">h", 2) + b"\xc3\x28"):
        with pytest.raises(DecodeError):
            decode_request_header(memoryview(struct.pack(">hhi", key, version, 1) + client_id + b"\x00"))


@settings(max_examples=300, deadline=None)
@given(blob=st.binary(max_size=32), header_version=st.sampled_from([0, 1]))
def test_response_header_decoding_of_arbitrary_bytes_raises_only_decode_error(
        blob: bytes, header_version: int) -> None:
    _decode_or_refuse(lambda b: decode_response_header(memoryview(b), header_version), blob)
