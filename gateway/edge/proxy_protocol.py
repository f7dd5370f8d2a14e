"""HAProxy's PROXY protocol, v1 (text) and v2 (binary), parsed sans-IO and bounded.

A load balancer that speaks it prefixes each connection with the client's real address;
``ProxyHeaderReader`` takes the first bytes of a connection and yields that header (and
the bytes after it) or an error, never holding more than the protocol's bounds.
"""

from __future__ import annotations

import enum
import ipaddress
import struct
from dataclasses import dataclass, field

from auth.client_address import ClientAddress

V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
V1_PREFIX = b"PROXY "
V1_MAX_BYTES = 107  # the specification's bound for the longest (TCP6) v1 line, CRLF included
V2_FIXED_BYTES = 16  # signature (12), version/command, family/transport, length (2)
DEFAULT_V2_MAX_BYTES = 4096  # addresses and TLVs; HAProxy's own headers stay far below this
_V2_HEADER = struct.Struct(">12sBBH")
_ADDRESS_BYTES = {0x1: 12, 0x2: 36, 0x3: 216}  # INET, INET6, UNIX: two addresses and (for IP) two ports


class ProxyProtocolError(ValueError):
    """The connection did not start with a well-formed PROXY header: close it."""


class Command(enum.Enum):
    LOCAL = 0  # the balancer's own connection (health check): no client address
    PROXY = 1


@dataclass(slots=True, frozen=True)
class ProxyHeader:
    """What the balancer says about the connection it relays."""

    version: int
    command: Command
    source: ClientAddress | None = None  # the client's (canonical) address; None for LOCAL, UNKNOWN or UNIX
    destination: tuple[str, int] | None = None  # the address the client connected to (the balancer's)
    tlvs: dict[int, bytes] = field(default_factory=dict)  # v2 type-length-values, unknown ones included


@dataclass(slots=True)
class ProxyHeaderReader:
    """Feed the first bytes of a connection until it returns a header; ``rest`` then holds what followed it."""

    v2_max_bytes: int = DEFAULT_V2_MAX_BYTES
    rest: bytes = b""
    _buffer: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> ProxyHeader | None:
        """The header once complete, None while more bytes are needed; ProxyProtocolError when malformed."""
        self._buffer += data
        buffer = self._buffer
        if buffer[:len(V2_SIGNATURE)] == V2_SIGNATURE[:len(buffer)] and buffer[:1] == b"\r":
            return self._v2()
        if buffer[:len(V1_PREFIX)] == V1_PREFIX[:len(buffer)]:
            return self._v1()
        raise ProxyProtocolError("the connection does not start with a PROXY protocol header")

    def _done(self, header: ProxyHeader, used: int) -> ProxyHeader:
        self.rest = bytes(self._buffer[used:])
        self._buffer.clear()
        return header

    def _v1(self) -> ProxyHeader | None:
        end = self._buffer.find(b"\r\n")
        if end < 0:
            if len(self._buffer) >= V1_MAX_BYTES:
                raise ProxyProtocolError(f"PROXY v1 header longer than {V1_MAX_BYTES} bytes")
            return None
        if end + 2 > V1_MAX_BYTES:
            raise ProxyProtocolError(f"PROXY v1 header longer than {V1_MAX_BYTES} bytes")
        return self._done(parse_v1(bytes(self._buffer[:end])), end + 2)

    def _v2(self) -> ProxyHeader | None:
        if len(self._buffer) < V2_FIXED_BYTES:
            return None
        _, version_command, family_transport, length = _V2_HEADER.unpack_from(self._buffer)
        if length > self.v2_max_bytes:
            raise ProxyProtocolError(f"PROXY v2 header of {length} bytes (the bound is {self.v2_max_bytes})")
        if len(self._buffer) < V2_FIXED_BYTES + length:
            return None
        body = bytes(self._buffer[V2_FIXED_BYTES:V2_FIXED_BYTES + length])
        return self._done(parse_v2(version_command, family_transport, body), V2_FIXED_BYTES + length)


def parse_v1(line: bytes) -> ProxyHeader:
    """``PROXY TCP4|TCP6 src dst sport dport`` or ``PROXY UNKNOWN …`` (without its CRLF)."""
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        raise ProxyProtocolError("PROXY v1 header is not ASCII") from None
    parts = text.split(" ")
    if len(parts) < 2 or parts[0] != "PROXY":
        raise ProxyProtocolError("malformed PROXY v1 header")
    if parts[1] == "UNKNOWN":  # the balancer cannot tell: the peer address stands (the specification)
        return ProxyHeader(1, Command.PROXY)
    if parts[1] not in ("TCP4", "TCP6") or len(parts) != 6:
        raise ProxyProtocolError(f"malformed PROXY v1 header (protocol {parts[1][:8]!r}, {len(parts)} fields)")
    version = 4 if parts[1] == "TCP4" else 6
    source = ClientAddress.of(_v1_address(parts[2], version), _v1_port(parts[4]))
    destination = (_v1_address(parts[3], version), _v1_port(parts[5]))
    return ProxyHeader(1, Command.PROXY, source, destination)


def _v1_address(text: str, version: int) -> str:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ProxyProtocolError("malformed address in PROXY v1 header") from None
    if address.version != version:
        raise ProxyProtocolError(f"an IPv{address.version} address in a TCP{version} PROXY v1 header")
    return str(address)


def _v1_port(text: str) -> int:
    # The specification: decimal, no leading zero, 0-65535.
    if not text.isdigit() or (len(text) > 1 and text[0] == "0") or int(text) > 65535:
        raise ProxyProtocolError("malformed port in PROXY v1 header")
    return int(text)


def parse_v2(version_command: int, family_transport: int, body: bytes) -> ProxyHeader:
    """The part after the signature: version/command and family/transport bytes, then addresses and TLVs."""
    if version_command >> 4 != 2:
        raise ProxyProtocolError(f"PROXY v2 header with version {version_command >> 4}")
    command = version_command & 0xF
    if command not in (0, 1):
        raise ProxyProtocolError(f"PROXY v2 header with command {command}")
    family, transport = family_transport >> 4, family_transport & 0xF
    if family > 3 or transport > 2:
        raise ProxyProtocolError(f"PROXY v2 header with family {family}, transport {transport}")
    if command == 0:  # LOCAL: the balancer speaking for itself; whatever address block there is, is ignored
        return ProxyHeader(2, Command.LOCAL, tlvs=_tlvs(body[_ADDRESS_BYTES.get(family, 0):]))
    size = _ADDRESS_BYTES.get(family, 0)
    if len(body) < size:
        raise ProxyProtocolError(f"PROXY v2 address block of {len(body)} bytes, {size} needed")
    source = destination = None
    if family in (1, 2):
        length = 4 if family == 1 else 16
        src, dst = body[:length], body[length:2 * length]
        sport, dport = struct.unpack_from(">HH", body, 2 * length)
        # AF_INET6 with an IPv4-mapped address is what HAProxy sends for an IPv4 client on a
        # dual-stack bind: ClientAddress spells it as the IPv4 address it is.
        source = ClientAddress.of(str(ipaddress.ip_address(src)), sport)
        destination = (str(ipaddress.ip_address(dst)), dport)
    return ProxyHeader(2, Command.PROXY, source, destination, _tlvs(body[size:]))


def _tlvs(data: bytes) -> dict[int, bytes]:
    tlvs: dict[int, bytes] = {}
    at = 0
    while at < len(data):
        if at + 3 > len(data):
            raise ProxyProtocolError("truncated TLV in PROXY v2 header")
        kind, length = data[at], struct.unpack_from(">H", data, at + 1)[0]
        if at + 3 + length > len(data):
            raise ProxyProtocolError("truncated TLV in PROXY v2 header")
        tlvs[kind] = data[at + 3:at + 3 + length]
        at += 3 + length
    return tlvs
