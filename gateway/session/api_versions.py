"""ApiVersions, answered by the gateway itself.

A client may use exactly the intersection of what the upstream broker supports and what
the gateway can parse and police; anything else is refused rather than relayed blind.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.session.routes import Dispatch, RouteTable, VersionRanges
from protocol.api_keys import ApiKey
from protocol.codec import MessageCodec
from protocol.errors import DecodeError
from protocol.header import encode_response_header, read_request_header
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


@dataclass(slots=True, frozen=True)
class ServedNode:
    """The cluster and broker a connection reaches through the gateway, as far as it is known (KIP-1242).

    None where it is not known: before authentication on a SASL listener (Kafka's SASL authenticator
    does not check either), or a bootstrap connection whose upstream broker is not in the cluster view.
    """

    cluster_id: str | None = None
    node_id: int | None = None


NOT_CHECKED = ServedNode()
_SOFTWARE_FROM = 3  # ApiVersions v3 (KIP-511) names the client's software and its version
_INTENDED_FROM = 5  # ApiVersions v5 (Kafka 4.4) names the cluster and node the client means to reach
_LEVEL_0_FROM = 4  # ApiVersions v4 (KAFKA-17011) lists supported features whose lowest level is 0
# What Kafka accepts as a software name or version: letters, digits, '-' and '.', starting and ending with a
# letter or digit (so never empty). The character classes are ASCII, as in Java's default regex flags.
_SOFTWARE_NAME = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?")


def api_versions_reply(payload: memoryview, correlation_id: int, version: int, ranges: VersionRanges,
                       features: Mapping[str, object], served: ServedNode = NOT_CHECKED) -> tuple[bytes, bool]:
    """The full response payload (header + body) for a client's ApiVersions request, and whether it
    was answered without an error (after one, Kafka's SASL authenticator still waits for an ApiVersions).

    A version newer than the gateway knows gets Kafka's KIP-511 answer: a v0 response
    with UNSUPPORTED_VERSION that still lists the supported ApiVersions range. From v3 the
    request is checked as Kafka checks it: see ``request_error``.
    """
    if version not in ranges_for(ApiKey.API_VERSIONS, ranges):
        low, high = ranges[ApiKey.API_VERSIONS]
        body = {"error_code": KafkaError.UNSUPPORTED_VERSION,
                "api_keys": [{"api_key": ApiKey.API_VERSIONS, "min_version": low, "max_version": high}]}
        return encode_response_header(correlation_id, 0) + bytes(_codec(0).encode(body)), False
    error = request_error(payload, version, served)
    if error is not None:
        # ApiVersionsRequest.getErrorResponse: the code alone, no API listed, at the version asked.
        body = {"error_code": error, "api_keys": [], "throttle_time_ms": 0}
        return encode_response_header(correlation_id, 0) + bytes(_codec(version).encode(body)), False
    body = {
        "error_code": KafkaError.NONE,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(ranges.items())],
        "throttle_time_ms": 0,
        **features_at(features, version),
    }
    return encode_response_header(correlation_id, 0) + bytes(_codec(version).encode(body)), True


def features_at(features: Mapping[str, Any], version: int) -> Mapping[str, Any]:
    """The upstream's feature fields as Kafka 4.4 answers them at ``version`` (ApiVersionsResponse): below v4
    without the supported features whose lowest level is 0, which older clients failed to read
    (KAFKA-17011); finalized features at level 0 at no version. Once per connection, a few items."""
    supported = features.get("supported_features")
    finalized = features.get("finalized_features")
    if version >= _LEVEL_0_FROM and not any(f["max_version_level"] == 0 for f in finalized or ()):
        return features
    shown = dict(features)
    if supported is not None and version < _LEVEL_0_FROM:
        shown["supported_features"] = [f for f in supported if f["min_version"] != 0]
    if finalized is not None:
        shown["finalized_features"] = [f for f in finalized if f["max_version_level"] != 0]
    return shown


def request_error(payload: memoryview, version: int, served: ServedNode) -> KafkaError | None:
    """The error Kafka 4.4 answers a supported ApiVersions request with, or None: INVALID_REQUEST for
    what ``is_valid`` refuses, before and after login alike (Kafka's SASL authenticator and KafkaApis both
    ask it), then REBOOTSTRAP_REQUIRED for a v5+ request naming another node (``names_another_node``).
    Raises DecodeError on a malformed body.
    """
    if version < _SOFTWARE_FROM:  # nothing to check below v3: the body is empty
        return None
    schema, _, _, header_size, _ = read_request_header(payload, ApiKey.API_VERSIONS, version)
    body, _ = schema.request_codec(version).decode_prefix(payload[header_size:])
    if not is_valid(body, version):
        return KafkaError.INVALID_REQUEST
    if names_another_node(body, version, served):
        return KafkaError.REBOOTSTRAP_REQUIRED
    return None


def is_valid(body: Mapping[str, Any], version: int) -> bool:
    """Kafka's ApiVersionsRequest.isValid: from v5, a cluster and a node both or neither (KIP-1242); from
    v3, a software name and version Kafka would accept (KIP-511), which it keeps per connection for its
    metrics and client telemetry; a client that sends anything else gets INVALID_REQUEST from Kafka too.
    """
    if version >= _INTENDED_FROM and (body["cluster_id"] is None) != (body["node_id"] == -1):
        return False
    return version < _SOFTWARE_FROM or (_SOFTWARE_NAME.fullmatch(body["client_software_name"]) is not None
                                        and _SOFTWARE_NAME.fullmatch(body["client_software_version"]) is not None)


def names_another_node(body: Mapping[str, Any], version: int, served: ServedNode) -> bool:
    """Whether a v5+ request names a cluster or broker other than the one the connection reaches: the
    client's metadata is stale (KafkaApis.handleApiVersionsRequest). What ``served`` does not know is not
    checked, so an honest client is never sent to re-bootstrap on a guess.
    """
    if version < _INTENDED_FROM or body["cluster_id"] is None:
        return False
    if served.cluster_id is not None and body["cluster_id"] != served.cluster_id:
        return True
    return served.node_id is not None and body["node_id"] != served.node_id


_NOTHING = (0, -1)  # an api key the gateway does not offer: no version is in it


def ranges_for(api_key: int, ranges: VersionRanges) -> range:
    low, high = ranges.get(api_key, _NOTHING)
    return range(low, high + 1)


def check_negotiated(api_key: int, version: int, ranges: VersionRanges) -> None:
    low, high = ranges.get(api_key, _NOTHING)  # ranges_for's bounds, without a range per request
    if not low <= version <= high:
        raise DecodeError(f"api key {api_key} v{version} is outside the negotiated set")
