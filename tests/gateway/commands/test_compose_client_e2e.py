"""The compose stack's test client (scripts/compose/client.py) against init's files, without containers.

A gateway runs with configs/docker/ksgate.yaml's security settings over what ``ksgate init`` created; the client
logs in with init's generated admin password, creates its users and ACLs, and alice's produce is allowed while
bob's is denied, as scripts/compose-test.sh expects in the real stack.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import KafkaError

from gateway.commands.cli import main
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.config import load_config
from tests.harness import GatewayThread

ROOT = Path(__file__).resolve().parents[3]
IMAGE_ROOT = "/var/lib/ksgate"


def _client_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compose_client", ROOT / "scripts/compose/client.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def stack(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayThread, Path]]:
    state = tmp_path_factory.mktemp("state")
    assert main(["init", "--dir", str(state)]) == 0
    docker = load_config(ROOT / "configs/docker/ksgate.yaml", env={}).settings
    keys = ("ssl.keystore.location", "ssl.key.location", "sasl.enabled.mechanisms", "ksgate.credentials.file",
            "authorizer.class.name", "super.users", "ksgate.acl.file", "ksgate.audit.log.allowed")
    extra: dict[str, Any] = {key: str(docker[key]).replace(IMAGE_ROOT, str(state)) for key in keys}
    extra.update({"allow.everyone.if.no.acl.found": False, "ksgate.audit.log.file": str(state / "audit.log")})
    gateway = GatewayThread(broker.bootstrap, extra, protocol="SASL_SSL", advertised_host="localhost").start()
    yield gateway, state
    gateway.stop()


def test_the_compose_client_provisions_with_inits_password_and_enforces_its_acls(
        stack: tuple[GatewayThread, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    gateway, state = stack
    client = _client_module()
    monkeypatch.setattr(client, "BOOTSTRAP", gateway.bootstrap)
    for name in ("CA", "ADMIN_PASSWORD", "AUDIT"):  # the container paths, under this test's init directory
        original = str(getattr(client, name))
        assert original.startswith(IMAGE_ROOT + "/") or original.startswith("/var/log/ksgate/"), name
        moved = state / Path(original).relative_to(IMAGE_ROOT if original.startswith(IMAGE_ROOT) else "/var/log/ksgate")
        monkeypatch.setattr(client, name, moved if isinstance(getattr(client, name), Path) else str(moved))
    client.provision()
    client.create_topic()
    assert client.produce("alice", b"allowed") is None
    error = client.produce("bob", b"denied")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert client.audit_has("User:bob", "DENIED")
