"""The gateway's own long-lived upstream connections (UpstreamClient: the security store's tail and writer) log in
again on the same connection (KIP-368) before their first request past 85-95 % of the lifetime the broker granted,
against a loopback stand-in broker and a test clock: none before the point, none when no lifetime was granted, and a
refused login fails that request with its reason, the request itself never sent."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.config import UpstreamConfig
from gateway.upstream.client import UpstreamClient, UpstreamError
from protocol.api_keys import ApiKey
from protocol.header import decode_request_header
from protocol.messages import response_frame

PASSWORD = "store-secret-pw"
CONFIG = UpstreamConfig(bootstrap_servers=(("127.0.0.1", 1),), security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism="PLAIN", sasl_username="ksgate", sasl_password=PASSWORD,
                        connect_timeout_ms=2000)
LIFETIME_MS = 10_000
REFUSAL = "Authentication failed: Invalid username or password"
ANY_REQUEST = (ApiKey.API_VERSIONS, 3, {"client_software_name": "ksgate", "client_software_version": "0"})


@dataclass(slots=True)
class StandInBroker:
    """Answers SaslHandshake, SaslAuthenticate (granting ``lifetime_ms``) and ApiVersions, and records each
    request's API; a login after ``refuse_after`` successful ones is refused, as Kafka does (then it closes);
    with ``vanish_at_login``, a SaslHandshake after the first login closes the connection unanswered."""

    lifetime_ms: int
    refuse_after: int | None = None
    vanish_at_login: bool = False
    received: list[ApiKey] = field(default_factory=list)
    logins: int = 0

    def answer(self, api_key: ApiKey) -> tuple[int, dict[str, Any]] | None:
        """The version and body of the answer to ``api_key``; None: close the connection instead."""
        if api_key == ApiKey.SASL_HANDSHAKE:
            if self.vanish_at_login and self.logins:
                return None
            return 1, {"error_code": 0, "mechanisms": ["PLAIN"]}
        if api_key == ApiKey.SASL_AUTHENTICATE:
            if self.refuse_after is not None and self.logins >= self.refuse_after:
                return 2, {"error_code": 58, "error_message": REFUSAL, "auth_bytes": b"", "session_lifetime_ms": 0}
            self.logins += 1
            return 2, {"error_code": 0, "error_message": None, "auth_bytes": b"",
                       "session_lifetime_ms": self.lifetime_ms}
        assert api_key == ApiKey.API_VERSIONS, api_key
        return 3, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0}

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                header, _ = decode_request_header(memoryview(await reader.readexactly(size)))
                api_key = ApiKey(header.api_key)
                self.received.append(api_key)
                answer = self.answer(api_key)
                if answer is None:
                    break
                version, body = answer
                writer.write(response_frame(api_key, version, header.correlation_id, body))
                await writer.drain()
                if body["error_code"]:
                    break
        writer.close()


@dataclass(slots=True)
class ManualClock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def logged_in(broker: StandInBroker, clock: Callable[[], float],
                    errors: list[str] | None = None) -> AsyncIterator[UpstreamClient]:
    """A client connected to ``broker`` on loopback and logged in once."""
    server = await asyncio.start_server(broker.serve, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = UpstreamClient(reader, writer, 2.0, (errors if errors is not None else []).append, clock=clock)
        try:
            await client.authenticate(CONFIG)
            yield client
        finally:
            await client.close()


LOGIN = [ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE]


async def test_the_first_request_past_the_point_logs_in_again_first_and_the_next_lifetime_counts_from_there() -> None:
    broker, clock = StandInBroker(LIFETIME_MS), ManualClock()
    async with logged_in(broker, clock) as client:
        clock.now += 0.849 * LIFETIME_MS / 1000  # before the earliest point (85 %)
        await client.request(*ANY_REQUEST)
        assert broker.received == [*LOGIN, ApiKey.API_VERSIONS], "no login before 85 % of the lifetime"

        clock.now += 0.102 * LIFETIME_MS / 1000  # past the latest point (95 %)
        await client.request(*ANY_REQUEST)
        assert broker.received[3:] == [*LOGIN, ApiKey.API_VERSIONS], "the login again, then the request"
        assert broker.logins == 2

        clock.now += 0.849 * LIFETIME_MS / 1000  # the new lifetime starts at the second login
        await client.request(*ANY_REQUEST)
        assert broker.received[6:] == [ApiKey.API_VERSIONS]
        clock.now += 0.102 * LIFETIME_MS / 1000
        await client.request(*ANY_REQUEST)
        assert broker.received[7:] == [*LOGIN, ApiKey.API_VERSIONS], "and again after each new lifetime"


async def test_no_lifetime_means_no_login_again_however_long_the_connection_lives() -> None:
    broker, clock = StandInBroker(0), ManualClock()
    async with logged_in(broker, clock) as client:
        clock.now += 365 * 24 * 3600.0
        await client.request(*ANY_REQUEST)
    assert broker.received == [*LOGIN, ApiKey.API_VERSIONS]


async def test_a_refused_login_again_fails_the_request_with_its_reason_and_never_sends_it() -> None:
    broker, clock, errors = StandInBroker(LIFETIME_MS, refuse_after=1), ManualClock(), list[str]()
    async with logged_in(broker, clock, errors) as client:
        clock.now += LIFETIME_MS / 1000
        with pytest.raises(UpstreamError) as failed:
            await client.request(*ANY_REQUEST)
        text = str(failed.value)
        assert text.startswith("upstream re-authentication failed: ") and REFUSAL in text, text
        assert PASSWORD not in text
        assert failed.value.cause == "authentication" and not failed.value.retriable
        assert errors == ["authentication"], "counted once, as a refused first login is"
        assert broker.received == [*LOGIN, *LOGIN], "the request did not go out unauthenticated"
        with pytest.raises(UpstreamError):  # nothing more on that connection: its caller reconnects
            await client.request(*ANY_REQUEST)
    assert broker.received == [*LOGIN, *LOGIN]


async def test_a_connection_lost_during_the_login_again_fails_the_request_naming_the_step() -> None:
    broker, clock = StandInBroker(LIFETIME_MS, vanish_at_login=True), ManualClock()
    async with logged_in(broker, clock) as client:
        clock.now += LIFETIME_MS / 1000
        with pytest.raises(UpstreamError) as failed:
            await client.request(*ANY_REQUEST)
    assert str(failed.value).startswith("upstream re-authentication failed: upstream closed the connection")
    assert failed.value.retriable, "a lost connection: reconnecting may help"
    assert broker.received == [*LOGIN, ApiKey.SASL_HANDSHAKE]
