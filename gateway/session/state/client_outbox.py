"""What is on its way to the client: answers held while its socket is full, or a streamed response.

While the client's transport reports a full buffer (``pause_writing``), answers the gateway
makes itself (ApiVersions, denials, admin APIs) would otherwise keep growing it and free
their queue slot at once; held here (written once it drains, as uvicorn's flow control does),
they still count against queued.max.requests. A large response streamed as it arrives owns
the socket until its last byte: nothing may interleave.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.session.response_queue import WireBytes


@dataclass(slots=True)
class ClientOutbox:
    full: bool = False  # the client's transport is above its high-water mark
    # Made when the client's socket first fills with answers to hold, dropped when they are written.
    pieces: list[WireBytes] | None = None
    answers: int = 0  # complete answers in ``pieces``: each still counts as a queued request
    streaming: int | None = None  # the API key of the response being streamed, if one is

    @property
    def busy(self) -> bool:
        """A response streamed now would overtake answers held, or interleave with another stream."""
        return self.answers > 0 or self.streaming is not None

    def hold(self, pieces: list[WireBytes], answers: int) -> None:
        if self.pieces is None:
            self.pieces = []
        self.pieces.extend(pieces)
        self.answers += answers

    def take(self) -> list[WireBytes]:
        """Everything held, in order; the outbox is empty afterwards."""
        pieces, self.pieces, self.answers = self.pieces, None, 0
        return pieces if pieces is not None else []
