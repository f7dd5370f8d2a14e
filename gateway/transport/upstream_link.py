"""The upstream half of a relayed connection: one socket to the broker the client addressed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast

from protocol.errors import DecodeError
from protocol.framing import Frame, FrameSplitter

if TYPE_CHECKING:
    from gateway.session.actions import Action

_HEAD_BYTES = 8  # a response's size and correlation id: enough to ask whether it may stream


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


class UpstreamLink(asyncio.Protocol):
    """Splits upstream bytes into response frames, or streams a large response straight on.

    A response the owner accepts for streaming (next in line, no rewriting needed) is
    forwarded chunk by chunk as it arrives instead of being held until complete, so the
    client starts receiving a multi-megabyte Fetch while the rest is still in flight.
    """

    __slots__ = ("_do", "_owner", "_splitter", "_stream_left", "auth_inbox", "transport")

    def __init__(self, owner: UpstreamOwner, do: Callable[[list[Action]], None], max_frame_bytes: int) -> None:
        self._owner = owner
        self._do = do  # carries out the session's actions (the client connection's adapter)
        self._splitter = FrameSplitter(max_frame_bytes)
        self._stream_left = 0  # bytes of the streamed frame still to come
        self.transport: asyncio.Transport | None = None
        # While the gateway authenticates itself to the upstream (at the start, and again on the live
        # link: KIP-368), the answers to its own requests go here: the negative correlation ids.
        # None is delivered when the link is lost: the login reports why, its refusal if one came first.
        self.auth_inbox: Callable[[Frame | None], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # cast, not isinstance: uvloop's transports are not asyncio.Transport subclasses
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        rest: bytes | memoryview = data  # viewed by the splitter once, not here as well
        if self._stream_left:
            view = memoryview(data)
            n = min(self._stream_left, len(view))
            self._stream_left -= n
            self._do(self._owner.stream_chunk(view[:n]))
            if not self._stream_left:
                self._do(self._owner.stream_ended())
            rest = view[n:]
            if not rest:
                return
        try:
            frames = self._splitter.feed(rest)
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
        if self.auth_inbox is not None:  # a login runs: it reports the loss, or the refusal that preceded it
            self.auth_inbox(None)
            return
        self._do(self._owner.upstream_lost(repr(exc) if exc else None))


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
