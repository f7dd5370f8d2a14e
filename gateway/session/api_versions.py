"""ApiVersions, answered by the gateway itself.

A client may use exactly the intersection of what the upstream broker supports and what
the gateway can parse and police; anything else is refused rather than relayed blind.
"""

from __future__ import annotations

from protocol.api_keys import INTERNAL_APIS, ApiKey
from protocol.codec import MessageCodec
from protocol.errors import DecodeError
from protocol.header import encode_response_header
from protocol.kafka_errors import KafkaError
from protocol.registry import all_apis, api

# Answered by the gateway before any policy runs, whatever the upstream supports.
GATEWAY_HANDLED = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# Fetch v16+ responses may end with node_endpoints (broker addresses, KIP-951): a gateway
# must then hold and decode every Fetch response to rewrite them. v15 differs only in lacking
# them, so offering at most v15 lets Fetch responses stream through untouched, and no broker
# address can ride along in them. Clients fall back to a Metadata refresh on NOT_LEADER.
VERSION_CAPS: dict[int, int] = {ApiKey.FETCH: 15}

VersionRanges = dict[int, tuple[int, int]]


def negotiate(upstream: VersionRanges, policed: tuple[set[int], set[int]] | None = None,
              never_relayed: frozenset[int] = frozenset()) -> VersionRanges:
    """Per api key, the overlap of the upstream's range and the gateway's schemas.

    With authorization on (``policed`` = (APIs with a policy, APIs the gateway serves
    itself)), an API without a policy is not offered, and a gateway-served API is offered
    over its whole schema range whatever the upstream supports.
    """
    with_policy, served_here = policed if policed is not None else (None, set())
    served_here = set(served_here) | GATEWAY_HANDLED
    ranges: VersionRanges = {}
    for key, schema in all_apis().items():
        if key in INTERNAL_APIS:
            continue
        if key in served_here:
            ranges[key] = (schema.min_version, schema.max_version)
            continue
        if key not in upstream or (with_policy is not None and key not in with_policy) or key in never_relayed:
            continue
        low = max(schema.min_version, upstream[key][0])
        high = min(schema.max_version, upstream[key][1], VERSION_CAPS.get(key, schema.max_version))
        if low <= high:
            ranges[key] = (low, high)
    return ranges


def _codec(version: int) -> MessageCodec:
    schema = api(ApiKey.API_VERSIONS)
    assert schema is not None
    return schema.response_codec(version)


def api_versions_response(correlation_id: int, version: int, ranges: VersionRanges,
                          features: dict[str, object]) -> bytes:
    """The full response payload (header + body) for a client's ApiVersions request.

    A version newer than the gateway knows gets Kafka's KIP-511 answer: a v0 response
    with UNSUPPORTED_VERSION that still lists the supported ApiVersions range.
    """
    if version not in ranges_for(ApiKey.API_VERSIONS, ranges):
        low, high = ranges[ApiKey.API_VERSIONS]
        body = {"error_code": KafkaError.UNSUPPORTED_VERSION,
                "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": low, "max_version": high}]}
        return encode_response_header(correlation_id, 0) + bytes(_codec(0).encode(body))
    body = {
        "error_code": KafkaError.NONE,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(ranges.items())],
        "throttle_time_ms": 0,
        **features,
    }
    return encode_response_header(correlation_id, 0) + bytes(_codec(version).encode(body))


def ranges_for(api_key: int, ranges: VersionRanges) -> range:
    low, high = ranges.get(api_key, (0, -1))
    return range(low, high + 1)


def check_negotiated(api_key: int, version: int, ranges: VersionRanges) -> None:
    if version not in ranges_for(api_key, ranges):
        raise DecodeError(f"api key {api_key} v{version} is outside the negotiated set")
