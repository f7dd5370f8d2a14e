"""Kafka v2 record batches: header fields read in place for the relay's hot path (which never
decodes records), and whole-batch encode/decode for the gateway's own control-plane topic."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from protocol.crc32c import crc32c
from protocol.errors import DecodeError, EncodeError
from protocol.primitives import Reader, Writer

_MAGIC_AT = 16
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21
_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43
_BATCH_LENGTH = struct.Struct(">i")
_HEADER_SIZE = 61
_TRANSACTIONAL_BIT = 0x10


def batches(records: memoryview | bytes | None) -> list[memoryview]:
    """The v2 batches of a record set (each a view: base offset .. end of batch)."""
    if not records:
        return []
    view = memoryview(records)
    out = []
    pos = 0
    while (end := _batch_end(view, pos, len(view))) is not None:
        out.append(view[pos:end])
        pos = end
    return out


def _batch_end(buf: memoryview | bytes, pos: int, end: int) -> int | None:
    """Where the whole batch starting at ``pos`` ends; None when no whole batch starts there before ``end`` (the
    set ends, or a truncated trailing batch ends it: that is the broker's to reject)."""
    if end - pos < _HEADER_SIZE:
        return None
    length = _BATCH_LENGTH.unpack_from(buf, pos + 8)[0]
    batch_end = pos + 12 + length
    return None if length < _HEADER_SIZE - 12 or batch_end > end else batch_end


def is_transactional(records: memoryview | bytes | None) -> bool:
    """True if any v2 batch in the set has the transactional attribute (as Kafka checks)."""
    if not records:
        return False
    return any_transactional(records, 0, len(records))


def any_transactional(buf: memoryview | bytes, start: int, end: int) -> bool:
    """is_transactional of the record set ``buf[start:end]``, read in place: the batches ``batches`` finds (a
    truncated trailing batch ends the set), without a view per batch (the walk of a Produce reads it in its body)."""
    pos = start
    while (batch_end := _batch_end(buf, pos, end)) is not None:
        if buf[pos + _MAGIC_AT] >= 2 and _ATTRIBUTES.unpack_from(buf, pos + _ATTRIBUTES_AT)[0] & _TRANSACTIONAL_BIT:
            return True
        pos = batch_end
    return False


def producer_id(batch: memoryview) -> int:
    value: int = _PRODUCER_ID.unpack_from(batch, _PRODUCER_ID_AT)[0]
    return value


# --- whole batches, for the gateway's own control-plane records -------------------------

_LOG_OVERHEAD = 12  # baseOffset and batchLength: the bytes batchLength does not count
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc: the bytes the CRC does not cover.
_PREFIX = struct.Struct(">qiibI")
# attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, records count: the CRC-covered header, ahead of the records.
_COVERED_HEADER = struct.Struct(">hiqqqhii")
_V2_MAGIC = 2
_NO_LEADER_EPOCH = -1  # the broker stamps its own on append
_CODEC_MASK = 0x07
_GZIP = 1
_CODEC_NAMES = {_GZIP: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_LOG_APPEND_TIME_BIT = 0x08
_CONTROL_BIT = 0x20
# length, attributes, timestampDelta, offsetDelta, key length, value length, headers count:
# at least one byte each, so a declared record count is checked against bytes // 7.
_MIN_RECORD_SIZE = 7
_MIN_HEADER_SIZE = 2  # key length and value length
_MAX_VARLONG_BYTES = 10
# The one place output may outgrow its input: a gzip batch.  Far above Kafka's default
# max.message.bytes (1 MiB), yet a hard stop for a decompression bomb.
MAX_DECOMPRESSED_BATCH_BYTES = 16 * 1024 * 1024


@dataclass(slots=True, frozen=True)
class Record:
    """One record of a fetched batch; a None value is a tombstone (compaction deletes the key)."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def encode_batch(records: Sequence[tuple[bytes | None, bytes | None]], *, timestamp_ms: int,
                 base_offset: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, gzip: bool = False) -> bytes:
    """One v2 batch of (key, value) records, all stamped ``timestamp_ms``; ``gzip`` compresses the records.

    Offsets are ``base_offset`` + position; on produce the broker assigns the real ones.
    """
    if not records:
        raise EncodeError("a record batch needs at least one record")
    out = Writer()
    out.raw(bytes(_PREFIX.size))  # filled in once the length and CRC are known
    try:
        out.raw(_COVERED_HEADER.pack(_GZIP if gzip else 0, len(records) - 1, timestamp_ms, timestamp_ms,
                                     producer_id, producer_epoch, base_sequence, len(records)))
        body = Writer()
        for offset_delta, (key, value) in enumerate(records):
            _write_record(body, offset_delta, key, value)
        out.raw(_gzip(bytes(body.out)) if gzip else body.out)
        crc = crc32c(memoryview(out.out)[_ATTRIBUTES_AT:])
        _PREFIX.pack_into(out.out, 0, base_offset, len(out.out) - _LOG_OVERHEAD, _NO_LEADER_EPOCH,
                          _V2_MAGIC, crc)
    except struct.error as exc:
        raise EncodeError(f"record batch field out of range: {exc}") from None
    return bytes(out.out)


def _gzip(data: bytes) -> bytes:
    """One gzip member (what Kafka's GZIP codec writes and reads)."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


def _write_record(out: Writer, offset_delta: int, key: bytes | None, value: bytes | None) -> None:
    record = Writer()
    record.int8(0)  # attributes: unused in v2
    record.varint(0)  # timestampDelta: every record carries the batch's base timestamp
    record.varint(offset_delta)
    _write_nullable(record, key)
    _write_nullable(record, value)
    record.varint(0)  # headers count
    out.varint(len(record.out))
    out.raw(record.out)


def _write_nullable(out: Writer, data: bytes | None) -> None:
    if data is None:
        out.varint(-1)
    else:
        out.varint(len(data))
        out.raw(data)


def decode_batches(records: bytes | memoryview | None, *, verify_crc: bool = True) -> list[Record]:
    """Every data record of every complete v2 batch of a record set, as fetched.

    A batch cut short at the end is ignored: a fetch truncates its record set at the size
    limit wherever that falls, and the next fetch starts at that batch.  Control batches
    (transaction markers) are skipped.  Anything else malformed raises DecodeError.
    """
    if not records:
        return []
    view = memoryview(records)
    out: list[Record] = []
    pos = 0
    while len(view) - pos >= _LOG_OVERHEAD:
        length = _BATCH_LENGTH.unpack_from(view, pos + 8)[0]
        if length < 0:
            raise DecodeError(f"record batch at byte {pos} has negative length {length}")
        end = pos + _LOG_OVERHEAD + length
        if end > len(view):
            break
        try:
            out.extend(_decode_batch(view[pos:end], verify_crc))
        except DecodeError as exc:
            raise DecodeError(f"record batch at byte {pos}: {exc}") from None
        pos = end
    return out


def _decode_batch(batch: memoryview, verify_crc: bool) -> list[Record]:
    if len(batch) <= _MAGIC_AT:
        raise DecodeError(f"{len(batch)} bytes cannot hold a magic byte")
    if batch[_MAGIC_AT] != _V2_MAGIC:
        raise DecodeError(f"magic {batch[_MAGIC_AT]} is not supported, only v2 record batches (magic 2)")
    if len(batch) < _HEADER_SIZE:
        raise DecodeError(f"{len(batch)} bytes are shorter than the {_HEADER_SIZE}-byte v2 batch header")
    base_offset, _, _, _, stored_crc = _PREFIX.unpack_from(batch)
    if verify_crc and (actual := crc32c(batch[_ATTRIBUTES_AT:])) != stored_crc:
        raise DecodeError(f"CRC-32C mismatch: batch says {stored_crc:#010x}, bytes give {actual:#010x}")
    attributes, _, base_timestamp, max_timestamp, _, _, _, count = _COVERED_HEADER.unpack_from(
        batch, _ATTRIBUTES_AT)
    if attributes & _CONTROL_BIT:
        return []
    body = batch[_HEADER_SIZE:]
    codec = attributes & _CODEC_MASK
    if codec == _GZIP:
        body = memoryview(_gunzip(body))
    elif codec:
        name = _CODEC_NAMES.get(codec, f"unknown codec {codec}")
        raise DecodeError(f"{name}-compressed batches are not supported (only gzip)")
    # With LogAppendTime the broker stamps maxTimestamp on the batch and readers use it for
    # every record, ignoring the producer's deltas (as Kafka's own clients do).
    append_time = max_timestamp if attributes & _LOG_APPEND_TIME_BIT else None
    return _decode_records(Reader(body), count, base_offset, base_timestamp, append_time)


def _decode_records(body: Reader, count: int, base_offset: int, base_timestamp: int,
                    append_time: int | None) -> list[Record]:
    body.count(count, _MIN_RECORD_SIZE)
    records = [_decode_record(body, base_offset, base_timestamp, append_time) for _ in range(count)]
    if body.remaining():
        # Kafka refuses this too: the declared count and the batch length disagree.
        raise DecodeError(f"{body.remaining()} bytes left after the batch's {count} records")
    return records


def _decode_record(body: Reader, base_offset: int, base_timestamp: int, append_time: int | None) -> Record:
    length = body.varint()
    if length < 0:
        raise DecodeError(f"negative record length {length}")
    record = Reader(body.view(length))
    record.int8()  # attributes: unused in v2
    timestamp_delta = _varlong(record)
    offset_delta = record.varint()
    key = _nullable_bytes(record, "key")
    value = _nullable_bytes(record, "value")
    count = record.count(record.varint(), _MIN_HEADER_SIZE)
    headers = tuple(_header(record) for _ in range(count))
    if record.remaining():
        raise DecodeError(f"record of {length} bytes has {record.remaining()} unread after its headers")
    timestamp = base_timestamp + timestamp_delta if append_time is None else append_time
    return Record(base_offset + offset_delta, timestamp, key, value, headers)


def _header(record: Reader) -> tuple[str, bytes | None]:
    length = record.varint()
    if length < 0:
        raise DecodeError(f"negative record header key length {length}")
    return record.text(length), _nullable_bytes(record, "record header value")


def _nullable_bytes(reader: Reader, what: str) -> bytes | None:
    length = reader.varint()
    if length == -1:
        return None
    if length < 0:
        raise DecodeError(f"negative {what} length {length}")
    return bytes(reader.view(length))


def _varlong(reader: Reader) -> int:
    # Reader.varint stops at 32 bits; a timestamp delta is a zigzag varlong of up to 64.
    raw = 0
    for index in range(_MAX_VARLONG_BYTES):
        byte = reader.view(1)[0]
        raw |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            if raw >> 64:
                raise DecodeError("varlong exceeds 64 bits")
            return (raw >> 1) ^ -(raw & 1)
    raise DecodeError(f"varlong longer than {_MAX_VARLONG_BYTES} bytes")


def _gunzip(data: memoryview) -> bytes:
    # A gzip stream may hold several members back to back; each is inflated in turn, and
    # inflation stops one byte past the limit rather than after the bomb has gone off.
    out = bytearray()
    rest: bytes | memoryview = data
    while rest:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, MAX_DECOMPRESSED_BATCH_BYTES - len(out) + 1)
        except zlib.error as exc:
            raise DecodeError(f"gzip batch does not inflate: {exc}") from None
        if len(out) > MAX_DECOMPRESSED_BATCH_BYTES:
            raise DecodeError(f"gzip batch inflates past {MAX_DECOMPRESSED_BATCH_BYTES} bytes")
        if not inflater.eof:
            raise DecodeError("gzip batch ends inside its compressed stream")
        rest = inflater.unused_data
    return bytes(out)
