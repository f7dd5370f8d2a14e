"""Acceptance: login floods through a real gateway: hashes off the loop, cached logins, a per-address budget.

Every client here is 127.0.0.1, so the budget is tested as it acts on one address: over it, unknown
users are answered unhashed and known users wait their turn; nobody's right password is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.wire_client import WireClient, request_frame

LIMIT = 3


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("creds") / "users.json"
    FileCredentialStore(path).upsert_user("alice", "alice-secret", mechanisms=("PLAIN",))
    return path


def _gateway(broker: EmbeddedBroker, credentials: Path, **extra: object) -> GatewayThread:
    settings = {"sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(credentials),
                "ksgate.sasl.plain.allow.insecure": True, "connection.failed.authentication.delay.ms": 20,
                **extra}
    return GatewayThread(broker.bootstrap, settings, protocol="SASL_PLAINTEXT").start()


@pytest.fixture
def budgeted_gateway(broker: EmbeddedBroker, credentials: Path) -> Iterator[GatewayThread]:
    # One hash at once, then one every 100 s: over budget from the second attempt on.
    running = _gateway(broker, credentials, **{"ksgate.authentication.hash.rate.per.ip": 0.01,
                                               "ksgate.authentication.hash.burst.per.ip": 1})
    yield running
    running.stop()


@pytest.fixture(scope="module")
def gateway(broker: EmbeddedBroker, credentials: Path) -> Iterator[GatewayThread]:
    running = _gateway(broker, credentials)
    yield running
    running.stop()


def _hashes(gateway: GatewayThread) -> float:
    return float(gateway.call(lambda: gateway.gateway.ctx.metrics.password_hashes.value()))


def _plain_login(gateway: GatewayThread, user: str, password: str) -> dict[str, object]:
    client = WireClient(gateway.bootstrap)
    try:
        client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
        assert client.read_response(ApiKey.SASL_HANDSHAKE, 1)[1]["error_code"] == 0
        client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": f"\0{user}\0{password}".encode()}))
        return client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]
    finally:
        client.close()


def _audited_failures(gateway: GatewayThread) -> list[str | None]:
    lines = (gateway.directory / "audit.log").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    return [e["failure"] for e in events if e["event"] == "authentication" and e["decision"] == "FAILED"]


def test_over_budget_unknown_users_are_answered_unhashed_and_a_repeated_password_is_not_hashed_again(
        budgeted_gateway: GatewayThread) -> None:
    assert _plain_login(budgeted_gateway, "alice", "wrong")["error_code"] == 58
    assert _hashes(budgeted_gateway) == 1  # the budget's one token
    for attempt in range(LIMIT):
        assert _plain_login(budgeted_gateway, f"mallory-{attempt}", "guess")["error_code"] == 58
        assert _plain_login(budgeted_gateway, "alice", "wrong")["error_code"] == 58  # the refuted cache answers
    assert _hashes(budgeted_gateway) == 1
    assert _audited_failures(budgeted_gateway) == ["bad_credentials"] * (1 + 2 * LIMIT)
    metrics = budgeted_gateway.call(lambda: budgeted_gateway.gateway.ctx.metrics.render())
    assert f'ksgate_authentications_total{{mechanism="PLAIN",outcome="bad_credentials"}} {1 + 2 * LIMIT}\n' in metrics


def test_a_real_client_logs_in_and_its_reconnects_use_the_cache(gateway: GatewayThread) -> None:
    settings = {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": "alice-secret"}
    before = _hashes(gateway)
    AdminClient(settings).list_topics(timeout=15)
    first = _hashes(gateway) - before
    assert first >= 1  # the first login (per concurrent connection at most) was hashed
    succeeded = gateway.call(lambda: gateway.gateway.ctx.counters.authenticated.get("User:alice", 0))
    AdminClient(settings).list_topics(timeout=15)
    assert _hashes(gateway) - before == first  # the reconnecting client paid no PBKDF2
    assert gateway.call(lambda: gateway.gateway.ctx.counters.authenticated.get("User:alice", 0)) > succeeded


def test_frames_pipelined_behind_a_pending_password_check_are_answered_in_order(gateway: GatewayThread) -> None:
    client = WireClient(gateway.bootstrap)
    try:
        client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"})
                    + request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": b"\0alice\0alice-secret"})
                    + request_frame(ApiKey.API_VERSIONS, 3, 3, {"client_software_name": "t",
                                                                "client_software_version": "1"}))
        assert client.read_response(ApiKey.SASL_HANDSHAKE, 1)[0] == 1
        cid, body = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
        assert (cid, body["error_code"]) == (2, 0)
        cid, body = client.read_response(ApiKey.API_VERSIONS, 3)
        assert (cid, body["error_code"]) == (3, 0)
    finally:
        client.close()


def test_a_reauthentication_hashed_off_the_loop_keeps_responses_in_order(broker: EmbeddedBroker,
                                                                         credentials: Path) -> None:
    """KIP-368 on a live connection: requests pipelined behind the re-authentication wait for it."""
    # A session that expires: without one a SaslHandshake after the login is refused, as on Kafka.
    uncached = _gateway(broker, credentials, **{"ksgate.authentication.plain.cache.size": 0,
                                                "connections.max.reauth.ms": 60_000})
    client = WireClient(uncached.bootstrap)
    try:
        token = b"\0alice\0alice-secret"
        versions = {"client_software_name": "t", "client_software_version": "1"}
        client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"})
                    + request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": token}))
        client.read_response(ApiKey.SASL_HANDSHAKE, 1)
        assert client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"] == 0
        client.send(request_frame(ApiKey.API_VERSIONS, 3, 3, versions)
                    + request_frame(ApiKey.SASL_HANDSHAKE, 1, 4, {"mechanism": "PLAIN"})
                    + request_frame(ApiKey.SASL_AUTHENTICATE, 2, 5, {"auth_bytes": token})
                    + request_frame(ApiKey.API_VERSIONS, 3, 6, versions))
        assert client.read_response(ApiKey.API_VERSIONS, 3)[0] == 3
        assert client.read_response(ApiKey.SASL_HANDSHAKE, 1)[0] == 4
        cid, body = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
        assert (cid, body["error_code"]) == (5, 0)
        assert client.read_response(ApiKey.API_VERSIONS, 3)[0] == 6
        assert _hashes(uncached) == 2  # both logins were hashed (no cache), on the pool
    finally:
        client.close()
        uncached.stop()


def test_many_connections_with_the_same_password_over_budget_share_one_hash_and_all_get_in(
        broker: EmbeddedBroker, credentials: Path) -> None:
    """More than the per-user queue (pods of one service behind a NAT, restarting together): one hash."""
    running = _gateway(broker, credentials, **{"ksgate.authentication.hash.rate.per.ip": 2,
                                               "ksgate.authentication.hash.burst.per.ip": 1,
                                               "ksgate.authentication.hash.queue.per.user": 2})
    clients = [WireClient(running.bootstrap) for _ in range(10)]
    try:
        assert _plain_login(running, "alice", "wrong")["error_code"] == 58  # spends the token
        for client in clients:
            client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"})
                        + request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": b"\0alice\0alice-secret"}))
        for client in clients:
            client.read_response(ApiKey.SASL_HANDSHAKE, 1)
            assert client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"] == 0
        assert _hashes(running) == 2  # the wrong password, then alice's once for all ten
    finally:
        for client in clients:
            client.close()
        running.stop()
