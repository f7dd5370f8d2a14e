"""The streamed response stage: a large response written to the client as it arrives.

Most stream untouched. One whose broker endpoints all sit in its top-level tag section (Fetch v16+'s
node_endpoints, KIP-951) streams too: a walker (protocol/streaming/trailer_walker.py) follows it, every byte
before that section goes on at once, and only the section is held back, rewritten at the frame's end to the
length already announced. Records are never held.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from gateway.config import ConfigError
from gateway.session.address_rewrite import NodeAddressBook, TrailerRewrite, rewrite_trailer
from gateway.session.response_queue import ResponseSlot
from gateway.session.response_stage import PipelineRefusal
from protocol.header import response_header_version
from protocol.registry import api
from protocol.streaming.trailer_walker import TrailerWalker, walk_plan

_SIZE = struct.Struct(">i")


@dataclass(slots=True)
class StreamedTrailer:
    """A streamed response whose trailer is held back: its API, version and walk."""

    api_key: int
    api_version: int
    walker: TrailerWalker
    failed: bool = False  # refused (the connection closes): none of the rest may be forwarded

    def forwardable(self, chunk: memoryview) -> memoryview:
        """What of the next chunk may go to the client now (DecodeError: the connection must close)."""
        return self.walker.feed(chunk)

    @property
    def complete(self) -> bool:
        """The whole response was fed: its trailer can be rewritten and sent with the last chunk."""
        return self.walker.complete

    def finish(self, book: NodeAddressBook) -> TrailerRewrite:
        """The trailer to send last, as long as the upstream's (DecodeError or PipelineRefusal: close)."""
        try:
            return rewrite_trailer(self.api_key, self.api_version, self.walker.trailer(), book)
        except ConfigError as exc:  # no listener serves a node it names: as in response_stage
            raise PipelineRefusal(str(exc)) from None


def start_trailer_walk(slot: ResponseSlot, head: bytearray) -> StreamedTrailer:
    """The walk of the response whose first bytes (size prefix included) are ``head``."""
    schema = api(slot.api_key)
    assert schema is not None  # a slot is only opened for a request the schemas parsed
    header_version = response_header_version(slot.api_key, schema.is_flexible(slot.api_version))
    plan = walk_plan(slot.api_key, slot.api_version, header_version)
    return StreamedTrailer(slot.api_key, slot.api_version, TrailerWalker(plan, _SIZE.unpack_from(head, 0)[0]))
