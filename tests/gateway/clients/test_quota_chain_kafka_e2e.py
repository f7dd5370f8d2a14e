"""Acceptance (#21) against the real broker: Kafka 4.4's own kafka-configs (ConfigCommand) sets a quota
through ksgate, in front of Apache Kafka 4.4 over SASL_SSL; alice's librdkafka producer is throttled by
the gateway while bob's beside it is not, and once kafka-configs removes it, no longer; and the same
with the replicated store kept on Kafka, set through one instance and enforced by another."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.commands.cli import main as ksgate
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.java_clients import ConfigsTool, JavaRunner, java_available, scram_properties
from tests.gateway.clients.quota_chain import (
    PBR,
    alter_quota,
    gateway_on_kafka,
    kafka_upstream,
    throttles_alice_not_bob_until_removed,
)
from tests.harness import GatewayThread

pytestmark = pytest.mark.kafka


class KafkaConfigs(ConfigsTool):
    """kafka-configs from the 4.4 jars, run as ksgate's admin against the gateway."""

    __slots__ = ()

    def set_alice(self, value: float | None) -> None:
        change = ("--delete-config", PBR) if value is None else ("--add-config", f"{PBR}={value:.0f}")
        done = self("--alter", *change, "--entity-type", "users", "--entity-name", "alice")
        assert done.startswith("Completed updating"), done


@pytest.fixture(scope="module")
def configs_on_kafka(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaConfigs]:
    if not java_available():
        pytest.skip("no java on PATH")
    directory = tmp_path_factory.mktemp("chain-kafka")
    gateway = gateway_on_kafka(kafka, directory)
    try:
        yield KafkaConfigs(gateway, JavaRunner(kafka.lib, directory / "java"),
                           scram_properties(directory / "admin.properties"))
    finally:
        gateway.stop()


def test_kafka_configs_through_ksgate_throttles_alice_in_front_of_apache_kafka(configs_on_kafka: KafkaConfigs) -> None:
    throttles_alice_not_bob_until_removed(configs_on_kafka.set_alice, configs_on_kafka.gateway, 100_000.0)


def test_a_quota_set_on_one_instance_throttles_on_the_other_through_kafkas_security_topic(
        kafka: KafkaBroker, tmp_path: Path) -> None:
    """The replicated store on Apache Kafka itself (a compacted topic there): set through one instance,
    enforced by the other."""
    settings: dict[str, Any] = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": "StandardAuthorizer",
        "ksgate.security.store": "KAFKA", "ksgate.security.store.topic": f"_ksgate_security_{uuid.uuid4().hex[:8]}",
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": True,
        "connection.failed.authentication.delay.ms": 10, **kafka_upstream(kafka)}
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({**settings, "upstream.bootstrap.servers": kafka.bootstrap("SASL_SSL")}))
    for user in ("admin", "alice", "bob"):
        password = tmp_path / f"{user}.pw"
        password.write_text(f"{user}-secret\n")
        assert ksgate(["users", "add", user, "--config", str(config), "--password-file", str(password)]) == 0
    first, second = (GatewayThread(kafka.bootstrap("SASL_SSL"), settings, protocol="SASL_PLAINTEXT").start()
                     for _ in range(2))
    try:
        throttles_alice_not_bob_until_removed(lambda value: alter_quota(first, {"user": "alice"}, PBR, value),
                                              second, 100_000.0)
    finally:
        first.stop()
        second.stop()
