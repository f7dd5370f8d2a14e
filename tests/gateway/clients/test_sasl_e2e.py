"""Acceptance: real clients authenticate to the gateway with PLAIN and SCRAM over SASL_PLAINTEXT.

Negative cases end with a client-side error, a closed connection and nothing relayed:
the gateway opens no upstream connection before a client has authenticated.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError as KafkaPythonError

from auth.sasl.scram import ScramClient
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.scram_wire import scram_salt
from tests.wire_client import WireClient, request_frame

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def credentials(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("creds") / "users.json"
    store = FileCredentialStore(path)
    store.upsert_user("alice", "alice-secret")
    store.upsert_user("bob", "bob-secret")
    return path


def _sasl_gateway(broker: EmbeddedBroker, credentials: Path, **extra: object) -> GatewayThread:
    settings = {"sasl.enabled.mechanisms": ",".join(MECHANISMS), "ksgate.credentials.file": str(credentials),
                "ksgate.sasl.plain.allow.insecure": True, "connection.failed.authentication.delay.ms": 50,
                **extra}
    return GatewayThread(broker.bootstrap, settings, protocol="SASL_PLAINTEXT").start()


@pytest.fixture(scope="module")
def sasl_gateway(broker: EmbeddedBroker, credentials: Path) -> Iterator[GatewayThread]:
    running = _sasl_gateway(broker, credentials)
    yield running
    running.stop()


def _client(gateway: GatewayThread, mechanism: str, user: str, password: str) -> dict[str, object]:
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_authenticates_and_round_trips_records(sasl_gateway: GatewayThread, mechanism: str) -> None:
    settings = _client(sasl_gateway, mechanism, "alice", "alice-secret")
    topic = f"sasl-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(settings)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=15)
    producer = Producer({**settings, "enable.idempotence": True})
    for i in range(100):
        producer.produce(topic, value=f"{mechanism}-{i}".encode())
    assert producer.flush(15) == 0
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < 100 and time.monotonic() < deadline:
        got.extend(m.value() for m in consumer.consume(100, 0.5) if m.error() is None)
    consumer.close()
    assert got == [f"{mechanism}-{i}".encode() for i in range(100)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_authenticates_and_round_trips_records(sasl_gateway: GatewayThread, mechanism: str) -> None:
    common = {"bootstrap_servers": sasl_gateway.bootstrap, "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": mechanism, "sasl_plain_username": "bob", "sasl_plain_password": "bob-secret"}
    topic = f"kp-sasl-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(**common)
    for i in range(20):
        producer.send(topic, f"v{i}".encode())
    producer.flush(timeout=20)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **common)
    got = [record.value for _, record in zip(range(20), consumer, strict=False)]
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))


def _failed_metadata(settings: dict[str, object]) -> str:
    """The client-side errors librdkafka reports (error_cb) while a metadata request fails."""
    errors: list[str] = []
    admin = AdminClient({**settings, "error_cb": lambda err: errors.append(err.str())})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    deadline = time.monotonic() + 5
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)  # error_cb runs from poll()
    return " | ".join(errors)


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("mallory", "whatever")])
def test_bad_credentials_fail_with_the_same_error_and_nothing_reaches_the_upstream(
        broker: EmbeddedBroker, credentials: Path, user: str, password: str) -> None:
    gateway = _sasl_gateway(broker, credentials)
    try:
        error = _failed_metadata(_client(gateway, "SCRAM-SHA-512", user, password))
        assert "Authentication failed during authentication due to invalid credentials" in error
        counters = gateway.gateway.ctx.counters
        assert counters.authentication_failures >= 1
        assert counters.upstream_connections == 0 and counters.relayed_requests == 0
    finally:
        gateway.stop()


def test_kafka_python_wrong_password_is_refused(sasl_gateway: GatewayThread) -> None:
    with pytest.raises(KafkaPythonError):
        KafkaProducer(bootstrap_servers=sasl_gateway.bootstrap, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice", sasl_plain_password="nope",
                      request_timeout_ms=5000, max_block_ms=5000, bootstrap_timeout_ms=5000,
                      ).send("t", b"x").get(timeout=5)


def test_mechanism_not_enabled_is_refused(broker: EmbeddedBroker, credentials: Path) -> None:
    gateway = _sasl_gateway(broker, credentials, **{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    try:
        error = _failed_metadata(_client(gateway, "SCRAM-SHA-256", "alice", "alice-secret"))
        assert "SCRAM-SHA-256" in error or "mechanism" in error.lower()
        assert gateway.gateway.ctx.counters.upstream_connections == 0
    finally:
        gateway.stop()


def test_plain_over_a_non_tls_listener_is_refused_unless_allowed(broker: EmbeddedBroker, credentials: Path) -> None:
    gateway = _sasl_gateway(broker, credentials, **{"ksgate.sasl.plain.allow.insecure": False})
    try:
        error = _failed_metadata(_client(gateway, "PLAIN", "alice", "alice-secret"))
        assert "PLAIN" in error or "mechanism" in error.lower()
        assert gateway.gateway.ctx.counters.upstream_connections == 0
    finally:
        gateway.stop()


def _handshake(client: WireClient, mechanism: str, cid: int = 1) -> dict[str, object]:
    client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, cid, {"mechanism": mechanism}))
    return client.read_response(ApiKey.SASL_HANDSHAKE, 1)[1]


def _auth(client: WireClient, token: bytes, cid: int) -> dict[str, object]:
    client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, cid, {"auth_bytes": token}))
    return client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]


def test_produce_before_authentication_closes_the_connection(sasl_gateway: GatewayThread) -> None:
    client = WireClient(sasl_gateway.bootstrap)
    client.send(request_frame(ApiKey.PRODUCE, 9, 1, {"transactional_id": None, "acks": 1, "timeout_ms": 1000,
                                                      "topic_data": []}))
    assert client.is_closed_by_peer()


def test_sasl_authenticate_before_handshake_closes_without_answer(sasl_gateway: GatewayThread) -> None:
    # As Kafka 4.4 does (measured, tests/auth_vs_kafka): before a handshake it is like any other request.
    client = WireClient(sasl_gateway.bootstrap)
    client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 1, 1, {"auth_bytes": b"n,,n=alice,r=abc"}))
    assert client.is_closed_by_peer()


def test_oversized_sasl_frame_is_refused_before_it_is_read(sasl_gateway: GatewayThread) -> None:
    client = WireClient(sasl_gateway.bootstrap)
    client.send((600_000).to_bytes(4, "big"))  # over sasl.server.max.receive.size (524288)
    assert client.is_closed_by_peer()


def test_replayed_scram_client_final_is_refused(sasl_gateway: GatewayThread) -> None:
    first = WireClient(sasl_gateway.bootstrap)
    assert _handshake(first, "SCRAM-SHA-256")["error_code"] == 0
    scram = ScramClient("SCRAM-SHA-256", "alice", "alice-secret", nonce="fixed-client-nonce")
    server_first = _auth(first, scram.first_message(), 2)["auth_bytes"]
    client_final = scram.final_message(bytes(server_first))  # type: ignore[arg-type]
    assert _auth(first, client_final, 3)["error_code"] == 0
    first.close()
    replay = WireClient(sasl_gateway.bootstrap)
    _handshake(replay, "SCRAM-SHA-256")
    _auth(replay, scram.first_message(), 2)  # a fresh server nonce
    assert _auth(replay, client_final, 3)["error_code"] == 58  # SASL_AUTHENTICATION_FAILED
    assert replay.is_closed_by_peer()


def test_reauthentication_as_another_user_is_refused_with_kafkas_error_then_closed(
        broker: EmbeddedBroker, credentials: Path) -> None:
    # Re-authentication needs a session that expires: without one Kafka refuses the handshake (tests/auth_vs_kafka).
    gateway = _sasl_gateway(broker, credentials, **{"connections.max.reauth.ms": 60_000})
    try:
        client = WireClient(gateway.bootstrap)
        finals = []
        for cid, (user, password) in enumerate([("alice", "alice-secret"), ("bob", "bob-secret")]):
            assert _handshake(client, "SCRAM-SHA-512", cid * 10)["error_code"] == 0
            scram = ScramClient("SCRAM-SHA-512", user, password)
            server_first = _auth(client, scram.first_message(), cid * 10 + 1)["auth_bytes"]
            finals.append(_auth(client, scram.final_message(bytes(server_first)),  # type: ignore[arg-type]
                                cid * 10 + 2))
        assert finals[0]["error_code"] == 0
        # KIP-368, as Kafka's SaslServerAuthenticator answers it: 58 SASL_AUTHENTICATION_FAILED, then the close.
        assert finals[1]["error_code"] == 58
        assert finals[1]["error_message"] == \
            "Cannot change principals during re-authentication from User.alice: User.bob"
        assert client.is_closed_by_peer()
    finally:
        gateway.stop()


def test_librdkafka_reauthenticates_before_the_session_lifetime_ends(broker: EmbeddedBroker,
                                                                     credentials: Path) -> None:
    gateway = _sasl_gateway(broker, credentials, **{"connections.max.reauth.ms": 1500})
    try:
        settings = _client(gateway, "SCRAM-SHA-512", "alice", "alice-secret")
        topic = f"reauth-{uuid.uuid4().hex[:6]}"
        producer = Producer({**settings, "linger.ms": 0})
        deadline = time.monotonic() + 6  # several session lifetimes on the same connections
        sent = 0
        while time.monotonic() < deadline:
            producer.produce(topic, str(sent).encode())
            assert producer.flush(5) == 0
            sent += 1
            time.sleep(0.1)  # pacing the workload, not synchronisation
        counters = gateway.gateway.ctx.counters
        # More successful authentications than connections: re-authentication happened, and
        # no request was refused for an expired session (every flush above succeeded).
        assert counters.authenticated["User:alice"] > counters.upstream_connections
        assert counters.authentication_failures == 0
    finally:
        gateway.stop()


def test_an_unknown_users_scram_salt_survives_a_restart_and_looks_like_a_real_users(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """Decoys derive from a secret kept in the credential file, so probing across restarts (or
    across instances with a copy of the file) cannot tell an unknown user from a real one."""
    path = tmp_path / "users.json"
    FileCredentialStore(path).upsert_user("alice", "alice-secret")
    document = json.loads(path.read_text())
    document.pop("decoy_secret", None)  # as a file written by hand or by an older ksgate
    path.write_text(json.dumps(document))
    offered: list[dict[str, tuple[bytes, int]]] = []
    for _ in range(2):
        gateway = _sasl_gateway(broker, path)
        try:
            offered.append({user: scram_salt(gateway.bootstrap, user) for user in ("alice", "mallory", "trudy")})
            offered[-1]["mallory-512"] = scram_salt(gateway.bootstrap, "mallory", "SCRAM-SHA-512")
        finally:
            gateway.stop()
    before, after = offered
    assert before == after  # the same salts and iterations after the restart, real and decoy alike
    (real_salt, real_iterations), (decoy_salt, decoy_iterations) = before["alice"], before["mallory"]
    assert (len(decoy_salt), decoy_iterations) == (len(real_salt), real_iterations)
    assert before["mallory"] != before["trudy"] and before["mallory"] != before["mallory-512"]
    assert isinstance(json.loads(path.read_text())["decoy_secret"], str)  # the gateway stored it once
