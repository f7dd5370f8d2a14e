"""Client side of PLAIN and SCRAM, sans-IO: how the gateway authenticates to the upstream.

``first()`` gives the initial token; ``respond(challenge)`` the next one (None once the
exchange is complete); a server that fails to prove itself raises AuthenticationFailed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field

from auth.errors import AuthenticationFailed

_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


def _saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


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


@dataclass(slots=True)
class ScramClient:
    mechanism: str
    username: str
    password: str = field(repr=False)
    nonce: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    extensions: dict[str, str] = field(default_factory=dict)
    _bare: str = field(default="", init=False)
    _server_signature: bytes | None = field(default=None, init=False, repr=False)
    _done: bool = field(default=False, init=False)

    def first(self) -> bytes:
        ext = "".join(f",{k}={v}" for k, v in self.extensions.items())
        self._bare = f"n={_saslname(self.username)},r={self.nonce}{ext}"
        return f"n,,{self._bare}".encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._done:
            if challenge:
                raise AuthenticationFailed("SCRAM server sent data after completion")
            return None
        if self._server_signature is None:
            return self._client_final(challenge.decode())
        return self._verify_server_final(challenge.decode())

    def _client_final(self, server_first: str) -> bytes:
        attrs = dict(part.split("=", 1) for part in server_first.split(",") if "=" in part)
        nonce, salt, iterations = attrs.get("r", ""), attrs.get("s", ""), int(attrs.get("i", "0"))
        if not nonce.startswith(self.nonce) or len(nonce) == len(self.nonce):
            raise AuthenticationFailed("SCRAM server nonce does not extend the client nonce")
        if iterations < 4096:
            raise AuthenticationFailed(f"SCRAM iteration count {iterations} is below 4096")
        name = _HASHES[self.mechanism]
        salted = hashlib.pbkdf2_hmac(name, self.password.encode(), base64.b64decode(salt), iterations)
        client_key = hmac.digest(salted, b"Client Key", name)
        stored_key = hashlib.new(name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, name)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", name)
        self._server_signature = hmac.digest(server_key, auth_message, name)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final: str) -> bytes | None:
        if server_final.startswith("e="):
            raise AuthenticationFailed(f"SCRAM server error: {server_final[2:]}")
        expected = b"v=" + base64.b64encode(self._server_signature or b"")
        if not hmac.compare_digest(server_final.encode(), expected):
            raise AuthenticationFailed("SCRAM server signature does not verify")
        self._done = True
        return None


SaslClient = PlainClient | ScramClient


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in _HASHES:
        return ScramClient(mechanism, username, password)
    raise ValueError(f"unsupported client mechanism {mechanism}")
