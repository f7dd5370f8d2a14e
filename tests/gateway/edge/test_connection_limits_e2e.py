"""Connection limits and the TLS handshake timeout on the wire, against a real gateway.

Refused connections are closed at accept, before TLS or any Kafka byte, audited and counted.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from auth.cert_tools import TlsFiles, write_tls_material
from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.wire_client import WireClient, request_frame

API_VERSIONS = {"client_software_name": "t", "client_software_version": "1"}
EOF_WAIT_S = 10.0  # a generous upper bound: the assertion is that the close happens at all


def _answers(client: WireClient) -> bool:
    """The connection was admitted: an ApiVersions request is answered."""
    client.send(request_frame(ApiKey.API_VERSIONS, 3, 1, API_VERSIONS))
    correlation_id, body = client.read_response(ApiKey.API_VERSIONS, 3)
    return correlation_id == 1 and body["error_code"] == 0


def _closed_at_once(client: WireClient) -> bool:
    """The gateway closed the connection without answering anything (sending nothing first)."""
    return client.is_closed_by_peer(EOF_WAIT_S)


def _refusals(gateway: GatewayThread) -> list[dict[str, object]]:
    path = Path(gateway.config.settings["ksgate.audit.log.file"])
    events = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return [event for event in events if event["event"] == "connection"]


def _refused_metric(gateway: GatewayThread, reason: str) -> float:
    value: float = gateway.call(gateway.gateway.ctx.metrics.connections_refused.value, ("PLAINTEXT", reason))
    return value


@pytest.fixture
def open_clients() -> Iterator[list[WireClient]]:
    clients: list[WireClient] = []
    yield clients
    for client in clients:
        client.close()


def _start(broker: EmbeddedBroker, settings: dict[str, object]) -> Iterator[GatewayThread]:
    gateway = GatewayThread(broker.bootstrap, settings).start()
    try:
        yield gateway
    finally:
        gateway.stop()


@pytest.fixture
def per_ip_gateway(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    yield from _start(broker, {"max.connections.per.ip": 2})


def test_the_third_connection_from_one_address_is_closed_at_once_and_audited(
        per_ip_gateway: GatewayThread, open_clients: list[WireClient]) -> None:
    gateway = per_ip_gateway
    open_clients.extend(WireClient(gateway.bootstrap) for _ in range(2))
    assert all(_answers(client) for client in open_clients)
    third = WireClient(gateway.bootstrap)
    open_clients.append(third)
    assert _closed_at_once(third)
    assert _refused_metric(gateway, "max_connections_per_ip") == 1
    [event] = _refusals(gateway)
    local_port = third.sock.getsockname()[1]
    assert (event["decision"], event["reason"], event["limit"]) == ("REFUSED", "max.connections.per.ip", 2)
    assert (event["client_host"], event["client_port"], event["listener"]) == ("127.0.0.1", local_port, "PLAINTEXT")
    # A slot frees when a connection closes.
    open_clients[0].close()
    assert _eventually_admitted(gateway, open_clients)


def _eventually_admitted(gateway: GatewayThread, clients: list[WireClient], attempts: int = 50) -> bool:
    """The gateway learns of a client's close asynchronously: retry the connection a few times."""
    for _ in range(attempts):
        client = WireClient(gateway.bootstrap)
        clients.append(client)
        try:
            if _answers(client):
                return True
        except (ConnectionError, OSError):
            continue
    return False


@pytest.fixture
def override_gateway(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    yield from _start(broker, {"max.connections.per.ip": 1,
                               "max.connections.per.ip.overrides": "127.0.0.2:1,127.0.0.1:4"})


def test_an_override_for_the_address_raises_its_limit(
        override_gateway: GatewayThread, open_clients: list[WireClient]) -> None:
    open_clients.extend(WireClient(override_gateway.bootstrap) for _ in range(4))
    assert all(_answers(client) for client in open_clients)
    fifth = WireClient(override_gateway.bootstrap)
    open_clients.append(fifth)
    assert _closed_at_once(fifth)
    [event] = _refusals(override_gateway)
    assert (event["reason"], event["limit"]) == ("max.connections.per.ip.overrides", 4)


@pytest.fixture
def rate_gateway(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    yield from _start(broker, {"max.connection.creation.rate": 3})


def test_a_burst_over_the_creation_rate_is_refused(rate_gateway: GatewayThread,
                                                    open_clients: list[WireClient]) -> None:
    # 20 connections opened back to back: at most the bucket's 3 (plus what refills while
    # they are opened) are admitted, the rest refused at accept.
    burst = [WireClient(rate_gateway.bootstrap) for _ in range(20)]
    open_clients.extend(burst)
    closed = [client for client in burst if _closed_at_once_or_answers(client)]
    assert 3 <= 20 - len(closed) < 20
    assert _refused_metric(rate_gateway, "max_connection_creation_rate") == len(closed)
    assert {event["reason"] for event in _refusals(rate_gateway)} == {"max.connection.creation.rate"}


def _closed_at_once_or_answers(client: WireClient) -> bool:
    """True when refused (closed with nothing sent back); False when the request is answered."""
    try:
        return not _answers(client)
    except (ConnectionError, OSError):
        return True


@pytest.fixture
def listener_gateway(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    yield from _start(broker, {"listener.name.plaintext.max.connections": 2})


def test_listener_scoped_max_connections(listener_gateway: GatewayThread, open_clients: list[WireClient]) -> None:
    open_clients.extend(WireClient(listener_gateway.bootstrap) for _ in range(2))
    assert all(_answers(client) for client in open_clients)
    third = WireClient(listener_gateway.bootstrap)
    open_clients.append(third)
    assert _closed_at_once(third)
    assert _refused_metric(listener_gateway, "listener_max_connections") == 1
    [event] = _refusals(listener_gateway)
    assert (event["reason"], event["limit"]) == ("listener.name.plaintext.max.connections", 2)


# --- the TLS handshake must complete within the authentication timeout ---------------------------

@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_material(tmp_path_factory.mktemp("tls"), server_subject="CN=localhost")


@pytest.fixture
def tls_gateway(broker: EmbeddedBroker, tls: TlsFiles) -> Iterator[GatewayThread]:
    gateway = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "ksgate.authentication.timeout.ms": 1000,
    }, protocol="SSL", advertised_host="localhost").start()
    try:
        yield gateway
    finally:
        gateway.stop()


def _eof_within(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _handshake_timeouts(gateway: GatewayThread) -> float:
    value: float = gateway.call(gateway.gateway.ctx.metrics.tls_handshake_failures.value, ("SSL", "timeout"))
    return value


def test_a_tcp_connection_that_never_starts_tls_is_closed_within_the_authentication_timeout(
        tls_gateway: GatewayThread) -> None:
    with socket.create_connection(("127.0.0.1", tls_gateway.port)) as sock:
        assert _eof_within(sock, EOF_WAIT_S)
    assert _handshake_timeouts(tls_gateway) == 1


def test_a_half_sent_client_hello_is_closed_within_the_authentication_timeout(
        tls_gateway: GatewayThread) -> None:
    # A real ClientHello, cut in half: the handshake starts and never finishes.
    client_hello = _client_hello()
    assert len(client_hello) > 100
    with socket.create_connection(("127.0.0.1", tls_gateway.port)) as sock:
        sock.sendall(client_hello[: len(client_hello) // 2])
        assert _eof_within(sock, EOF_WAIT_S)
    assert _handshake_timeouts(tls_gateway) == 1


def test_tls_clients_that_complete_the_handshake_are_still_served(tls_gateway: GatewayThread, tls: TlsFiles) -> None:
    context = ssl.create_default_context(cafile=str(tls.ca))
    with socket.create_connection(("127.0.0.1", tls_gateway.port)) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as sock:
        sock.sendall(request_frame(ApiKey.API_VERSIONS, 3, 9, API_VERSIONS))
        sock.settimeout(EOF_WAIT_S)
        assert len(sock.recv(4)) == 4  # the response's size prefix: answered after the handshake


def _client_hello() -> bytes:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        hello.do_handshake()
    return outgoing.read()


def test_garbage_instead_of_a_client_hello_counts_as_a_failed_handshake(tls_gateway: GatewayThread) -> None:
    with socket.create_connection(("127.0.0.1", tls_gateway.port)) as sock:
        sock.sendall(request_frame(ApiKey.API_VERSIONS, 3, 1, API_VERSIONS))  # Kafka bytes on a TLS port
        assert _eof_within(sock, EOF_WAIT_S)
    failed: float = tls_gateway.call(tls_gateway.gateway.ctx.metrics.tls_handshake_failures.value, ("SSL", "failed"))
    assert failed == 1


@pytest.fixture
def tls_limited_gateway(broker: EmbeddedBroker, tls: TlsFiles) -> Iterator[GatewayThread]:
    gateway = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "max.connections.per.ip": 1,
    }, protocol="SSL", advertised_host="localhost").start()
    try:
        yield gateway
    finally:
        gateway.stop()


def test_a_refused_connection_is_closed_before_any_tls(tls_limited_gateway: GatewayThread, tls: TlsFiles) -> None:
    context = ssl.create_default_context(cafile=str(tls.ca))
    address = ("127.0.0.1", tls_limited_gateway.port)
    with socket.create_connection(address) as raw, context.wrap_socket(raw, server_hostname="localhost"), \
            socket.create_connection(address) as second:
        second.sendall(_client_hello())
        second.settimeout(EOF_WAIT_S)
        try:
            answer = second.recv(1)
        except ConnectionResetError:
            answer = b""
        assert answer == b""  # closed with no ServerHello: the handshake never began
    refused: float = tls_limited_gateway.call(
        tls_limited_gateway.gateway.ctx.metrics.connections_refused.value, ("SSL", "max_connections_per_ip"))
    assert refused == 1
    assert _handshake_timeouts(tls_limited_gateway) == 0
