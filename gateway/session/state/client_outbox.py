"""Answers ready for a client whose socket is full, written once it drains (uvicorn's flow control).

While the client's transport reports a full buffer (``pause_writing``), answers the gateway
makes itself (ApiVersions, denials, admin APIs) would otherwise keep growing it and free
their queue slot at once; held here, they still count against queued.max.requests.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.session.response_queue import WireBytes


@dataclass(slots=True)
class ClientOutbox:
    full: bool = False  # the client's transport is above its high-water mark
    pieces: list[WireBytes] = field(default_factory=list)
    answers: int = 0  # complete answers in ``pieces``: each still counts as a queued request

    def hold(self, pieces: list[WireBytes], answers: int) -> None:
        self.pieces.extend(pieces)
        self.answers += answers

    def take(self) -> list[WireBytes]:
        """Everything held, in order; the outbox is empty afterwards."""
        pieces, self.pieces, self.answers = self.pieces, [], 0
        return pieces
