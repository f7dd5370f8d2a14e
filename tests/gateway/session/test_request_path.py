"""The request path on the wire: ordering, correlation ids, refusals and limits."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.config import ConfigError
from gateway.session.api_versions import NOT_CHECKED, ServedNode, api_versions_reply
from gateway.session.routes import Dispatch
from protocol.api_keys import INTERNAL_APIS, ApiKey
from protocol.header import decode_response_header
from protocol.kafka_errors import KafkaError
from protocol.registry import all_apis, api
from tests.harness import GatewayThread, free_port_block
from tests.wire_client import WireClient, request_frame

TANSU_NODE_ID = 111

METADATA_V = 12
ALL_TOPICS = {"topics": None, "allow_auto_topic_creation": False,
              "include_topic_authorized_operations": False}


@pytest.fixture
def client(gateway: GatewayThread) -> Iterator[WireClient]:
    c = WireClient(gateway.bootstrap)
    yield c
    c.close()


def test_pipelined_requests_come_back_in_order_with_the_clients_correlation_ids(client: WireClient) -> None:
    # Arbitrary, non-monotonic ids, a duplicate, and a mix of gateway-answered
    # (ApiVersions) and relayed (Metadata) requests, all sent before reading anything.
    ids = [7, 3, 1000, 3, -5, 2**31 - 1, 42, 0] * 6
    sent = []
    for i, cid in enumerate(ids):
        if i % 3 == 0:
            client.send(request_frame(ApiKey.API_VERSIONS, 3, cid, {"client_software_name": "t",
                                                                  "client_software_version": "1"}))
            sent.append((ApiKey.API_VERSIONS, 3))
        else:
            client.send(request_frame(ApiKey.METADATA, METADATA_V, cid, ALL_TOPICS))
            sent.append((ApiKey.METADATA, METADATA_V))
    got = [client.read_response(key, version)[0] for key, version in sent]
    assert got == ids


def test_produce_with_acks_zero_gets_no_response(client: WireClient) -> None:
    produce = {"transactional_id": None, "acks": 0, "timeout_ms": 1000,
               "topic_data": [{"name": "acks0-topic", "partition_data": []}]}
    client.send(request_frame(ApiKey.PRODUCE, 9, 11, produce))
    client.send(request_frame(ApiKey.METADATA, METADATA_V, 12, ALL_TOPICS))
    correlation_id, _ = client.read_response(ApiKey.METADATA, METADATA_V)
    assert correlation_id == 12


def test_api_versions_offers_only_what_both_upstream_and_gateway_can_handle(
        client: WireClient, broker: EmbeddedBroker, gateway: GatewayThread) -> None:
    client.send(request_frame(ApiKey.API_VERSIONS, 3, 1, {"client_software_name": "t",
                                                          "client_software_version": "1"}))
    _, ours = client.read_response(ApiKey.API_VERSIONS, 3)
    direct = WireClient(broker.bootstrap)
    direct.send(request_frame(ApiKey.API_VERSIONS, 3, 1, {"client_software_name": "t",
                                                          "client_software_version": "1"}))
    _, theirs = direct.read_response(ApiKey.API_VERSIONS, 3)
    direct.close()
    upstream = {k["api_key"]: (k["min_version"], k["max_version"]) for k in theirs["api_keys"]}
    assert ours["error_code"] == 0
    for entry in ours["api_keys"]:
        key, low, high = entry["api_key"], entry["min_version"], entry["max_version"]
        assert key not in INTERNAL_APIS
        schema = all_apis()[key]
        assert schema.min_version <= low <= high <= schema.max_version
        if gateway.gateway.ctx.routes[key].dispatch is Dispatch.RELAY:
            assert upstream[key][0] <= low and high <= upstream[key][1]
    offered = {entry["api_key"] for entry in ours["api_keys"]}
    assert {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA} <= offered


def test_api_versions_newer_than_known_gets_kip511_v0_error(client: WireClient) -> None:
    client.send(request_frame(ApiKey.API_VERSIONS, 0, 5, {})[:6] + struct.pack(">h", 99)
                + request_frame(ApiKey.API_VERSIONS, 0, 5, {})[8:])
    correlation_id, body = client.read_response(ApiKey.API_VERSIONS, 0)
    assert correlation_id == 5
    assert body["error_code"] == 35  # UNSUPPORTED_VERSION
    assert [k["api_key"] for k in body["api_keys"]] == [ApiKey.API_VERSIONS]


def test_inter_broker_api_is_refused_by_closing_the_connection(client: WireClient) -> None:
    # LeaderAndIsr (key 4): a controller-only API; header v1 with an empty body.
    payload = struct.pack(">hhih", ApiKey.LEADER_AND_ISR, 0, 1, 0)
    client.send(struct.pack(">i", len(payload)) + payload)
    assert client.is_closed_by_peer()


def test_version_outside_the_negotiated_range_is_refused(client: WireClient, gateway: GatewayThread) -> None:
    _low, high = gateway.gateway.ctx.negotiated[ApiKey.METADATA]
    schema_max = all_apis()[ApiKey.METADATA].max_version
    if high >= schema_max:
        pytest.skip("the upstream supports every Metadata version the gateway parses")
    client.send(request_frame(ApiKey.METADATA, high + 1, 1, ALL_TOPICS))
    assert client.is_closed_by_peer()


def test_truncated_request_body_is_refused_not_relayed(client: WireClient) -> None:
    frame = request_frame(ApiKey.METADATA, 4, 1, {"topics": [{"name": "some-topic"}],
                                                  "allow_auto_topic_creation": False})
    cut = frame[4:-6]  # lose the end of the topic name and the flags
    client.send(struct.pack(">i", len(cut)) + cut)
    assert client.is_closed_by_peer()


def test_tls_client_hello_on_plaintext_port_is_refused(client: WireClient) -> None:
    client.send(bytes.fromhex("160301020001000200") + b"\x00" * 64)
    assert client.is_closed_by_peer()


def test_oversized_frame_is_refused_before_its_body_arrives(broker: EmbeddedBroker) -> None:
    small = GatewayThread(broker.bootstrap, {"socket.request.max.bytes": 4096}).start()
    try:
        c = WireClient(small.bootstrap)
        c.send(struct.pack(">i", 50 * 1024 * 1024))  # announce 50 MiB, send nothing more
        assert c.is_closed_by_peer()
        c.close()
    finally:
        small.stop()


def test_identity_apis_are_never_relayed_even_without_an_authorizer(broker: EmbeddedBroker) -> None:
    """Relayed, DescribeAcls/CreateDelegationToken would act as the gateway's own upstream principal."""
    open_gateway = GatewayThread(broker.bootstrap, {"authorizer.class.name": ""}).start()
    try:
        offered = open_gateway.gateway.ctx.negotiated
        assert ApiKey.DESCRIBE_ACLS not in offered and ApiKey.CREATE_DELEGATION_TOKEN not in offered
        c = WireClient(open_gateway.bootstrap)
        c.send(request_frame(ApiKey.DESCRIBE_ACLS, 1, 1, {
            "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}))
        assert c.is_closed_by_peer()
        assert open_gateway.gateway.ctx.counters.relayed_requests == 0
        c.close()
    finally:
        open_gateway.stop()


def test_idle_connections_are_closed_after_connections_max_idle_ms(broker: EmbeddedBroker) -> None:
    idle_gateway = GatewayThread(broker.bootstrap, {"connections.max.idle.ms": 600}).start()
    try:
        c = WireClient(idle_gateway.bootstrap)
        c.send(request_frame(ApiKey.METADATA, METADATA_V, 1, ALL_TOPICS))
        c.read_response(ApiKey.METADATA, METADATA_V)
        assert c.is_closed_by_peer(timeout_s=5)  # nothing sent after the response: closed
        c.close()
    finally:
        idle_gateway.stop()


def test_a_negative_connections_max_idle_ms_never_closes_idle_connections(broker: EmbeddedBroker) -> None:
    """As on Kafka (its Selector has no idle expiry when the value is negative); a sweep used to
    find every connection idle for more than -1 ms and close it within half a second."""
    never = GatewayThread(broker.bootstrap, {"connections.max.idle.ms": -1}).start()
    try:
        c = WireClient(never.bootstrap)
        c.send(request_frame(ApiKey.METADATA, METADATA_V, 1, ALL_TOPICS))
        c.read_response(ApiKey.METADATA, METADATA_V)
        assert not c.is_closed_by_peer(timeout_s=1.5)  # three of the old sweeps' periods
        c.send(request_frame(ApiKey.METADATA, METADATA_V, 2, ALL_TOPICS))
        c.read_response(ApiKey.METADATA, METADATA_V)
        c.close()
    finally:
        never.stop()


def _start_with_its_node_port_taken(broker: EmbeddedBroker) -> GatewayThread:
    """A gateway whose node port another socket holds: its start fails (returned after the failure)."""
    base = free_port_block()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base + TANSU_NODE_ID))
        squatter.listen(1)
        gateway = GatewayThread(broker.bootstrap, {"listener.name.plaintext.node.port.base": base})
        with pytest.raises(ConfigError, match="cannot bind"):
            gateway.start()
    return gateway


def test_a_node_port_that_cannot_be_bound_fails_start_up(broker: EmbeddedBroker) -> None:
    """Clients told to use a node address nobody listens on would only time out: refuse to start."""
    _start_with_its_node_port_taken(broker).stop()


class StillEnding:
    """A thread that has closed its event loop and not yet returned: alive, with a closed loop."""

    def __init__(self, thread: threading.Thread) -> None:
        self._thread = thread

    def is_alive(self) -> bool:
        return True

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)


def test_stopping_a_gateway_thread_whose_start_failed_leaves_its_closed_loop_alone(
        broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness's side of the test above: after a failed start its thread closes the loop on its own,
    sometimes between stop()'s check that the thread is alive and its call on the loop ("Event loop is
    closed", intermittently). Here that instant is held still."""
    gateway = _start_with_its_node_port_taken(broker)
    gateway._thread.join(timeout=15)
    assert gateway.loop is not None and gateway.loop.is_closed()
    monkeypatch.setattr(gateway, "_thread", StillEnding(gateway._thread))
    gateway.stop()


def test_a_task_still_pending_when_a_gateway_thread_stops_is_cancelled_not_destroyed(broker: EmbeddedBroker) -> None:
    """The harness ends its loop as ``asyncio.run`` ends ``ksgate run``'s: remaining tasks are cancelled."""
    gateway = GatewayThread(broker.bootstrap).start()
    task = gateway.call(lambda: asyncio.ensure_future(asyncio.Event().wait()))
    gateway.stop()
    assert task.cancelled()


# --- ApiVersions v5 (KIP-1242), answered from request bytes (gateway/session/api_versions.py) ---------------------

RANGES = {ApiKey.API_VERSIONS: (0, 5), ApiKey.METADATA: (0, 12)}
FEATURES = {"finalized_features_epoch": 7}
HERE = ServedNode("cluster-one", 3)
SOFTWARE = {"client_software_name": "t", "client_software_version": "1"}


def _reply(version: int, served: ServedNode, **fields: Any) -> tuple[dict[str, Any], bool]:
    named = {"cluster_id": None, "node_id": -1} if version >= 5 else {}  # the schema's defaults
    payload = memoryview(request_frame(ApiKey.API_VERSIONS, version, 9, {**SOFTWARE, **named, **fields}))[4:]
    answer, answered = api_versions_reply(payload, 9, version, RANGES, FEATURES, served)
    correlation_id, offset = decode_response_header(memoryview(answer), 0)  # ApiVersions: header v0 always
    assert correlation_id == 9
    schema = api(ApiKey.API_VERSIONS)
    assert schema is not None
    return schema.response_codec(version).decode(memoryview(answer)[offset:]), answered


def test_v5_naming_the_node_the_connection_reaches_gets_the_full_answer() -> None:
    body, answered = _reply(5, HERE, cluster_id="cluster-one", node_id=3)
    assert answered and body["error_code"] == KafkaError.NONE
    assert {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]} == RANGES
    assert body["finalized_features_epoch"] == 7


def test_v5_naming_neither_cluster_nor_node_is_not_checked() -> None:
    body, answered = _reply(5, HERE)
    assert answered and body["error_code"] == KafkaError.NONE


@pytest.mark.parametrize(("cluster_id", "node_id"), [("cluster-two", 3), ("cluster-one", 4)])
def test_v5_naming_another_cluster_or_node_must_rebootstrap(cluster_id: str, node_id: int) -> None:
    body, answered = _reply(5, HERE, cluster_id=cluster_id, node_id=node_id)
    # KafkaApis answers with the code alone: no API listed, so a stale client cannot carry on here.
    assert not answered
    assert (body["error_code"], body["api_keys"]) == (KafkaError.REBOOTSTRAP_REQUIRED, [])


@pytest.mark.parametrize(("cluster_id", "node_id"), [(None, 3), ("cluster-one", -1)])
def test_v5_naming_only_one_of_cluster_and_node_is_an_invalid_request(cluster_id: str | None, node_id: int) -> None:
    for served in (HERE, NOT_CHECKED):  # ApiVersionsRequest.isValid: checked before, and without, authentication
        body, answered = _reply(5, served, cluster_id=cluster_id, node_id=node_id)
        assert not answered
        assert (body["error_code"], body["api_keys"]) == (KafkaError.INVALID_REQUEST, [])


def test_v5_what_the_gateway_does_not_know_it_does_not_refuse() -> None:
    # Before authentication (Kafka's SASL authenticator does not check), or a bootstrap link to an unlisted broker.
    body, answered = _reply(5, NOT_CHECKED, cluster_id="cluster-two", node_id=4)
    assert answered and body["error_code"] == KafkaError.NONE
    body, answered = _reply(5, ServedNode("cluster-one", None), cluster_id="cluster-one", node_id=4)
    assert answered and body["error_code"] == KafkaError.NONE
    body, _ = _reply(5, ServedNode("cluster-one", None), cluster_id="cluster-two", node_id=4)
    assert body["error_code"] == KafkaError.REBOOTSTRAP_REQUIRED


def test_versions_before_v5_are_answered_whatever_the_connection_reaches() -> None:
    body, answered = _reply(4, HERE)
    assert answered and body["error_code"] == KafkaError.NONE


# --- ApiVersions v3+ software name and version (KIP-511), checked as ApiVersionsRequest.isValid does --------------

@pytest.mark.parametrize("version", [3, 4, 5])
@pytest.mark.parametrize(("name", "software_version"), [
    ("apache-kafka-java", "4.4.0"), ("librdkafka", "2.6.1"), ("a", "1"), ("x.y-z", "0-SNAPSHOT"), ("A9", "9a")])
def test_a_software_name_and_version_kafka_accepts_get_the_full_answer(
        version: int, name: str, software_version: str) -> None:
    body, answered = _reply(version, HERE, client_software_name=name, client_software_version=software_version)
    assert answered and body["error_code"] == KafkaError.NONE
    assert {k["api_key"] for k in body["api_keys"]} == set(RANGES)


@pytest.mark.parametrize("version", [3, 4, 5])
@pytest.mark.parametrize("bad", ["", "bad name!", "-lead", "trail.", "under_score", "caf\u00e9", "x\n", "1.0+build"])
def test_a_software_name_or_version_kafka_refuses_is_an_invalid_request(version: int, bad: str) -> None:
    for served in (HERE, NOT_CHECKED):  # before authentication too: Kafka's SASL authenticator asks isValid
        for fields in ({"client_software_name": bad}, {"client_software_version": bad}):
            body, answered = _reply(version, served, **fields)
            assert not answered  # the SASL stage still waits for an ApiVersions, as Kafka's authenticator does
            assert (body["error_code"], body["api_keys"]) == (KafkaError.INVALID_REQUEST, [])


def test_an_invalid_software_name_is_refused_before_the_node_it_names_is_checked() -> None:
    # KafkaApis asks isValid first: INVALID_REQUEST, not REBOOTSTRAP_REQUIRED, for a request wrong on both counts.
    body, _ = _reply(5, HERE, client_software_name="", cluster_id="cluster-two", node_id=3)
    assert body["error_code"] == KafkaError.INVALID_REQUEST


@pytest.mark.parametrize("version", [0, 1, 2])
def test_versions_before_v3_name_no_software_and_are_not_checked(version: int) -> None:
    payload = memoryview(request_frame(ApiKey.API_VERSIONS, version, 9, {}))[4:]
    _, answered = api_versions_reply(payload, 9, version, RANGES, FEATURES, HERE)
    assert answered


# --- The upstream's features as Kafka 4.4 lists them per version (ApiVersionsResponse, KAFKA-17011) ---------------

UPSTREAM_FEATURES = {
    "supported_features": [{"name": "metadata.version", "min_version": 7, "max_version": 29},
                           {"name": "group.version", "min_version": 0, "max_version": 1},
                           {"name": "share.version", "min_version": 0, "max_version": 1}],
    "finalized_features_epoch": 42,
    "finalized_features": [{"name": "metadata.version", "max_version_level": 29, "min_version_level": 29},
                           {"name": "group.version", "max_version_level": 1, "min_version_level": 1},
                           {"name": "share.version", "max_version_level": 0, "min_version_level": 0}],
}


def _features(version: int) -> dict[str, Any]:
    named = {"cluster_id": None, "node_id": -1} if version >= 5 else {}
    payload = memoryview(request_frame(ApiKey.API_VERSIONS, version, 9, {**SOFTWARE, **named}))[4:]
    answer, _ = api_versions_reply(payload, 9, version, RANGES, UPSTREAM_FEATURES, HERE)
    _, offset = decode_response_header(memoryview(answer), 0)
    schema = api(ApiKey.API_VERSIONS)
    assert schema is not None
    return schema.response_codec(version).decode(memoryview(answer)[offset:])


@pytest.mark.parametrize("version", [4, 5])
def test_v4_and_later_list_the_supported_features_whose_lowest_level_is_0(version: int) -> None:
    body = _features(version)
    assert [f["name"] for f in body["supported_features"]] == ["metadata.version", "group.version", "share.version"]
    assert [f["name"] for f in body["finalized_features"]] == ["metadata.version", "group.version"]
    assert body["finalized_features_epoch"] == 42


def test_v3_leaves_out_the_supported_features_whose_lowest_level_is_0() -> None:
    body = _features(3)
    assert [f["name"] for f in body["supported_features"]] == ["metadata.version"]
    # Finalized features are filtered alike at every version: only a level of 0 is left out.
    assert [f["name"] for f in body["finalized_features"]] == ["metadata.version", "group.version"]


def test_the_readiness_probe_replaces_feature_levels_the_upstream_no_longer_lists(gateway: GatewayThread) -> None:
    """A level changed with kafka-features while the gateway runs reaches clients at the next probe: here the
    gateway is made to hold a level Tansu (which finalizes none) never gave, and the probe's answer replaces it."""
    cluster = gateway.gateway.ctx.cluster
    learned = cluster.features
    stale = {**learned, "finalized_features_epoch": 99,
             "finalized_features": [{"name": "group.version", "max_version_level": 1, "min_version_level": 1}]}
    gateway.call(setattr, cluster, "features", stale)
    try:
        assert gateway.loop is not None
        failure = asyncio.run_coroutine_threadsafe(gateway.gateway._bootstrap_answers(), gateway.loop).result(10)
        assert failure is None
        client = WireClient(gateway.bootstrap)
        client.send(request_frame(ApiKey.API_VERSIONS, 4, 1, SOFTWARE))
        _, body = client.read_response(ApiKey.API_VERSIONS, 4)
        client.close()
        assert body["finalized_features"] == [] and body["finalized_features_epoch"] == -1
    finally:
        gateway.call(setattr, cluster, "features", learned)
