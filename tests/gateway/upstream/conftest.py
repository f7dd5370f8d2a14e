"""A quickstart-like ksgate (SASL_SSL, users admin/alice/bob, the quickstart's ACLs and client files)
in front of the Apache Kafka kit's broker, for the tests of Kafka's own Java clients and tools; and the watch
on the request stage's Produce walk that the walked-Produce tests share (walked_produce/kit.py)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.commands.embedded_broker import free_port
from gateway.commands.quickstart import QuickstartPlan, prepare, write_client_files
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.java_clients import JavaRunner, java_available
from tests.gateway.upstream.walked_produce.kit import WalkWatch, watch_walks
from tests.harness import GatewayThread


@dataclass(slots=True, frozen=True)
class JavaGateway:
    """The running gateway, where its quickstart files are, and a runner for Kafka's Java code."""

    plan: QuickstartPlan
    gateway: GatewayThread
    java: JavaRunner

    @property
    def bootstrap(self) -> str:
        return self.plan.bootstrap

    def properties(self, user: str) -> Path:
        """USER.jaas.properties as the quickstart wrote it."""
        return self.plan.directory / f"{user}.jaas.properties"


@pytest.fixture(scope="session")
def java_gateway(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaGateway]:
    if not java_available():
        pytest.skip("no java/javac on PATH")
    directory = tmp_path_factory.mktemp("java-gateway")
    plan = QuickstartPlan(directory / "quickstart", free_port(), "SASL_SSL")
    settings = {**prepare(plan), "allow.everyone.if.no.acl.found": False,  # as the quickstart (GatewayThread allows)
                "delegation.token.secret.key": secrets.token_hex(16),
                "ksgate.delegation.token.file": str(plan.directory / "tokens.json")}
    gateway = GatewayThread(kafka.bootstrap("PLAINTEXT"), settings, protocol="SASL_SSL").start()
    try:
        write_client_files(plan)
        yield JavaGateway(plan, gateway, JavaRunner(kafka.lib, directory / "java"))
    finally:
        gateway.stop()


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> WalkWatch:
    """What the request stage does with each Produce from now on (walked_produce.kit.watch_walks)."""
    return watch_walks(monkeypatch)
