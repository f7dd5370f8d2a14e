"""Acceptance (#21): Kafka's own kafka-configs (ConfigCommand, the 4.4 jars) adds, describes and removes
user, client-id and user + client-id quotas through ksgate, which answers the quota APIs itself
(the upstream here is Tansu, which has none)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from tests.apache_kafka import kafka_lib
from tests.apache_kafka.java_clients import ConfigsTool, JavaRunner, java_available, scram_properties
from tests.harness import secured_gateway

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def kafka_configs(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConfigsTool]:
    lib = kafka_lib()
    if lib is None or not java_available():
        pytest.skip("needs java and the Apache Kafka jars (scripts/kafka/fetch.sh, REFERENCE_KAFKA_LIB)")
    directory = tmp_path_factory.mktemp("kafka-configs")
    gateway = secured_gateway(broker.bootstrap, directory, extra={"ksgate.quota.file": str(directory / "quotas.json")})
    try:
        yield ConfigsTool(gateway, JavaRunner(lib, directory / "java"),
                          scram_properties(directory / "admin.properties"))
    finally:
        gateway.stop()


@pytest.mark.parametrize("entity", [
    ("--entity-type", "users", "--entity-name", "alice"),
    ("--entity-type", "clients", "--entity-name", "billing"),
    ("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "billing"),
    ("--entity-type", "users", "--entity-default"),
], ids=["user", "client-id", "user+client-id", "default-user"])
def test_kafka_configs_adds_describes_and_removes_quotas_through_ksgate(kafka_configs: ConfigsTool,
                                                                        entity: tuple[str, ...]) -> None:
    added = kafka_configs("--alter", "--add-config", "producer_byte_rate=1048576,request_percentage=50.5", *entity)
    assert added.startswith("Completed updating")
    described = kafka_configs("--describe", *entity)
    print(added, described)  # -s shows what the tool printed
    assert "producer_byte_rate=1048576.0" in described and "request_percentage=50.5" in described
    kafka_configs("--alter", "--delete-config", "producer_byte_rate,request_percentage", *entity)
    assert "producer_byte_rate" not in kafka_configs("--describe", *entity)
    assert not kafka_configs.gateway.gateway.ctx.quotas.lookup("alice", "billing", "producer_byte_rate")


def test_kafka_configs_reports_kafkas_refusal(kafka_configs: ConfigsTool) -> None:
    with pytest.raises(Exception, match="producer_byte_rate cannot be a fractional value"):
        kafka_configs("--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "users",
                      "--entity-name", "bob")


def test_ksgate_quotas_prints_what_kafka_configs_prints(kafka_configs: ConfigsTool,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.commands.cli import main as ksgate
    from gateway.stores.file_quotas import FileQuotaStore

    kafka_configs("--alter", "--add-config", "consumer_byte_rate=100000000,controller_mutation_rate=2.5",
                  "--entity-type", "users", "--entity-name", "carol")
    kafka_configs("--alter", "--add-config", "producer_byte_rate=2048", "--entity-type", "users", "--entity-default")
    try:
        tool = [line for line in kafka_configs("--describe", "--entity-type", "users").splitlines()
                if line.startswith("Quota configs")]
        store = kafka_configs.gateway.gateway.quota_store
        assert isinstance(store, FileQuotaStore)
        capsys.readouterr()
        assert ksgate(["quotas", "--quota-file", str(store.path), "--describe", "--entity-type", "users"]) == 0
        ours = capsys.readouterr().out.splitlines()
        print(tool)
        assert sorted(ours) == sorted(tool) and len(tool) == 2
    finally:
        kafka_configs("--alter", "--delete-config", "consumer_byte_rate,controller_mutation_rate",
                      "--entity-type", "users", "--entity-name", "carol")
        kafka_configs("--alter", "--delete-config", "producer_byte_rate", "--entity-type", "users",
                      "--entity-default")
