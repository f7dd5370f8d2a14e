"""Acceptance (issue #18, item 1): one client's failed logins never lock other users out of its address.

Every client here is 127.0.0.1, as behind a NAT, a load balancer without PROXY protocol, or in the
quickstart.  bob fails 30 logins (over the raw wire: the attacker's side needs no real client),
then admin and alice log in with real clients from the same address, for every mechanism.  The
gateway keeps the old throttle key at its old default, which must now be ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from tests.auth.test_tls_oauth_e2e import Jwks
from tests.harness import GatewayThread
from tests.login_attempts import MECHANISMS, PASSWORDS, client_settings, fail_once, gateway_settings
from tests.scram_wire import can_connect

FAILURES = 30


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
    gateway = GatewayThread(broker.bootstrap, {**gateway_settings(str(credentials), jwks),
                                               "connection.failed.authentication.delay.ms": 20},
                            protocol="SASL_PLAINTEXT").start()
    yield gateway
    gateway.stop()


def _logins(gateway: GatewayThread, user: str) -> int:
    return int(gateway.call(lambda: gateway.gateway.ctx.counters.authenticated.get(f"User:{user}", 0)))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_thirty_failures_for_bob_do_not_lock_admin_and_alice_out_of_the_same_address(
        lockout_gateway: GatewayThread, jwks: Jwks, mechanism: str) -> None:
    for attempt in range(FAILURES):
        assert fail_once(lockout_gateway, mechanism, attempt, jwks) == 58  # SASL_AUTHENTICATION_FAILED
    for user in ("admin", "alice"):
        before = _logins(lockout_gateway, user)
        # A real client, given a generous timeout; it gets in at its first login, not by outlasting a lock.
        assert can_connect(client_settings(lockout_gateway, mechanism, user, jwks), timeout_s=10), (mechanism, user)
        assert _logins(lockout_gateway, user) > before


def _audited_bob_failures(gateway: GatewayThread) -> int:
    events = [json.loads(line) for line in (gateway.directory / "audit.log").read_text().splitlines()]
    return sum(1 for e in events if e["event"] == "authentication" and e["decision"] == "FAILED"
               and e["attempted_user"] == "bob")


def test_every_failure_is_still_audited_and_counted(lockout_gateway: GatewayThread, jwks: Jwks) -> None:
    counted = lockout_gateway.call(lambda: lockout_gateway.gateway.ctx.counters.authentication_failures)
    audited = _audited_bob_failures(lockout_gateway)
    for _ in range(3):  # the same wrong password: hashed once, then answered from the refuted cache
        assert fail_once(lockout_gateway, "PLAIN", 999, jwks) == 58
    assert lockout_gateway.call(lambda: lockout_gateway.gateway.ctx.counters.authentication_failures) == counted + 3
    assert _audited_bob_failures(lockout_gateway) == audited + 3
