"""The request path of one connection, stage by stage.

    frame → header → (authenticate) → check negotiated version → decode body
          → topic guard / (authorize) → (rewrite) → relay
    upstream frame → match slot → (rewrite addresses, authorization hook) → restore correlation id

Authentication and authorization plug in where marked; everything the gateway cannot
parse is refused (connection closed), never relayed blind.
"""

from __future__ import annotations

import struct
from functools import partial
from typing import TYPE_CHECKING

from auth.sasl.mechanism import wall_clock_ms
from authz.request_policy import Answer, Refuse, Relay, Rewrite
from gateway.config import ConfigError
from gateway.session.address_rewrite import NodeAddressBook, body_names_endpoints, needs_rewrite, rewrite_endpoints
from gateway.session.api_versions import api_versions_response, check_negotiated
from gateway.session.local_answers import answer_locally
from gateway.session.policy_check import authorize, check_topics
from gateway.session.response_queue import Slot, WireBytes, with_correlation_id
from gateway.session.sasl_stage import apply_step
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.framing import Frame
from protocol.header import decode_request_header, decode_response_header, peek_api, response_header_version
from protocol.kafka_errors import KafkaError
from protocol.messages import response_frame
from protocol.registry import api

if TYPE_CHECKING:
    from gateway.transport.client_connection import ClientConnection
    from gateway.upstream.cluster_view import ClusterView

_SIZE = struct.Struct(">i")


class PipelineRefusal(Exception):
    """The request (or response) cannot be handled safely; the connection is closed."""


def _framed(payload: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(payload)) + bytes(payload)


# Offsets in a frame (size prefix included) of the correlation id.
_REQUEST_CORRELATION_AT = 8  # size(4) api_key(2) api_version(2)
_RESPONSE_CORRELATION_AT = 4  # size(4)


def handle_request(conn: ClientConnection, frame: Frame) -> list[WireBytes] | None:
    """Run one request through the pipeline; return the frame pieces to relay, if any."""
    payload = frame.payload
    try:
        key, version, correlation_id = peek_api(payload)
    except DecodeError as exc:
        raise PipelineRefusal(f"not a Kafka request: {exc}") from None
    if key == ApiKey.API_VERSIONS:
        response = api_versions_response(correlation_id, version, conn.ctx.negotiated, conn.ctx.cluster.features)
        conn.responses.add_local(correlation_id, key, version, _framed(response))
        return None
    if key in _SASL_APIS:
        _sasl_after_authentication(conn, frame, key, version, correlation_id)
        return None
    if conn.authenticator is not None and conn.authenticator.session_expired(wall_clock_ms()):
        raise PipelineRefusal("session expired without re-authentication (connections.max.reauth.ms)")
    if key in NEVER_RELAYED and (conn.ctx.authorization is None or key not in conn.ctx.authorization.local):
        raise PipelineRefusal(f"api key {key} is only served by the gateway itself, and it is not enabled here")
    try:
        header, schema = decode_request_header(payload)
        check_negotiated(key, version, conn.ctx.negotiated)
        codec = schema.request_codec(version)
        raw_body = payload[header.size :]
        body, consumed = codec.decode_prefix(raw_body)
    except DecodeError as exc:
        raise PipelineRefusal(f"refused api key {key} v{version}: {exc}") from None
    wire = frame.wire
    if consumed != len(raw_body):
        # Trailing bytes after the body: Kafka ignores them, so we accept the request,
        # but relay the canonical encoding so the upstream sees exactly what we parsed.
        wire = memoryview(_framed(bytes(payload[: header.size]) + codec.encode(body)))
    shared = conn.ctx.authorization
    if shared is not None:
        verdict = authorize(conn, shared, key, version, body)
        conn.ctx.metrics.authorization_decision(key, _OUTCOMES[type(verdict)])
    else:  # no ACLs, but Kafka's topic-name rules and the follower refusal still hold
        verdict = check_topics(conn, key, version, body)
    if isinstance(verdict, Refuse):
        raise PipelineRefusal(verdict.reason)
    if isinstance(verdict, Answer):
        conn.responses.add_local(correlation_id, key, version,
                                 response_frame(key, version, correlation_id, verdict.response))
        return None
    if isinstance(verdict, Rewrite):
        wire = memoryview(_framed(bytes(payload[: header.size]) + codec.encode(verdict.request)))
    hook = verdict.on_response
    local = shared.local.get(key) if shared is not None else None
    if local is not None:
        assert shared is not None
        answer_locally(conn, partial(local, shared, conn, body, version), hook, key, version, correlation_id)
        return None
    if key == ApiKey.PRODUCE and body["acks"] == 0:
        upstream_id = conn.responses.expect_nothing()  # the client expects no response
    else:
        upstream_id = conn.responses.expect_upstream(correlation_id, key, version, hook)
    conn.ctx.counters.relayed_requests += 1
    conn.ctx.metrics.relayed(key)
    return with_correlation_id(wire, _REQUEST_CORRELATION_AT, upstream_id)


_SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
_OUTCOMES = {Relay: "allowed", Rewrite: "partial", Answer: "denied", Refuse: "refused"}
# Identity APIs: relayed, they would act as the gateway's own upstream principal (minting its
# tokens, changing its ACLs or users). ksgate answers them itself or refuses them.
NEVER_RELAYED = frozenset({
    ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN,
    ApiKey.DESCRIBE_DELEGATION_TOKEN, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.DESCRIBE_ACLS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
})
# Responses that reveal topic ids, and so feed the id → name cache authorization uses.
_TOPIC_ID_SOURCES = frozenset({ApiKey.METADATA, ApiKey.DESCRIBE_TOPIC_PARTITIONS})


def _sasl_after_authentication(conn: ClientConnection, frame: Frame, key: int, version: int,
                               correlation_id: int) -> None:
    """SASL frames are never relayed: they would authenticate to the upstream itself.

    On a SASL listener they are KIP-368 re-authentication; elsewhere Kafka answers
    ILLEGAL_SASL_STATE.
    """
    if conn.authenticator is not None:
        apply_step(conn, conn.authenticator.on_frame(frame.payload))
        return
    schema = api(key)
    if schema is None or not schema.supports(version):
        raise PipelineRefusal(f"SASL api key {key} v{version} is outside the parsable range")
    illegal = KafkaError.ILLEGAL_SASL_STATE
    body: dict[str, object] = {"error_code": illegal, "mechanisms": []} if key == ApiKey.SASL_HANDSHAKE \
        else {"error_code": illegal, "auth_bytes": b"", "session_lifetime_ms": 0,
              "error_message": "SASL is not enabled on this listener"}
    conn.responses.add_local(correlation_id, key, version, response_frame(key, version, correlation_id, body))


def match_response(conn: ClientConnection, frame: Frame) -> Slot | None:
    """The slot an upstream response fills (taken out of the awaited ones); None to drop it."""
    if len(frame.payload) < 4:
        raise DecodeError("upstream response shorter than a correlation id")
    return conn.responses.match_upstream(_SIZE.unpack_from(frame.payload, 0)[0])


def needs_decoding(slot: Slot) -> bool:
    """Whether the response may need decoding (addresses to rewrite, an authorization hook to run)."""
    return slot.hook is not None or needs_rewrite(slot.api_key, slot.api_version)


def response_pieces(slot: Slot, frame: Frame, cluster: ClusterView, book: NodeAddressBook) -> list[WireBytes]:
    """The slot's response: the upstream's bytes, or (when needed) decoded, rewritten and re-encoded.

    Touches nothing of the connection, so gateway/transport/worker_thread.py may run it in a worker thread.
    """
    payload = frame.payload
    if not needs_decoding(slot):  # the fast path: relay the bytes untouched
        return with_correlation_id(frame.wire, _RESPONSE_CORRELATION_AT, slot.correlation_id)
    schema = api(slot.api_key)
    assert schema is not None
    header_version = response_header_version(slot.api_key, schema.is_flexible(slot.api_version))
    _, header_size = decode_response_header(payload, header_version)
    raw_body = payload[header_size:]
    rewrite = needs_rewrite(slot.api_key, slot.api_version) and \
        body_names_endpoints(slot.api_key, slot.api_version, raw_body)
    if slot.hook is None and not rewrite and slot.api_key not in _TOPIC_ID_SOURCES:
        # e.g. a Produce or Fetch response without node_endpoints: nothing to change
        return with_correlation_id(frame.wire, _RESPONSE_CORRELATION_AT, slot.correlation_id)
    codec = schema.response_codec(slot.api_version)
    body = codec.decode(raw_body)
    if slot.api_key in _TOPIC_ID_SOURCES:
        cluster.learn_topics(body.get("topics") or [])
    changed = False
    if rewrite:
        try:
            changed = rewrite_endpoints(slot.api_key, slot.api_version, body, book)
        except ConfigError as exc:
            raise PipelineRefusal(str(exc)) from None
    if slot.hook is not None:
        body = slot.hook(body)
        changed = True
    if not changed:
        return with_correlation_id(frame.wire, _RESPONSE_CORRELATION_AT, slot.correlation_id)
    new_header = _SIZE.pack(slot.correlation_id) + bytes(payload[4:header_size])
    return [_framed(new_header + codec.encode(body))]
