"""A blocking raw Kafka client for wire-level tests: build frames with our codec, read replies."""

from __future__ import annotations

import socket
import struct
from typing import Any

from protocol.messages import decode_response, request_frame

__all__ = ["WireClient", "request_frame"]


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
