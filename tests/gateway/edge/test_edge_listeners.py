"""Edge listeners without a balancer (#12): configuration errors, certificate coverage at start-up and on reload,
and the PROXY protocol on a plaintext listener (v1, v2, LOCAL, malformed, untrusted) against a real gateway."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import struct
from pathlib import Path

import pytest

from auth.cert_tools import issue_cert, make_ca
from auth.tls import ListenerTlsSettings, TlsContextProvider
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.config import ConfigError, build_config
from gateway.edge.proxy_protocol import V2_SIGNATURE
from gateway.edge.sni_routing import SniRoutes
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.wire_client import WireClient, request_frame

BASE = {"upstream.bootstrap.servers": "b:9092"}


@pytest.mark.parametrize(("settings", "named"), [
    ({"listeners": "PLAINTEXT://127.0.0.1:9092",
      "listener.name.plaintext.ksgate.sni.broker.host.pattern": "b-{nodeId}.x.com"}, "SNI needs TLS"),
    ({"listeners": "SSL://127.0.0.1:9092", "advertised.listeners": "SSL://boot.x.com:9092",
      "listener.name.ssl.ksgate.sni.broker.host.pattern": "b.x.com"}, "{nodeId}"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.name.plaintext.ksgate.proxy.protocol": True},
     "trusted.networks: required"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.name.plaintext.ksgate.proxy.protocol": True,
      "listener.name.plaintext.ksgate.proxy.protocol.trusted.networks": "10.0.0.0/33"}, "trusted.networks"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.name.plaintext.ksgate.ipv6.only": True},
     "not an IPv6 one"),
])
def test_edge_settings_that_cannot_work_are_refused_with_the_key_named(settings: dict[str, object],
                                                                        named: str) -> None:
    with pytest.raises(ConfigError, match="ksgate"):
        build_config({**BASE, **settings})
    with pytest.raises(ConfigError) as raised:
        build_config({**BASE, **settings})
    assert named in str(raised.value)


def _tls(directory: Path, names: tuple[str, ...], stem: str = "server") -> ListenerTlsSettings:
    ca = make_ca()
    issue_cert(ca, "CN=gw", dns_names=names, ip_addresses=()).write_pem(directory / f"{stem}.pem",
                                                                       directory / f"{stem}.key")
    return ListenerTlsSettings.from_config({"ssl.keystore.location": str(directory / f"{stem}.pem"),
                                            "ssl.key.location": str(directory / f"{stem}.key")})


def test_a_certificate_that_misses_the_pattern_is_a_configuration_error_naming_it(tmp_path: Path) -> None:
    provider = TlsContextProvider(_tls(tmp_path, ("boot.x.com",)))
    routes = SniRoutes("boot.x.com", "b-{nodeId}.x.com")
    with pytest.raises(Exception, match=r"b-\{nodeId\}\.x\.com"):
        provider.route_server_names(routes.route, lambda names: routes.uncovered(names))


def test_a_reload_to_a_certificate_that_misses_a_name_is_refused(tmp_path: Path) -> None:
    settings = _tls(tmp_path, ("boot.x.com", "*.x.com"))
    provider = TlsContextProvider(settings)
    routes = SniRoutes("boot.x.com", "b-{nodeId}.x.com")
    provider.route_server_names(routes.route, lambda names: routes.uncovered(names))
    before = provider.current
    ca = make_ca()
    issue_cert(ca, "CN=gw", dns_names=("boot.x.com",), ip_addresses=()).write_pem(
        settings.keystore_location, settings.key_location)
    assert provider.reload() is False
    assert provider.current is before


# --- the PROXY protocol on a plaintext listener, with a real gateway ------------------------------------------

@pytest.fixture(scope="module")
def proxied(broker: EmbeddedBroker) -> GatewayThread:
    gateway = GatewayThread(broker.bootstrap, {
        "listener.name.plaintext.ksgate.proxy.protocol": True,
        # 127.0.0.2 plays the balancer; 127.0.0.1 (the test's default source) is not trusted
        "listener.name.plaintext.ksgate.proxy.protocol.trusted.networks": "127.0.0.2/32, ::1/128",
        "ksgate.audit.log.allowed": True, "ksgate.authentication.timeout.ms": 2000}).start()
    yield gateway
    gateway.stop()


def _from_balancer(gateway: GatewayThread) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.2", 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", gateway.port))
    return sock


def _metadata_as(sock: socket.socket) -> dict[str, object]:
    client = WireClient.__new__(WireClient)
    client.sock = sock
    client.send(request_frame(ApiKey.METADATA, 9, 1, {"topics": [], "allow_auto_topic_creation": False,
                                                      "include_cluster_authorized_operations": False,
                                                      "include_topic_authorized_operations": False}))
    return client.read_response(ApiKey.METADATA, 9)[1]


def _audited_hosts(gateway: GatewayThread) -> set[str]:
    path = gateway.directory / "audit.log"
    return {json.loads(line)["client_host"] for line in path.read_text().splitlines() if line.strip()}


def _closed(sock: socket.socket) -> bool:
    with contextlib.suppress(ConnectionResetError):
        return sock.recv(1) == b""
    return True


def test_a_v1_header_makes_its_address_the_clients(proxied: GatewayThread) -> None:
    sock = _from_balancer(proxied)
    sock.sendall(b"PROXY TCP4 198.51.100.23 127.0.0.1 40001 9092\r\n")
    assert _metadata_as(sock)["brokers"]
    sock.close()
    assert "198.51.100.23" in _audited_hosts(proxied)


def test_a_v2_header_with_ipv6_and_tlvs_makes_its_address_the_clients(proxied: GatewayThread) -> None:
    body = ipaddress.ip_address("2001:db8::42").packed + ipaddress.ip_address("::1").packed \
        + struct.pack(">HH", 40002, 9092) + b"\xe0\x00\x03abc"
    sock = _from_balancer(proxied)
    sock.sendall(V2_SIGNATURE + b"\x21\x21" + struct.pack(">H", len(body)) + body)
    assert _metadata_as(sock)["brokers"]
    sock.close()
    assert "2001:db8::42" in _audited_hosts(proxied)


def test_a_v2_local_health_check_is_closed_quietly(proxied: GatewayThread) -> None:
    sock = _from_balancer(proxied)
    sock.sendall(V2_SIGNATURE + b"\x20\x00\x00\x00")
    assert _closed(sock)
    sock.close()


@pytest.mark.parametrize("data", [
    b"\x00\x00\x00\x15\x00\x12\x00\x03",  # a Kafka request without a header
    b"PROXY TCP4 198.51.100.23 127.0.0.1 040001 9092\r\n",  # malformed
    V2_SIGNATURE + b"\x21\x11\xff\xff",  # oversized
])
def test_a_connection_without_a_well_formed_header_is_closed(proxied: GatewayThread, data: bytes) -> None:
    sock = _from_balancer(proxied)
    sock.sendall(data)
    assert _closed(sock)
    sock.close()


def test_a_peer_that_stalls_inside_its_header_is_closed_after_the_authentication_timeout(
        proxied: GatewayThread) -> None:
    sock = _from_balancer(proxied)
    sock.sendall(b"PROXY TCP4 ")
    assert _closed(sock)  # the socket's own 10 s timeout would raise instead
    sock.close()


def test_an_untrusted_peer_is_closed_before_anything_is_read(proxied: GatewayThread) -> None:
    with socket.create_connection(("127.0.0.1", proxied.port), timeout=10) as sock:
        sock.sendall(b"PROXY TCP4 203.0.113.1 127.0.0.1 1 9092\r\n")
        assert _closed(sock)
    assert "203.0.113.1" not in _audited_hosts(proxied)


def test_per_ip_limits_count_the_address_in_the_header_not_the_balancers(broker: EmbeddedBroker) -> None:
    gateway = GatewayThread(broker.bootstrap, {
        "listener.name.plaintext.ksgate.proxy.protocol": True,
        "listener.name.plaintext.ksgate.proxy.protocol.trusted.networks": "127.0.0.2/32",
        "max.connections.per.ip": 1}).start()
    try:
        first, second, same = (_from_balancer(gateway) for _ in range(3))
        first.sendall(b"PROXY TCP4 198.51.100.1 127.0.0.1 1 9092\r\n")
        second.sendall(b"PROXY TCP4 198.51.100.2 127.0.0.1 2 9092\r\n")
        # Two clients behind one balancer address: each has its own one connection.
        assert _metadata_as(first)["brokers"] and _metadata_as(second)["brokers"]
        same.sendall(b"PROXY TCP4 198.51.100.1 127.0.0.1 3 9092\r\n")
        assert _closed(same), "a second connection of 198.51.100.1 is over max.connections.per.ip"
        for sock in (first, second, same):
            sock.close()
    finally:
        gateway.stop()


def test_connections_still_reading_their_proxy_header_count_against_max_connections(broker: EmbeddedBroker) -> None:
    """They hold descriptors before any address is known: at max.connections, a further one is
    closed at once instead of joining them."""
    gateway = GatewayThread(broker.bootstrap, {
        "listener.name.plaintext.ksgate.proxy.protocol": True,
        "listener.name.plaintext.ksgate.proxy.protocol.trusted.networks": "127.0.0.2/32",
        "max.connections": 2}).start()
    try:
        stalled = [_from_balancer(gateway) for _ in range(2)]
        for sock in stalled:
            sock.sendall(b"PROXY TCP4 ")  # and nothing more
        third = _from_balancer(gateway)
        assert _closed(third)
        value = gateway.call(gateway.gateway.ctx.metrics.connections_refused.value, ("PLAINTEXT", "max_connections"))
        assert value == 1
        for sock in (*stalled, third):
            sock.close()
    finally:
        gateway.stop()
