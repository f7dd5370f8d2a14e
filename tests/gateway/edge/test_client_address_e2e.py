"""An IPv4 client seen as an IPv4-mapped IPv6 address is that IPv4 client (#18 item 2), against Tansu.

The ways a gateway meets ``::ffff:a.b.c.d``: a PROXY v1 ``TCP6`` or v2 ``AF_INET6`` header (what HAProxy
sends for an IPv4 client on a dual-stack bind), and its own listener bound to ``[::]``. Each time,
host ACLs — a DENY on ``demo-*`` and the only ALLOW on ``only-*``, both for the IPv4 host — apply, and
the audit log names the IPv4 address. Raw-wire clients and confluent-kafka (through a real HAProxy).
"""

from __future__ import annotations

import ipaddress
import json
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from authz.acl_json import encode_acl_file
from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.edge.proxy_protocol import V2_SIGNATURE
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from tests.haproxy import HAProxy
from tests.harness import GatewayThread
from tests.wire_client import WireClient, request_frame

NODE = 111  # Tansu's node id
TOPIC_AUTHORIZATION_FAILED = 29
BALANCER = "127.0.0.2"  # the trusted balancer's source address
CLIENT = "10.1.2.3"  # the IPv4 client the PROXY headers speak for


def _binding(permission: AclPermissionType, operation: AclOperation, prefix: str, host: str) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, prefix, PatternType.PREFIXED),
                      AccessControlEntry("User:ANONYMOUS", host, operation, permission))


def _gateway(broker: EmbeddedBroker, directory: Path, acl_host: str, extra: dict[str, Any],
             **where: str) -> GatewayThread:
    """A PLAINTEXT gateway where ``demo-*`` is described by anyone but denied to ``acl_host``, and
    ``only-*`` is described by ``acl_host`` alone (no ACL found means deny)."""
    acl_file = directory / "acls.json"
    acl_file.write_bytes(encode_acl_file([
        _binding(AclPermissionType.ALLOW, AclOperation.DESCRIBE, "demo-", "*"),
        _binding(AclPermissionType.DENY, AclOperation.ALL, "demo-", acl_host),
        _binding(AclPermissionType.ALLOW, AclOperation.DESCRIBE, "only-", acl_host),
    ]))
    # In the test's directory, not one stop() removes: the tests read the audit log after stopping the gateway.
    return GatewayThread(broker.bootstrap, {"allow.everyone.if.no.acl.found": False, "ksgate.acl.file": str(acl_file),
                                            "ksgate.audit.log.allowed": True, **extra},
                         directory=directory, **where).start()


def _topics() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"demo-{suffix}", f"only-{suffix}"


def _topic_errors(client: WireClient, *topics: str) -> dict[str, int]:
    client.send(request_frame(ApiKey.METADATA, 9, 1, {
        "topics": [{"name": t} for t in topics], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}))
    body = client.read_response(ApiKey.METADATA, 9)[1]
    return {t["name"]: t["error_code"] for t in body["topics"]}


def _audited(gateway: GatewayThread, topic: str) -> set[tuple[str, str]]:
    """(client_host, decision) of every authorization audit event on ``topic``; the whole log has no mapped address."""
    events = [json.loads(line) for line in (gateway.directory / "audit.log").read_text().splitlines() if line.strip()]
    assert not [e for e in events if "ffff" in str(e.get("client_host"))], "a mapped address reached the audit log"
    return {(e["client_host"], e["decision"]) for e in events if e.get("resource_name") == topic}


def _assert_host_acls_applied(gateway: GatewayThread, errors: dict[str, int], host: str,
                              denied: str, allowed: str) -> None:
    assert errors[denied] == TOPIC_AUTHORIZATION_FAILED, "the DENY for the IPv4 host must apply"
    assert errors[allowed] != TOPIC_AUTHORIZATION_FAILED, "the ALLOW for the IPv4 host must apply"
    assert _audited(gateway, denied) == {(host, "DENIED")}
    assert _audited(gateway, allowed) == {(host, "ALLOWED")}


# --- PROXY headers on the raw wire ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def proxied(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    gateway = _gateway(broker, tmp_path_factory.mktemp("proxied"), CLIENT, {
        "listener.name.plaintext.ksgate.proxy.protocol": True,
        "listener.name.plaintext.ksgate.proxy.protocol.trusted.networks": f"{BALANCER}/32"})
    yield gateway
    gateway.stop()


def _v2_inet6(source: str, port: int) -> bytes:
    body = ipaddress.ip_address(source).packed + ipaddress.ip_address("::ffff:10.0.0.1").packed \
        + struct.pack(">HH", port, 9092)
    return V2_SIGNATURE + b"\x21\x21" + struct.pack(">H", len(body)) + body  # PROXY, AF_INET6 over TCP


@pytest.mark.parametrize("header", [
    f"PROXY TCP6 ::ffff:{CLIENT} ::ffff:10.0.0.1 40001 9092\r\n".encode(),
    _v2_inet6(f"::ffff:{CLIENT}", 40002),
], ids=["v1-tcp6", "v2-af-inet6"])
def test_a_proxy_header_with_an_ipv4_mapped_client_meets_the_ipv4_host_acls(proxied: GatewayThread,
                                                                            header: bytes) -> None:
    sock = socket.socket()
    sock.bind((BALANCER, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", proxied.port))
    sock.sendall(header)
    client = WireClient.__new__(WireClient)
    client.sock = sock
    denied, allowed = _topics()
    try:
        errors = _topic_errors(client, denied, allowed)
    finally:
        client.close()
    _assert_host_acls_applied(proxied, errors, CLIENT, denied, allowed)


# --- a real client through a real HAProxy bound dual-stack ------------------------------------------------------

@pytest.mark.skipif(not HAProxy.available(), reason="needs Debian's haproxy (scripts/test.sh installs it)")
@pytest.mark.parametrize("proxy_version", [1, 2])
def test_confluent_kafka_behind_a_dual_stack_haproxy_meets_the_ipv4_host_acls(broker: EmbeddedBroker,
                                                                              proxy_version: int,
                                                                              tmp_path: Path) -> None:
    # HAProxy binds an IPv4-mapped address (an AF_INET6 socket) on 127.0.0.5, the address the gateway
    # advertises, with the gateway's own port numbers: bootstrap and node connections both pass it, and
    # it states each IPv4 client (127.0.0.1) as ::ffff:127.0.0.1, in a v1 TCP6 or a v2 AF_INET6 header.
    gateway = _gateway(broker, tmp_path, "127.0.0.1", {
        "listener.name.plaintext.ksgate.proxy.protocol": True,
        "listener.name.plaintext.ksgate.proxy.protocol.trusted.networks": f"{BALANCER}/32"},
        advertised_host="127.0.0.5")
    node_port = gateway.config.node_port(gateway.config.listeners[0], NODE)
    balancer = HAProxy(f"127.0.0.1:{gateway.port}", port=gateway.port, proxy_version=proxy_version,
                       bind_host="::ffff:127.0.0.5", more=[(node_port, f"127.0.0.1:{node_port}")])
    denied, allowed = _topics()
    try:
        with balancer:
            errors = _client_topic_errors(gateway.bootstrap, denied, allowed)
    finally:
        gateway.stop()
    _assert_host_acls_applied(gateway, errors, "127.0.0.1", denied, allowed)


def _client_topic_errors(bootstrap: str, *topics: str) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})
    errors = {}
    for topic in topics:
        metadata = admin.list_topics(topic=topic, timeout=15)
        error = metadata.topics[topic].error
        errors[topic] = 0 if error is None else error.code()
    return errors


# --- a dual-stack [::] listener reached over IPv4 ------------------------------------------------------------

@pytest.fixture(scope="module")
def dual_stack(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    gateway = _gateway(broker, tmp_path_factory.mktemp("dual-stack"), "127.0.0.1", {}, bind_host="::")
    yield gateway
    gateway.stop()


def test_a_raw_client_on_a_dual_stack_listener_meets_the_ipv4_host_acls(dual_stack: GatewayThread) -> None:
    client = WireClient(f"127.0.0.1:{dual_stack.port}")
    denied, allowed = _topics()
    try:
        errors = _topic_errors(client, denied, allowed)
    finally:
        client.close()
    _assert_host_acls_applied(dual_stack, errors, "127.0.0.1", denied, allowed)


def test_confluent_kafka_on_a_dual_stack_listener_meets_the_ipv4_host_acls(dual_stack: GatewayThread) -> None:
    denied, allowed = _topics()
    errors = _client_topic_errors(f"127.0.0.1:{dual_stack.port}", denied, allowed)
    _assert_host_acls_applied(dual_stack, errors, "127.0.0.1", denied, allowed)


def test_an_ipv6_only_listener_refuses_ipv4_and_serves_ipv6(broker: EmbeddedBroker, tmp_path: Path) -> None:
    gateway = _gateway(broker, tmp_path, "::1", {"listener.name.plaintext.ksgate.ipv6.only": True}, bind_host="::")
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", gateway.port), timeout=10).close()
        client = WireClient(f"::1:{gateway.port}")  # WireClient splits at the last colon
        denied, allowed = _topics()
        try:
            errors = _topic_errors(client, denied, allowed)
        finally:
            client.close()
    finally:
        gateway.stop()
    _assert_host_acls_applied(gateway, errors, "::1", denied, allowed)


# --- the password-hash budget counts one address, however it was spelled -----------------------------------

def test_the_hash_budget_counts_a_mapped_and_a_plain_ipv4_client_as_one_address(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    credentials = tmp_path / "users.json"
    FileCredentialStore(credentials).upsert_user("alice", "alice-secret", mechanisms=("PLAIN",))
    gateway = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(credentials),
        "ksgate.sasl.plain.allow.insecure": True, "connection.failed.authentication.delay.ms": 0,
        # One hash per address, then one every 100 s: a second spelling of the address would get a token of its own.
        "ksgate.authentication.hash.rate.per.ip": 0.01, "ksgate.authentication.hash.burst.per.ip": 1,
        "listener.name.sasl_plaintext.ksgate.proxy.protocol": True,
        "listener.name.sasl_plaintext.ksgate.proxy.protocol.trusted.networks": f"{BALANCER}/32"},
        protocol="SASL_PLAINTEXT", directory=tmp_path).start()  # its audit log is read after stop()
    try:
        headers = (f"PROXY TCP6 ::ffff:{CLIENT} ::ffff:10.0.0.1 40001 9092\r\n".encode(),
                   _v2_inet6(f"::ffff:{CLIENT}", 40002),
                   f"PROXY TCP4 {CLIENT} 10.0.0.1 40003 9092\r\n".encode())
        for attempt, header in enumerate(headers):  # unknown users: over budget they are answered unhashed
            assert _wrong_plain_login(gateway, header, f"mallory-{attempt}") == 58  # SASL_AUTHENTICATION_FAILED
        hashes = gateway.call(lambda: gateway.gateway.ctx.metrics.password_hashes.value())
    finally:
        gateway.stop()
    assert hashes == 1  # the address's one token, spent by the first spelling
    events = [json.loads(line) for line in (gateway.directory / "audit.log").read_text().splitlines() if line]
    assert [e["client_host"] for e in events if e["event"] == "authentication"] == [CLIENT] * 3


def _wrong_plain_login(gateway: GatewayThread, header: bytes, user: str) -> int:
    sock = socket.socket()
    sock.bind((BALANCER, 0))
    sock.settimeout(10)
    sock.connect(("127.0.0.1", gateway.port))
    sock.sendall(header)
    client = WireClient.__new__(WireClient)
    client.sock = sock
    try:
        client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
        assert client.read_response(ApiKey.SASL_HANDSHAKE, 1)[1]["error_code"] == 0
        client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": f"\0{user}\0wrong".encode()}))
        return int(client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"])
    finally:
        client.close()
