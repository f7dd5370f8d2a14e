"""Client side of PLAIN and SCRAM, sans-IO: how the gateway authenticates to the upstream.

``first()`` gives the initial token; ``respond(challenge)`` the next one (None once the
exchange is complete); a server that fails to prove itself raises AuthenticationFailed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from auth.errors import AuthenticationFailed
from auth.sasl.scram import MIN_ITERATIONS, ScramClient


@dataclass(slots=True)
class PlainClient:
    username: str
    password: str = field(repr=False)

    def first(self) -> bytes:
        return b"\x00" + self.username.encode() + b"\x00" + self.password.encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if challenge:
            raise AuthenticationFailed("PLAIN server sent an unexpected challenge")
        return None


class ScramClientSession:
    """first()/respond() over auth.sasl.scram.ScramClient, refusing weak server parameters."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._client = ScramClient(mechanism, username, password)
        self._step = 0

    def __repr__(self) -> str:
        return "ScramClientSession(...)"

    def first(self) -> bytes:
        return self._client.first_message()

    def respond(self, challenge: bytes) -> bytes | None:
        self._step += 1
        try:
            if self._step == 1:
                iterations = _iterations(challenge)
                if iterations < MIN_ITERATIONS:
                    raise AuthenticationFailed(f"SCRAM iteration count {iterations} is below {MIN_ITERATIONS}")
                return self._client.final_message(challenge)
            if self._step == 2:
                if challenge.startswith(b"e="):
                    raise AuthenticationFailed(f"SCRAM server error: {challenge[2:].decode(errors='replace')}")
                self._client.verify_server_final(challenge)
                return None
        except (ValueError, KeyError) as exc:
            raise AuthenticationFailed(f"SCRAM server misbehaved: {exc}") from None
        if challenge:
            raise AuthenticationFailed("SCRAM server sent data after completion")
        return None


def _iterations(server_first: bytes) -> int:
    for part in server_first.split(b","):
        if part.startswith(b"i="):
            return int(part[2:])
    raise AuthenticationFailed("SCRAM server-first has no iteration count")


SaslClient = PlainClient | ScramClientSession


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramClientSession(mechanism, username, password)
    raise ValueError(f"unsupported client mechanism {mechanism}")
