"""A blocking raw Kafka client for wire-level tests: build frames with our codec, read replies."""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    request_header_version,
    response_header_version,
)
from protocol.registry import api


def request_frame(api_key: int, version: int, correlation_id: int, body: dict[str, Any],
                  client_id: str = "wire-test") -> bytes:
    schema = api(api_key)
    assert schema is not None
    header = RequestHeader(api_key, version, correlation_id, client_id,
                           request_header_version(schema, version), 0)
    payload = encode_request_header(header) + bytes(schema.request_codec(version).encode(body))
    return struct.pack(">i", len(payload)) + payload


class WireClient:
    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("closed by the gateway")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def read_response(self, api_key: int, version: int) -> tuple[int, dict[str, Any]]:
        schema = api(api_key)
        assert schema is not None
        payload = memoryview(self.read_frame())
        correlation_id, offset = decode_response_header(
            payload, response_header_version(api_key, schema.is_flexible(version)))
        return correlation_id, schema.response_codec(version).decode(payload[offset:])

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
