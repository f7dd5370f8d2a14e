"""What the gateway says when it cannot talk to its upstream: the step that failed and what to check, never an
empty reason (a TimeoutError has no message of its own), against loopback stand-ins for misconfigured brokers."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from gateway.config import UpstreamConfig
from gateway.upstream.client import UpstreamClient, UpstreamError, first_answering_bootstrap
from gateway.upstream.login import UpstreamAuthError, sasl_exchange
from protocol.api_keys import ApiKey
from tests.tls_material import client_context, issue_cert, make_ca


@asynccontextmanager
async def listener(ssl_context: ssl.SSLContext | None) -> AsyncIterator[int]:
    """A loopback port that accepts connections and reads without ever answering (TLS if ``ssl_context``)."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(OSError, ssl.SSLError):
            await reader.read()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ssl_context)
    async with server:
        yield server.sockets[0].getsockname()[1]


def server_context(directory: Path, ca_name: str) -> ssl.SSLContext:
    """A broker's TLS context, its certificate (for 127.0.0.1 and localhost) signed by a CA of its own."""
    ca = make_ca(f"CN={ca_name}")
    issue_cert(ca, "CN=localhost", dns_names=("localhost",), ip_addresses=("127.0.0.1",)).write_pem(
        directory / f"{ca_name}.pem", directory / f"{ca_name}.key")
    ca.write(directory / f"{ca_name}-ca.pem")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / f"{ca_name}.pem", directory / f"{ca_name}.key")
    return context


async def connect_error(port: int, context: ssl.SSLContext | None, timeout_s: float = 2.0) -> UpstreamError:
    kinds: list[str] = []
    with pytest.raises(UpstreamError) as failed:
        client = await UpstreamClient.connect("127.0.0.1", port, context, timeout_s, kinds.append)
        try:
            await client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        finally:
            await client.close()
    assert kinds, "the failure was not counted"
    return failed.value


async def test_a_broker_certificate_from_another_ca_is_named_as_untrusted(tmp_path: Path) -> None:
    broker = server_context(tmp_path, "broker-ca")
    server_context(tmp_path, "our-ca")  # the CA the gateway was told to trust
    async with listener(broker) as port:
        error = await connect_error(port, client_context(tmp_path / "our-ca-ca.pem"))
    assert f"upstream 127.0.0.1:{port}" in str(error)
    assert "not trusted" in str(error) and "upstream.ssl.truststore.location" in str(error)
    assert not error.retriable, "a certificate does not change by retrying"


async def test_tls_to_a_listener_that_does_not_speak_tls_says_so_instead_of_an_empty_reason(tmp_path: Path) -> None:
    server_context(tmp_path, "ca")
    async with listener(None) as port:  # a PLAINTEXT broker waits for a Kafka request: the handshake never ends
        error = await connect_error(port, client_context(tmp_path / "ca-ca.pem"), timeout_s=0.5)
    text = str(error)
    assert not text.endswith(": "), "an empty reason"
    assert "TLS handshake did not complete" in text and "upstream.security.protocol" in text
    assert not error.retriable, "the same answer on every try: start-up must not retry it for 30 s"


async def test_plaintext_to_a_tls_listener_names_the_security_protocol(tmp_path: Path) -> None:
    async with listener(server_context(tmp_path, "ca")) as port:
        error = await connect_error(port, None)
    assert "upstream.security.protocol" in str(error), str(error)


async def test_the_bootstrap_probe_reports_the_tls_cause_and_gives_up(tmp_path: Path) -> None:
    server_context(tmp_path, "ca")
    async with listener(None) as port:
        outcome = await first_answering_bootstrap([("127.0.0.1", port)], client_context(tmp_path / "ca-ca.pem"),
                                                  0.5, lambda kind: None, _never_called)
    assert not isinstance(outcome, str)
    assert "does not speak TLS" in outcome.reason and not outcome.retriable  # type: ignore[union-attr]


async def _never_called(client: UpstreamClient, versions: dict[str, Any]) -> str:
    raise AssertionError("nothing answered")


def _requester(handshake: dict[str, Any]) -> Any:
    async def request(api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        assert api_key == ApiKey.SASL_HANDSHAKE
        return handshake
    return request


UPSTREAM = UpstreamConfig(bootstrap_servers=(("b", 1),), security_protocol="SASL_SSL",
                          sasl_mechanism="SCRAM-SHA-512", sasl_username="ksgate", sasl_password="pw")


async def test_a_refused_handshake_shows_the_brokers_error_not_a_contradiction() -> None:
    with pytest.raises(UpstreamAuthError) as refused:
        await sasl_exchange(_requester({"error_code": 34, "mechanisms": ["SCRAM-SHA-512"]}), UPSTREAM)
    assert "ILLEGAL_SASL_STATE" in str(refused.value) and "does not accept" not in str(refused.value)


async def test_a_mechanism_the_broker_does_not_offer_is_named_with_what_it_offers() -> None:
    with pytest.raises(UpstreamAuthError) as refused:
        await sasl_exchange(_requester({"error_code": 33, "mechanisms": ["PLAIN"]}), UPSTREAM)
    text = str(refused.value)
    assert "does not accept SASL mechanism SCRAM-SHA-512" in text and "UNSUPPORTED_SASL_MECHANISM" in text
    assert "['PLAIN']" in text and "upstream.sasl.mechanism" in text
