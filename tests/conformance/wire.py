"""One authenticated raw Kafka connection for the conformance suite: TLS or not, SASL SCRAM or PLAIN.

Requests are built and responses read with ksgate's own codec (``protocol/``), the same on both
sides, so a difference in what comes back is a difference between the servers, not the clients.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from auth.sasl.scram import ScramClient
from protocol.api_keys import ApiKey
from protocol.messages import decode_response, request_frame
from tests.wire_client import recv_exactly

_SIZE = struct.Struct(">i")
CLIENT_ID = "conformance"


@dataclass(slots=True, frozen=True)
class Endpoint:
    """Where one side listens and how a client logs in there."""

    address: str  # host:port
    tls: ssl.SSLContext | None
    server_hostname: str = "localhost"
    mechanism: str = "SCRAM-SHA-512"  # or PLAIN


@dataclass(slots=True, frozen=True)
class Outcome:
    """What a request got: a decoded response, or the connection closed (or timed out) instead."""

    kind: str  # "response" | "closed" | "timeout"
    body: dict[str, Any] | None = None

    @classmethod
    def closed(cls) -> Outcome:
        return cls("closed")


@dataclass(slots=True, frozen=True)
class Pipelined:
    """One request of a pipelined write; ``answered``: whether the server owes an answer (acks=0 Produce: no)."""

    api_key: int
    version: int
    body: dict[str, Any]
    answered: bool = True


class LoginFailed(Exception):
    """The SASL login was refused (the error code and message the server sent)."""


@dataclass(slots=True)
class Connection:
    """A logged-in connection; reopened (and logged in again) after the server closes it."""

    endpoint: Endpoint
    user: str
    password: str
    timeout_s: float = 8.0
    _sock: socket.socket | None = None
    _correlation: int = 0
    versions: dict[int, tuple[int, int]] = field(default_factory=dict)

    def exchange(self, api_key: int, version: int, body: dict[str, Any], expect_response: bool = True) -> Outcome:
        """Send one request; its response, or how the connection ended instead."""
        sock = self._sock or self._open()
        self._correlation += 1
        try:
            sock.sendall(request_frame(api_key, version, self._correlation, body, CLIENT_ID))
            if not expect_response:
                return Outcome("response", {})
            _, decoded = decode_response(self._read_frame(sock), api_key, version)
        except TimeoutError:
            self.close()
            return Outcome("timeout")
        except (ConnectionError, ssl.SSLError, OSError):
            self.close()
            return Outcome.closed()
        return Outcome("response", decoded)

    def pipeline(self, requests: Sequence[Pipelined]) -> list[Outcome]:
        """Send ``requests`` in one write, as a client that pipelines them; the outcome of each answered one, in
        order: its response, or how the connection ended before it (closed, or silent past the timeout)."""
        sock = self._sock or self._open()
        expected: list[tuple[Pipelined, int]] = []
        frames = []
        for request in requests:
            self._correlation += 1
            frames.append(request_frame(request.api_key, request.version, self._correlation, request.body, CLIENT_ID))
            if request.answered:
                expected.append((request, self._correlation))
        ended: Outcome | None = None
        try:
            sock.sendall(b"".join(frames))
        except (ConnectionError, ssl.SSLError, OSError):
            ended = Outcome.closed()
        outcomes = []
        for request, correlation_id in expected:
            if ended is None:
                try:
                    answered, decoded = decode_response(self._read_frame(sock), request.api_key, request.version)
                    assert answered == correlation_id, f"answer {answered} where {correlation_id} was due"
                    outcomes.append(Outcome("response", decoded))
                    continue
                except TimeoutError:
                    ended = Outcome("timeout")
                except (ConnectionError, ssl.SSLError, OSError):
                    ended = Outcome.closed()
            outcomes.append(ended)
        if ended is not None:
            self.close()
        return outcomes

    @property
    def connected(self) -> bool:
        """Open and logged in (exchange() would otherwise open a new connection)."""
        return self._sock is not None

    def before_login(self, api_key: int, version: int, body: dict[str, Any]) -> Outcome:
        """Send one request as the first of a fresh connection, not logged in; its response (or how the
        connection ended), and the connection closed again."""
        sock = self._connect()
        try:
            sock.sendall(request_frame(api_key, version, 1, body, CLIENT_ID))
            return Outcome("response", decode_response(self._read_frame(sock), api_key, version)[1])
        except TimeoutError:
            return Outcome("timeout")
        except (ConnectionError, ssl.SSLError, OSError):
            return Outcome.closed()
        finally:
            sock.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _open(self) -> socket.socket:
        sock = self._sock = self._connect()
        self._api_versions(sock)
        self._login(sock)
        return sock

    def _connect(self) -> socket.socket:
        host, port = self.endpoint.address.rsplit(":", 1)
        raw = socket.create_connection((host, int(port)), timeout=self.timeout_s)
        if self.endpoint.tls is None:
            return raw
        return self.endpoint.tls.wrap_socket(raw, server_hostname=self.endpoint.server_hostname)

    def _call(self, sock: socket.socket, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self._correlation += 1
        sock.sendall(request_frame(api_key, version, self._correlation, body, CLIENT_ID))
        return decode_response(self._read_frame(sock), api_key, version)[1]

    def _api_versions(self, sock: socket.socket) -> None:
        answer = self._call(sock, ApiKey.API_VERSIONS, 3,
                            {"client_software_name": "ksgate-conformance", "client_software_version": "1"})
        self.versions = {item["api_key"]: (item["min_version"], item["max_version"]) for item in answer["api_keys"]}

    def _login(self, sock: socket.socket) -> None:
        mechanism = self.endpoint.mechanism
        handshake = self._call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
        if handshake["error_code"]:
            raise LoginFailed(f"{mechanism} not offered: {handshake['mechanisms']}")
        if mechanism == "PLAIN":
            self._authenticate(sock, f"\0{self.user}\0{self.password}".encode())
            return
        scram = ScramClient(mechanism, self.user, self.password)
        first = self._authenticate(sock, scram.first_message())
        final = self._authenticate(sock, scram.final_message(first))
        scram.verify_server_final(final)

    def _authenticate(self, sock: socket.socket, token: bytes) -> bytes:
        answer = self._call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
        if answer["error_code"]:
            raise LoginFailed(f"{self.user}: error {answer['error_code']} {answer['error_message']!r}")
        return bytes(answer["auth_bytes"])

    def _read_frame(self, sock: socket.socket) -> bytes:
        size = _SIZE.unpack(recv_exactly(sock, 4))[0]
        return recv_exactly(sock, size)

