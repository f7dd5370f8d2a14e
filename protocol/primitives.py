"""Reading and writing Kafka's primitive types over a memoryview.

The Reader never allocates more than the bytes it was given: every length and count is
checked against what remains before anything is sliced or built.
"""

from __future__ import annotations

import struct
import uuid

from protocol.errors import DecodeError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

# An unsigned varint encoding a 32-bit value takes at most five bytes.
_MAX_UVARINT_BYTES = 5


class Reader:
    """A cursor over an immutable buffer; all reads are bounds-checked."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: memoryview | bytes | bytearray, pos: int = 0) -> None:
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        self.end = len(self.buf)

    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.end:
            raise DecodeError(f"need {n} bytes at offset {start}, have {self.end - start}")
        self.pos = start + n
        return start

    def _unpack(self, st: struct.Struct) -> int:
        start = self._take(st.size)
        value: int = st.unpack_from(self.buf, start)[0]
        return value

    def int8(self) -> int:
        return self._unpack(_I8)

    def int16(self) -> int:
        return self._unpack(_I16)

    def uint16(self) -> int:
        return self._unpack(_U16)

    def int32(self) -> int:
        return self._unpack(_I32)

    def uint32(self) -> int:
        return self._unpack(_U32)

    def int64(self) -> int:
        return self._unpack(_I64)

    def float64(self) -> float:
        start = self._take(8)
        value: float = _F64.unpack_from(self.buf, start)[0]
        return value

    def boolean(self) -> bool:
        return self._unpack(_I8) != 0

    def uuid(self) -> uuid.UUID:
        start = self._take(16)
        return uuid.UUID(bytes=bytes(self.buf[start : start + 16]))

    def uvarint(self) -> int:
        # Nearly every uvarint on the wire is one byte (tag counts, lengths + 1 of short strings and
        # arrays): read it without the loop (measured: 18 of them per relayed Produce round trip).
        # Two bytes (128..16383: a record batch's or a short array's length) are read without it too:
        # the loop below cost ~130 bytecodes of a relayed Produce of a 100-byte record.
        start, buf = self.pos, self.buf
        if start < self.end:
            first = buf[start]
            if first < 0x80:
                self.pos = start + 1
                return first
            if start + 1 < self.end and (second := buf[start + 1]) < 0x80:
                self.pos = start + 2
                return (first & 0x7F) | (second << 7)
        result = 0
        shift = 0
        for _ in range(_MAX_UVARINT_BYTES):
            start = self._take(1)
            byte = self.buf[start]
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if result > 0xFFFFFFFF:
                    raise DecodeError("unsigned varint exceeds 32 bits")
                return result
            shift += 7
        raise DecodeError("unsigned varint longer than 5 bytes")

    def varint(self) -> int:
        raw = self.uvarint()
        return (raw >> 1) ^ -(raw & 1)

    def view(self, n: int) -> memoryview:
        start = self._take(n)
        return self.buf[start : start + n]

    def text(self, n: int) -> str:
        raw = self.view(n)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid UTF-8 in string: {exc.reason}") from None

    def count(self, n: int, min_item_size: int = 1) -> int:
        """Validate an array count against the bytes left before any list is built."""
        if n < 0:
            raise DecodeError(f"negative array length {n}")
        if n * min_item_size > self.end - self.pos:
            raise DecodeError(f"array of {n} items cannot fit in {self.remaining()} bytes")
        return n


class Writer:
    """Appends Kafka primitives to a growing bytearray."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def int8(self, v: int) -> None:
        self.out += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.out += _I16.pack(v)

    def uint16(self, v: int) -> None:
        self.out += _U16.pack(v)

    def int32(self, v: int) -> None:
        self.out += _I32.pack(v)

    def uint32(self, v: int) -> None:
        self.out += _U32.pack(v)

    def int64(self, v: int) -> None:
        self.out += _I64.pack(v)

    def float64(self, v: float) -> None:
        self.out += _F64.pack(v)

    def boolean(self, v: bool) -> None:
        self.out.append(1 if v else 0)

    def uuid(self, v: uuid.UUID) -> None:
        self.out += v.bytes

    def uvarint(self, v: int) -> None:
        if v < 0:
            raise ValueError("unsigned varint cannot be negative")
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)

    def varint(self, v: int) -> None:
        self.uvarint((v << 1) ^ (v >> 63))

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.out += data


def uvarint_size(v: int) -> int:
    size = 1
    while v >= 0x80:
        v >>= 7
        size += 1
    return size
