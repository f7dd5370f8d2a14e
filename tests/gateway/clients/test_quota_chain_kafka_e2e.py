"""Acceptance (#21) against the real broker: Kafka 4.4's own kafka-configs (ConfigCommand) sets a quota
through ksgate, in front of Apache Kafka 4.4 over SASL_SSL; alice's librdkafka producer is throttled by
the gateway while bob's beside it is not, and once kafka-configs removes it, no longer."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.java_clients import JavaRunner, java_available
from tests.gateway.clients.quota_chain import PBR, gateway_on_kafka, throttles_alice_not_bob_until_removed
from tests.harness import GatewayThread

CONFIGS = "org.apache.kafka.tools.ConfigCommand"
pytestmark = pytest.mark.kafka


@dataclass(slots=True, frozen=True)
class KafkaConfigs:
    """kafka-configs from the 4.4 jars, run as ksgate's admin against the gateway."""

    gateway: GatewayThread
    java: JavaRunner
    properties: Path

    def set_alice(self, value: float | None) -> None:
        change = ("--delete-config", PBR) if value is None else ("--add-config", f"{PBR}={value:.0f}")
        done = self.java.tool(CONFIGS, self.gateway.bootstrap, self.properties, "--alter", *change,
                              "--entity-type", "users", "--entity-name", "alice").stdout
        assert done.startswith("Completed updating"), done


@pytest.fixture(scope="module")
def configs_on_kafka(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaConfigs]:
    if not java_available():
        pytest.skip("no java on PATH")
    directory = tmp_path_factory.mktemp("chain-kafka")
    gateway = gateway_on_kafka(kafka, directory)
    properties = directory / "admin.properties"
    properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-secret";\n')
    try:
        yield KafkaConfigs(gateway, JavaRunner(kafka.lib, directory / "java"), properties)
    finally:
        gateway.stop()


def test_kafka_configs_through_ksgate_throttles_alice_in_front_of_apache_kafka(configs_on_kafka: KafkaConfigs) -> None:
    throttles_alice_not_bob_until_removed(configs_on_kafka.set_alice, configs_on_kafka.gateway, 100_000.0)
