"""Acceptance (issue #18, item 1): one client's failed logins never lock other users out of its address.

Every client here is 127.0.0.1, as behind a NAT, a load balancer without PROXY protocol, or in the
quickstart.  bob fails 30 logins (over the raw wire: the attacker's side needs no real client),
then admin and alice log in with real clients from the same address, for every mechanism.  The
gateway keeps the old throttle key at its old default, which must now be ignored (and warned about).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from tests.auth.test_tls_oauth_e2e import Jwks
from tests.harness import GatewayThread
from tests.scram_wire import can_connect, scram_login
from tests.wire_client import WireClient, request_frame

FAILURES = 30
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@pytest.fixture(scope="module")
def jwks() -> Iterator[Jwks]:
    keys = Jwks()
    keys.add_key("k1")
    keys.add_key("forger", publish=False)  # bob's tokens are signed with a key the gateway never trusts
    yield keys
    keys.server.shutdown()


@pytest.fixture(scope="module")
def lockout_gateway(broker: EmbeddedBroker, jwks: Jwks, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[GatewayThread]:
    credentials = tmp_path_factory.mktemp("creds") / "users.json"
    for user, password in PASSWORDS.items():
        FileCredentialStore(credentials).upsert_user(user, password)
    gateway = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": ",".join(MECHANISMS), "ksgate.credentials.file": str(credentials),
        "ksgate.sasl.plain.allow.insecure": True, "connection.failed.authentication.delay.ms": 20,
        "sasl.oauthbearer.jwks.endpoint.url": jwks.url, "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.oauthbearer.expected.issuer": "https://issuer.test",
        # The old per-address throttle at its old default: it refused everyone after 10 failures.
        "ksgate.authentication.failures.per.ip": 10,
    }, protocol="SASL_PLAINTEXT").start()
    yield gateway
    gateway.stop()


def _fail_once(gateway: GatewayThread, mechanism: str, attempt: int, jwks: Jwks) -> int:
    """One failed login for bob from 127.0.0.1: a wrong password (a new one each time), or a forged token."""
    if mechanism.startswith("SCRAM-"):
        client, error = scram_login(gateway.bootstrap, "bob", f"wrong-{attempt}", mechanism)
        client.close()
        return error
    token = f"\0bob\0wrong-{attempt}".encode() if mechanism == "PLAIN" else \
        f"n,,\x01auth=Bearer {jwks.token('forger', sub='bob')}\x01\x01".encode()
    client = WireClient(gateway.bootstrap)
    try:
        client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": mechanism}))
        client.read_response(ApiKey.SASL_HANDSHAKE, 1)
        client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": token}))
        answer = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]
        if mechanism == "OAUTHBEARER" and answer["error_code"] == 0:  # RFC 7628: the error comes as a challenge
            assert b"invalid_token" in bytes(answer["auth_bytes"])
            client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 3, {"auth_bytes": b"\x01"}))
            answer = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]
        return int(answer["error_code"])
    finally:
        client.close()


def _client_settings(gateway: GatewayThread, mechanism: str, user: str, jwks: Jwks) -> dict[str, Any]:
    settings: dict[str, Any] = {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        token = jwks.token("k1", sub=user)
        settings["oauth_cb"] = lambda _config: (token, time.time() + 300)
    else:
        settings.update({"sasl.username": user, "sasl.password": PASSWORDS[user]})
    return settings


def _logins(gateway: GatewayThread, user: str) -> int:
    return int(gateway.call(lambda: gateway.gateway.ctx.counters.authenticated.get(f"User:{user}", 0)))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_thirty_failures_for_bob_do_not_lock_admin_and_alice_out_of_the_same_address(
        lockout_gateway: GatewayThread, jwks: Jwks, mechanism: str) -> None:
    for attempt in range(FAILURES):
        assert _fail_once(lockout_gateway, mechanism, attempt, jwks) == 58  # SASL_AUTHENTICATION_FAILED
    for user in ("admin", "alice"):
        before = _logins(lockout_gateway, user)
        # A real client, given a generous timeout; it gets in at its first login, not by outlasting a lock.
        assert can_connect(_client_settings(lockout_gateway, mechanism, user, jwks), timeout_s=10), (mechanism, user)
        assert _logins(lockout_gateway, user) > before


def _audited_bob_failures(gateway: GatewayThread) -> int:
    events = [json.loads(line) for line in (gateway.directory / "audit.log").read_text().splitlines()]
    return sum(1 for e in events if e["event"] == "authentication" and e["decision"] == "FAILED"
               and e["attempted_user"] == "bob")


def test_every_failure_is_still_audited_and_counted(lockout_gateway: GatewayThread, jwks: Jwks) -> None:
    counted = lockout_gateway.call(lambda: lockout_gateway.gateway.ctx.counters.authentication_failures)
    audited = _audited_bob_failures(lockout_gateway)
    for _ in range(3):  # the same wrong password: hashed once, then answered from the refuted cache
        assert _fail_once(lockout_gateway, "PLAIN", 999, jwks) == 58
    assert lockout_gateway.call(lambda: lockout_gateway.gateway.ctx.counters.authentication_failures) == counted + 3
    assert _audited_bob_failures(lockout_gateway) == audited + 3
