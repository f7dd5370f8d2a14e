"""Splits a byte stream into Kafka frames, receiving it into buffers it hands out itself.

Sans-IO, shaped like asyncio.BufferedProtocol: ``get_buffer()`` says where the next bytes
go, ``buffer_updated(n)`` says n bytes arrived there and returns the frames completed.
The socket writes straight into a frame's own buffer, so a large request is neither
copied out of a per-read ``bytes`` object nor grown by appending.
"""

from __future__ import annotations

import struct
import sys

from protocol.errors import DecodeError
from protocol.framing import Frame, FrameTooLarge

_SIZE = struct.Struct(">i")
_EMPTY = bytearray()


def _references(buffers: list[bytearray], i: int) -> int:
    return sys.getrefcount(buffers[i])


# What _references() reports for a buffer only its list refers to, measured rather than
# assumed (interpreters differ in the temporary references they count).
_UNREFERENCED = _references([bytearray()], 0)


class BufferPool:
    """Large receive buffers, reused once nothing refers to them any more.

    Fresh megabyte buffers cost a page fault per 4 KiB on first touch, more than the copy
    from the socket itself; reusing warm ones avoids that.  A pooled buffer is free when
    the pool's reference is the only one left: every view of it (a frame, a slice queued
    in a transport, a decoded record set) keeps it alive, so a free buffer has no reader.
    A reused buffer still holds old bytes, but FrameReceiver only ever exposes bytes the
    socket wrote into it.  Not thread-safe: one pool per event loop.
    """

    __slots__ = ("_buffers", "_held", "max_bytes")

    GRANULE = 64 * 1024  # sizes are rounded up to this, so similar frames share buffers

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._buffers: list[bytearray] = []
        self._held = 0

    def held(self) -> int:
        """Bytes of buffers the pool keeps (free or in use)."""
        return self._held

    def take(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes (contents undefined; at most twice as large)."""
        rounded = -(-size // self.GRANULE) * self.GRANULE
        best = self._best_free(rounded)
        if best >= 0:
            return self._buffers[best]
        if self._held + rounded > self.max_bytes:
            self._evict_free(self._held + rounded - self.max_bytes)
        if self._held + rounded > self.max_bytes:
            return bytearray(size)  # the pool is full of buffers in use: an ordinary one
        fresh = bytearray(rounded)
        self._buffers.append(fresh)
        self._held += rounded
        return fresh

    def _best_free(self, rounded: int) -> int:
        """Index of the smallest free buffer that fits (-1: none)."""
        buffers, best, best_len = self._buffers, -1, 2 * rounded + 1
        for i in range(len(buffers)):  # by index: a loop variable would be one more reference
            if rounded <= len(buffers[i]) < best_len and self._free(i):
                best, best_len = i, len(buffers[i])
        return best

    def _free(self, i: int) -> bool:
        return _references(self._buffers, i) == _UNREFERENCED

    def _evict_free(self, need: int) -> None:
        """Drop free buffers (of sizes no longer asked for) until ``need`` bytes are released."""
        i = 0
        while need > 0 and i < len(self._buffers):
            if self._free(i):
                need -= len(self._buffers[i])
                self._held -= len(self._buffers[i])
                del self._buffers[i]
            else:
                i += 1


class FrameReceiver:
    """Frames are memoryview slices of the buffer they were received into.

    Small frames share a scratch buffer, many per read; a frame larger than that gets a
    buffer of its own once its size prefix has been read and checked against the limit.
    A buffer is never written again below a view handed out, nor resized; once its
    frames are all complete it is let go, so an idle connection holds no buffer.

    Memory bound: nothing is reserved more than ``prealloc`` bytes (at least 4 KiB) ahead
    of what has arrived, the scratch buffer included; beyond that a frame's buffer grows by doubling
    as bytes arrive, so it is at most twice what the peer actually sent.  Before
    authentication the owner sets a small ``prealloc``: a peer that announces a size, or
    sends a few bytes and stalls, costs the gateway next to nothing.
    """

    __slots__ = ("_buf", "_cap", "_end", "_failed", "_pool", "_start", "limit", "prealloc")

    SCRATCH_BYTES = 64 * 1024
    MIN_SCRATCH_BYTES = 4 * 1024  # the scratch buffer when prealloc is smaller than SCRATCH_BYTES
    PREALLOC_BYTES = 1024 * 1024

    def __init__(self, limit: int, prealloc: int = PREALLOC_BYTES, pool: BufferPool | None = None) -> None:
        self.limit = limit  # the largest frame accepted (its size prefix excluded)
        self.prealloc = prealloc
        self._pool = pool  # where buffers larger than the scratch come from, if given
        self._buf = _EMPTY
        self._cap = 0  # bytes of _buf this frame (or run of small frames) may use
        self._start = 0  # where the first incomplete frame begins in _buf
        self._end = 0  # bytes of _buf filled
        self._failed = False

    def buffered(self) -> int:
        """Bytes of an incomplete frame held."""
        return self._end - self._start

    def held(self) -> int:
        """Bytes of buffer reserved for the stream (filled or not)."""
        return self._cap

    def peek(self, n: int = 8) -> bytes:
        """The first bytes of the incomplete (or just refused) frame, for diagnostics."""
        return bytes(self._buf[self._start : min(self._start + n, self._end)])

    def get_buffer(self) -> memoryview:
        """Where the next bytes must be written; never empty."""
        if self._failed:  # the stream was refused: whatever still comes is discarded
            return memoryview(bytearray(4096))
        if not self._cap:
            self._cap = self._scratch_bytes()
            self._buf = bytearray(self._cap)
        return memoryview(self._buf)[self._end : self._cap]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """``nbytes`` were written at the start of the last ``get_buffer()``; the frames completed.

        Raises FrameTooLarge or DecodeError (negative size) as soon as a size prefix is
        complete, before anything is reserved for that frame; the receiver then stays
        refused.
        """
        if self._failed:
            raise DecodeError("the stream was already refused")
        if not 0 < nbytes <= self._cap - self._end:
            raise ValueError(f"buffer_updated({nbytes}) outside the buffer handed out")
        self._end += nbytes
        frames = self._split()
        self._make_room()
        return frames

    def _split(self) -> list[Frame]:
        view = memoryview(self._buf)
        frames: list[Frame] = []
        pos, end, limit = self._start, self._end, self.limit
        while end - pos >= 4:
            size = _SIZE.unpack_from(view, pos)[0]
            if size < 0 or size > limit:
                self._start, self._failed = pos, True  # peek() shows the refused frame's head
                raise FrameTooLarge(size, limit) if size > 0 else DecodeError(f"negative frame size {size}")
            if end - pos - 4 < size:
                break
            frames.append(Frame(view[pos : pos + 4 + size]))
            pos += 4 + size
        self._start = pos
        return frames

    def _make_room(self) -> None:
        """Ensure get_buffer() has room for the incomplete frame, moving it if it must."""
        have = self._end - self._start
        if not have:  # every frame complete: let the buffer go (views of it may live on)
            self._buf, self._cap, self._start, self._end = _EMPTY, 0, 0, 0
            return
        # _split() checked the size against the limit whenever four bytes of it are here.
        total = 4 + _SIZE.unpack_from(self._buf, self._start)[0] if have >= 4 else 0
        if self._end < self._cap and self._start + total <= self._cap:
            return  # the frame fits where it started
        capacity = self._capacity(total, have)
        fresh = bytearray(capacity) if self._pool is None or capacity <= self.SCRATCH_BYTES \
            else self._pool.take(capacity)  # only large buffers are worth pooling
        fresh[:have] = memoryview(self._buf)[self._start : self._end]
        self._buf, self._cap, self._start, self._end = fresh, capacity, 0, have

    def _capacity(self, total: int, have: int) -> int:
        """Buffer size for a frame of ``total`` bytes (0: size unknown) of which ``have`` arrived."""
        scratch = self._scratch_bytes()
        if total <= scratch:  # small, or size not known yet: later frames may follow
            return scratch
        return min(total, max(self.prealloc, 2 * have))

    def _scratch_bytes(self) -> int:
        return max(self.MIN_SCRATCH_BYTES, min(self.SCRATCH_BYTES, self.prealloc))
