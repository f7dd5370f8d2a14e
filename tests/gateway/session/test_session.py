"""The proxy session's behaviour, without sockets or a broker: events in, actions out."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from authz.model import AclOperation, ResourceType
from gateway.clock import SYSTEM_CLOCK, Clock
from gateway.server import Gateway
from gateway.session import actions as act
from gateway.session.session import LARGE_BYTES, STREAM_MIN_BYTES
from gateway.stores.file_acls import FileAclStore
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from protocol.messages import request_frame, response_frame
from tests.authz.helpers import acl
from tests.authz.test_policies_data import entry, request, response
from tests.gateway.session.session_driver import Driver, ManualClock, gateway_for

METADATA_V = 12
PRODUCE_V = 9
FETCH_V = 15


def metadata(*names: str) -> dict[str, Any]:
    return request(ApiKey.METADATA, METADATA_V, topics=[{"name": n, "topic_id": uuid.UUID(int=0)} for n in names],
                   allow_auto_topic_creation=False)


def metadata_answer(*names: str) -> dict[str, Any]:
    return response(ApiKey.METADATA, METADATA_V, "topics",
                    [entry(ApiKey.METADATA, METADATA_V, "topics", name=n, topic_id=uuid.uuid4()) for n in names],
                    brokers=[{"node_id": 111, "host": "10.9.9.9", "port": 9092, "rack": None}])


def produce(acks: int) -> dict[str, Any]:
    return request(ApiKey.PRODUCE, PRODUCE_V, acks=acks, timeout_ms=1000,
                   topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 61}]}])


@pytest.fixture
def plaintext(tmp_path: Path) -> Gateway:
    return gateway_for(tmp_path)  # no authorizer: every authenticated request is relayed


def log_in(driver: Driver, user: str, password: str, correlation_id: int = 1) -> None:
    driver.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, correlation_id, {"mechanism": "PLAIN"}))
    driver.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, correlation_id + 1,
                              {"auth_bytes": f"\0{user}\0{password}".encode()}))
    if any(j.kind is act.JobKind.VERIFY for j in driver.jobs.values()):
        driver.run_job(act.JobKind.VERIFY)  # the password hash, as the verification pool would run it


def authenticated(gateway: Gateway, user: str = "alice", clock: Clock = SYSTEM_CLOCK) -> Driver:
    driver = Driver.connect(gateway, "SASL_PLAINTEXT", clock=clock)
    log_in(driver, user, f"{user}-secret")
    assert driver.session.principal is not None and driver.session.principal.name == user
    driver.record(driver.session.upstream_ready("10.9.9.9:9092"))
    driver.client_bytes.clear()
    return driver


# --- ordering -----------------------------------------------------------------------------------

def test_answers_leave_in_request_order_with_the_clients_ids_whatever_order_the_upstream_answers(
        plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 7, metadata("a"))
                + request_frame(ApiKey.API_VERSIONS, 3, 3, {"client_software_name": "t",
                                                            "client_software_version": "1"})
                + request_frame(ApiKey.METADATA, METADATA_V, 7, metadata("b")))
    first, second = driver.upstream_requests()
    assert first.upstream_id != second.upstream_id  # the client reused 7; the upstream never sees a clash
    driver.answer(second, metadata_answer("b"))
    assert driver.client_bytes == b""  # b's answer waits for a's: order is the client's
    driver.answer(first, metadata_answer("a"))
    assert driver.correlation_ids() == [7, 3, 7]


def test_an_upstream_answer_nobody_asked_for_closes_the_connection(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    [sent] = driver.upstream_requests()
    sent.upstream_id += 1000
    driver.answer(sent, metadata_answer("a"))
    assert driver.closed is not None and "nobody asked for" in str(driver.closed.reason)


def test_requests_before_the_upstream_is_up_wait_and_go_out_in_order(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext, upstream_up=False)
    assert driver.reading_paused  # connecting: nothing more is read meanwhile
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    assert driver.upstream_bytes == b""
    driver.record(driver.session.upstream_ready("10.9.9.9:9092"))
    assert [r.body["topics"][0]["name"] for r in driver.upstream_requests()] == ["a"]
    assert not driver.reading_paused


# --- ApiVersions v5 (KIP-1242) --------------------------------------------------------------------

def _intends(driver: Driver, cluster_id: str, node_id: int) -> int:
    driver.send(request_frame(ApiKey.API_VERSIONS, 5, 4, {"client_software_name": "t", "client_software_version": "1",
                                                         "cluster_id": cluster_id, "node_id": node_id}))
    ((_, body),) = driver.responses(ApiKey.API_VERSIONS, 5)
    return int(body["error_code"])


def test_a_bootstrap_link_is_checked_against_the_broker_it_reached(plaintext: Gateway) -> None:
    cluster = plaintext.ctx.cluster
    cluster.cluster_id, cluster.nodes = "c1", {7: ("10.9.9.9", 9092)}  # the driver's upstream is node 7
    driver = Driver.connect(plaintext)
    assert _intends(driver, "c1", 7) == KafkaError.NONE
    assert _intends(driver, "c1", 8) == KafkaError.REBOOTSTRAP_REQUIRED
    assert _intends(driver, "c2", 7) == KafkaError.REBOOTSTRAP_REQUIRED
    assert not driver.upstream_requests()  # answered by the gateway, never relayed
    # A link to a broker the cluster view does not list: which node it is is unknown, so not checked.
    cluster.nodes = {7: ("10.9.9.10", 9092)}
    other = Driver.connect(plaintext)
    assert _intends(other, "c1", 8) == KafkaError.NONE
    assert _intends(other, "c2", 8) == KafkaError.REBOOTSTRAP_REQUIRED


def _software(driver: Driver, name: str, correlation_id: int) -> dict[str, Any]:
    driver.send(request_frame(ApiKey.API_VERSIONS, 3, correlation_id, {"client_software_name": name,
                                                                      "client_software_version": "1"}))
    ((answered_id, body),) = driver.responses(ApiKey.API_VERSIONS, 3)
    assert answered_id == correlation_id
    return body


def test_an_invalid_software_name_before_login_is_refused_and_another_api_versions_awaited(
        alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    refused = _software(driver, "bad name!", 1)
    assert (refused["error_code"], refused["api_keys"]) == (KafkaError.INVALID_REQUEST, [])
    assert driver.closed is None  # Kafka's SASL authenticator answers and waits for a valid ApiVersions
    assert _software(driver, "fixed-name", 2)["error_code"] == KafkaError.NONE
    log_in(driver, "alice", "alice-secret", correlation_id=3)
    assert driver.session.principal is not None and driver.session.principal.name == "alice"


def test_an_invalid_software_name_after_login_is_answered_locally_and_the_connection_kept(
        alice_sees_a: Gateway) -> None:
    driver = authenticated(alice_sees_a)
    refused = _software(driver, "", 7)
    assert (refused["error_code"], refused["api_keys"]) == (KafkaError.INVALID_REQUEST, [])
    assert _software(driver, "apache-kafka-java", 8)["error_code"] == KafkaError.NONE
    assert driver.closed is None and driver.upstream_bytes == b""  # never relayed


# --- StreamsGroupTopologyDescriptionUpdate (93, KIP-1331) -----------------------------------------------------

STU = ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE


@pytest.fixture
def reads_group_g(tmp_path: Path) -> Gateway:
    """An authorizer; ANONYMOUS may read group g, and nothing else (no topic at all)."""
    FileAclStore(tmp_path / "acls.json").add([acl("g", AclOperation.READ, principal="User:ANONYMOUS",
                                                  resource_type=ResourceType.GROUP)])
    gateway = gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer",
                                       "ksgate.acl.file": str(tmp_path / "acls.json")})
    assert gateway.ctx.authorization is not None
    gateway.ctx.authorization.reserved_topics = frozenset({"_ksgate_security"})
    return gateway


def _description_update(group: str, *topics: str) -> bytes:
    nodes = [{"name": "source", "node_type": 1, "source_topics": list(topics), "sink_topic": None,
              "stores": [], "successors": []}]
    return request_frame(STU, 0, 5, request(STU, 0, group_id=group, member_id="m", topology_epoch=1,
                                            topology_description={"subtopologies": [
                                                {"subtopology_id": "0", "nodes": nodes}], "global_stores": []}))


def test_a_streams_topology_description_is_relayed_with_read_on_the_group_whatever_topics_it_names(
        reads_group_g: Gateway) -> None:
    driver = Driver.connect(reads_group_g)
    assert reads_group_g.ctx.negotiated[STU] == (0, 0)  # offered: a client API, not an inter-broker one
    driver.send(_description_update("g", "a", "b"))
    [relayed] = driver.upstream_requests()
    assert relayed.api_key == STU and relayed.body["group_id"] == "g"
    driver.answer(relayed, {"throttle_time_ms": 0, "error_code": KafkaError.UNKNOWN_MEMBER_ID, "error_message": None})
    [(correlation_id, answer)] = driver.responses(STU, 0)
    assert (correlation_id, answer["error_code"]) == (5, KafkaError.UNKNOWN_MEMBER_ID)


def test_a_streams_topology_description_without_read_on_the_group_is_answered_here(reads_group_g: Gateway) -> None:
    driver = Driver.connect(reads_group_g)
    driver.send(_description_update("h", "a"))
    [(_, answer)] = driver.responses(STU, 0)
    assert answer["error_code"] == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert driver.upstream_bytes == b"" and driver.closed is None


def test_a_streams_topology_description_naming_the_reserved_topic_is_never_relayed(reads_group_g: Gateway) -> None:
    driver = Driver.connect(reads_group_g)
    driver.send(_description_update("g", "a", "_ksgate_security"))
    assert driver.closed is not None and "reserved or illegal topic" in str(driver.closed.reason)
    assert driver.upstream_bytes == b""


# --- acks=0 --------------------------------------------------------------------------------------

def test_acks_zero_expects_nothing_and_an_upstream_answer_to_it_is_dropped(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 5, produce(acks=0))
                + request_frame(ApiKey.PRODUCE, PRODUCE_V, 6, produce(acks=1)))
    fire_and_forget, answered = driver.upstream_requests()
    assert driver.session.in_flight == 1  # only the acks=1 request holds a slot
    produced = response(ApiKey.PRODUCE, PRODUCE_V, "responses", [])
    driver.answer(fire_and_forget, produced)  # Tansu answers acks=0 anyway
    assert driver.closed is None and driver.client_bytes == b""
    driver.answer(answered, produced)
    assert driver.correlation_ids() == [6]


# --- refusals ------------------------------------------------------------------------------------

def _refused(gateway: Gateway, wire: bytes) -> Driver:
    driver = Driver.connect(gateway)
    driver.send(wire)
    assert driver.closed is not None and driver.closed.reason
    assert driver.upstream_bytes == b""  # nothing the gateway refuses reaches the upstream
    return driver


def test_a_request_that_is_not_kafka_is_refused(plaintext: Gateway) -> None:
    driver = _refused(plaintext, b"\x00\x00\x00\x02\x7f\x7f")
    assert "not a Kafka request" in str(driver.closed and driver.closed.reason)


def test_a_version_outside_the_negotiated_set_is_refused(plaintext: Gateway) -> None:
    wire = bytearray(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    wire[6:8] = (99).to_bytes(2, "big")
    driver = _refused(plaintext, bytes(wire))
    assert "v99" in str(driver.closed and driver.closed.reason)


def test_an_inter_broker_api_is_refused(plaintext: Gateway) -> None:
    wire = bytearray(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    wire[4:6] = (4).to_bytes(2, "big")  # LeaderAndIsr: no schema, no route
    _refused(plaintext, bytes(wire))


def test_an_admin_api_is_never_relayed_without_the_gateway_serving_it(plaintext: Gateway) -> None:
    body = request(ApiKey.DESCRIBE_ACLS, 3, resource_type_filter=1, pattern_type_filter=1, operation=1,
                   permission_type=1)
    driver = _refused(plaintext, request_frame(ApiKey.DESCRIBE_ACLS, 3, 1, body))
    assert "only served by the gateway" in str(driver.closed and driver.closed.reason)


@pytest.mark.parametrize("version", [FETCH_V, 16, 17, 18])
def test_a_follower_fetch_is_refused(plaintext: Gateway, version: int) -> None:
    # v17 adds the follower's replica_directory_id, v18 its high watermark (tagged, per partition): still a replica.
    extra = {**({"replica_directory_id": uuid.uuid4()} if version >= 17 else {}),
             **({"high_watermark": 7} if version >= 18 else {})}
    partition = {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                 "log_start_offset": -1, "partition_max_bytes": 1024, **extra}
    body = request(ApiKey.FETCH, version, replica_state={"replica_id": 1, "replica_epoch": 0},
                   topics=[{"topic_id": uuid.uuid4(), "partitions": [partition]}])
    driver = _refused(plaintext, request_frame(ApiKey.FETCH, version, 1, body))
    assert "follower" in str(driver.closed and driver.closed.reason)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_below_v3_closes_the_connection_before_authorization_as_kafka_4_does(
        alice_sees_a: Gateway, version: int) -> None:
    driver = authenticated(alice_sees_a, "bob")  # bob may write nothing: Kafka closes, it does not answer
    body = request(ApiKey.PRODUCE, version, acks=1, timeout_ms=1000,
                   topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": b"x" * 61}]}])
    driver.send(request_frame(ApiKey.PRODUCE, version, 5, body))
    assert driver.closed is not None and "not served" in str(driver.closed.reason)
    assert driver.upstream_bytes == b"" and driver.client_bytes == b""


def test_a_large_frame_before_authentication_is_refused_before_it_is_buffered(alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    driver.send((10_000_000).to_bytes(4, "big") + b"\x00\x11\x00\x01")
    assert driver.closed is not None and "sasl.server.max.receive.size" in str(driver.closed.reason)


def test_a_denied_request_is_answered_with_kafkas_error_and_not_relayed(alice_sees_a: Gateway) -> None:
    driver = authenticated(alice_sees_a, "bob")
    body = request(ApiKey.CREATE_TOPICS, 7, topics=[{"name": "x", "num_partitions": 1, "replication_factor": 1,
                                                     "assignments": [], "configs": []}])
    driver.send(request_frame(ApiKey.CREATE_TOPICS, 7, 9, body))
    [(correlation_id, answer)] = driver.responses(ApiKey.CREATE_TOPICS, 7)
    assert correlation_id == 9 and answer["topics"][0]["error_code"] == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert driver.upstream_bytes == b""


def test_a_denied_acks_zero_produce_closes_the_connection_as_kafka_does(alice_sees_a: Gateway) -> None:
    driver = authenticated(alice_sees_a)  # alice may not write to topic t
    driver.send(request_frame(ApiKey.PRODUCE, PRODUCE_V, 5, produce(acks=0)))
    assert driver.closed is not None and driver.upstream_bytes == b"" and driver.client_bytes == b""


def test_trailing_bytes_are_accepted_but_the_canonical_encoding_is_relayed(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    wire = request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a"))
    padded = (len(wire) - 4 + 3).to_bytes(4, "big") + wire[4:] + b"\x00\x00\x00"  # Kafka ignores these
    driver.send(padded)
    assert driver.closed is None
    assert bytes(driver.upstream_bytes)[12:] == wire[12:]  # the same request, without the trailing bytes


# --- authentication and re-authentication -----------------------------------------------------------

def test_authentication_times_out(alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    assert "authentication" in driver.timers
    driver.fire("authentication")
    assert driver.closed is not None and driver.closed.reason == "authentication timed out"


def test_nothing_is_relayed_or_opened_before_authentication(alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    assert not any(isinstance(a, act.OpenUpstream) for a in driver.actions)
    driver.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
    login = request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": b"\0alice\0alice-secret"})
    driver.send(login + request_frame(ApiKey.METADATA, METADATA_V, 3, metadata("a")))
    assert driver.reading_paused and not any(isinstance(a, act.OpenUpstream) for a in driver.actions)
    driver.run_job(act.JobKind.VERIFY)
    assert any(isinstance(a, act.OpenUpstream) for a in driver.actions)
    assert "authentication" not in driver.timers  # cancelled
    driver.record(driver.session.upstream_ready("10.9.9.9:9092"))
    [relayed] = driver.upstream_requests()  # the frame that waited for the hash, relayed after it
    assert relayed.api_key == ApiKey.METADATA


def test_a_wrong_password_is_answered_after_the_delay_and_closes(alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    log_in(driver, "alice", "wrong")
    assert driver.timers.get("farewell") == pytest.approx(0.1)  # connection.failed.authentication.delay.ms
    assert driver.responses(ApiKey.SASL_HANDSHAKE, 1, count=1) and driver.client_bytes == b""
    driver.fire("farewell")
    [(_, answer)] = driver.responses(ApiKey.SASL_AUTHENTICATE, 2)
    assert answer["error_code"] == KafkaError.SASL_AUTHENTICATION_FAILED
    assert driver.closed is not None


def test_a_full_verification_queue_fails_the_login(alice_sees_a: Gateway) -> None:
    driver = Driver.connect(alice_sees_a, "SASL_PLAINTEXT")
    driver.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
    driver.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": b"\0alice\0alice-secret"}))
    driver.run_job(act.JobKind.VERIFY, act.QueueFull())
    assert driver.session.principal is None and "farewell" in driver.timers


def test_reauthentication_as_the_same_principal_keeps_the_connection(alice_sees_a: Gateway) -> None:
    driver = authenticated(alice_sees_a)
    log_in(driver, "alice", "alice-secret", correlation_id=10)
    assert driver.responses(ApiKey.SASL_HANDSHAKE, 1, count=1)[0][1]["error_code"] == 0
    [(_, answer)] = driver.responses(ApiKey.SASL_AUTHENTICATE, 2)
    assert answer["error_code"] == 0 and answer["session_lifetime_ms"] > 0
    assert driver.closed is None and driver.upstream_bytes == b""  # SASL frames are never relayed


def test_sasl_authenticate_after_login_is_answered_illegal_state_and_the_connection_kept(
        alice_sees_a: Gateway) -> None:
    # As Kafka 4.4's request handler answers it (tests/auth_vs_kafka): only a SaslHandshake re-authenticates.
    driver = authenticated(alice_sees_a)
    driver.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 10, {"auth_bytes": b"\0alice\0alice-secret"}))
    [(correlation_id, answer)] = driver.responses(ApiKey.SASL_AUTHENTICATE, 2)
    assert correlation_id == 10 and answer["error_code"] == KafkaError.ILLEGAL_SASL_STATE
    assert answer["error_message"] == "SaslAuthenticate request received after successful authentication"
    assert driver.closed is None and driver.upstream_bytes == b""
    assert driver.session.principal is not None and driver.session.principal.name == "alice"


def test_sasl_handshake_after_login_without_reauthentication_is_answered_illegal_state(tmp_path: Path) -> None:
    users = FileCredentialStore(tmp_path / "users.json")
    users.upsert_user("alice", "alice-secret")
    gateway = gateway_for(tmp_path, "SASL_PLAINTEXT", **{  # no connections.max.reauth.ms: sessions never expire
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(tmp_path / "users.json"),
        "ksgate.sasl.plain.allow.insecure": True})
    driver = authenticated(gateway)
    driver.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 10, {"mechanism": "PLAIN"}))
    [(correlation_id, answer)] = driver.responses(ApiKey.SASL_HANDSHAKE, 1)
    assert (correlation_id, answer["error_code"], answer["mechanisms"]) == (10, KafkaError.ILLEGAL_SASL_STATE, [])
    assert driver.closed is None and driver.upstream_bytes == b""


def test_reauthentication_as_another_principal_is_refused(alice_sees_a: Gateway) -> None:
    driver = authenticated(alice_sees_a)
    log_in(driver, "bob", "bob-secret", correlation_id=10)
    driver.fire("farewell")
    assert driver.session.principal is not None and driver.session.principal.name == "alice"
    assert driver.closed is not None


def test_an_expired_session_is_closed_at_its_next_request(alice_sees_a: Gateway) -> None:
    clock = ManualClock.from_system()  # the authenticator dates the session from the system clock
    driver = authenticated(alice_sees_a, clock=clock)
    clock.advance(61)  # past connections.max.reauth.ms, on the session's clock only
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    assert driver.closed is not None and "connections.max.reauth.ms" in str(driver.closed.reason)
    assert driver.upstream_bytes == b""


@pytest.mark.parametrize("frame", [
    request_frame(ApiKey.API_VERSIONS, 3, 1, {"client_software_name": "x", "client_software_version": "1"}),
    request_frame(ApiKey.SASL_AUTHENTICATE, 2, 1, {"auth_bytes": b"\0alice\0alice-secret"}),
], ids=["api-versions", "sasl-authenticate"])
def test_an_expired_session_closes_on_any_request_but_a_handshake(alice_sees_a: Gateway, frame: bytes) -> None:
    # As Kafka 4.4 (tests/auth_vs_kafka/test_reauth_vs_kafka.py): not answered, ApiVersions and SASL included.
    clock = ManualClock.from_system()
    driver = authenticated(alice_sees_a, clock=clock)
    clock.advance(61)
    driver.send(frame)
    assert driver.closed is not None and "connections.max.reauth.ms" in str(driver.closed.reason)
    assert driver.client_bytes == b"" and driver.upstream_bytes == b""


def test_reauthentication_asking_for_another_mechanism_closes_at_the_next_frame(tmp_path: Path) -> None:
    FileCredentialStore(tmp_path / "users.json").upsert_user("alice", "alice-secret")
    gateway = gateway_for(tmp_path, "SASL_PLAINTEXT", **{
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", "ksgate.credentials.file": str(tmp_path / "users.json"),
        "ksgate.sasl.plain.allow.insecure": True, "connections.max.reauth.ms": 60_000})
    driver = authenticated(gateway)  # with PLAIN
    driver.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 10, {"mechanism": "SCRAM-SHA-512"}))
    [(_, answer)] = driver.responses(ApiKey.SASL_HANDSHAKE, 1)
    assert answer["error_code"] == 0 and driver.closed is None  # Kafka 4.4 answers it without an error
    failures = driver.session.ctx.counters.authentication_failures
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 11, metadata("a")))
    assert driver.session.ctx.counters.authentication_failures == failures + 1  # logged, counted and audited
    driver.fire("farewell")  # after connection.failed.authentication.delay.ms, as any failed login
    assert driver.closed is not None and driver.upstream_bytes == b""  # not served meanwhile


# --- partial rewrites -----------------------------------------------------------------------------

def test_a_partly_authorized_request_relays_only_its_allowed_part_and_merges_the_rest(
        alice_sees_a: Gateway) -> None:
    driver = authenticated(alice_sees_a)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 4, metadata("b", "a")))
    [relayed] = driver.upstream_requests()
    assert [t["name"] for t in relayed.body["topics"]] == ["a"]
    driver.answer(relayed, metadata_answer("a", "secret"))  # "secret": nobody asked for it
    [(_, answer)] = driver.responses(ApiKey.METADATA, METADATA_V)
    assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [
        ("b", KafkaError.TOPIC_AUTHORIZATION_FAILED), ("a", 0)]
    assert answer["brokers"][0]["host"] == "gw.example"  # and no upstream address reaches the client


# --- streaming, large requests, local answers ---------------------------------------------------------

def test_only_a_large_response_next_in_line_that_needs_no_rewriting_is_streamed(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    fetch = request(ApiKey.FETCH, FETCH_V, topics=[])
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a"))
                + request_frame(ApiKey.FETCH, FETCH_V, 2, fetch) + request_frame(ApiKey.FETCH, FETCH_V, 3, fetch))
    meta, first, second = driver.upstream_requests()
    size = STREAM_MIN_BYTES
    assert not driver.session.may_stream(meta.upstream_id, size)  # Metadata names brokers: rewritten
    assert not driver.session.may_stream(first.upstream_id, size)  # not next in line yet
    driver.answer(meta, metadata_answer("a"))
    assert not driver.session.may_stream(first.upstream_id, size - 1)  # too small to be worth it
    assert driver.session.may_stream(first.upstream_id, size)
    driver.record(driver.session.stream_started(first.upstream_id, bytearray(b"\x00\x01\x00\x00")))
    assert not driver.session.may_stream(second.upstream_id, size)  # one stream at a time


def test_a_large_request_is_decided_in_the_worker_and_later_frames_wait(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    names = [f"topic-{i:06}" for i in range(LARGE_BYTES // 10)]
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata(*names))
                + request_frame(ApiKey.METADATA, METADATA_V, 2, metadata("small")))
    assert driver.reading_paused and driver.upstream_bytes == b""
    driver.run_job(act.JobKind.LARGE)
    big, small = driver.upstream_requests()
    assert len(big.body["topics"]) == len(names) and small.body["topics"][0]["name"] == "small"
    assert not driver.reading_paused


def test_frames_of_a_later_read_go_out_behind_those_that_waited(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    names = [f"topic-{i:06}" for i in range(LARGE_BYTES // 10)]
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata(*names))
                + request_frame(ApiKey.METADATA, METADATA_V, 2, metadata("second")))
    # A read already under way when reading paused: its frame waits behind the one already held.
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 3, metadata("third")))
    assert driver.upstream_bytes == b"" and driver.session.held_frames == 2
    driver.run_job(act.JobKind.LARGE)
    big, second, third = driver.upstream_requests()
    assert [r.body["topics"][0]["name"] for r in (second, third)] == ["second", "third"]
    for sent, name in ((third, "third"), (second, "second"), (big, names[0])):
        driver.answer(sent, metadata_answer(name))
    driver.run_job(act.JobKind.LARGE)  # the large request's answer is rewritten in the worker too
    assert driver.correlation_ids() == [1, 2, 3]


def test_an_admin_answer_waits_for_the_store_write_before_it(tmp_path: Path) -> None:
    FileAclStore(tmp_path / "acls.json")
    gateway = gateway_for(tmp_path, **{"authorizer.class.name": "StandardAuthorizer",
                                       "ksgate.acl.file": str(tmp_path / "acls.json"),
                                       "super.users": "User:ANONYMOUS"})
    driver = Driver.connect(gateway)
    create = request(ApiKey.CREATE_ACLS, 3, creations=[{
        "resource_type": 2, "resource_name": "t", "resource_pattern_type": 3, "principal": "User:x", "host": "*",
        "operation": 3, "permission_type": 3}])
    describe = request(ApiKey.DESCRIBE_ACLS, 3, resource_type_filter=1, resource_name_filter=None,
                       pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1, permission_type=1)
    driver.send(request_frame(ApiKey.CREATE_ACLS, 3, 1, create)
                + request_frame(ApiKey.DESCRIBE_ACLS, 3, 2, describe))
    assert driver.client_bytes == b"" and driver.upstream_bytes == b""  # never relayed
    driver.run_job(act.JobKind.STORE)
    assert driver.correlation_ids() == [1, 2]
    [(_, created)] = driver.responses(ApiKey.CREATE_ACLS, 3, count=1)
    assert created["results"][0]["error_code"] == 0
    [(_, described)] = driver.responses(ApiKey.DESCRIBE_ACLS, 3)
    # The describe ran after the create's write, as a Kafka broker serves one request at a time.
    assert [r["resource_name"] for r in described["resources"]] == ["t"]


# --- backpressure --------------------------------------------------------------------------------

def test_reading_pauses_at_queued_max_requests_and_resumes_as_answers_leave(tmp_path: Path) -> None:
    gateway = gateway_for(tmp_path, **{"queued.max.requests": 2})
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a"))
                + request_frame(ApiKey.METADATA, METADATA_V, 2, metadata("b")))
    assert driver.reading_paused
    first, _ = driver.upstream_requests()
    driver.answer(first, metadata_answer("a"))
    assert not driver.reading_paused


def test_write_buffers_pause_the_other_side(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    driver.record(driver.session.client_write_paused(True))
    assert driver.upstream_reading_paused  # a slow client: stop reading the upstream
    driver.record(driver.session.upstream_write_paused(True))
    assert driver.reading_paused  # a full upstream socket: stop reading the client
    driver.record(driver.session.upstream_write_paused(False))
    driver.record(driver.session.client_write_paused(False))
    assert not driver.reading_paused and not driver.upstream_reading_paused


def test_drain_closes_once_the_last_answer_is_out(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    driver.record(driver.session.drain())
    assert driver.reading_paused and driver.closed is None
    [sent] = driver.upstream_requests()
    driver.answer(sent, metadata_answer("a"))
    assert driver.correlation_ids() == [1] and driver.closed is not None


# --- several frames per read: one write each way, in order, the in-flight bound kept ------------------

def _produce_answer() -> dict[str, Any]:
    return response(ApiKey.PRODUCE, PRODUCE_V, "responses", [])


def _writes(driver: Driver, since: int, kind: type) -> int:
    return sum(isinstance(a, kind) for a in driver.actions[since:])


def test_a_read_of_several_requests_goes_upstream_in_one_write_and_their_answers_back_in_one(
        plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    since = len(driver.actions)
    driver.send(b"".join(request_frame(ApiKey.PRODUCE, PRODUCE_V, cid, produce(-1)) for cid in (11, 12, 13)))
    assert _writes(driver, since, act.SendToUpstream) == 1
    relayed = driver.upstream_requests()
    assert len(relayed) == 3 and [r.upstream_id for r in relayed] == sorted(r.upstream_id for r in relayed)
    # One upstream read holding the three answers, last request's first: one write, in request order.
    since = len(driver.actions)
    driver.record(driver.session.upstream_frames([
        memoryview(response_frame(r.api_key, r.version, r.upstream_id, _produce_answer())) for r in reversed(relayed)]))
    assert _writes(driver, since, act.SendToClient) == 1
    assert driver.correlation_ids() == [11, 12, 13]


def test_an_answer_whose_predecessor_is_not_in_waits_for_it_across_reads(plaintext: Gateway) -> None:
    driver = Driver.connect(plaintext)
    driver.send(b"".join(request_frame(ApiKey.PRODUCE, PRODUCE_V, cid, produce(-1)) for cid in (21, 22, 23)))
    first, second, third = driver.upstream_requests()
    driver.answer(second, _produce_answer())
    assert driver.correlation_ids() == []  # the head is not in: nothing may overtake it
    driver.answer(first, _produce_answer())
    assert driver.correlation_ids() == [21, 22]
    driver.answer(third, _produce_answer())
    assert driver.correlation_ids() == [21, 22, 23]


def test_a_read_of_more_requests_than_queued_max_requests_relays_only_as_many(tmp_path: Path) -> None:
    driver = Driver.connect(gateway_for(tmp_path, **{"queued.max.requests": 2}))
    driver.send(b"".join(request_frame(ApiKey.PRODUCE, PRODUCE_V, cid, produce(-1)) for cid in (31, 32, 33)))
    assert driver.reading_paused and driver.session.held_frames == 1
    first, second = driver.upstream_requests()  # the third waits for a slot
    driver.answer(first, _produce_answer())
    [third] = driver.upstream_requests()
    assert driver.session.held_frames == 0 and driver.session.queued_requests == 2
    driver.answer(second, _produce_answer())
    driver.answer(third, _produce_answer())
    assert driver.correlation_ids() == [31, 32, 33] and not driver.reading_paused
