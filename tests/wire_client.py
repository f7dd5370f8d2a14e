"""A blocking raw Kafka client for wire-level tests: build frames with our codec, read replies.

``read_frame`` (one size-prefixed frame off a blocking socket) also serves bench/'s raw clients.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.api_keys import ApiKey
from protocol.messages import decode_response, request_frame

__all__ = ["WireClient", "assert_served", "read_frame", "recv_exactly", "request_frame"]

_SIZE = struct.Struct(">i")


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from a blocking socket; ConnectionError if the peer closes first."""
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        read = sock.recv_into(view[got:])
        if not read:
            raise ConnectionError("closed by the gateway")
        got += read
    return bytes(buffer)


def read_frame(sock: socket.socket) -> bytes:
    """One Kafka frame's payload (its 4-byte size prefix read and dropped)."""
    size = _SIZE.unpack(recv_exactly(sock, 4))[0]
    return recv_exactly(sock, size)


class WireClient:
    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        return read_frame(self.sock)

    def read_response(self, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
        return decode_response(self.read_frame(), api_key, version)

    def is_closed_by_peer(self, timeout_s: float = 5.0) -> bool:
        """True when the gateway closes the connection (EOF) without sending anything."""
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def assert_served(bootstrap: str) -> None:
    """A fresh, honest client at ``bootstrap`` gets its ApiVersions and a Metadata relayed upstream and back:
    what the availability tests check while another client misbehaves."""
    client = WireClient(bootstrap)
    try:
        client.send(request_frame(ApiKey.API_VERSIONS, 3, 1, {"client_software_name": "t",
                                                               "client_software_version": "1"}))
        assert client.read_response(ApiKey.API_VERSIONS, 3)[1]["error_code"] == 0
        client.send(request_frame(ApiKey.METADATA, 9, 2, {"topics": None, "allow_auto_topic_creation": False,
                                                          "include_cluster_authorized_operations": False,
                                                          "include_topic_authorized_operations": False}))
        assert client.read_response(ApiKey.METADATA, 9)[1]["brokers"]  # relayed upstream and back
    finally:
        client.close()
