"""Acceptance (#5): several ksgate instances in front of one Tansu share users, ACLs and tokens
through the compacted security topic; a change made through one applies on the others within
2 s, and an instance started from scratch converges to the same state."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer
from kafka.structs import TopicPartition as KafkaTopicPartition

from gateway.commands.cli import main as ksgate
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.security_records import SecuritySnapshot, decoy_secret_record
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.scram_wire import can_connect, create_token, scram_login, scram_salt
from tests.wire_client import request_frame

CONVERGENCE_S = 2.0  # the bound: printed beside the measured figure, never asserted
HANG_S = 60.0  # bounds a hang only
TOPIC_AUTHORIZATION_FAILED = 29



class Cluster:
    """Gateways sharing one security topic (unique per test module) in front of the session's Tansu."""

    def __init__(self, broker: EmbeddedBroker, directory: Path) -> None:
        self.broker = broker
        self.settings: dict[str, Any] = {
            "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "authorizer.class.name": "StandardAuthorizer", "ksgate.security.store": "KAFKA",
            "ksgate.security.store.topic": f"_ksgate_security_{uuid.uuid4().hex[:8]}",
            "super.users": "User:admin", "allow.everyone.if.no.acl.found": False,
            "delegation.token.secret.key": "shared-by-every-instance",
            "connection.failed.authentication.delay.ms": 10,
        }
        self.config_file = directory / "gateway.yaml"
        self.config_file.write_text(yaml.safe_dump({**self.settings, "upstream.bootstrap.servers": broker.bootstrap}))
        self.running: list[GatewayThread] = []
        # Set after any instance's store applied a run of records and ran its listeners (the gateway's, subscribed
        # when it was built, first): the event a test waits on to look at an instance's state again.
        self.applied = threading.Event()

    def start(self) -> GatewayThread:
        gateway = GatewayThread(self.broker.bootstrap, self.settings, protocol="SASL_PLAINTEXT").start()
        assert gateway.gateway.security_topic is not None
        gateway.gateway.security_topic.subscribe(lambda _run: self.applied.set())
        self.running.append(gateway)
        return gateway

    def stop(self, gateway: GatewayThread) -> None:
        gateway.stop()
        self.running.remove(gateway)


def _client(gateway: GatewayThread, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password}


def _add_user(cluster: Cluster, name: str, tmp: Path) -> None:
    """As an operator bootstraps a replicated store: ``ksgate users add --config``."""
    password_file = tmp / f"{name}.pw"
    password_file.write_text(f"{name}-secret\n")
    assert ksgate(["users", "add", name, "--config", str(cluster.config_file),
                   "--password-file", str(password_file)]) == 0


@pytest.fixture(scope="module")
def cluster(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("replicated")
    shared = Cluster(broker, directory)
    _add_user(shared, "admin", directory)
    _add_user(shared, "alice", directory)
    shared.start()
    shared.start()
    yield shared
    for gateway in list(shared.running):
        shared.stop(gateway)


def _within(cluster: Cluster, condition: Callable[[], bool]) -> float:
    """How long until ``condition()`` held, checked again each time an instance's store has applied records: printed
    beside the docs' figure (CONVERGENCE_S), never asserted (tests never assert on timings); HANG_S bounds a hang."""
    start = time.monotonic()
    while True:
        cluster.applied.clear()  # before the check: a run applied after it sets the event again
        if condition():
            break
        if not cluster.applied.wait(max(0.0, start + HANG_S - time.monotonic())):
            pytest.fail(f"never converged (waited {HANG_S:g} s)")
    elapsed = time.monotonic() - start
    print(f"converged in {elapsed * 1000:.0f} ms (the docs quote under {CONVERGENCE_S:g} s)")  # shown with -s
    return elapsed


def _logs_in(gateway: GatewayThread, user: str, password: str) -> bool:
    """One SCRAM-SHA-512 login attempt (a client library retries for its whole timeout instead)."""
    client, error = scram_login(gateway.bootstrap, user, password, mechanism="SCRAM-SHA-512")
    client.close()
    return error == 0


def test_an_acl_created_through_one_instance_applies_on_the_other(cluster: Cluster) -> None:
    a, b = cluster.running[:2]
    admin_a = AdminClient(_client(a, "admin", "admin-secret"))
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    admin_a.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=10)
    alice_b = AdminClient(_client(b, "alice", "alice-secret"))
    assert topic not in alice_b.list_topics(timeout=5).topics, "no ACL yet: alice must not see the topic"

    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for future in admin_a.create_acls([binding]).values():
        future.result(timeout=10)
    _within(cluster, lambda: topic in alice_b.list_topics(timeout=5).topics)

    # A DENY added on B wins on A too.
    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                      AclOperation.ALL, AclPermissionType.DENY)
    admin_b = AdminClient(_client(b, "admin", "admin-secret"))  # held: a dropped client cancels its futures
    for future in admin_b.create_acls([deny]).values():
        future.result(timeout=10)
    alice_a = AdminClient(_client(a, "alice", "alice-secret"))
    _within(cluster, lambda: topic not in alice_a.list_topics(timeout=5).topics)

    # The store's own topic is the gateway's: hidden even from a super user, and never readable.
    store_topic = cluster.settings["ksgate.security.store.topic"]
    assert store_topic not in admin_b.list_topics(timeout=5).topics
    snoop, error = scram_login(b.bootstrap, "admin", "admin-secret")
    assert error == 0
    snoop.send(request_frame(ApiKey.FETCH, 12, 5, {
        "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0, "session_id": 0,
        "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "", "replica_id": -1,
        "topics": [{"topic": store_topic, "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
            "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]}))
    fetched = snoop.read_response(ApiKey.FETCH, 12)[1]
    assert fetched["responses"][0]["partitions"][0]["error_code"] == TOPIC_AUTHORIZATION_FAILED
    assert not fetched["responses"][0]["partitions"][0]["records"]
    snoop.close()

    any_filter = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    described = admin_b.describe_acls(any_filter).result(timeout=10)
    assert set(described) == {binding, deny}


def test_a_scram_user_created_on_one_instance_logs_in_on_the_other_and_is_locked_out_when_deleted(
        cluster: Cluster) -> None:
    a, b = cluster.running[:2]
    admin_a = AdminClient(_client(a, "admin", "admin-secret"))
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"carol-pw")
    for future in admin_a.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=10)
    assert can_connect(_client(a, "carol", "carol-pw")), "the writing instance reads its own write"
    _within(cluster, lambda: _logs_in(b, "carol", "carol-pw"))
    assert can_connect(_client(b, "carol", "carol-pw"))
    admin_b = AdminClient(_client(b, "admin", "admin-secret"))
    described = admin_b.describe_user_scram_credentials(["carol"])
    assert described["carol"].result(timeout=10).scram_credential_infos[0].iterations == 8192

    deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)
    for future in admin_a.alter_user_scram_credentials([deletion]).values():
        future.result(timeout=10)
    _within(cluster, lambda: not _logs_in(b, "carol", "carol-pw"))
    assert not can_connect(_client(b, "carol", "carol-pw")), "and a real client is refused too"


def test_a_token_created_on_one_instance_authenticates_on_the_other_and_expiring_it_anywhere_ends_it(
        cluster: Cluster) -> None:
    a, b = cluster.running[:2]
    alice, error = scram_login(a.bootstrap, "alice", "alice-secret")
    assert error == 0
    token = create_token(alice)
    assert token["error_code"] == 0 and token["principal_name"] == "alice"
    password = base64.b64encode(bytes(token["hmac"])).decode()

    def token_logs_in_on_b() -> bool:
        client, code = scram_login(b.bootstrap, token["token_id"], password, tokenauth="true")
        client.close()
        return code == 0

    _within(cluster, token_logs_in_on_b)
    # Expire through B: A refuses the token within the bound.
    holder, error = scram_login(b.bootstrap, "alice", "alice-secret")
    assert error == 0
    holder.send(request_frame(ApiKey.EXPIRE_DELEGATION_TOKEN, 2, 11, {"hmac": bytes(token["hmac"]),
                                                                     "expiry_time_period_ms": -1}))
    assert holder.read_response(ApiKey.EXPIRE_DELEGATION_TOKEN, 2)[1]["error_code"] == 0

    def token_refused_on_a() -> bool:
        client, code = scram_login(a.bootstrap, token["token_id"], password, tokenauth="true")
        client.close()
        return code != 0

    _within(cluster, token_refused_on_a)


def _raw_topic(cluster: Cluster, until_key_contains: bytes) -> list[tuple[bytes, bytes | None]]:
    """The security topic's records up to the first whose key contains ``until_key_contains``,
    read straight from the broker (not through ksgate)."""
    topic = cluster.settings["ksgate.security.store.topic"]
    consumer = KafkaConsumer(bootstrap_servers=cluster.broker.bootstrap, enable_auto_commit=False)
    try:
        partition = KafkaTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        records: list[tuple[bytes, bytes | None]] = []
        deadline = time.monotonic() + 10
        while not any(until_key_contains in key for key, _ in records) and time.monotonic() < deadline:
            for batch in consumer.poll(500).values():
                records += [(r.key, r.value) for r in batch]
        return records
    finally:
        consumer.close()


def test_the_topic_holds_no_password_and_no_token_hmac(cluster: Cluster) -> None:
    a = cluster.running[0]
    alice, error = scram_login(a.bootstrap, "alice", "alice-secret")
    assert error == 0
    token = create_token(alice)
    alice.close()
    mac = bytes(token["hmac"])
    records = _raw_topic(cluster, until_key_contains=token["token_id"].encode())
    assert any(b'"kind":"token"' in key and token["token_id"].encode() in key for key, _ in records)
    assert any(b'"kind":"credential"' in key and b'"user":"alice"' in key for key, _ in records)
    everything = b"".join(key + (value or b"") for key, value in records)
    for secret in (b"alice-secret", b"admin-secret", mac, base64.b64encode(mac), base64.b64encode(mac)[:32]):
        assert secret not in everything


def _state(gateway: GatewayThread) -> tuple[set[tuple[str, ...]], dict[str, list[str]], set[str]]:
    """An instance's whole store: ACLs (as comparable tuples), users and their mechanisms, token ids."""
    topic = gateway.gateway.security_topic
    assert topic is not None
    snapshot: SecuritySnapshot = topic.snapshot
    acls = {(b.pattern.resource_type.name, b.pattern.name, b.pattern.pattern_type.name, b.entry.principal,
             b.entry.host, b.entry.operation.name, b.entry.permission_type.name) for b in snapshot.acls}
    return acls, {u: e.mechanisms for u, e in snapshot.users.items()}, set(snapshot.tokens)


def _as_tuple(binding: AclBinding) -> tuple[str, ...]:
    return (binding.restype.name, binding.name, binding.resource_pattern_type.name, binding.principal,
            binding.host, binding.operation.name, binding.permission_type.name)


def test_an_instance_started_from_scratch_converges_to_the_same_state(cluster: Cluster) -> None:
    a, b = cluster.running[:2]
    admin_a = AdminClient(_client(a, "admin", "admin-secret"))
    binding = AclBinding(ResourceType.GROUP, "payments-", ResourcePatternType.PREFIXED, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    for future in admin_a.create_acls([binding]).values():
        future.result(timeout=10)
    _within(cluster, lambda: _state(b) == _state(a))
    expected = _state(a)
    assert _as_tuple(binding) in expected[0] and {"admin", "alice"} <= set(expected[1])

    # A restarted instance (nothing kept locally) replays the topic before it serves.
    cluster.stop(a)
    restarted = cluster.start()
    assert _state(restarted) == expected
    assert restarted.gateway.store_problem is None
    assert can_connect(_client(restarted, "alice", "alice-secret"))
    any_group = AclBindingFilter(ResourceType.GROUP, None, ResourcePatternType.ANY, None, None,
                                 AclOperation.ANY, AclPermissionType.ANY)
    admin_restarted = AdminClient(_client(restarted, "admin", "admin-secret"))
    assert binding in admin_restarted.describe_acls(any_group).result(10)
    # ...and keeps following: a removal through the other instance reaches it.
    admin_b = AdminClient(_client(b, "admin", "admin-secret"))
    for future in admin_b.delete_acls([any_group]).values():
        future.result(timeout=10)
    _within(cluster, lambda: _as_tuple(binding) not in _state(restarted)[0])


def test_pipelined_admin_requests_on_one_connection_see_each_others_changes_in_order(cluster: Cluster) -> None:
    """CreateAcls (a store write, answered later) then DescribeAcls sent back to back: the describe
    runs after the write and the answers come back in request order, as from one Kafka broker."""
    gateway = cluster.running[0]
    admin, error = scram_login(gateway.bootstrap, "admin", "admin-secret")
    assert error == 0
    name = f"pipelined-{uuid.uuid4().hex[:6]}"
    create = request_frame(ApiKey.CREATE_ACLS, 3, 21, {"creations": [{
        "resource_type": 2, "resource_name": name, "resource_pattern_type": 3, "principal": "User:alice",
        "host": "*", "operation": 3, "permission_type": 3}]})  # TOPIC, LITERAL, READ, ALLOW
    describe = request_frame(ApiKey.DESCRIBE_ACLS, 3, 22, {
        "resource_type_filter": 2, "resource_name_filter": name, "pattern_type_filter": 3,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})  # ANY, ANY
    admin.send(create + describe)
    created_id, created = admin.read_response(ApiKey.CREATE_ACLS, 3)
    described_id, described = admin.read_response(ApiKey.DESCRIBE_ACLS, 3)
    admin.close()
    assert (created_id, described_id) == (21, 22)
    assert created["results"][0]["error_code"] == 0
    assert [r["resource_name"] for r in described["resources"]] == [name]


def test_operators_manage_tokens_of_the_replicated_store_with_ksgate_tokens_config(
        cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = cluster.running[:2]
    assert ksgate(["tokens", "create", "--config", str(cluster.config_file), "--owner", "User:alice"]) == 0
    out = capsys.readouterr().out
    token_id = re.search(r"Created delegation token with tokenId : (\S+)", out)
    assert token_id is not None
    password = next(word for word in out.split() if len(word) == 88 and word.endswith("=="))  # base64 of 64 bytes
    # The instances, tailing the topic, accept it at once.
    for gateway in (a, b):
        _within(cluster, lambda g=gateway: _token_logs_in(g, token_id.group(1), password))
    assert ksgate(["tokens", "describe", "--config", str(cluster.config_file), "--owner", "User:alice"]) == 0
    assert token_id.group(1) in capsys.readouterr().out
    hmac_file = cluster.config_file.with_name("token.hmac")
    hmac_file.write_text(password + "\n")
    assert ksgate(["tokens", "expire", "--config", str(cluster.config_file), "--hmac-file", str(hmac_file)]) == 0
    _within(cluster, lambda: not _token_logs_in(b, token_id.group(1), password))


def _token_logs_in(gateway: GatewayThread, token_id: str, password: str) -> bool:
    client, error = scram_login(gateway.bootstrap, token_id, password, tokenauth="true")
    client.close()
    return error == 0


def test_a_write_survives_the_broker_closing_the_idle_writer_connection(cluster: Cluster) -> None:
    a = cluster.running[0]
    topic = a.gateway.security_topic
    assert topic is not None and topic._loop is not None
    admin = AdminClient(_client(a, "admin", "admin-secret"))
    if topic._writer is None:  # a first write through A opens the connection that is then lost
        warm = AclBinding(ResourceType.TOPIC, "warm", ResourcePatternType.LITERAL, "User:alice", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
        for future in admin.create_acls([warm]).values():
            future.result(timeout=10)
    writer = topic._writer
    assert writer is not None
    # As if the broker dropped it (connections.max.idle.ms): the socket is closed under the writer.
    asyncio.run_coroutine_threadsafe(writer.close(), topic._loop).result(timeout=5)
    binding = AclBinding(ResourceType.TOPIC, "after-idle", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    for future in admin.create_acls([binding]).values():
        future.result(timeout=10)
    assert _as_tuple(binding) in _state(a)[0]
    assert topic._writer is not None and topic._writer is not writer


def test_an_unknown_users_scram_salt_is_the_same_on_every_instance_and_after_a_restart(cluster: Cluster) -> None:
    a, b = cluster.running[:2]
    offered = scram_salt(a.bootstrap, "mallory")
    assert scram_salt(b.bootstrap, "mallory") == offered
    real_salt, real_iterations = scram_salt(a.bootstrap, "alice")
    assert (len(offered[0]), offered[1]) == (len(real_salt), real_iterations)
    assert scram_salt(a.bootstrap, "trudy") != offered

    # A late racer's candidate changes nothing: the first in the log stays the secret everywhere.
    topic_a, topic_b = a.gateway.security_topic, b.gateway.security_topic
    assert topic_a is not None and topic_b is not None
    winner = topic_b.snapshot.decoy_secret
    assert winner is not None
    topic_b.append([decoy_secret_record(b"late-candidate-0123456789abcdef!")])
    _within(cluster, lambda: topic_a.next_offset >= topic_b.next_offset)
    assert topic_a.snapshot.decoy_secret == topic_b.snapshot.decoy_secret == winner

    cluster.stop(a)
    restarted = cluster.start()
    assert scram_salt(restarted.bootstrap, "mallory") == offered


def test_instances_starting_together_on_a_new_topic_converge_on_one_decoy_secret(
        broker: EmbeddedBroker, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fresh = Cluster(broker, tmp_path)
    with ThreadPoolExecutor(2) as pool:
        started = list(pool.map(lambda _: fresh.start(), range(2)))
    try:
        topics = [g.gateway.security_topic for g in started]
        assert all(t is not None for t in topics)
        _within(fresh, lambda: len({t.next_offset for t in topics if t is not None}) == 1)
        secrets = {t.snapshot.decoy_secret for t in topics if t is not None}
        assert len(secrets) == 1 and None not in secrets
        assert scram_salt(started[0].bootstrap, "mallory") == scram_salt(started[1].bootstrap, "mallory")
        secret = secrets.pop()
        assert secret is not None and "SCRAM decoys" in caplog.text  # the store's lines were captured
        for form in (base64.b64encode(secret).decode(), secret.hex(), repr(secret)):
            assert form not in caplog.text
    finally:
        for gateway in started:
            fresh.stop(gateway)
