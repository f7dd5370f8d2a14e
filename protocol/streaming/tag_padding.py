"""Pads a tag section to an exact length with one extra tagged field that no version of the message defines.

A streamed response's length prefix is on the wire before its trailer is rewritten, so a rewritten
trailer must keep the original's size. Readers skip a tagged field they do not know by its size (Kafka's
generated Java readers keep it as an unknown tagged field; librdkafka skips it), and the codec here does
too (protocol/codec.py). Tags are written in ascending order: the padding goes last, above every other tag.
"""

from __future__ import annotations

from protocol.errors import DecodeError
from protocol.primitives import Reader, Writer, uvarint_size

# Two tags, one and two varint bytes long: with one fixed tag some sizes cannot be reached (a field of
# tag, size and 127 zeros is 1 + 1 + 127 = 129 bytes, with 128 zeros 131: 130 is missing), with both every size
# from 2 bytes up can.
# Far above any tag a Kafka message defines (0-2 today), so no reader takes the padding for a field.
PAD_TAGS = (127, 128)


def pad_tag_section(section: bytes | bytearray, size: int) -> bytes | None:
    """``section`` (a whole tag section) grown to exactly ``size`` bytes by one padding field of zeros;
    None when it cannot be: it is already larger, or only one byte short (a field takes two at least).
    Raises DecodeError when the section is malformed or already uses a tag at or above the padding's."""
    count, entries = _split(section)
    if len(section) == size:
        return bytes(section)
    room = size - uvarint_size(count + 1) - len(entries)
    field = _padding_field(room)
    if field is None:
        return None
    out = Writer()
    out.uvarint(count + 1)
    out.raw(entries)
    out.raw(field)
    return bytes(out.out)


def _split(section: bytes | bytearray) -> tuple[int, memoryview]:
    """The field count and the bytes of the fields, checked: no tag may reach the padding's."""
    reader = Reader(section)
    count = reader.count(reader.uvarint(), 2)
    start = reader.pos
    for _ in range(count):
        tag = reader.uvarint()
        if tag >= PAD_TAGS[0]:
            raise DecodeError(f"a tag section holds tag {tag}: no padding tag can follow it")
        reader.view(reader.uvarint())
    if reader.remaining():
        raise DecodeError(f"a tag section has {reader.remaining()} trailing bytes")
    return count, memoryview(section)[start:]


def _padding_field(room: int) -> bytes | None:
    """One tagged field of exactly ``room`` bytes (tag, size, zeros), or None."""
    for tag in PAD_TAGS:
        for size_bytes in (1, 2, 3, 4):
            n = room - uvarint_size(tag) - size_bytes
            if n >= 0 and uvarint_size(n) == size_bytes:
                out = Writer()
                out.uvarint(tag)
                out.uvarint(n)
                out.raw(bytes(n))
                return bytes(out.out)
    return None
