"""ApiVersions, answered by the gateway itself.

A client may use exactly the intersection of what the upstream broker supports and what
the gateway can parse and police; anything else is refused rather than relayed blind.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.session.routes import Dispatch, RouteTable, VersionRanges
from protocol.api_keys import ApiKey
from protocol.codec import MessageCodec
from protocol.errors import DecodeError
from protocol.header import encode_response_header
from protocol.kafka_errors import KafkaError
from protocol.registry import api


def negotiate(routes: RouteTable, upstream: VersionRanges, authorizing: bool) -> dict[int, tuple[int, int]]:
    """Per api key, the versions clients may use (gateway/session/routes.py says why each is what it is).

    With authorization on, an API without a policy is not offered, and an admin API this gateway
    serves is offered over its whole schema range whatever the upstream supports. Without it, no
    admin API is served here (their routes have no handler), and none is relayed.
    """
    ranges: dict[int, tuple[int, int]] = {}
    for key, route in routes.items():
        if route.dispatch in (Dispatch.API_VERSIONS, Dispatch.SASL) or route.local is not None:
            ranges[key] = (route.versions.start, route.versions.stop - 1)
            continue
        if key not in upstream or route.never_relayed or (authorizing and route.policy is None):
            continue
        offered = route.offered(upstream[key])
        if offered:
            ranges[key] = (offered.start, offered.stop - 1)
    return ranges


def _codec(version: int) -> MessageCodec:
    schema = api(ApiKey.API_VERSIONS)
    assert schema is not None
    return schema.response_codec(version)


def api_versions_response(correlation_id: int, version: int, ranges: VersionRanges,
                          features: Mapping[str, object]) -> bytes:
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


_NOTHING = (0, -1)  # an api key the gateway does not offer: no version is in it


def ranges_for(api_key: int, ranges: VersionRanges) -> range:
    low, high = ranges.get(api_key, _NOTHING)
    return range(low, high + 1)


def check_negotiated(api_key: int, version: int, ranges: VersionRanges) -> None:
    low, high = ranges.get(api_key, _NOTHING)  # ranges_for's bounds, without a range per request
    if not low <= version <= high:
        raise DecodeError(f"api key {api_key} v{version} is outside the negotiated set")
