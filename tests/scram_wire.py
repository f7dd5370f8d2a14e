"""SCRAM logins: over a raw socket (one attempt; tokenauth, which no client library here offers),
and with a real client."""

from __future__ import annotations

import base64
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from auth.sasl.scram import ScramClient
from protocol.api_keys import ApiKey
from tests.wire_client import WireClient, request_frame


def scram_login(address: str, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                **extensions: str) -> tuple[WireClient, int]:
    """One SCRAM login attempt (with SCRAM extensions, e.g. tokenauth="true"); the client and the error code."""
    client = WireClient(address)
    client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": mechanism}))
    client.read_response(ApiKey.SASL_HANDSHAKE, 1)
    scram = ScramClient(mechanism, user, password, extensions=extensions or None)
    client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": scram.first_message()}))
    _, first = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
    if first["error_code"]:
        return client, first["error_code"]
    client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 3,
                              {"auth_bytes": scram.final_message(bytes(first["auth_bytes"]))}))
    _, final = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
    return client, final["error_code"]


def scram_salt(address: str, user: str, mechanism: str = "SCRAM-SHA-256") -> tuple[bytes, int]:
    """The salt and iteration count the server-first message offers ``user`` (known or not); no login."""
    client = WireClient(address)
    try:
        client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": mechanism}))
        client.read_response(ApiKey.SASL_HANDSHAKE, 1)
        first_message = ScramClient(mechanism, user, "unused").first_message()
        client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": first_message}))
        _, first = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
    finally:
        client.close()
    assert first["error_code"] == 0, first
    attributes = dict(item.split("=", 1) for item in bytes(first["auth_bytes"]).decode().split(","))
    return base64.b64decode(attributes["s"]), int(attributes["i"])


def create_token(client: WireClient) -> dict[str, Any]:
    """CreateDelegationToken v3 for the logged-in principal, default lifetime, no renewers."""
    client.send(request_frame(ApiKey.CREATE_DELEGATION_TOKEN, 3, 9, {
        "owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1}))
    return client.read_response(ApiKey.CREATE_DELEGATION_TOKEN, 3)[1]


def can_connect(settings: dict[str, Any], timeout_s: float = 4) -> bool:
    """Whether a confluent-kafka admin client with ``settings`` gets Metadata.

    The client retries a failed login until the timeout, so a refusal takes ``timeout_s``."""
    try:
        AdminClient(settings).list_topics(timeout=timeout_s)
        return True
    except KafkaException:
        return False
