"""The shadow ACL set in the replicated store, on Tansu: ``ksgate acls --shadow --config`` reaches every
instance, and a promotion is applied by each instance as one change (never half a set)."""

from __future__ import annotations

import threading
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

HANG_S = 30.0  # bounds a hang only, never a timing
ALICE = KafkaPrincipal("User", "alice")
TOPICS = [f"t{i}" for i in range(50)]


def _until(condition: Callable[[], bool], what: str, applied: threading.Event) -> None:
    """Wait for ``condition``, checked again each time an instance's store has applied a run of records (and its
    listeners, the authorizers' included, have run): ``applied`` is set by a listener subscribed after them."""
    deadline = time.monotonic() + HANG_S
    while True:
        applied.clear()  # before the check: a run applied after it sets the event again
        if condition():
            return
        assert applied.wait(max(0.0, deadline - time.monotonic())), f"never: {what} (waited {HANG_S:g}s)"


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
        applied = threading.Event()
        for seen, instance in zip(changes, instances, strict=True):
            assert instance.gateway.security_topic is not None

            def record(run: AppliedRecords, seen: list[tuple[int, int]] = seen) -> None:
                if run.acls_added or run.acls_removed:
                    seen.append((len(run.acls_added), len(run.acls_removed)))
                applied.set()

            instance.gateway.security_topic.subscribe(record)

        for topic in TOPICS:
            _acls(config, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic)

        def authorizations() -> list[Any]:
            found = [i.gateway.ctx.authorization for i in instances]
            assert all(a is not None and a.shadow is not None for a in found)
            return found

        _until(lambda: all(a.shadow.authorizer.acl_count == len(TOPICS) for a in authorizations()),
               "every instance follows the shadow set", applied)
        assert all(a.authorizer.acl_count == 0 for a in authorizations())  # nothing enforced

        _acls(config, "--promote")
        _until(lambda: all(a.authorizer.acl_count == len(TOPICS) and not a.shadow.active
                           for a in authorizations()), "every instance applies the promotion", applied)
        assert changes == [[(len(TOPICS), 0)], [(len(TOPICS), 0)]]  # one change each, never part of the set
        for authorization in authorizations():
            assert authorization.authorizer.authorize(ALICE, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC,
                                                      "t7").allowed

        _acls(config, "--rollback")
        _until(lambda: all(a.authorizer.acl_count == 0 for a in authorizations()), "every instance rolls back", applied)
        assert changes == [[(len(TOPICS), 0), (0, len(TOPICS))]] * 2
    finally:
        for instance in instances:
            instance.stop()
