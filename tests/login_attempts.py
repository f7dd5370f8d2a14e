"""Logins for the lockout scenario (issue #18, item 1), shared by its acceptance test and
bench/availability/login_lockout.py: bob's failed attempts over the raw wire, and a real client's settings for
admin and alice."""

from __future__ import annotations

import time
from typing import Any

from protocol.api_keys import ApiKey
from tests.auth.test_tls_oauth_e2e import Jwks
from tests.harness import GatewayThread
from tests.scram_wire import scram_login
from tests.wire_client import WireClient, request_frame

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def gateway_settings(credentials: str, jwks: Jwks) -> dict[str, Any]:
    """Every mechanism on one SASL_PLAINTEXT listener, and the old throttle key at its old default
    (it refused every login from the address after 10 failures; now ignored, with a warning)."""
    return {"sasl.enabled.mechanisms": ",".join(MECHANISMS), "ksgate.credentials.file": credentials,
            "ksgate.sasl.plain.allow.insecure": True, "sasl.oauthbearer.jwks.endpoint.url": jwks.url,
            "sasl.oauthbearer.expected.audience": "kafka", "sasl.oauthbearer.expected.issuer": "https://issuer.test",
            "ksgate.authentication.failures.per.ip": 10}


def fail_once(gateway: GatewayThread, mechanism: str, attempt: int, jwks: Jwks) -> int:
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


def client_settings(gateway: GatewayThread, mechanism: str, user: str, jwks: Jwks) -> dict[str, Any]:
    settings: dict[str, Any] = {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        token = jwks.token("k1", sub=user)
        settings["oauth_cb"] = lambda _config: (token, time.time() + 300)
    else:
        settings.update({"sasl.username": user, "sasl.password": PASSWORDS[user]})
    return settings
