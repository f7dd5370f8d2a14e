"""The upstream half of a relayed connection: one socket to the broker the client addressed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from gateway.transport import read_buffers
from protocol.errors import DecodeError
from protocol.framing import Frame, FrameSplitter

if TYPE_CHECKING:
    from gateway.session.actions import Action

_HEAD_BYTES = 8  # a response's size and correlation id: enough to ask whether it may stream
# A streamed chunk shorter than this goes to the client as a copy: a view keeps its whole read buffer alive while
# the client's socket holds it, so a view must carry at least a quarter of the buffer's bytes (what the client
# transport may hold, connection.buffer.max.bytes, then pins at most four times as much).
_VIEW_MIN_BYTES = read_buffers.READ_BUFFER_BYTES // 4
# uvloop's TLS transport asks for a buffer ``pending + 256`` long each time it looks for decrypted bytes, even
# when nothing is pending: such a look gets this shared scrap, not a read buffer an idle link would then keep.
_PROBE_BYTES = 256
_landing = bytearray(_PROBE_BYTES)


class UpstreamOwner(Protocol):
    """The proxy session (gateway/session/session.py) as the upstream link sees it."""

    def upstream_frames(self, frames: list[memoryview]) -> list[Action]: ...

    def may_stream(self, upstream_id: int, size: int) -> bool: ...

    def stream_started(self, upstream_id: int, head: bytearray) -> list[Action]: ...

    def stream_chunk(self, chunk: memoryview) -> list[Action]: ...

    def stream_ended(self) -> list[Action]: ...

    def upstream_error(self, reason: str) -> list[Action]: ...

    def upstream_lost(self, error: str | None) -> list[Action]: ...

    def upstream_write_paused(self, paused: bool) -> list[Action]: ...


class UpstreamLink(asyncio.BufferedProtocol):
    """Splits upstream bytes into response frames, or streams a large response straight on.

    A response the owner accepts for streaming (next in line, no rewriting needed) is
    forwarded chunk by chunk as it arrives instead of being held until complete, so the
    client starts receiving a multi-megabyte Fetch while the rest is still in flight.

    The socket is read straight into a shared read buffer (gateway/transport/read_buffers.py), not into a
    fresh ``bytes`` per read: a streamed chunk goes to the client as a view of it.  Only streamed chunks are
    views of it; the frames of a read are handed on as views of a copy (or of the splitter's own buffer), as
    before, since the session may hold them in its response queue for as long as the client is slow.
    """

    __slots__ = ("_buf", "_do", "_owner", "_splitter", "_stream_left", "auth_inbox", "transport")

    def __init__(self, owner: UpstreamOwner, do: Callable[[list[Action]], None], max_frame_bytes: int) -> None:
        self._owner = owner
        self._do = do  # carries out the session's actions (the client connection's adapter)
        self._splitter = FrameSplitter(max_frame_bytes)
        self._stream_left = 0  # bytes of the streamed frame still to come
        self._buf: bytearray | None = None  # the read buffer lent for the read under way (get_buffer to buffer_updated)
        self.transport: asyncio.Transport | None = None
        # While the gateway authenticates itself to the upstream (at the start, and again on the live
        # link: KIP-368), the answers to its own requests go here: the negative correlation ids.
        # None is delivered when the link is lost: the login reports why, its refusal if one came first.
        self.auth_inbox: Callable[[Frame | None], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # cast, not isinstance: uvloop's transports are not asyncio.Transport subclasses
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if 0 <= sizehint <= _PROBE_BYTES:  # a TLS look: a read buffer taken earlier goes back, if it can
            self._give_back()
            return memoryview(_landing)
        if self._buf is None:
            self._buf = read_buffers.take()
        return memoryview(self._buf)

    def buffer_updated(self, nbytes: int) -> None:
        buf = self._buf
        if buf is None:  # the bytes landed in the probe's scrap: copied out before anything else may land there
            self._received(memoryview(bytes(memoryview(_landing)[:nbytes])))
            return
        try:
            self._received(memoryview(buf)[:nbytes])
        finally:  # whatever happened, the next read gets a buffer no one still views
            self._give_back()

    def receive(self, data: bytes | bytearray | memoryview) -> None:
        """Take ``data`` as the loop would hand it over, a read buffer at a time (tests and benches: no socket)."""
        view = memoryview(data)
        while view:
            buf = self.get_buffer(len(view))
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            del buf  # as the loop does: no view of the read buffer kept past the read
            self.buffer_updated(n)
            view = view[n:]

    def _give_back(self) -> None:
        """The read buffer returns to the shared ones unless a view of it lives on (the client's transport holds
        part of a streamed chunk): then it is left to that view and freed with it, never written again."""
        if (buf := self._buf) is not None:
            self._buf = None
            read_buffers.give_back(buf)

    def _received(self, data: memoryview) -> None:
        rest = data
        if self._stream_left:
            n = min(self._stream_left, len(data))
            self._stream_left -= n
            chunk = data[:n]
            self._do(self._owner.stream_chunk(chunk if n >= _VIEW_MIN_BYTES else memoryview(bytes(chunk))))
            if not self._stream_left:
                self._do(self._owner.stream_ended())
            rest = data[n:]
            if not rest:
                return
        try:
            frames = self._splitter.feed(_unshared(rest, self._splitter))
        except DecodeError as exc:
            self._do(self._owner.upstream_error(f"upstream framing: {exc}"))
            return
        if frames and self.auth_inbox is not None:
            frames = _to_login(frames, self.auth_inbox)
        if frames:
            self._do(self._owner.upstream_frames(frames))
        if self._splitter.buffered() >= _HEAD_BYTES:  # the usual read ends on a whole answer: nothing to ask
            self._maybe_stream()

    def _maybe_stream(self) -> None:
        head = self._splitter.pending_head(_HEAD_BYTES)
        if head is None:  # (the gateway's own answers are small and never streamed: no slot awaits them)
            return
        size, first = head
        upstream_id = int.from_bytes(first, "big", signed=True)
        if not self._owner.may_stream(upstream_id, size):
            return
        pending = self._splitter.take_pending()
        self._stream_left = 4 + size - len(pending)
        self._do(self._owner.stream_started(upstream_id, pending))

    def pause_writing(self) -> None:
        # The upstream socket is full: stop reading more requests from the client.
        self._do(self._owner.upstream_write_paused(True))

    def resume_writing(self) -> None:
        self._do(self._owner.upstream_write_paused(False))

    def connection_lost(self, exc: Exception | None) -> None:
        self._give_back()
        if self.auth_inbox is not None:  # a login runs: it reports the loss, or the refusal that preceded it
            self.auth_inbox(None)
            return
        self._do(self._owner.upstream_lost(repr(exc) if exc else None))


def _unshared(rest: memoryview, splitter: FrameSplitter) -> bytes | memoryview:
    """What to feed the splitter so that no frame it returns is a view of the read buffer: a copy if ``rest``
    starts with a whole frame (the splitter would hand out views of it); else ``rest`` itself, which the splitter
    copies into its own buffer (a frame it is collecting, or the start of one)."""
    if splitter.buffered() or len(rest) < 4:
        return rest
    return bytes(rest) if 4 + int.from_bytes(rest[:4], "big", signed=True) <= len(rest) else rest


def _to_login(frames: list[memoryview], inbox: Callable[[Frame | None], None]) -> list[memoryview]:
    """Hands the answers to the gateway's own login (negative correlation ids) to ``inbox``, as Frames (rare:
    a login); the others, answers to requests relayed before a re-authentication began, stay in order for the
    session."""
    rest = []
    for wire in frames:
        if len(wire) >= 8 and wire[4] & 0x80:  # the sign bit of the big-endian correlation id
            inbox(Frame(wire))
        else:
            rest.append(wire)
    return rest
