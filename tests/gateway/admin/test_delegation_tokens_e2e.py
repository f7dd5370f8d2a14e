"""Acceptance (KIP-48): delegation tokens created through the gateway authenticate over SCRAM."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.scram_wire import create_token, scram_login
from tests.wire_client import WireClient, request_frame

DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64


@pytest.fixture(scope="module")
def token_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    directory = tmp_path_factory.mktemp("tokens")
    FileCredentialStore(directory / "users.json").upsert_user("alice", "alice-secret")
    gateway = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "ksgate.credentials.file": str(directory / "users.json"),
        "delegation.token.secret.key": "a-test-secret-key", "ksgate.delegation.token.file": str(directory / "t.json"),
        "connection.failed.authentication.delay.ms": 10}, protocol="SASL_PLAINTEXT").start()
    yield gateway
    gateway.stop()


def _login(gateway: GatewayThread, user: str, password: str, **extensions: str) -> tuple[WireClient, int]:
    return scram_login(gateway.bootstrap, user, password, **extensions)


_create = create_token


def test_a_token_authenticates_as_its_owner_cannot_mint_tokens_and_stops_working_once_expired(
        token_gateway: GatewayThread) -> None:
    alice, error = _login(token_gateway, "alice", "alice-secret")
    assert error == 0
    token = _create(alice)
    assert token["error_code"] == 0 and token["principal_name"] == "alice"
    password = base64.b64encode(bytes(token["hmac"])).decode()

    with_token, error = _login(token_gateway, token["token_id"], password, tokenauth="true")
    assert error == 0
    assert token_gateway.gateway.ctx.counters.authenticated["User:alice"] >= 2
    # Kafka: a connection authenticated with a token may not create (or renew) tokens.
    assert _create(with_token)["error_code"] == DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    with_token.close()

    alice.send(request_frame(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, 10, {"hmac": token["hmac"],
                                                                   "expiry_time_period_ms": -1}))
    assert alice.read_response(ApiKey.EXPIRE_DELEGATION_TOKEN, 2)[1]["error_code"] == 0
    refused, error = _login(token_gateway, token["token_id"], password, tokenauth="true")
    assert error == 58  # SASL_AUTHENTICATION_FAILED
    refused.close()
    alice.close()


def test_a_wrong_hmac_is_refused(token_gateway: GatewayThread) -> None:
    alice, _ = _login(token_gateway, "alice", "alice-secret")
    token = _create(alice)
    alice.close()
    forged, error = _login(token_gateway, token["token_id"], base64.b64encode(b"x" * 64).decode(), tokenauth="true")
    assert error == 58
    forged.close()
