"""Splits a byte stream into Kafka frames (4-byte big-endian size, then the frame).

Sans-IO: feed it whatever the socket delivered and get back complete frames.  A frame's
declared size is checked against the limit before any buffer for it is allocated.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol.errors import DecodeError

_SIZE = struct.Struct(">i")


class FrameTooLarge(DecodeError):
    """The peer announced a frame larger than the configured maximum."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit}")
        self.size = size
        self.limit = limit


@dataclass(slots=True, init=False)
class Frame:
    """One frame: ``wire`` is size prefix + payload (relayable as is), ``payload`` the body.

    Made only for the answers to the gateway's own upstream login (gateway/upstream/login.py): relayed
    requests and answers are handed on as their wire views (FrameReceiver, FrameSplitter), read at fixed
    offsets, with no object per frame.  Treat it as immutable.  Not ``frozen``: a frozen class must set
    its fields through ``object.__setattr__``, which made a Frame cost 350 ns instead of 190
    (bench/framing_cost.py)."""

    wire: memoryview
    # Sliced once, where it is made: a view of the same bytes, so no copy and no extra buffer.
    payload: memoryview = field(repr=False, compare=False)

    def __init__(self, wire: memoryview) -> None:
        self.wire = wire
        self.payload = wire[4:]


class FrameSplitter:
    """Accumulates stream bytes and yields complete frames without copying them twice.

    Frames are memoryview slices of the chunk they arrived in (or of the one buffer that
    collected a frame spanning several chunks), size prefix included: the upstream's answers,
    which the session reads at fixed offsets and relays as is, so no Frame object (and no payload
    view) is made per answer.  Buffers are replaced, never resized, once a view of them has
    been handed out.
    """

    __slots__ = ("_limit", "_need", "_pending")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        # The partial frame: a bytearray of its own while one is buffered, else the shared empty bytes (an
        # upstream link idles between answers; an empty bytearray kept by each was 56 bytes).
        self._pending: bytes | bytearray = b""
        self._need = 4  # bytes _pending must reach before a frame can complete

    @property
    def limit(self) -> int:
        return self._limit

    @limit.setter
    def limit(self, value: int) -> None:
        self._limit = value

    def buffered(self) -> int:
        return len(self._pending)

    def pending_head(self, header_bytes: int = 8) -> tuple[int, memoryview] | None:
        """Size and first bytes of a frame that has started arriving but is not complete yet."""
        if len(self._pending) < header_bytes:
            return None
        return _SIZE.unpack_from(self._pending, 0)[0], memoryview(self._pending)[4:header_bytes]

    def take_pending(self) -> bytearray:
        """Hand over the partial frame (for streaming it onwards); the splitter starts afresh."""
        pending, self._pending, self._need = self._pending, b"", 4
        return pending if isinstance(pending, bytearray) else bytearray(pending)

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        """The frames ``data`` completed, each its wire bytes (size prefix + payload)."""
        if self._pending:
            self._pending += data
            if len(self._pending) < self._need:
                return []
            chunk: bytes | bytearray | memoryview = self._pending
            self._pending = b""
        else:
            chunk = data
        view = memoryview(chunk)
        frames: list[memoryview] = []
        pos = 0
        end = len(view)
        while end - pos >= 4:
            size = _SIZE.unpack_from(view, pos)[0]
            if size < 0 or size > self._limit:
                raise FrameTooLarge(size, self._limit) if size > 0 else DecodeError(f"negative frame size {size}")
            if end - pos - 4 < size:
                break
            # The usual read is one whole answer: the view itself, not a slice of all of it.
            frames.append(view if pos == 0 and size == end - 4 else view[pos : pos + 4 + size])
            pos += 4 + size
        if pos < end:
            self._keep(view, pos, end)
        else:
            self._need = 4
        return frames

    def _keep(self, view: memoryview, pos: int, end: int) -> None:
        # The size was validated by feed() when four bytes of it were present.
        self._need = 4 + _SIZE.unpack_from(view, pos)[0] if end - pos >= 4 else 4
        self._pending = bytearray(view[pos:end])


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix a payload with its size."""
    return _SIZE.pack(len(payload)) + bytes(payload)
