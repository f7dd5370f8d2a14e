"""Encoding and decoding whole v2 record batches, and the CRC-32C that guards them.

Batches are cross-checked against kafka-python's independent implementation in both
directions; malformed record sets (hand-built, mutated, or arbitrary bytes) must raise
``DecodeError`` and nothing else, with heap and time bounded by the input.  The transactional bit read in
place (any_transactional, the walk of a Produce body) answers as reading each batch sliced did.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import struct
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import record_batch
from protocol.crc32c import crc32c
from protocol.errors import DecodeError, EncodeError
from protocol.record_batch import Record, any_transactional, batches, decode_batches, encode_batch, is_transactional
from tests.heap import heap_peak
from tests.steps import line_steps

with warnings.catch_warnings():  # kafka-python reads its JSON files with deprecated importlib calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record._crc32c import crc as kafka_python_crc32c
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Decoding builds a Record (and bytes objects) per record, so heap grows faster than the
# input; what must never happen is allocation driven by a declared length or count.
HEAP_PER_INPUT_BYTE = 512
# zlib's inflate state (a 32 KiB window plus tables) is a fixed cost of any gzip batch.
HEAP_SLACK = 128 * 1024
# Work per input byte, in Python lines (tests/steps.py): the most this module's inputs ran was 10 lines per byte and
# 832 lines in all, so 32 per byte (per inflated byte, for a compressed batch) and 1,024 lines of slack catch a
# decoder that counts up to a declared size rather than refusing it, however loaded the machine.
STEPS_PER_INPUT_BYTE = 32
STEPS_SLACK = 1024
# Deflate inflates at most ~1032:1, so a mutated gzip batch may legitimately grow that much.
DEFLATE_MAX_RATIO = 1032

TS = 1_700_000_000_000
HEADER_SIZE = 61
CRC_AT = 17
ATTRIBUTES_AT = 21
GZIP = 1
LOG_APPEND_TIME = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20

KeyValue = tuple[bytes | None, bytes | None]


# --- building blocks, independent of the code under test -------------------------------

def _varint(n: int) -> bytes:
    """Kafka's zigzag varint/varlong, written out by hand."""
    raw = (n << 1) ^ (n >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def _nullable(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def _record(key: bytes | None, value: bytes | None, *, offset_delta: int = 0, timestamp_delta: int = 0,
            headers: bytes = _varint(0)) -> bytes:
    body = b"\x00" + _varint(timestamp_delta) + _varint(offset_delta) + _nullable(key) + _nullable(value) + headers
    return _varint(len(body)) + body


def _batch(records: bytes, count: int, *, attributes: int = 0, base_offset: int = 0, magic: int = 2,
           base_timestamp: int = TS, max_timestamp: int = TS) -> bytes:
    """A v2 batch around raw record bytes, with a correct CRC whatever those bytes are."""
    covered = struct.pack(">hiqqqhii", attributes, max(count - 1, 0), base_timestamp, max_timestamp,
                          -1, -1, -1, count) + records
    return struct.pack(">qiibI", base_offset, len(covered) + 9, -1, magic, crc32c(covered)) + covered


def _patched(batch: bytes, *, attributes: int | None = None, max_timestamp: int | None = None,
             count: int | None = None) -> bytes:
    """A batch with header fields rewritten and its CRC recomputed."""
    out = bytearray(batch)
    if attributes is not None:
        struct.pack_into(">h", out, ATTRIBUTES_AT, attributes)
    if max_timestamp is not None:
        struct.pack_into(">q", out, 35, max_timestamp)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return bytes(out)


def _kafka_python_batch(items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]], *,
                        compression: int = 0, timestamps: list[int] | None = None) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2**30)
    for delta, (key, value, headers) in enumerate(items):
        timestamp = TS if timestamps is None else timestamps[delta]
        assert builder.append(delta, timestamp=timestamp, key=key, value=value, headers=headers) is not None
    return bytes(builder.build())


def _kafka_python_read(record_set: bytes) -> list[Record]:
    """Decode with kafka-python, checking every batch's CRC on the way."""
    out: list[Record] = []
    records = MemoryRecords(record_set)
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()
        out.extend(Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch)
    return out


# --- measuring ------------------------------------------------------------------------

def _decode_or_refuse(data: bytes, *, verify_crc: bool, heap_per_byte: int = HEAP_PER_INPUT_BYTE,
                      inflation: int = 1) -> Any:
    """Decode untrusted bytes: DecodeError is fine (returns None), any other exception fails
    the test; heap and work stay bounded by the input (``inflation``: how many bytes a compressed
    input byte may become, whose records are parsed too)."""
    with heap_peak() as peak:
        try:
            value = decode_batches(data, verify_crc=verify_crc)
        except DecodeError:
            value = None
    assert peak[0] <= heap_per_byte * len(data) + HEAP_SLACK, f"decoding {len(data)} bytes allocated {peak[0]}"
    # A second, traced decode (the tracer's own allocations kept out of the heap figure): the Python lines it
    # runs, not its wall time, which moves with the machine's load (tests/steps.py).
    with line_steps() as steps, contextlib.suppress(DecodeError):
        decode_batches(data, verify_crc=verify_crc)
    assert steps[0] <= STEPS_PER_INPUT_BYTE * inflation * len(data) + STEPS_SLACK, \
        f"decoding {len(data)} bytes executed {steps[0]} Python lines"
    return value


# --- CRC-32C --------------------------------------------------------------------------

@pytest.mark.parametrize(("data", "expected"), [
    (bytes(32), 0x8A9136AA),  # RFC 3720 appendix B.4
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),  # the customary check value
    (b"", 0),
])
def test_crc32c_matches_published_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected
    assert crc32c(memoryview(data)) == expected
    assert crc32c(bytearray(data)) == expected


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=100), cut=st.integers(0, 100))
def test_crc32c_continues_across_chunks_and_agrees_with_kafka_python(data: bytes, cut: int) -> None:
    cut = min(cut, len(data))
    assert crc32c(data[cut:], crc32c(data[:cut])) == crc32c(data) == kafka_python_crc32c(data)


# --- round trips ----------------------------------------------------------------------

ROUND_TRIP_CASES: dict[str, list[KeyValue]] = {
    "one": [(b"k", b"v")],
    "null key": [(None, b"v")],
    "tombstone": [(b"k", None)],
    "both null": [(None, None)],
    "empty": [(b"", b""), (b"", None), (None, b"")],
    "binary": [(bytes(range(256)), bytes(range(255, -1, -1))), (b"\x00", b"\xff\x80\x7f")],
    "many": [(f"key-{i}".encode(), f"value-{i}".encode() * (i % 7)) for i in range(2000)],
    "large value": [(b"big", bytes(range(256)) * 4096), (b"small", b"x")],
}


@pytest.mark.parametrize("items", ROUND_TRIP_CASES.values(), ids=ROUND_TRIP_CASES.keys())
def test_encoded_batch_decodes_to_the_same_records(items: list[KeyValue]) -> None:
    wire = encode_batch(items, timestamp_ms=TS, base_offset=1000)
    expected = [Record(1000 + i, TS, key, value) for i, (key, value) in enumerate(items)]
    assert decode_batches(wire) == expected
    assert decode_batches(memoryview(wire)) == expected
    assert _kafka_python_read(wire) == expected


@pytest.mark.parametrize("items", ROUND_TRIP_CASES.values(), ids=ROUND_TRIP_CASES.keys())
def test_a_gzip_batch_decodes_to_the_same_records_here_and_in_kafka_python(items: list[KeyValue]) -> None:
    wire = encode_batch(items, timestamp_ms=TS, base_offset=7, gzip=True)
    expected = [Record(7 + i, TS, key, value) for i, (key, value) in enumerate(items)]
    assert decode_batches(wire) == expected
    assert _kafka_python_read(wire) == expected


def test_gzip_shrinks_repetitive_records() -> None:
    items: list[KeyValue] = [(b'{"kind":"acl","resourceName":"orders-%d"}' % i, b'{"v":1}') for i in range(1000)]
    assert len(encode_batch(items, timestamp_ms=TS, gzip=True)) * 5 < len(encode_batch(items, timestamp_ms=TS))


def test_consecutive_batches_decode_in_order() -> None:
    first = encode_batch([(b"a", b"1"), (b"b", b"2")], timestamp_ms=TS, base_offset=0)
    second = encode_batch([(b"a", None)], timestamp_ms=TS + 5, base_offset=2)
    assert decode_batches(first + second) == [
        Record(0, TS, b"a", b"1"), Record(1, TS, b"b", b"2"), Record(2, TS + 5, b"a", None)]


def test_nothing_fetched_decodes_to_no_records() -> None:
    assert decode_batches(None) == decode_batches(b"") == decode_batches(memoryview(b"")) == []


def test_encoding_no_records_or_out_of_range_fields_raises_encode_error() -> None:
    with pytest.raises(EncodeError):
        encode_batch([], timestamp_ms=TS)
    with pytest.raises(EncodeError):
        encode_batch([(b"k", b"v")], timestamp_ms=TS, producer_epoch=2**15)
    with pytest.raises(EncodeError):
        encode_batch([(b"k", b"v")], timestamp_ms=2**63)


@FUZZ
@given(items=st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200)),
                      min_size=1, max_size=30),
       timestamp=st.integers(0, 2**62), base_offset=st.integers(0, 2**62))
def test_any_records_round_trip_through_us_and_kafka_python(items: list[KeyValue], timestamp: int,
                                                            base_offset: int) -> None:
    wire = encode_batch(items, timestamp_ms=timestamp, base_offset=base_offset)
    expected = [Record(base_offset + i, timestamp, k, v) for i, (k, v) in enumerate(items)]
    assert decode_batches(wire) == expected
    assert _kafka_python_read(wire) == expected


# --- against kafka-python -------------------------------------------------------------

def test_our_batch_is_byte_identical_to_kafka_pythons_but_for_the_leader_epoch() -> None:
    items: list[KeyValue] = [(b"key", b"value"), (None, b"no key"), (b"gone", None), (b"", b"")]
    ours = encode_batch(items, timestamp_ms=TS)
    theirs = _kafka_python_batch([(k, v, []) for k, v in items])
    # The producer leaves partitionLeaderEpoch for the broker: kafka-python writes 0, we -1.
    # It sits outside the CRC, so everything else, CRC included, must match.
    assert struct.unpack_from(">i", ours, 12) == (-1,)
    assert struct.unpack_from(">i", theirs, 12) == (0,)
    assert ours[:12] + ours[16:] == theirs[:12] + theirs[16:]


def test_producer_fields_are_written_where_kafka_python_reads_them() -> None:
    wire = encode_batch([(b"k", b"v")] * 3, timestamp_ms=TS, base_offset=40, producer_id=7001,
                        producer_epoch=3, base_sequence=12)
    batch = DefaultRecordBatch(wire)
    assert batch.validate_crc()
    assert (batch.base_offset, batch.magic, batch.leader_epoch, batch.attributes) == (40, 2, -1, 0)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7001, 3, 12)
    assert (batch.last_offset_delta, batch.first_timestamp, batch.max_timestamp) == (2, TS, TS)
    assert (batch.records_count, batch.size_in_bytes) == (3, len(wire))
    assert not batch.is_transactional and not batch.is_control_batch


def test_kafka_python_batch_with_timestamp_deltas_and_headers_decodes() -> None:
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (b"k1", b"v1", []),
        (None, b"v2", [("trace-id", b"abc"), ("empty", b""), ("ünïcode", b"\x00\xff")]),
        (b"k3", None, [("a", b"1")]),
    ]
    timestamps = [TS, TS + 250, TS - 3]  # a delta may be negative: the first record sets the base
    wire = _kafka_python_batch(items, timestamps=timestamps)
    expected = [Record(i, ts, k, v, tuple(h)) for i, ((k, v, h), ts) in enumerate(zip(items, timestamps, strict=True))]
    assert decode_batches(wire) == expected == _kafka_python_read(wire)


def test_null_header_values_decode() -> None:
    headers = _varint(2) + _varint(1) + b"a" + _nullable(None) + _varint(1) + b"b" + _nullable(b"x")
    wire = _batch(_record(b"k", b"v", headers=headers), 1)
    assert decode_batches(wire) == [Record(0, TS, b"k", b"v", (("a", None), ("b", b"x")))]


def test_gzip_batch_from_kafka_python_decodes() -> None:
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (f"acl-{i}".encode(), b"User:alice ALLOW READ " * 20, []) for i in range(50)]
    items.append((b"acl-deleted", None, []))
    wire = _kafka_python_batch(items, compression=GZIP)
    assert DefaultRecordBatch(wire).compression_type == GZIP  # kafka-python kept it compressed
    assert len(wire) < sum(len(v or b"") for _, v, _ in items)
    assert decode_batches(wire) == [Record(i, TS, k, v) for i, (k, v, _) in enumerate(items)]


def test_gzip_batch_of_several_members_decodes() -> None:
    records = [_record(b"a", b"1"), _record(b"b", b"2", offset_delta=1)]
    body = gzip.compress(records[0]) + gzip.compress(records[1])
    assert decode_batches(_batch(body, 2, attributes=GZIP)) == [Record(0, TS, b"a", b"1"), Record(1, TS, b"b", b"2")]


def test_log_append_time_batch_takes_its_max_timestamp_for_every_record() -> None:
    wire = _kafka_python_batch([(b"a", b"1", []), (b"b", b"2", [])], timestamps=[TS, TS + 10])
    stamped = _patched(wire, attributes=LOG_APPEND_TIME, max_timestamp=TS + 99_000)
    assert [r.timestamp_ms for r in decode_batches(stamped)] == [TS + 99_000] * 2
    assert decode_batches(stamped) == _kafka_python_read(stamped)


# --- what a fetch may legitimately contain --------------------------------------------

def test_truncated_trailing_batch_is_ignored_at_every_cut() -> None:
    first = encode_batch([(b"a", b"1"), (b"b", None)], timestamp_ms=TS, base_offset=10)
    last = encode_batch([(b"c", b"3" * 100)], timestamp_ms=TS, base_offset=12)
    expected = decode_batches(first)
    for cut in range(len(last)):
        assert decode_batches(first + last[:cut]) == expected, f"cut at {cut}"
        assert decode_batches(last[:cut]) == []
    assert decode_batches(first + last) == [*expected, Record(12, TS, b"c", b"3" * 100)]


def test_truncated_trailing_batch_declaring_a_huge_length_is_ignored_without_allocating() -> None:
    first = encode_batch([(b"a", b"1")], timestamp_ms=TS)
    huge = struct.pack(">qi", 1, 2**31 - 1) + bytes(20)
    with heap_peak() as peak:
        assert decode_batches(first + huge) == decode_batches(first)
    assert peak[0] < HEAP_SLACK


def test_control_batch_is_skipped() -> None:
    # An end-transaction marker: key (version 0, type 1 = COMMIT), value (version 0, epoch 5).
    marker = encode_batch([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))], timestamp_ms=TS, base_offset=3)
    control = _patched(marker, attributes=TRANSACTIONAL | CONTROL)
    assert DefaultRecordBatch(control).is_control_batch
    data = encode_batch([(b"k", b"v")], timestamp_ms=TS, base_offset=4)
    assert decode_batches(control) == []
    assert decode_batches(control + data) == [Record(4, TS, b"k", b"v")]


def test_empty_batch_left_by_compaction_decodes_to_no_records() -> None:
    assert decode_batches(_batch(b"", 0)) == []


# --- what must be refused -------------------------------------------------------------

def _refused(data: bytes, match: str | None = None, *, verify_crc: bool = True) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_batches(data, verify_crc=verify_crc)


def test_bad_crc_is_refused_unless_verification_is_off() -> None:
    wire = bytearray(encode_batch([(b"key", b"value")], timestamp_ms=TS))
    wire[-2] ^= 0x01  # the last byte of the value (the very last is the headers count)
    _refused(bytes(wire), "CRC")
    assert decode_batches(bytes(wire), verify_crc=False) == [Record(0, TS, b"key", b"valud")]


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_are_refused(magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=2**20)
    builder.append(0, timestamp=TS if magic else None, key=b"k", value=b"v")
    _refused(bytes(builder.build()), f"magic {magic}")


def test_unknown_magic_is_refused() -> None:
    _refused(_batch(_record(b"k", b"v"), 1, magic=3), "magic 3")


@pytest.mark.parametrize(("codec", "name"), [(2, "snappy"), (3, "lz4"), (4, "zstd"), (5, "unknown codec 5"),
                                             (7, "unknown codec 7")])
def test_batches_in_other_codecs_are_refused_naming_the_codec(codec: int, name: str) -> None:
    _refused(_batch(_record(b"k", b"v"), 1, attributes=codec), name)


def test_negative_batch_length_is_refused() -> None:
    _refused(struct.pack(">qi", 0, -1) + bytes(60), "negative length")


@pytest.mark.parametrize("length", [0, 4, 5, 48])
def test_complete_batch_shorter_than_the_v2_header_is_refused(length: int) -> None:
    wire = encode_batch([(b"k", b"v")], timestamp_ms=TS)
    short = struct.pack(">qi", 0, length) + wire[12:12 + length]
    _refused(short + wire)


HUGE = 2**31 - 1

MALFORMED_BATCHES: dict[str, tuple[bytes, str]] = {  # name: (record set, what the error says)
    "record count past the bytes": (_batch(_record(b"k", b"v"), HUGE), "cannot fit"),
    "negative record count": (_batch(_record(b"k", b"v"), -1), "negative array length"),
    "fewer records than declared": (_batch(_record(b"k", b"v") * 2, 3), "cannot fit"),
    "more records than declared": (_batch(_record(b"k", b"v") * 2, 1), "left after the batch's 1 records"),
    "negative record length": (_batch(_varint(-5) + bytes(10), 1), "negative record length -5"),
    "record length past the batch": (_batch(_varint(HUGE) + bytes(10), 1), f"need {HUGE} bytes"),
    "record longer than its fields": (_batch(_varint(9) + _record(b"k", b"v")[1:] + b"\x00", 1), "1 unread"),
    "record shorter than its fields": (_batch(_varint(6) + _record(b"k", b"v")[1:], 1), "need 1 bytes"),
    "key length past the record": (_batch(_record(b"k", b"v")[:4] + _varint(HUGE) + bytes(4), 1),
                                   f"need {HUGE} bytes"),
    "negative key length": (_batch(_varint(7) + b"\x00\x00\x00" + _varint(-2) + bytes(3), 1), "negative key length"),
    "negative value length": (_batch(_varint(6) + b"\x00\x00\x00" + _varint(-1) + _varint(-3) + b"\x00", 1),
                              "negative value length"),
    "header count past the record": (_batch(_record(b"k", b"v", headers=_varint(HUGE)), 1), "cannot fit"),
    "negative header count": (_batch(_record(b"k", b"v", headers=_varint(-1)), 1), "negative array length"),
    "negative header key length": (_batch(_record(b"k", b"v", headers=_varint(1) + _varint(-1) + _varint(-1)), 1),
                                   "negative record header key length"),
    "negative header value length": (
        _batch(_record(b"k", b"v", headers=_varint(1) + _varint(1) + b"h" + _varint(-2)), 1),
        "negative record header value length"),
    "header key not UTF-8": (
        _batch(_record(b"k", b"v", headers=_varint(1) + _varint(2) + b"\xc3\x28" + _varint(-1)), 1), "UTF-8"),
    "over-long varint": (_batch(_varint(11) + b"\x00\x00" + b"\x80" * 5 + b"\x00" + bytes(3), 1),
                         "longer than 5 bytes"),
    "varint over 32 bits": (_batch(_varint(10) + b"\x00\x00" + b"\xff" * 4 + b"\x7f" + bytes(3), 1),
                            "exceeds 32 bits"),
    "over-long varlong": (_batch(_varint(16) + b"\x00" + b"\x80" * 10 + b"\x00" + bytes(4), 1),
                          "longer than 10 bytes"),
    "varlong over 64 bits": (_batch(_varint(15) + b"\x00" + b"\xff" * 9 + b"\x7f" + bytes(4), 1), "exceeds 64 bits"),
    "varlong cut off at the record end": (_batch(_varint(6) + b"\x00" + b"\x80" * 5, 1), "need 1 bytes"),
    "gzip stream cut short": (_batch(gzip.compress(_record(b"k", b"v" * 100))[:-10], 1, attributes=GZIP),
                              "ends inside its compressed stream"),
    "not gzip at all": (_batch(_record(b"k", b"v"), 1, attributes=GZIP), "does not inflate"),
    "gzip with trailing garbage": (_batch(gzip.compress(_record(b"k", b"v")) + b"junk", 1, attributes=GZIP),
                                   "does not inflate"),
    "gzip records count past the inflated bytes": (_batch(gzip.compress(_record(b"k", b"v")), HUGE, attributes=GZIP),
                                                   "cannot fit"),
}


@pytest.mark.parametrize(("wire", "reason"), MALFORMED_BATCHES.values(), ids=MALFORMED_BATCHES.keys())
def test_malformed_batch_is_refused_without_allocating_for_declared_sizes(wire: bytes, reason: str) -> None:
    good = encode_batch([(b"k", b"v")], timestamp_ms=TS)
    for record_set in (wire, good + wire, wire + good):
        assert _decode_or_refuse(record_set, verify_crc=True, heap_per_byte=64) is None
    at = len(good)
    _refused(good + wire, f"record batch at byte {at}: .*{re.escape(reason)}")


def test_the_hand_built_batches_are_sound_when_not_broken() -> None:
    """The fixtures above differ from a valid batch only in the defect they name."""
    wire = _batch(_record(b"k", b"v") + _record(b"k2", None, offset_delta=1, timestamp_delta=-7), 2)
    expected = [Record(0, TS, b"k", b"v"), Record(1, TS - 7, b"k2", None)]
    assert decode_batches(wire) == expected == _kafka_python_read(wire)
    varlong_max = _batch(_record(b"k", b"v", timestamp_delta=2**63 - 1), 1)
    assert decode_batches(varlong_max)[0].timestamp_ms == TS + 2**63 - 1


def test_gzip_bomb_is_refused_past_the_inflation_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_batch, "MAX_DECOMPRESSED_BATCH_BYTES", 4096)
    at_limit = _record(b"k", bytes(4086))  # 10 bytes of lengths, attributes, deltas and key
    assert len(at_limit) == 4096
    assert decode_batches(_batch(gzip.compress(at_limit), 1, attributes=GZIP)) == [Record(0, TS, b"k", bytes(4086))]
    over = _record(b"k", bytes(4087))
    _refused(_batch(gzip.compress(over), 1, attributes=GZIP), "inflates past 4096")


def test_real_gzip_bomb_stops_at_the_default_limit() -> None:
    bomb = _batch(gzip.compress(bytes(64 * 1024 * 1024), compresslevel=9), 1, attributes=GZIP)
    assert len(bomb) < 128 * 1024
    with heap_peak() as peak:
        _refused(bomb, "inflates past")
    assert peak[0] < 3 * record_batch.MAX_DECOMPRESSED_BATCH_BYTES


# --- fuzzing --------------------------------------------------------------------------

@FUZZ
@given(blob=st.binary(max_size=200), verify_crc=st.booleans())
def test_arbitrary_bytes_raise_only_decode_error(blob: bytes, verify_crc: bool) -> None:
    _decode_or_refuse(blob, verify_crc=verify_crc)


@FUZZ
@given(body=st.binary(max_size=200), count=st.integers(-3, 40) | st.integers(-(2**31), 2**31 - 1),
       attributes=st.sampled_from([0, GZIP, LOG_APPEND_TIME, CONTROL]))
def test_arbitrary_records_under_a_valid_header_raise_only_decode_error(body: bytes, count: int,
                                                                        attributes: int) -> None:
    """A correct header and CRC get arbitrary bytes all the way into record parsing."""
    _decode_or_refuse(_batch(body, count, attributes=attributes), verify_crc=True,
                      heap_per_byte=2 * DEFLATE_MAX_RATIO + HEAP_PER_INPUT_BYTE, inflation=DEFLATE_MAX_RATIO)


def _mutate(data: st.DataObject, wire: bytes) -> bytes:
    out = bytearray(wire)
    for _ in range(data.draw(st.integers(1, 6), label="mutations")):
        mode = data.draw(st.sampled_from(["flip", "splice", "cut", "append"]), label="mode")
        at = data.draw(st.integers(0, len(out)), label="at")
        if mode == "flip" and at < len(out):
            out[at] = data.draw(st.integers(0, 255), label="byte")
        elif mode == "splice":
            out[at:at + data.draw(st.integers(0, 8))] = data.draw(st.binary(max_size=8), label="spliced")
        elif mode == "cut":
            del out[at:]
        else:
            out += data.draw(st.binary(min_size=1, max_size=8), label="appended")
    return bytes(out)


VALID_RECORD_SETS = {
    "ours": encode_batch([(b"k", b"v"), (None, b"value"), (b"tomb", None)], timestamp_ms=TS)
    + encode_batch([(b"x" * 30, b"y" * 60)], timestamp_ms=TS, base_offset=3),
    "kafka-python with headers": _kafka_python_batch(
        [(b"k", b"v", [("h", b"1"), ("h2", b"")]), (None, None, [])], timestamps=[TS, TS + 2**40]),
    "gzip": _kafka_python_batch([(b"key", b"value " * 30, [("h", b"x")]) for _ in range(4)], compression=GZIP),
}


@pytest.mark.parametrize("name", VALID_RECORD_SETS)
@FUZZ
@given(data=st.data(), verify_crc=st.booleans())
def test_mutated_valid_batches_raise_only_decode_error(name: str, data: st.DataObject, verify_crc: bool) -> None:
    wire = _mutate(data, VALID_RECORD_SETS[name])
    _decode_or_refuse(wire, verify_crc=verify_crc, heap_per_byte=2 * DEFLATE_MAX_RATIO + HEAP_PER_INPUT_BYTE,
                      inflation=DEFLATE_MAX_RATIO)


@pytest.mark.parametrize("name", VALID_RECORD_SETS)
def test_valid_fuzz_seeds_decode_as_kafka_python_reads_them(name: str) -> None:
    wire = VALID_RECORD_SETS[name]
    assert decode_batches(wire) == _kafka_python_read(wire)
    assert len(decode_batches(wire)) >= 2


# --- the transactional bit, read in place (any_transactional) as is_transactional read each batch sliced ----

_ATTRIBUTES_AT, _MAGIC_AT, _TRANSACTIONAL = 21, 16, 0x10


def _sliced(records: bytes) -> bool:
    """The reading by slices (is_transactional before any_transactional)."""
    return any(b[_MAGIC_AT] >= 2 and struct.unpack_from(">h", b, _ATTRIBUTES_AT)[0] & _TRANSACTIONAL
               for b in batches(records))


def _flagged_batch(transactional: bool, magic: int, value: bytes) -> bytes:
    """A batch with the attribute and magic asked for (the CRC is not read here, so it is left stale)."""
    raw = bytearray(encode_batch([(None, value)], timestamp_ms=0))
    if transactional:
        raw[_ATTRIBUTES_AT + 1] |= _TRANSACTIONAL
    raw[_MAGIC_AT] = magic
    return bytes(raw)


_BATCHES = st.builds(_flagged_batch, st.booleans(), st.sampled_from([0, 1, 2, 2, 2, 0x80, 0xFF]),
                     st.binary(max_size=40))


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_BATCHES, max_size=4), tail=st.binary(max_size=80), cut=st.integers(0, 400),
       head=st.binary(max_size=9), pad=st.binary(max_size=9))
def test_any_transactional_in_place_answers_as_the_batches_sliced(parts: list[bytes], tail: bytes, cut: int,
                                                                   head: bytes, pad: bytes) -> None:
    records = b"".join(parts) + tail
    records = records[:cut] if cut < len(records) else records
    buf = head + records + pad  # the records inside a larger body, as the walk sees them
    expected = _sliced(records)
    assert any_transactional(buf, len(head), len(head) + len(records)) is expected
    assert any_transactional(memoryview(buf), len(head), len(head) + len(records)) is expected
    assert is_transactional(records) is expected and is_transactional(memoryview(records)) is expected


def test_a_transactional_batch_after_a_plain_one_is_found_and_a_truncated_one_is_not() -> None:
    plain, txn = _flagged_batch(False, 2, b"a"), _flagged_batch(True, 2, b"b")
    assert is_transactional(plain + txn) and not is_transactional(plain)
    assert not is_transactional(plain + txn[:-1])  # a truncated trailing batch is the broker's to reject
    assert not is_transactional(_flagged_batch(True, 1, b"c"))  # only v2 batches carry the bit
    assert not is_transactional(None) and not is_transactional(b"")
    body = b"\x00" * 5 + txn + plain
    assert any_transactional(body, 5, 5 + len(txn)) and not any_transactional(body, 5 + len(txn), len(body))
