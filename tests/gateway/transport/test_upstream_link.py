"""UpstreamLink without sockets: the upstream's answers reach the session as wire views, in order, one call
per read, and a response that has started arriving is offered for streaming once its head is in."""

from __future__ import annotations

import struct
from typing import Any

from gateway.transport.upstream_link import UpstreamLink
from protocol.framing import frame


class Owner:
    """The session as the link sees it: records what it is handed and asked."""

    def __init__(self) -> None:
        self.reads: list[list[bytes]] = []
        self.asked: list[tuple[int, int]] = []

    def upstream_frames(self, frames: list[memoryview]) -> list[Any]:
        self.reads.append([bytes(f) for f in frames])
        return []

    def may_stream(self, upstream_id: int, size: int) -> bool:
        self.asked.append((upstream_id, size))
        return False


def _answer(upstream_id: int, body: bytes) -> bytes:
    return frame(struct.pack(">i", upstream_id) + body)


def test_a_read_of_several_answers_reaches_the_session_in_one_call_as_wire_bytes_in_order() -> None:
    owner = Owner()
    link = UpstreamLink(owner, lambda actions: None, 1 << 20)
    answers = [_answer(i, bytes([i]) * i) for i in (3, 1, 2)]
    link.data_received(b"".join(answers))
    assert owner.reads == [answers]  # size prefix included: the session relays them as they are


def test_a_partial_answer_is_offered_for_streaming_only_once_its_size_and_id_are_in() -> None:
    owner = Owner()
    link = UpstreamLink(owner, lambda actions: None, 1 << 20)
    done, big = _answer(5, b"x" * 10), _answer(6, b"y" * 100)
    link.data_received(done + big[:7])  # the next answer's size and three bytes of its id
    assert owner.reads == [[done]] and owner.asked == []
    link.data_received(big[7:8])  # its id complete: asked, with its size
    assert owner.asked == [(6, len(big) - 4)]
    link.data_received(big[8:])
    assert owner.reads == [[done], [big]]
