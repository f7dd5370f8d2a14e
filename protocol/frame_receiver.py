"""Splits a byte stream into Kafka frames, receiving it into buffers it hands out itself.

Sans-IO, shaped like asyncio.BufferedProtocol: ``get_buffer()`` says where the next bytes
go, ``buffer_updated(n)`` says n bytes arrived there and returns the frames completed,
each its wire bytes (size prefix included), as FrameSplitter hands the upstream's answers.
The socket writes straight into a frame's own buffer, so a large request is neither
copied out of a per-read ``bytes`` object nor grown by appending.
"""

from __future__ import annotations

import mmap
import struct
import sys
from typing import Final, Protocol

from protocol.errors import DecodeError
from protocol.framing import FrameTooLarge

_SIZE = struct.Struct(">i")
_EMPTY = memoryview(bytearray())


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

    It also keeps a few scratch buffers, the ones small frames are read into: a receiver lets
    its scratch go whenever every frame in it is complete (an idle connection holds none), so
    without the pool every read of a small request allocated and zero-filled a fresh 64 KiB
    (bench/framing_cost.py).  At most SCRATCH_KEPT of them, within max_bytes.
    """

    __slots__ = ("_buffers", "_held", "_scratch", "_scratch_takes", "_scratch_takes_seen", "_takes_seen",
                 "max_bytes", "takes")

    GRANULE: Final = 64 * 1024  # sizes are rounded up to this, so similar frames share buffers
    # Enough for the reads of one loop's wake-up whose frames are still referenced (queued in a full
    # upstream transport, waiting in a session); beyond that a scratch buffer is an ordinary one.
    SCRATCH_KEPT: Final = 8

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._buffers: list[bytearray] = []
        self._held = 0
        self.takes = 0  # take() calls, ever
        self._takes_seen = 0  # ... as of the last drop_idle()
        self._scratch: list[bytearray] = []
        self._scratch_takes = 0  # take_scratch() calls, ever
        self._scratch_takes_seen = 0  # ... as of the last drop_idle()

    def held(self) -> int:
        """Bytes of buffers the pool keeps (free or in use)."""
        return self._held

    def take(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes (contents undefined; at most twice as large)."""
        rounded = -(-size // self.GRANULE) * self.GRANULE
        self.takes += 1
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

    def take_scratch(self, size: int) -> bytearray:
        """A buffer of exactly ``size`` bytes for small frames (contents undefined)."""
        self._scratch_takes += 1
        scratch, i, spare = self._scratch, len(self._scratch), -1
        while i:  # from the last one kept, the likeliest to be free; by index: see _best_free
            i -= 1
            # _references(scratch, i) inline (once per read): the same expression, so the same temporaries counted
            if sys.getrefcount(scratch[i]) == _UNREFERENCED:
                if len(scratch[i]) == size:
                    return scratch[i]
                spare = i
        fresh = bytearray(size)
        if spare >= 0 and len(scratch) == self.SCRATCH_KEPT:  # a free one of the other size makes room:
            self._held -= len(scratch[spare])  # scratch left by a burst of logins must not stay in the way
            del scratch[spare]
        if len(scratch) < self.SCRATCH_KEPT and self._held + size <= self.max_bytes:
            scratch.append(fresh)
            self._held += size
        return fresh

    def drop_idle(self) -> int:
        """Let go of the free buffers if nothing was taken since the last call; the bytes of large ones let go.

        Called periodically: a pool that serves steady large traffic keeps its warm buffers,
        one left idle after a burst gives its memory back.  Scratch buffers are judged by
        their own takes (steady small traffic does not keep large buffers warm) and left out
        of the answer, which the server reads as "worth a malloc_trim": they are at most
        SCRATCH_KEPT small ones, and a client sending once a second would otherwise have the
        heap trimmed on the loop once a second."""
        if self._scratch_takes == self._scratch_takes_seen:
            self._drop_free_scratch()
        self._scratch_takes_seen = self._scratch_takes
        if self.takes != self._takes_seen:
            self._takes_seen = self.takes
            return 0
        before = self._held
        self._evict_free(self._held)
        return before - self._held

    def _best_free(self, rounded: int) -> int:
        """Index of the smallest free buffer that fits (-1: none)."""
        buffers, best, best_len = self._buffers, -1, 2 * rounded + 1
        for i in range(len(buffers)):  # by index: a loop variable would be one more reference
            if rounded <= len(buffers[i]) < best_len and self._free(i):
                best, best_len = i, len(buffers[i])
        return best

    def _free(self, i: int) -> bool:
        return _references(self._buffers, i) == _UNREFERENCED

    def _drop_free_scratch(self) -> None:
        scratch, i = self._scratch, 0
        while i < len(scratch):
            if _references(scratch, i) == _UNREFERENCED:
                self._held -= len(scratch[i])
                del scratch[i]
            else:
                i += 1

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


class FrameGate(Protocol):
    """Asked before a frame gets a buffer of its own (queued.max.request.bytes)."""

    def admit(self, nbytes: int) -> bool:
        """May a frame of ``nbytes`` (size prefix included) be received now?  False: not yet."""
        ...

    def complete(self) -> None:
        """The admitted frame is complete (or the stream was closed)."""
        ...


class FrameReceiver:
    """Frames are memoryview slices of the buffer they were received into, size prefix included.

    A view, not a Frame object: the session reads the header at fixed offsets (4 on) and relays
    the view as is, so a request costs no object and no payload view of its own.

    Small frames share a scratch buffer, many per read; a frame larger than that gets a
    buffer of its own once its size prefix has been read and checked against the limit.
    A buffer is never written again below a view handed out, nor resized; once its
    frames are all complete it is let go, so an idle connection holds no buffer.  With a
    pool, the scratch comes from it: one no view refers to any more is read into again.

    Memory bound: nothing is reserved more than ``prealloc`` bytes (at least 4 KiB) ahead
    of what has arrived, the scratch buffer included; beyond that a frame's buffer grows by doubling
    as bytes arrive, so it is at most twice what the peer actually sent.  Before
    authentication the owner sets a small ``prealloc``: a peer that announces a size, or
    sends a few bytes and stalls, costs the gateway next to nothing.

    With a ``gate``, a frame larger than the scratch buffer gets its own buffer only once
    the gate admits its size; until then ``waiting`` is that size, nothing more is
    allocated and the owner must stop reading (the gate's later yes goes to ``admitted()``).
    An admitted frame of MAPPED_BYTES or more gets, at once, an anonymous mapping of its
    full size (the size was granted, so reserving it is accounted for): the kernel supplies
    pages only as the socket writes them (resident memory follows the bytes that arrived,
    with no growth copies) and unmaps them when the frame's last view goes, instead of
    leaving a hole in the heap.  Without a gate, nothing vouches for a size: buffers double.
    """

    __slots__ = ("_admitted", "_buf", "_cap", "_end", "_failed", "_pool", "_start", "gate", "limit",
                 "prealloc", "waiting")

    SCRATCH_BYTES: Final = 64 * 1024
    MIN_SCRATCH_BYTES: Final = 4 * 1024  # the scratch buffer when prealloc is smaller than SCRATCH_BYTES
    PREALLOC_BYTES: Final = 1024 * 1024
    MAPPED_BYTES: Final = 16 * 1024 * 1024  # the pool's default size: it would not keep these anyway

    def __init__(self, limit: int, prealloc: int = PREALLOC_BYTES, pool: BufferPool | None = None) -> None:
        self.limit = limit  # the largest frame accepted (its size prefix excluded)
        self.prealloc = prealloc
        self._pool = pool  # where buffers larger than the scratch come from, if given
        # A view of the whole buffer (a bytearray or a mapping), made once per buffer: get_buffer() and
        # every frame are slices of it.  The buffer lives as long as the last of them.
        self._buf: memoryview = _EMPTY
        self._cap = 0  # bytes of _buf this frame (or run of small frames) may use
        self._start = 0  # where the first incomplete frame begins in _buf
        self._end = 0  # bytes of _buf filled
        self._failed = False
        self.gate: FrameGate | None = None
        self._admitted = False  # the incomplete frame was admitted by the gate
        self.waiting = 0  # the size of the frame waiting for the gate (0: none)

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
        cap = self._cap
        if not cap:  # a read after every frame completed (per request): _scratch_bytes() and _scratch() inline
            cap = self._cap = self.SCRATCH_BYTES if self.prealloc >= self.SCRATCH_BYTES else self._scratch_bytes()
            pool = self._pool
            self._buf = memoryview(bytearray(cap) if pool is None else pool.take_scratch(cap))
        elif self._end == cap:  # only while waiting for the gate, read although told to pause
            self._overflow()
            cap = self._cap
        return self._buf[self._end : cap]

    def admitted(self) -> None:
        """The gate said yes to the waiting frame: its buffer can be allocated."""
        self.waiting, self._admitted = 0, True
        self._make_room()

    def close(self) -> None:
        """The stream is over: let go of the buffer and of the gate's admission."""
        self._buf, self._cap, self._start, self._end, self._failed = _EMPTY, 0, 0, 0, True
        self.waiting = 0
        if self._admitted and self.gate is not None:
            self._admitted = False
            self.gate.complete()

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """``nbytes`` were written at the start of the last ``get_buffer()``; the frames completed, each its
        wire bytes (size prefix + payload).

        Raises FrameTooLarge or DecodeError (negative size) as soon as a size prefix is
        complete, before anything is reserved for that frame; the receiver then stays
        refused.
        """
        if self._failed:
            raise DecodeError("the stream was already refused")
        end = self._end + nbytes
        if nbytes <= 0 or end > self._cap:
            raise ValueError(f"buffer_updated({nbytes}) outside the buffer handed out")
        self._end = end
        # The split, inline (once per read): the frames complete from the first incomplete one on.
        view, pos, limit = self._buf, self._start, self.limit
        frames: list[memoryview] = []
        while end - pos >= 4:
            size = _SIZE.unpack_from(view, pos)[0]
            if size < 0 or size > limit:
                self._start, self._failed = pos, True  # peek() shows the refused frame's head
                raise FrameTooLarge(size, limit) if size > 0 else DecodeError(f"negative frame size {size}")
            if end - pos - 4 < size:
                break
            frames.append(view[pos : pos + 4 + size])
            pos += 4 + size
        if frames and self._admitted:  # the admitted frame is always the first one completed
            self._admitted = False
            if self.gate is not None:
                self.gate.complete()
        if pos == end:  # every frame complete: let the buffer go (views of it may live on)
            self._buf, self._cap, self._start, self._end = _EMPTY, 0, 0, 0
        else:
            self._start = pos
            self._make_room()
        return frames

    def _make_room(self) -> None:
        """Ensure get_buffer() has room for the incomplete frame, moving it if it must."""
        have = self._end - self._start
        if not have:  # every frame complete: let the buffer go (views of it may live on)
            self._buf, self._cap, self._start, self._end = _EMPTY, 0, 0, 0
            return
        # buffer_updated() checked the size against the limit whenever four bytes of it are here.
        total = 4 + _SIZE.unpack_from(self._buf, self._start)[0] if have >= 4 else 0
        if self._end < self._cap and self._start + total <= self._cap:
            return  # the frame fits where it started
        if total > self._scratch_bytes() and not self._admitted and not self._admit(total):
            return  # not yet: the bytes already here stay where they are
        capacity = self._capacity(total, have)
        fresh: bytearray | mmap.mmap
        if capacity >= self.MAPPED_BYTES:
            fresh = mmap.mmap(-1, capacity)
        elif capacity == self._scratch_bytes():
            fresh = self._scratch(capacity)
        elif self._pool is None or capacity <= self.SCRATCH_BYTES:
            fresh = bytearray(capacity)
        else:  # only large buffers are worth pooling
            fresh = self._pool.take(capacity)
        fresh[:have] = self._buf[self._start : self._end]
        self._buf, self._cap, self._start, self._end = memoryview(fresh), capacity, 0, have

    def _admit(self, total: int) -> bool:
        if self.waiting:
            return False  # already asked: admitted() comes when the gate has room
        if self.gate is None or self.gate.admit(total):
            self._admitted = True
            return True
        self.waiting = total
        return False

    def _overflow(self) -> None:
        """Room for a read the owner should have paused: a scratch buffer more, outside the gate."""
        have = self._end - self._start
        fresh = bytearray(have + self._scratch_bytes())
        fresh[:have] = self._buf[self._start : self._end]
        self._buf, self._cap, self._start, self._end = memoryview(fresh), len(fresh), 0, have

    def _capacity(self, total: int, have: int) -> int:
        """Buffer size for a frame of ``total`` bytes (0: size unknown) of which ``have`` arrived."""
        scratch = self._scratch_bytes()
        if total <= scratch:  # small, or size not known yet: later frames may follow
            return scratch
        if total >= self.MAPPED_BYTES and self.gate is not None:  # granted, and mapped: pages cost once written
            return total
        return min(total, max(self.prealloc, 2 * have))

    def _scratch(self, size: int) -> bytearray:
        # Pooled: a buffer no frame refers to any more is written again (only below what the socket
        # then writes is ever read), instead of a fresh zero-filled one per read.
        return bytearray(size) if self._pool is None else self._pool.take_scratch(size)

    def _scratch_bytes(self) -> int:
        return max(self.MIN_SCRATCH_BYTES, min(self.SCRATCH_BYTES, self.prealloc))
