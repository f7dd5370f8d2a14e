"""The shadow ACL set in the replicated store, on Tansu: ``ksgate acls --shadow --config`` reaches every
instance, and a promotion is applied by each instance as one change (never half a set)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from auth.principal import KafkaPrincipal
from authz.model import AclOperation, ResourceType
from gateway.commands.cli import build_parser
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.security_records import AppliedRecords
from tests.harness import GatewayThread

CONVERGENCE_S = 10.0
ALICE = KafkaPrincipal("User", "alice")
TOPICS = [f"t{i}" for i in range(50)]


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + CONVERGENCE_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {CONVERGENCE_S:g}s"
        time.sleep(0.05)


def _acls(config: Path, *argv: str) -> None:
    args = build_parser().parse_args(["acls", "--shadow", "--config", str(config), *argv])
    assert args.func(args) == 0


@pytest.mark.broker
def test_shadow_set_and_promotion_reach_every_instance_as_one_change(broker: EmbeddedBroker, tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "authorizer.class.name": "StandardAuthorizer",
        "ksgate.security.store": "KAFKA", "ksgate.security.store.topic": f"_ksgate_security_{uuid.uuid4().hex[:8]}",
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": False}
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump({**settings, "upstream.bootstrap.servers": broker.bootstrap}))
    instances = [GatewayThread(broker.bootstrap, settings, protocol="SASL_PLAINTEXT").start() for _ in range(2)]
    try:
        changes: list[list[tuple[int, int]]] = [[] for _ in instances]
        for seen, instance in zip(changes, instances, strict=True):
            assert instance.gateway.security_topic is not None

            def record(applied: AppliedRecords, seen: list[tuple[int, int]] = seen) -> None:
                if applied.acls_added or applied.acls_removed:
                    seen.append((len(applied.acls_added), len(applied.acls_removed)))

            instance.gateway.security_topic.subscribe(record)

        for topic in TOPICS:
            _acls(config, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic)

        def authorizations() -> list[Any]:
            found = [i.gateway.ctx.authorization for i in instances]
            assert all(a is not None and a.shadow is not None for a in found)
            return found

        _until(lambda: all(a.shadow.authorizer.acl_count == len(TOPICS) for a in authorizations()),
               "every instance follows the shadow set")
        assert all(a.authorizer.acl_count == 0 for a in authorizations())  # nothing enforced

        _acls(config, "--promote")
        _until(lambda: all(a.authorizer.acl_count == len(TOPICS) and not a.shadow.active
                           for a in authorizations()), "every instance applies the promotion")
        assert changes == [[(len(TOPICS), 0)], [(len(TOPICS), 0)]]  # one change each, never part of the set
        for authorization in authorizations():
            assert authorization.authorizer.authorize(ALICE, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC,
                                                      "t7").allowed

        _acls(config, "--rollback")
        _until(lambda: all(a.authorizer.acl_count == 0 for a in authorizations()), "every instance rolls back")
        assert changes == [[(len(TOPICS), 0), (0, len(TOPICS))]] * 2
    finally:
        for instance in instances:
            instance.stop()
