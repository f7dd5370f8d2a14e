"""Padding a tag section to an exact length: every reachable size, readable by the codec, tags ascending."""

from __future__ import annotations

import pytest

from protocol.api_keys import ApiKey
from protocol.codec import UNKNOWN_TAGS
from protocol.errors import DecodeError
from protocol.primitives import Reader
from protocol.registry import api
from protocol.streaming.tag_padding import PAD_TAGS, pad_tag_section

NODE_ENDPOINTS = b"\x01\x00\x11\x02\x00\x00\x00\x02\x06hostA\x00\x00\x23\x84\x00\x00"  # tag 0: one endpoint


def _tags(section: bytes) -> list[int]:
    reader = Reader(section)
    tags = []
    for _ in range(reader.uvarint()):
        tags.append(reader.uvarint())
        reader.view(reader.uvarint())
    assert not reader.remaining()
    return tags


@pytest.mark.parametrize("section", [b"\x00", NODE_ENDPOINTS], ids=["empty", "node_endpoints"])
def test_every_size_from_two_bytes_more_is_reached_exactly(section: bytes) -> None:
    schema = api(ApiKey.FETCH)
    assert schema is not None
    codec = schema.response_codec(16)
    bare = b"\x00" * 10 + b"\x01"  # throttle, error, session and no topics: the section follows
    for size in range(len(section) + 2, len(section) + 17_000):
        padded = pad_tag_section(section, size)
        assert padded is not None and len(padded) == size, size
        tags = _tags(padded)
        assert tags == sorted(tags) and tags[-1] in PAD_TAGS
        body = codec.decode(bare + padded)  # the codec (as Kafka's readers) keeps it as an unknown tag
        [(tag, zeros)] = body[UNKNOWN_TAGS]
        assert tag == tags[-1] and zeros == bytes(len(zeros))


def test_the_same_size_is_kept_and_one_byte_more_or_any_less_cannot_be() -> None:
    assert pad_tag_section(NODE_ENDPOINTS, len(NODE_ENDPOINTS)) == NODE_ENDPOINTS
    assert pad_tag_section(NODE_ENDPOINTS, len(NODE_ENDPOINTS) + 1) is None
    assert pad_tag_section(NODE_ENDPOINTS, len(NODE_ENDPOINTS) - 1) is None


@pytest.mark.parametrize("section", [b"\x01\x7f\x00", b"\x01\x00\x05ab", b"\x01\x00"],
                         ids=["tag-at-the-padding", "short-field", "cut"])
def test_a_section_padding_cannot_follow_or_that_is_malformed_is_refused(section: bytes) -> None:
    with pytest.raises(DecodeError):
        pad_tag_section(section, 40)
