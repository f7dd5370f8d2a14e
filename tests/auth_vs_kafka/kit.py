"""The same raw requests of the authentication phase to Apache Kafka 4.4 (its SASL_SSL listener) and to ksgate
(SASL_PLAINTEXT, the same mechanisms and users) in front of it, and what a client sees of each answer.

Each answer is reduced to the fields a client acts on: error codes, Kafka's error messages, the mechanisms list,
session_lifetime_ms, the shape of auth_bytes (a SCRAM server message's attribute names, not its random nonce or
salt), the advertised version ranges of the APIs of this phase; and, at the end, whether the connection was
closed or left open, proven by the answer to one more request (``Probe.ending``), not by silence.  Requests are
built with ksgate's codec, identical on both sides.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.api_keys import ApiKey
from protocol.messages import decode_response, request_frame
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.broker import CLIENT_USER
from tests.harness import secured_gateway
from tests.wire_client import recv_exactly

USER = CLIENT_USER
MECHANISMS = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"  # Kafka's SASL_SSL listener enables them in this order
AUTH_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.API_VERSIONS, ApiKey.SASL_AUTHENTICATE)
CLOSED, TIMEOUT, OPEN = "closed", "timeout", "open"
# How long a client waits for an answer: a bound on a hang, not a measure; no case waits it out unless it fails.
ANSWER_TIMEOUT_S = 8.0
# The request that tells "left open" from "closed" at the end of each case.  Kafka answers a SaslHandshake in every
# state a connection can be left open in: before the exchange (HANDSHAKE_OR_VERSIONS_REQUEST, HANDSHAKE_REQUEST: its
# answer), during it (AUTHENTICATE: an error answer, then the close), after a login (the broker's answer, or the start
# of a re-authentication).  ApiVersions would not do: after a first ApiVersions Kafka closes on a second one
# unanswered.  A server that has closed, or muted the connection for its failed-authentication delay before closing
# it, reads nothing and closes.
FOLLOW_UP = (ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
_SIZE = struct.Struct(">i")


@dataclass(slots=True, frozen=True)
class Side:
    """Where a client reaches one side, and alice's password there."""

    name: str
    address: str
    tls: ssl.SSLContext | None
    password: str


@dataclass(slots=True)
class Sides:
    reference: Side
    ksgate: Side

    def both(self) -> tuple[Side, Side]:
        return self.reference, self.ksgate


def started(kafka: KafkaBroker, directory: Path, settings: Mapping[str, Any] | None = None) -> Iterator[Sides]:
    """The two sides (a generator for a fixture: the gateway stops after); ``settings``: more for the gateway."""
    directory.mkdir(parents=True, exist_ok=True)
    gateway = secured_gateway(kafka.bootstrap("PLAINTEXT"), directory, ("admin", USER), mechanisms=MECHANISMS,
                              extra={"ksgate.sasl.plain.allow.insecure": True, **(settings or {})})
    try:
        tls = ssl.create_default_context(cafile=str(kafka.ca))
        yield Sides(Side("kafka", kafka.bootstrap("SASL_SSL"), tls, kafka.users[USER]),
                    Side("ksgate", gateway.bootstrap, None, f"{USER}-secret"))
    finally:
        gateway.stop()


@dataclass(slots=True)
class Probe:
    """One raw, not-logged-in connection to a side; each call returns the reduced answer or how the connection
    ended instead.  ``seen`` keeps every reduced answer, in order, for the comparison."""

    side: Side
    sock: socket.socket
    seen: list[Any] = field(default_factory=list)
    raw_answers: list[dict[str, Any]] = field(default_factory=list)
    _correlation: int = 0
    _ended: str | None = None

    @classmethod
    def open(cls, side: Side) -> Probe:
        host, port = side.address.rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S)
        if side.tls is not None:
            sock = side.tls.wrap_socket(sock, server_hostname="localhost")
        return cls(side, sock)

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any] | None:
        """Send one request; its decoded answer (also kept, reduced, in ``seen``), None if the connection ended."""
        self._correlation += 1
        return self.send_frame(request_frame(api_key, version, self._correlation, body, "authcmp"), api_key,
                               version)

    def send_frame(self, frame: bytes, api_key: int, answer_version: int) -> dict[str, Any] | None:
        """Send a hand-built frame; its answer decoded as ``api_key`` at ``answer_version``."""
        answer = self._exchange(frame)
        if answer is None:
            return None
        _, body = decode_response(answer, api_key, answer_version)
        self.raw_answers.append(body)
        self.seen.append(reduced(api_key, body))
        return body

    def send_token(self, token: bytes) -> bytes | None:
        """A bare token (after SaslHandshake v0); the server's bare answer, None if the connection ended."""
        answer = self._exchange(_SIZE.pack(len(token)) + token)
        if answer is not None:
            self.seen.append({"token": auth_bytes_shape(answer)})
        return answer

    def _exchange(self, data: bytes) -> bytes | None:
        """Send ``data`` and read one frame; None (and how it ended, in ``seen``) if the connection ended."""
        if self._ended is None:
            try:
                self.sock.sendall(data)
                return self._read_frame()
            except TimeoutError:
                self._ended = TIMEOUT
            except (ConnectionError, ssl.SSLError, OSError):
                self._ended = CLOSED
        self.seen.append(self._ended)
        return None

    def ending(self) -> list[Any]:
        """Everything seen, then whether the server had left the connection open: it answers the follow-up request
        (its reduced answer is compared too), or the connection ends unanswered (closed, or timeout for a hang)."""
        if self._ended is None and self.call(*FOLLOW_UP) is not None:
            self._ended = OPEN
        self.sock.close()
        return [*self.seen, self._ended]

    def _read_frame(self) -> bytes:
        size = _SIZE.unpack(recv_exactly(self.sock, 4))[0]
        return recv_exactly(self.sock, size)


Case = Callable[[Probe, str], None]  # one exchange, run against either side with its password


def seen(side: Side, run: Case) -> list[Any]:
    """What ``run`` saw on ``side``, and how the connection ended (Probe.ending)."""
    probe = Probe.open(side)
    try:
        run(probe, side.password)
    finally:
        ended = probe.ending()
    return ended


def reduced(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
    """What a client acts on in an answer of this phase (see the module docstring)."""
    if api_key == ApiKey.API_VERSIONS:
        ranges = {item["api_key"]: (item["min_version"], item["max_version"]) for item in body["api_keys"]}
        return {"error_code": body["error_code"], "versions": {key: ranges.get(key) for key in AUTH_APIS},
                "advertises_all": len(ranges) > len(AUTH_APIS)}
    if api_key not in AUTH_APIS:  # answered at all, and its error code: its content is the broker's, not ours
        return {"answered": ApiKey(api_key).name, "error_code": body.get("error_code")}
    kept = {k: v for k, v in body.items() if k not in ("auth_bytes", "_tagged_fields")}
    if "mechanisms" in body:  # Kafka lists them in its HashMap's order, not the configured one: a set to clients
        kept["mechanisms"] = sorted(body["mechanisms"])
    if "auth_bytes" in body:
        kept["auth_bytes"] = auth_bytes_shape(bytes(body["auth_bytes"]))
    return kept


def auth_bytes_shape(data: bytes) -> Any:
    """A SCRAM server message as its attribute names (e.g. ['r', 's', 'i'], ['v'], ['e=…'] with the error);
    empty as ''; anything else as its length."""
    if not data:
        return ""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return len(data)
    parts = text.split(",")
    if all(len(p) > 1 and p[1] == "=" for p in parts):
        return [p if p.startswith("e=") else p[0] for p in parts]
    return len(data)


def api_versions_frame(version: int, correlation_id: int = 1, body: bytes = b"\x00") -> bytes:
    """An ApiVersions request at any version, even one no codec knows (v99): a flexible header (v2) with no
    tagged fields, then ``body`` (an empty flexible body: no tagged fields)."""
    client_id = b"authcmp"
    payload = (struct.pack(">hhih", ApiKey.API_VERSIONS, version, correlation_id, len(client_id)) + client_id
               + b"\x00" + body)
    return _SIZE.pack(len(payload)) + payload
