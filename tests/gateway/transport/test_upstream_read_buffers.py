"""The upstream link's shared read buffers: a buffer is written again only once nothing views it.

uvloop's ``write()`` keeps the caller's memoryview of what the socket did not take (and its TLS transport keeps it
in a backlog), so a streamed chunk handed to the client as a view of a read buffer must stay intact until the
transport lets go of it, however many reads follow.  The frames of a read may sit in the session's response queue:
they must never be views of a read buffer at all."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import uvloop

from gateway.transport import read_buffers
from gateway.transport.upstream_link import _VIEW_MIN_BYTES, UpstreamLink
from protocol.framing import frame


def _answer(upstream_id: int, size: int, seed: int) -> bytes:
    body = bytes((seed + i) % 251 for i in range(size - 4))
    return frame(struct.pack(">i", upstream_id) + body)


class KeepingOwner:
    """The session and a client transport that keeps every chunk it is given as the view it got (the socket took
    nothing), and every frame as its view (a client too slow to take answers)."""

    def __init__(self, stream: bool = True) -> None:
        self.stream = stream
        self.kept: list[memoryview] = []
        self.frames: list[memoryview] = []
        self.head = b""

    def upstream_frames(self, frames: list[memoryview]) -> list[Any]:
        self.frames.extend(frames)
        return []

    def may_stream(self, upstream_id: int, size: int) -> bool:
        return self.stream

    def stream_started(self, upstream_id: int, head: bytearray) -> list[Any]:
        self.head = bytes(head)
        return []

    def stream_chunk(self, chunk: memoryview) -> list[Any]:
        self.kept.append(chunk)
        return []

    def stream_ended(self) -> list[Any]:
        return []


def test_streamed_chunks_a_transport_still_holds_keep_their_bytes_while_more_reads_arrive() -> None:
    owner = KeepingOwner()
    link = UpstreamLink(owner, lambda actions: None, 64 << 20)
    answer = _answer(7, 3 * read_buffers.READ_BUFFER_BYTES + 12345, seed=1)
    # Read by read, each a read buffer's worth: every one would land in the same buffer if it were reused.
    link.receive(answer[:100])
    step = read_buffers.READ_BUFFER_BYTES
    for start in range(100, len(answer), step):
        link.receive(answer[start : start + step])
    assert owner.head + b"".join(bytes(chunk) for chunk in owner.kept) == answer


def test_a_buffer_is_reused_when_its_chunk_was_written_at_once_and_dropped_while_a_transport_holds_it() -> None:
    owner = KeepingOwner()
    link = UpstreamLink(owner, lambda actions: None, 64 << 20)
    answer = _answer(7, 3 * read_buffers.READ_BUFFER_BYTES, seed=2)
    link.receive(answer[:100])
    before = read_buffers.spare()
    link.receive(answer[100 : 100 + read_buffers.READ_BUFFER_BYTES])
    assert read_buffers.spare() == max(before - 1, 0)  # its chunk is held: not back among the spare ones
    owner.kept.clear()  # (freed with the view; never written again)
    owner.kept = _Written()  # now the socket takes each chunk at once: nothing views the buffer afterwards
    link.receive(answer[100 + read_buffers.READ_BUFFER_BYTES : 100 + 2 * read_buffers.READ_BUFFER_BYTES])
    assert read_buffers.spare() == max(before, 1)  # back, for the next read


class _Written(list[memoryview]):
    """A transport whose socket took every chunk: it keeps a copy, not the view."""

    def append(self, chunk: memoryview) -> None:
        super().append(memoryview(bytes(chunk)))


def test_frames_held_by_the_session_are_not_views_of_a_read_buffer() -> None:
    owner = KeepingOwner(stream=False)
    link = UpstreamLink(owner, lambda actions: None, 64 << 20)
    answers = [_answer(i, 1000 + i, seed=i) for i in range(50)]
    for answer in answers:  # one read each: each would land at the start of the same buffer
        link.receive(answer)
    assert [bytes(f) for f in owner.frames] == answers
    # Held, they keep only their own read's bytes alive, not a whole read buffer each (the response memory
    # accounting counts the frames' bytes): the buffer went back after every read.
    assert all(len(f.obj) < read_buffers.READ_BUFFER_BYTES for f in owner.frames)  # type: ignore[arg-type]
    assert read_buffers.spare() >= 1


def test_a_short_streamed_chunk_is_a_copy_so_it_does_not_keep_a_read_buffer_alive() -> None:
    owner = KeepingOwner()
    link = UpstreamLink(owner, lambda actions: None, 64 << 20)
    answer = _answer(7, read_buffers.READ_BUFFER_BYTES, seed=3)
    link.receive(answer[:100])
    tail = len(answer) - (_VIEW_MIN_BYTES - 1)
    link.receive(answer[100:tail])
    owner.kept.clear()
    link.receive(answer[tail:])  # the last chunk, shorter than a view is worth: kept by the transport
    assert len(owner.kept) == 1 and len(owner.kept[0]) == _VIEW_MIN_BYTES - 1
    buffer = read_buffers.take()  # the read's buffer went back: the transport holds a copy, not a view of it
    try:
        assert not read_buffers.in_use(buffer)
        assert owner.kept[0].obj is not buffer
    finally:
        read_buffers.give_back(buffer)


def test_in_use_sees_any_live_view_and_leaves_the_buffer_as_it_was() -> None:
    buffer = bytearray(b"abcdef")
    view = memoryview(buffer)[2:4]
    assert read_buffers.in_use(buffer)
    assert bytes(view) == b"cd"
    del view
    assert not read_buffers.in_use(buffer)
    assert buffer == b"abcdef"


def test_through_uvloop_a_client_that_reads_late_gets_every_byte_the_upstream_sent() -> None:
    """Real sockets: the client's socket fills, uvloop keeps views of the chunks it could not send, the upstream
    link goes on reading into buffers; the client, reading only at the end, must get the answer intact."""
    answer = _answer(9, 24 * read_buffers.READ_BUFFER_BYTES + 777, seed=4)
    assert uvloop.run(_relay_through_a_stalled_client(answer)) == answer


async def _relay_through_a_stalled_client(answer: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    upstream_gateway, upstream_broker = socket.socketpair()
    client_gateway, client_peer = socket.socketpair()
    for sock in (client_gateway, client_peer):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    client_transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, client_gateway)
    client_transport.set_write_buffer_limits(high=1 << 30)  # no pause: the transport holds what it is given
    done = loop.create_future()

    class Forwarding(KeepingOwner):
        def stream_started(self, upstream_id: int, head: bytearray) -> list[Any]:
            client_transport.write(bytes(head))
            return []

        def stream_chunk(self, chunk: memoryview) -> list[Any]:
            client_transport.write(chunk)
            return []

        def stream_ended(self) -> list[Any]:
            done.set_result(None)
            return []

    link = UpstreamLink(Forwarding(), lambda actions: None, 64 << 20)
    upstream_transport, _ = await loop.connect_accepted_socket(lambda: link, upstream_gateway)
    sender = loop.run_in_executor(None, upstream_broker.sendall, answer)
    await done
    await sender
    assert client_transport.get_write_buffer_size() > 0  # the client's socket did fill: views were held
    client_peer.setblocking(False)
    received = bytearray()
    while len(received) < len(answer):
        received += await loop.sock_recv(client_peer, 1 << 20)
    for closing in (client_transport, upstream_transport):
        closing.close()
    for sock in (client_peer, upstream_broker):
        sock.close()
    return bytes(received)


def test_a_buffer_given_back_while_viewed_is_lent_again_only_once_the_view_is_gone(monkeypatch: Any) -> None:
    monkeypatch.setattr(read_buffers, "_free", [])  # none left over from other tests to hand out first
    monkeypatch.setattr(read_buffers, "_viewed", [])
    buffer = read_buffers.take()
    view = memoryview(buffer)[10:20]  # what a client's transport keeps of a chunk it could not send yet
    assert not read_buffers.give_back(buffer)
    assert read_buffers.take() is not buffer  # still viewed: never written again while it is
    del view
    assert read_buffers.take() is buffer  # let go of: lent again rather than a new one zero-filled
