"""PROXY protocol v1/v2 (HAProxy's specification), sans-IO: every field, truncation, bounds, LOCAL, IPv6, TLVs."""

from __future__ import annotations

import contextlib
import ipaddress
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from auth.client_address import ClientAddress
from gateway.edge.proxy_protocol import (
    V1_MAX_BYTES,
    V2_SIGNATURE,
    Command,
    ProxyHeader,
    ProxyHeaderReader,
    ProxyProtocolError,
)

KAFKA_BYTES = b"\x00\x00\x00\x15\x00\x12\x00\x03"  # an ApiVersions request's first bytes


def v2(command: int, family: int, body: bytes, version: int = 2, transport: int = 1) -> bytes:
    return V2_SIGNATURE + bytes([version << 4 | command, family << 4 | transport]) + struct.pack(">H", len(body)) + body


def inet(src: str, dst: str, sport: int, dport: int) -> bytes:
    return ipaddress.ip_address(src).packed + ipaddress.ip_address(dst).packed + struct.pack(">HH", sport, dport)


def tlv(kind: int, value: bytes) -> bytes:
    return bytes([kind]) + struct.pack(">H", len(value)) + value


def read(data: bytes) -> tuple[ProxyHeader | None, bytes]:
    reader = ProxyHeaderReader()
    header = reader.feed(data)
    return header, reader.rest


def test_v1_tcp4_gives_every_field_and_keeps_the_bytes_after_it() -> None:
    header, rest = read(b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 9092\r\n" + KAFKA_BYTES)
    assert header == ProxyHeader(1, Command.PROXY, ClientAddress("192.0.2.7", 56324), ("198.51.100.1", 9092))
    assert rest == KAFKA_BYTES


def test_v1_tcp6() -> None:
    header, _ = read(b"PROXY TCP6 2001:db8::7 2001:db8::1 65535 9092\r\n")
    assert header is not None and header.source == ClientAddress("2001:db8::7", 65535)
    assert header.destination == ("2001:db8::1", 9092)


@pytest.mark.parametrize("source", ["::ffff:10.1.2.3", "::FFFF:10.1.2.3", "::ffff:a01:203"])
def test_v1_tcp6_with_an_ipv4_mapped_source_is_that_ipv4_client(source: str) -> None:
    header, _ = read(f"PROXY TCP6 {source} ::ffff:10.0.0.1 40001 9092\r\n".encode())
    assert header is not None and header.source == ClientAddress("10.1.2.3", 40001)


def test_v2_inet6_with_an_ipv4_mapped_source_is_that_ipv4_client() -> None:
    # What HAProxy sends for an IPv4 client on a dual-stack (``bind :::9092 v4v6``) frontend.
    header, _ = read(v2(1, 2, inet("::ffff:10.1.2.3", "::ffff:10.0.0.1", 40002, 9092)))
    assert header is not None and header.source == ClientAddress("10.1.2.3", 40002)


def test_v1_unknown_keeps_the_peer_address() -> None:
    header, _ = read(b"PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n")
    assert header == ProxyHeader(1, Command.PROXY)


@pytest.mark.parametrize("line", [
    b"PROXY TCP4 192.0.2.7 198.51.100.1 56324\r\n",  # a field missing
    b"PROXY TCP4 192.0.2.7 198.51.100.1 056324 9092\r\n",  # a leading zero
    b"PROXY TCP4 192.0.2.7 198.51.100.1 65536 9092\r\n",  # out of range
    b"PROXY TCP4 2001:db8::7 198.51.100.1 1 9092\r\n",  # IPv6 in TCP4
    b"PROXY TCP4 192.0.2.999 198.51.100.1 1 9092\r\n",
    b"PROXY UDP4 192.0.2.7 198.51.100.1 1 9092\r\n",
    b"PROXY TCP4  192.0.2.7 198.51.100.1 1 9092\r\n",  # two spaces
    b"PROXY TCP4 192.0.2.7 198.51.100.1 1 9092\xff\r\n",
])
def test_malformed_v1_headers_are_refused(line: bytes) -> None:
    with pytest.raises(ProxyProtocolError):
        read(line)


def test_an_oversized_v1_line_is_refused_before_its_end_arrives() -> None:
    reader = ProxyHeaderReader()
    with pytest.raises(ProxyProtocolError):
        reader.feed(b"PROXY TCP4 " + b"1" * V1_MAX_BYTES)


def test_a_connection_without_a_header_is_refused_at_its_first_byte() -> None:
    with pytest.raises(ProxyProtocolError):
        read(KAFKA_BYTES)
    with pytest.raises(ProxyProtocolError):
        read(b"\x16\x03\x01")  # a TLS ClientHello


def test_v2_inet_with_unknown_tlvs() -> None:
    body = inet("203.0.113.9", "127.0.0.2", 40000, 9093) + tlv(0x01, b"h2") + tlv(0xE0, b"custom") + tlv(0x04, b"")
    header, rest = read(v2(1, 1, body) + KAFKA_BYTES)
    assert header == ProxyHeader(2, Command.PROXY, ClientAddress("203.0.113.9", 40000), ("127.0.0.2", 9093),
                                 {0x01: b"h2", 0xE0: b"custom", 0x04: b""})
    assert rest == KAFKA_BYTES


def test_v2_inet6() -> None:
    header, _ = read(v2(1, 2, inet("2001:db8::9", "::1", 1, 2)))
    assert header is not None and header.source == ClientAddress("2001:db8::9", 1) and header.destination == ("::1", 2)


def test_v2_local_is_a_health_check_without_address() -> None:
    header, _ = read(v2(0, 0, b""))
    assert header == ProxyHeader(2, Command.LOCAL)
    header, _ = read(v2(0, 1, inet("10.0.0.1", "10.0.0.2", 1, 2)))  # an address block is ignored
    assert header is not None and header.command is Command.LOCAL and header.source is None


def test_v2_unix_and_unspec_carry_no_ip_address() -> None:
    header, _ = read(v2(1, 3, bytes(216)))
    assert header is not None and header.source is None
    header, _ = read(v2(1, 0, b""))
    assert header is not None and header.source is None


@pytest.mark.parametrize("data", [
    v2(1, 1, inet("10.0.0.1", "10.0.0.2", 1, 2), version=1),  # version 1 in the binary form
    v2(2, 1, inet("10.0.0.1", "10.0.0.2", 1, 2)),  # command 2
    v2(1, 4, b""),  # family 4
    v2(1, 1, b"\x0a\x00\x00"),  # a short address block
    v2(1, 1, inet("10.0.0.1", "10.0.0.2", 1, 2) + b"\x01\x00"),  # a truncated TLV header
    v2(1, 1, inet("10.0.0.1", "10.0.0.2", 1, 2) + b"\x01\x00\x09abc"),  # a TLV longer than the header
])
def test_malformed_v2_headers_are_refused(data: bytes) -> None:
    with pytest.raises(ProxyProtocolError):
        read(data)


def test_an_oversized_v2_header_is_refused_from_its_length_alone() -> None:
    reader = ProxyHeaderReader(v2_max_bytes=256)
    with pytest.raises(ProxyProtocolError):
        reader.feed(V2_SIGNATURE + b"\x21\x11" + struct.pack(">H", 257))


def test_a_truncated_header_waits_for_more() -> None:
    data = v2(1, 1, inet("10.0.0.1", "10.0.0.2", 1, 2))
    reader = ProxyHeaderReader()
    assert reader.feed(data[:-1]) is None
    assert reader.feed(data[-1:]) is not None


@given(st.sampled_from([b"PROXY TCP4 192.0.2.7 198.51.100.1 56324 9092\r\n",
                        b"PROXY TCP6 2001:db8::7 2001:db8::1 1 2\r\n",
                        v2(1, 1, inet("203.0.113.9", "127.0.0.2", 40000, 9093) + tlv(0xE0, b"x" * 40)),
                        v2(0, 0, b"")]),
       st.lists(st.integers(min_value=1, max_value=20), max_size=40))
def test_any_chunking_gives_the_same_header_and_rest(header_bytes: bytes, cuts: list[int]) -> None:
    data = header_bytes + KAFKA_BYTES
    expected, expected_rest = read(data)
    reader, at, got = ProxyHeaderReader(), 0, None
    for size in [*cuts, len(data)]:
        chunk, at = data[at:at + size], at + size
        got = reader.feed(chunk)
        if got is not None:
            break
    assert got == expected and reader.rest + data[at:] == expected_rest


@given(st.binary(max_size=300))
def test_arbitrary_bytes_give_a_header_more_please_or_a_protocol_error(data: bytes) -> None:
    reader = ProxyHeaderReader(v2_max_bytes=128)
    with contextlib.suppress(ProxyProtocolError):
        reader.feed(data)
    assert len(reader._buffer) <= 16 + 128 + V1_MAX_BYTES
