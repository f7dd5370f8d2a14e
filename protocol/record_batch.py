"""Fields of a v2 record batch header, read in place (records themselves are never decoded)."""

from __future__ import annotations

import struct

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
    while len(view) - pos >= _HEADER_SIZE:
        length = _BATCH_LENGTH.unpack_from(view, pos + 8)[0]
        end = pos + 12 + length
        if length < _HEADER_SIZE - 12 or end > len(view):
            break  # a truncated trailing batch is the broker's to reject
        out.append(view[pos:end])
        pos = end
    return out


def is_transactional(records: memoryview | bytes | None) -> bool:
    """True if any v2 batch in the set has the transactional attribute (as Kafka checks)."""
    return any(b[_MAGIC_AT] >= 2 and _ATTRIBUTES.unpack_from(b, _ATTRIBUTES_AT)[0] & _TRANSACTIONAL_BIT
               for b in batches(records))


def producer_id(batch: memoryview) -> int:
    value: int = _PRODUCER_ID.unpack_from(batch, _PRODUCER_ID_AT)[0]
    return value
