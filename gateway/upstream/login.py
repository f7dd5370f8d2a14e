"""The gateway authenticates itself to the upstream as its service principal (SASL PLAIN/SCRAM)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from auth.errors import AuthenticationFailed
from auth.sasl.client import sasl_client
from gateway.config import UpstreamConfig
from protocol.api_keys import ApiKey
from protocol.framing import Frame
from protocol.kafka_errors import KafkaError
from protocol.messages import decode_response, request_frame

# The client id of the gateway's own requests (what upstream logs and quotas see).
CLIENT_ID = "ksgate"
# Answers a login holds unread at most: it waits for one at a time, so more is a broker that is not Kafka.
MAX_UNREAD_ANSWERS = 4
Requester = Callable[[ApiKey, int, dict[str, Any]], Awaitable[dict[str, Any]]]


class UpstreamAuthError(ConnectionError):
    """The upstream refused the gateway's own credentials (a configuration problem)."""


async def sasl_exchange(request: Requester, config: UpstreamConfig, authenticate_version: int = 2) -> int:
    """Log in as the gateway's service principal; the session lifetime the broker granted (KIP-368:
    ``session_lifetime_ms`` of the final SaslAuthenticate answer, v1+; 0 when there is no limit)."""
    assert config.sasl_username is not None and config.sasl_password is not None
    client = sasl_client(config.sasl_mechanism, config.sasl_username, config.sasl_password)
    handshake = await request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": config.sasl_mechanism})
    if handshake["error_code"]:
        raise UpstreamAuthError(_handshake_refused(config.sasl_mechanism, handshake))
    token: bytes | None = client.first()
    lifetime_ms = 0
    try:
        while token is not None:
            reply = await request(ApiKey.SASL_AUTHENTICATE, authenticate_version, {"auth_bytes": token})
            if reply["error_code"]:
                raise UpstreamAuthError(f"upstream refused the gateway's credentials: {reply['error_message']}")
            lifetime_ms = reply.get("session_lifetime_ms", 0)
            token = client.respond(bytes(reply["auth_bytes"]))
    except AuthenticationFailed as exc:
        raise UpstreamAuthError(f"upstream failed to authenticate itself: {exc}") from None
    return max(0, lifetime_ms)


def _handshake_refused(mechanism: str, handshake: dict[str, Any]) -> str:
    """The broker's own error, and what it offers: "does not accept" only when it really does not."""
    code = handshake["error_code"]
    try:
        error = f"{KafkaError(code).name} ({code})"
    except ValueError:
        error = f"error code {code}"
    offered = list(handshake.get("mechanisms") or [])
    if mechanism not in offered:
        return (f"upstream does not accept SASL mechanism {mechanism}: {error}; it offers {offered or 'none'} "
                f"(upstream.sasl.mechanism)")
    return f"upstream refused the SASL handshake for {mechanism}: {error}"


class LinkRequester:
    """Request/response over an UpstreamLink that is still in its authentication phase."""

    def __init__(self, write: Callable[[bytes], None], timeout_s: float) -> None:
        self._write = write
        self._timeout = timeout_s
        self._inbox: asyncio.Queue[Frame | None] = asyncio.Queue()  # None: the link is gone
        self._flooded = False
        # Negative: never collides with relayed requests' ids (gateway/session/response_queue.py), so an
        # UpstreamLink re-authenticating (KIP-368) tells the gateway's own answers apart by the id alone.
        self._next_id = -1000

    def deliver(self, frame: Frame | None) -> None:
        """An answer; None once the link is lost (after the answers that came before it)."""
        if frame is not None and self._inbox.qsize() >= MAX_UNREAD_ANSWERS:
            self._flooded = True  # dropped, not queued: the exchange fails at its next answer
            return
        self._inbox.put_nowait(frame)

    async def __call__(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self._next_id -= 1
        self._write(request_frame(api_key, version, self._next_id, body, CLIENT_ID))
        frame = await asyncio.wait_for(self._inbox.get(), self._timeout)
        if frame is None:
            raise ConnectionError("upstream closed the connection")
        if self._flooded:
            raise UpstreamAuthError("upstream sent answers nobody asked for during authentication")
        correlation_id, response = decode_response(frame.payload, api_key, version)
        if correlation_id != self._next_id:
            raise UpstreamAuthError(f"upstream answered correlation id {correlation_id} during authentication")
        return response
