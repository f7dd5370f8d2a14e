"""Acceptance (KIP-554): SCRAM users managed through the gateway's admin API with confluent-kafka."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from tests.harness import GatewayThread, secured_gateway
from tests.scram_wire import can_connect


@pytest.fixture(scope="module")
def scram_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[GatewayThread, Path]]:
    directory = tmp_path_factory.mktemp("scram")
    gateway = secured_gateway(broker.bootstrap, directory, mechanisms="SCRAM-SHA-256,SCRAM-SHA-512",
                              extra={"connection.failed.authentication.delay.ms": 10})
    yield gateway, directory / "users.json"
    gateway.stop()


def _as(gateway: GatewayThread, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def test_a_user_created_through_the_gateway_logs_in_at_once_and_is_locked_out_when_deleted(
        scram_gateway: tuple[GatewayThread, Path]) -> None:
    gateway, users = scram_gateway
    admin = AdminClient(_as(gateway, "admin", "admin-secret"))
    upsert = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                          b"carol-pw")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=10)
    assert can_connect(_as(gateway, "carol", "carol-pw"))
    assert not can_connect(_as(gateway, "carol", "carol-pw", "SCRAM-SHA-256"))  # only SHA-512 was set

    described = admin.describe_user_scram_credentials(["carol"])
    description = (described["carol"] if isinstance(described, dict) else described).result(timeout=10)
    infos = description.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    assert b"carol-pw" not in users.read_bytes()  # derived keys only

    deletion = UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)
    for future in admin.alter_user_scram_credentials([deletion]).values():
        future.result(timeout=10)
    assert not can_connect(_as(gateway, "carol", "carol-pw"))


def test_iterations_outside_kafkas_bounds_are_refused(scram_gateway: tuple[GatewayThread, Path]) -> None:
    gateway, _ = scram_gateway
    admin = AdminClient(_as(gateway, "admin", "admin-secret"))
    upsert = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")
    with pytest.raises(KafkaException) as error:
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=10)
    assert error.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL


def test_only_cluster_alter_may_change_credentials(scram_gateway: tuple[GatewayThread, Path]) -> None:
    gateway, _ = scram_gateway
    alice = AdminClient(_as(gateway, "alice", "alice-secret"))
    upsert = UserScramCredentialUpsertion("eve", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"pw")
    with pytest.raises(KafkaException) as error:
        for future in alice.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=10)
    assert error.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_describe_without_user_names_lists_every_scram_user(scram_gateway: tuple[GatewayThread, Path]) -> None:
    """confluent-kafka sends an empty user list for "all users"; Kafka treats empty like null."""
    gateway, users = scram_gateway
    admin = AdminClient(_as(gateway, "admin", "admin-secret"))
    described = admin.describe_user_scram_credentials()
    every = described.result(timeout=10) if not isinstance(described, dict) else {
        user: future.result(timeout=10) for user, future in described.items()}
    expected = {user for user in FileCredentialStore(users).users()}
    assert {"admin", "alice"} <= expected
    assert set(every) == expected
    for description in every.values():
        assert {(i.mechanism, i.iterations) for i in description.scram_credential_infos} == {
            (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 4096)}
