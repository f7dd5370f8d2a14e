"""FrameReceiver (get_buffer/buffer_updated framing) and its BufferPool, without sockets.

A fake socket writes a byte stream into whatever buffers the receiver hands out, in
chunks of any size.  Frames must come out identical to the stream's, stay intact while
later bytes arrive, malformed or oversized sizes must be refused before anything is
reserved for them, and memory must stay bounded by what the peer actually sent.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import DecodeError
from protocol.frame_receiver import BufferPool, FrameReceiver
from protocol.framing import FrameTooLarge, frame
from tests.heap import heap_peak

SCRATCH = FrameReceiver.SCRATCH_BYTES


def _stream(payloads: list[bytes]) -> bytes:
    return b"".join(frame(p) for p in payloads)


def _receive(receiver: FrameReceiver, data: bytes, chunk_sizes: list[int] | None = None) -> list[memoryview]:
    """Write data the way a socket would: at most len(get_buffer()) bytes per read."""
    frames: list[memoryview] = []
    pos, turn = 0, 0
    while pos < len(data):
        buf = receiver.get_buffer()
        assert len(buf) > 0
        want = chunk_sizes[turn % len(chunk_sizes)] if chunk_sizes else len(data)
        n = min(len(buf), max(1, want), len(data) - pos)
        buf[:n] = data[pos : pos + n]
        buf.release()
        pos += n
        turn += 1
        frames.extend(receiver.buffer_updated(n))
    return frames


PAYLOADS = [b"", b"a", b"hello world", bytes(range(256)), b"\x00\x00\x00\x05", b"z" * 1000,
            b"m" * (SCRATCH - 10), b"L" * (3 * SCRATCH + 7), b"q" * 5]


@pytest.mark.parametrize("pool", [None, BufferPool()])
def test_frames_split_at_every_boundary_reassemble_identically(pool: BufferPool | None) -> None:
    stream = _stream(PAYLOADS[:6])
    for cut in range(len(stream) + 1):
        receiver = FrameReceiver(limit=4096, pool=pool)
        frames = _receive(receiver, stream, [cut or 1, len(stream)])
        assert [bytes(f[4:]) for f in frames] == PAYLOADS[:6], f"cut at {cut}"
        assert receiver.buffered() == 0 and receiver.held() == 0


@settings(max_examples=200, deadline=None)
@given(payloads=st.lists(st.sampled_from(PAYLOADS) | st.binary(max_size=300), max_size=10),
       chunk_sizes=st.lists(st.integers(1, 4 * SCRATCH), min_size=1, max_size=8),
       prealloc=st.sampled_from([1, 4096, SCRATCH, 2 * SCRATCH, FrameReceiver.PREALLOC_BYTES]),
       pooled=st.booleans())
def test_frames_reassemble_identically_under_any_chunking(payloads: list[bytes], chunk_sizes: list[int],
                                                           prealloc: int, pooled: bool) -> None:
    receiver = FrameReceiver(limit=4 * SCRATCH, prealloc=prealloc, pool=BufferPool() if pooled else None)
    frames = _receive(receiver, _stream(payloads), chunk_sizes)
    # Compared only after the whole stream: views handed out earlier must not have been overwritten.
    assert [bytes(f[4:]) for f in frames] == payloads
    assert receiver.buffered() == 0 and receiver.held() == 0


@settings(max_examples=100, deadline=None)
@given(sizes=st.lists(st.sampled_from([0, 7, SCRATCH - 10, SCRATCH + 1, 2 * SCRATCH, 3 * SCRATCH + 7]),
                      min_size=1, max_size=12),
       chunk_sizes=st.lists(st.integers(1, 4 * SCRATCH), min_size=1, max_size=8),
       keep=st.lists(st.booleans(), min_size=12, max_size=12))
def test_pooled_buffers_are_reused_only_once_no_frame_refers_to_them(
        sizes: list[int], chunk_sizes: list[int], keep: list[bool]) -> None:
    """Some frames are dropped at once (their buffer may be reused), others kept: a kept frame
    must still read as it arrived after later frames went through recycled buffers."""
    payloads = [bytes([i + 1]) * size for i, size in enumerate(sizes)]  # each frame tells itself apart
    receiver = FrameReceiver(limit=4 * SCRATCH, prealloc=SCRATCH, pool=BufferPool(max_bytes=8 * SCRATCH))
    stream = _stream(payloads)
    kept: list[tuple[int, memoryview]] = []
    seen = 0
    pos, turn = 0, 0
    while pos < len(stream):
        buf = receiver.get_buffer()
        n = min(len(buf), chunk_sizes[turn % len(chunk_sizes)], len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        buf.release()
        pos, turn = pos + n, turn + 1
        for f in receiver.buffer_updated(n):
            assert bytes(f[4:]) == payloads[seen]
            if keep[seen % len(keep)]:
                kept.append((seen, f))
            seen += 1
    assert seen == len(payloads)
    assert all(bytes(f[4:]) == payloads[i] for i, f in kept)


@settings(max_examples=300, deadline=None)
@given(chunks=st.lists(st.binary(min_size=1, max_size=64), max_size=6), pooled=st.booleans())
def test_arbitrary_bytes_raise_only_decode_error_with_bounded_memory(chunks: list[bytes], pooled: bool) -> None:
    receiver = FrameReceiver(limit=256, pool=BufferPool() if pooled else None)
    data, pos = b"".join(chunks), 0
    with heap_peak() as peak:
        try:
            for size in (len(c) for c in chunks):
                buf = receiver.get_buffer()
                n = min(len(buf), size)
                buf[:n] = data[pos : pos + n]
                buf.release()
                pos += n
                # Each read's frames are dropped before the next read, as the session does once it relayed them:
                # kept, every frame would keep its own scratch buffer alive (4 zero bytes are a whole frame).
                assert all(len(f) - 4 <= 256 for f in receiver.buffer_updated(n))
        except DecodeError:
            with pytest.raises(DecodeError):  # refused for good: nothing more comes out
                receiver.buffer_updated(1)
    assert peak[0] < 2 * SCRATCH


@pytest.mark.parametrize("size", [1025, 2**20, 2**31 - 1])
def test_frame_over_the_limit_is_refused_from_its_size_alone(size: int) -> None:
    head = struct.pack(">i", size)
    for stream, chunk_sizes in ((head, [4]), (head, [1, 2, 1]), (frame(b"ok") + head + b"\x00" * 8, [100])):
        receiver = FrameReceiver(limit=1024)
        with heap_peak() as peak, pytest.raises(FrameTooLarge) as info:
            _receive(receiver, stream, chunk_sizes)
        assert (info.value.size, info.value.limit) == (size, 1024)
        assert peak[0] < 2 * SCRATCH
        assert receiver.peek()[:4] == head  # what the diagnosis of a non-Kafka peer looks at


@pytest.mark.parametrize("size", [-1, -2, -(2**31)])
def test_negative_frame_size_raises_decode_error(size: int) -> None:
    for stream in (struct.pack(">i", size), frame(b"ok") + struct.pack(">i", size)):
        with pytest.raises(DecodeError) as info:
            _receive(FrameReceiver(limit=1024), stream)
        assert not isinstance(info.value, FrameTooLarge)


def test_frame_at_exactly_the_limit_is_accepted() -> None:
    frames = _receive(FrameReceiver(limit=1024), frame(b"x" * 1024))
    assert [len(f) - 4 for f in frames] == [1024]


@pytest.mark.parametrize("prealloc", [4096, SCRATCH, FrameReceiver.PREALLOC_BYTES])
def test_announced_size_reserves_at_most_prealloc_ahead_of_the_bytes_received(prealloc: int) -> None:
    """Before authentication prealloc is small: announcing a size, or stalling after a few
    bytes, makes the gateway hold next to nothing."""
    receiver = FrameReceiver(limit=2**30, prealloc=prealloc)
    with heap_peak() as peak:
        assert _receive(receiver, b"\x40\x00") == []  # half a size prefix, then a stall
        assert receiver.held() <= prealloc
        assert _receive(receiver, b"\x00\x00" + b"0123456789") == []  # 2**30 announced
    assert receiver.buffered() == 14
    assert receiver.held() <= prealloc and peak[0] < prealloc + min(prealloc, SCRATCH) + 16 * 1024


@pytest.mark.parametrize("prealloc", [4096, SCRATCH])
def test_a_frame_larger_than_prealloc_grows_by_doubling_with_what_arrived(prealloc: int) -> None:
    receiver = FrameReceiver(limit=2**30, prealloc=prealloc)
    received = 0
    buf = receiver.get_buffer()
    buf[:4] = struct.pack(">i", 2**30)
    buf.release()
    receiver.buffer_updated(4)
    received = 4
    while received < 40 * SCRATCH:
        buf = receiver.get_buffer()
        n = len(buf)
        buf.release()
        assert receiver.buffer_updated(n) == []
        received += n
        assert receiver.held() <= max(prealloc, 2 * received)


def test_a_large_frame_is_received_into_its_own_buffer_without_further_copies() -> None:
    payload = bytes(range(250)) * 4000  # a 1 MB Produce request, as librdkafka batches them
    receiver = FrameReceiver(limit=2 * len(payload))
    data = frame(payload) + frame(b"next")
    first = receiver.get_buffer()
    first[:100] = data[:100]  # the first read: the size prefix and a little of the body
    first.release()
    assert receiver.buffer_updated(100) == []
    rest = receiver.get_buffer()
    assert len(rest) == 4 + len(payload) - 100  # exactly the rest of the frame, nothing beyond
    rest[:] = data[100 : 4 + len(payload)]
    (big,) = receiver.buffer_updated(len(rest))
    assert rest.obj is big.obj and big.nbytes == 4 + len(payload) == len(bytes(big.obj))
    rest.release()
    assert bytes(big[4:]) == payload
    assert [bytes(f[4:]) for f in _receive(receiver, data[4 + len(payload) :])] == [b"next"]


def test_many_small_frames_in_one_read_are_views_of_one_buffer() -> None:
    payloads = [bytes([i]) * i for i in range(50)]
    receiver = FrameReceiver(limit=1024)
    frames = _receive(receiver, _stream(payloads))
    assert [bytes(f[4:]) for f in frames] == payloads
    assert len({id(f.obj) for f in frames}) == 1


def test_buffer_updated_beyond_the_buffer_handed_out_is_a_caller_bug() -> None:
    receiver = FrameReceiver(limit=1024)
    n = len(receiver.get_buffer())
    with pytest.raises(ValueError):
        receiver.buffer_updated(n + 1)
    with pytest.raises(ValueError):
        receiver.buffer_updated(0)


# --- BufferPool -------------------------------------------------------------------------

def test_pool_reuses_a_buffer_only_after_every_view_of_it_is_gone() -> None:
    pool = BufferPool()
    first = pool.take(1_000_000)
    view = memoryview(first)[10:20]
    slice_of_slice = view[2:4]
    del first, view
    assert pool.take(1_000_000) is not None and pool.held() == 2 * 1024 * 1024  # still referenced
    del slice_of_slice
    before = pool.held()
    pool.take(1_000_000)
    assert pool.held() == before  # a free buffer served it


def test_pool_serves_a_smaller_request_from_the_smallest_free_buffer_that_fits() -> None:
    pool = BufferPool()
    big, small = pool.take(1_500_000), pool.take(600_000)
    big_id, small_id = id(big), id(small)
    del big, small
    assert id(pool.take(500_000)) == small_id
    assert id(pool.take(200_000)) not in (big_id, small_id)  # more than twice too large: not used


def test_pool_stays_within_max_bytes_and_falls_back_to_ordinary_buffers() -> None:
    pool = BufferPool(max_bytes=2 * 1024 * 1024)
    held = [pool.take(1_000_000), pool.take(1_000_000)]
    extra = pool.take(1_000_000)
    assert pool.held() == 2 * 1024 * 1024 and len(extra) == 1_000_000
    del held, extra
    pool.take(1_900_000)  # the free 1 MiB buffers are evicted to make room
    assert pool.held() <= 2 * 1024 * 1024


def test_an_idle_pool_lets_its_free_buffers_go_and_a_busy_one_keeps_them() -> None:
    pool = BufferPool()
    buffer = pool.take(1_000_000)
    del buffer
    assert pool.drop_idle() == 0  # taken from since the last call: still warm
    assert pool.held() > 0
    kept = pool.take(1_000_000)
    pool.drop_idle()
    assert pool.drop_idle() == 0 and pool.held() == len(kept)  # in use: never dropped
    del kept
    assert pool.drop_idle() > 0 and pool.held() == 0


class _Yes:
    def admit(self, nbytes: int) -> bool:
        return True

    def complete(self) -> None:
        pass


def test_an_admitted_large_frame_is_received_into_one_mapping_of_its_size() -> None:
    import mmap

    receiver = FrameReceiver(limit=2**30)
    receiver.gate = _Yes()
    size = FrameReceiver.MAPPED_BYTES + 10
    payload = b"r" * size
    first = receiver.get_buffer()
    first[:100] = frame(payload)[:100]
    first.release()
    assert receiver.buffer_updated(100) == []
    assert receiver.held() == 4 + size  # the whole frame at once: no growth copies
    rest = receiver.get_buffer()
    rest[:] = frame(payload)[100:]
    rest.release()
    (big,) = receiver.buffer_updated(4 + size - 100)
    assert isinstance(big.obj, mmap.mmap)
    assert bytes(big[4:]) == payload


# --- scratch buffers: small frames' buffers reused through the pool ---------------------------
# Buffers are told apart by id() and what they still hold: a reference kept by the test would itself
# make a buffer "in use".

def _read(receiver: FrameReceiver, data: bytes) -> tuple[list[memoryview], int, bytes]:
    """One socket read of ``data``: the frames, the id of the buffer it landed in, and what the
    first len(data) bytes of the buffer held before the socket wrote them."""
    buf = receiver.get_buffer()
    landed, before = id(buf.obj), bytes(buf[: len(data)])
    buf[: len(data)] = data
    buf.release()
    return receiver.buffer_updated(len(data)), landed, before


def test_a_scratch_buffer_no_frame_refers_to_any_more_is_read_into_again() -> None:
    """The next read of a small request reuses the warm buffer instead of a fresh zero-filled 64 KiB."""
    receiver = FrameReceiver(limit=4096, pool=BufferPool())
    frames, first, _ = _read(receiver, frame(b"one"))
    assert [bytes(f[4:]) for f in frames] == [b"one"]
    del frames
    frames, second, before = _read(receiver, frame(b"two"))
    assert (second, before) == (first, frame(b"one"))  # the same buffer, still holding the last request
    assert [bytes(f[4:]) for f in frames] == [b"two"]


def test_a_scratch_buffer_a_frame_still_refers_to_is_never_written_again() -> None:
    receiver = FrameReceiver(limit=4096, pool=BufferPool())
    (kept,), first, _ = _read(receiver, frame(b"kept" * 10))
    for i in range(2 * BufferPool.SCRATCH_KEPT):  # more reads than the pool keeps buffers
        frames, landed, _ = _read(receiver, frame(bytes([i]) * 50))
        assert landed != first and [bytes(f[4:]) for f in frames] == [bytes([i]) * 50]
    assert bytes(kept[4:]) == b"kept" * 10


def test_a_reused_scratch_buffer_exposes_only_the_bytes_the_socket_wrote() -> None:
    """Another connection's old request is still in the buffer: no frame and no peek may show any of it."""
    pool = BufferPool()
    secret = b"password=" + b"s" * 991
    frames, first, _ = _read(FrameReceiver(limit=4096, pool=pool), frame(secret))
    del frames
    receiver = FrameReceiver(limit=4096, pool=pool)
    frames, landed, before = _read(receiver, struct.pack(">i", 10) + b"abc")  # a partial frame, then a stall
    assert (frames, landed, before) == ([], first, frame(secret)[:7])
    assert receiver.peek(100) == struct.pack(">i", 10) + b"abc"
    (short,) = _receive(receiver, b"defghij")
    assert bytes(short) == frame(b"abcdefghij")
    del short
    frames, landed, _ = _read(receiver, frame(b""))
    assert landed == first and [bytes(f) for f in frames] == [frame(b"")]


def test_an_idle_receiver_holds_no_buffer_and_its_scratch_goes_back_to_the_pool() -> None:
    pool = BufferPool()
    receiver = FrameReceiver(limit=4096, pool=pool)
    frames, landed, _ = _read(receiver, frame(b"request"))
    del frames
    assert receiver.held() == 0 and receiver.buffered() == 0
    again = pool.take_scratch(SCRATCH)  # nothing of the receiver's refers to it any more
    assert id(again) == landed and again.startswith(frame(b"request"))


def test_pool_keeps_at_most_scratch_kept_scratch_buffers_within_max_bytes() -> None:
    pool = BufferPool()
    in_use = [pool.take_scratch(SCRATCH) for _ in range(3 * BufferPool.SCRATCH_KEPT)]
    assert len({id(b) for b in in_use}) == len(in_use)  # none handed out twice while in use
    assert pool.held() == BufferPool.SCRATCH_KEPT * SCRATCH
    small = BufferPool(max_bytes=SCRATCH)
    kept = [small.take_scratch(SCRATCH), small.take_scratch(SCRATCH)]
    assert small.held() == SCRATCH and len(kept[1]) == SCRATCH  # the second one is an ordinary buffer


def test_pool_lets_idle_scratch_go_and_small_traffic_keeps_no_large_buffer_warm() -> None:
    pool = BufferPool()
    large = pool.take(1_000_000)
    del large
    pool.take_scratch(SCRATCH)
    assert pool.drop_idle() == 0 and pool.held() > SCRATCH  # both were taken since the last call
    pool.take_scratch(SCRATCH)  # steady small traffic only
    assert pool.drop_idle() > 0 and pool.held() == SCRATCH  # the large buffer is let go, the warm scratch kept
    # No reads at all: the scratch goes too, but is no reason for the server to trim the heap.
    assert pool.drop_idle() == 0 and pool.held() == 0


def test_free_scratch_of_the_other_size_makes_room_for_the_size_now_asked_for() -> None:
    """A burst of logins (4 KiB scratch before authentication) must not leave the pool unable to keep
    the 64 KiB scratch of the traffic that follows."""
    pool = BufferPool()
    logins = [pool.take_scratch(FrameReceiver.MIN_SCRATCH_BYTES) for _ in range(BufferPool.SCRATCH_KEPT)]
    del logins
    first = id(pool.take_scratch(SCRATCH))
    assert pool.held() == (BufferPool.SCRATCH_KEPT - 1) * FrameReceiver.MIN_SCRATCH_BYTES + SCRATCH
    assert id(pool.take_scratch(SCRATCH)) == first
