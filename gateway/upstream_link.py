"""The upstream half of a relayed connection: one socket to the broker the client addressed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

from protocol.errors import DecodeError
from protocol.framing import Frame, FrameSplitter


class UpstreamOwner(Protocol):
    def on_upstream_frames(self, frames: list[Frame]) -> None: ...

    def on_upstream_error(self, reason: str) -> None: ...

    def on_upstream_lost(self, exc: Exception | None) -> None: ...

    def set_read_paused(self, reason: str, paused: bool) -> None: ...


class UpstreamLink(asyncio.Protocol):
    __slots__ = ("_owner", "_splitter", "auth_inbox", "transport")

    def __init__(self, owner: UpstreamOwner, max_frame_bytes: int) -> None:
        self._owner = owner
        self._splitter = FrameSplitter(max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        # While the gateway authenticates itself to the upstream, frames go here instead.
        self.auth_inbox: Callable[[Frame], None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # cast, not isinstance: uvloop's transports are not asyncio.Transport subclasses
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self._splitter.feed(data)
        except DecodeError as exc:
            self._owner.on_upstream_error(f"upstream framing: {exc}")
            return
        if frames and self.auth_inbox is not None:
            for frame in frames:
                self.auth_inbox(frame)
        elif frames:
            self._owner.on_upstream_frames(frames)

    def pause_writing(self) -> None:
        # The upstream socket is full: stop reading more requests from the client.
        self._owner.set_read_paused("upstream-full", True)

    def resume_writing(self) -> None:
        self._owner.set_read_paused("upstream-full", False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner.on_upstream_lost(exc)
