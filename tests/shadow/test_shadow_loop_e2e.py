"""The closed loop of issue #22, end to end with real clients through a gateway in front of Tansu:

observed traffic (ksgate.audit.log.allowed) → ``ksgate audit recommend`` → [``ksgate audit replay``] →
``ksgate acls --shadow --load`` → the same traffic shows no divergence, while a client doing what the
recommendation did not cover is named (audit event "shadow", would_deny) → ``--promote`` → the observed
clients keep working, and the named one is refused, as it was told.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from authz.shadow import ShadowAcls
from gateway.commands.cli import build_parser
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from tests.harness import GatewayThread, produce_one, scram_client

RUN = uuid.uuid4().hex[:6]
ORDERS = [f"orders{RUN}-{i}" for i in range(1, 4)]
HANG_S = 20.0  # the gateway re-reads its ACL files every second: bounds a hang only, never a timing


def _audit_command(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "gateway", "audit", *args], check=True, timeout=600,
                   env={**os.environ, "PYSPARK_PYTHON": sys.executable}, capture_output=True)


def _acls(config: Path, *argv: str) -> None:
    args = build_parser().parse_args(["acls", "--shadow", "--config", str(config), *argv])
    assert args.func(args) == 0


def _polled(shadow: ShadowAcls) -> threading.Event:
    """An event set each time the gateway has re-read its ACL files: its file watch refreshes the shadow set
    (``shadow.refresh``) right after the live one, so a finished refresh is a finished poll of both."""
    polled = threading.Event()
    refresh = shadow.refresh

    def refresh_then_tell() -> object:
        try:
            return refresh()
        finally:
            polled.set()
    shadow.refresh = refresh_then_tell
    return polled


def _until(condition: Callable[[], bool], what: str, polled: threading.Event) -> None:
    """Wait for what the gateway must have picked up from its ACL files, checked again after each of its polls."""
    deadline = time.monotonic() + HANG_S
    while True:
        polled.clear()  # before the check: a poll finished after it sets the event again
        if condition():
            return
        assert polled.wait(max(0.0, deadline - time.monotonic())), f"never: {what} (waited {HANG_S:g}s)"


def _events(log: Path, kind: str) -> list[dict[str, Any]]:
    return [e for line in log.read_text().splitlines() if (e := json.loads(line)).get("event") == kind]


@pytest.fixture(params=[pytest.param("tansu", marks=pytest.mark.broker),
                        pytest.param("kafka", marks=pytest.mark.kafka)])
def upstream(request: pytest.FixtureRequest) -> str:
    """The upstream's bootstrap: Tansu, or the reference Apache Kafka 4.4 broker's PLAINTEXT listener."""
    if request.param == "kafka":
        return str(request.getfixturevalue("kafka").bootstrap("PLAINTEXT"))
    broker: EmbeddedBroker = request.getfixturevalue("broker")
    return broker.bootstrap


def test_recommend_shadow_promote_names_the_uncovered_client_before_the_promotion(
        upstream: str, tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    store = FileCredentialStore(users)
    for user in ("admin", "alice", "bob"):
        store.upsert_user(user, f"{user}-secret")
    audit_log = tmp_path / "audit.log"
    settings = {
        "upstream.bootstrap.servers": upstream, "authorizer.class.name": "StandardAuthorizer",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ksgate.credentials.file": str(users),
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": True,
        "ksgate.acl.file": str(tmp_path / "acls.json"), "ksgate.acl.shadow.file": str(tmp_path / "acls.shadow.json"),
        "ksgate.audit.log.file": str(audit_log), "ksgate.audit.log.allowed": True}
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(settings))
    gateway = GatewayThread(upstream, settings, protocol="SASL_PLAINTEXT").start()
    try:
        authorization = gateway.gateway.ctx.authorization
        assert authorization is not None and authorization.shadow is not None
        shadow = authorization.shadow
        polled = _polled(shadow)
        admin = AdminClient(scram_client(gateway, "admin"))
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in ORDERS]).values():
            future.result(timeout=15)

        # 1. The observed workload: alice writes to the three orders topics (no ACLs yet: allowed by default).
        for topic in ORDERS:
            assert produce_one(gateway, "alice", topic) is None

        # 2. recommend, from what the audit log recorded.
        recommend = tmp_path / "recommend"
        _audit_command("recommend", "--input", str(audit_log), "--output", str(recommend), "--min-prefix-group", "3")
        candidate = recommend / "recommended-acls.json"
        assert candidate.exists()

        # 3. replay: the candidate set must deny nothing of the observed traffic.
        replay = tmp_path / "replay"
        _audit_command("replay", "--input", str(audit_log), "--acls", str(candidate), "--output", str(replay))
        summary = json.loads((replay / "replay.json").read_text())
        assert summary["would_deny"] == 0, summary

        # 4. The candidate as the shadow set: the same traffic diverges nowhere.
        _acls(config, "--load", str(candidate))
        _until(lambda: shadow.active, "the shadow ACL set", polled)
        shadow_phase_starts = len(audit_log.read_text().splitlines())
        for topic in ORDERS:
            assert produce_one(gateway, "alice", topic) is None
        assert _events(audit_log, "shadow") == []
        assert sum(shadow.counts().values()) == 0

        # 5. bob does what nobody did while the traffic was observed: still allowed (nothing is enforced),
        #    and named before any promotion.
        assert produce_one(gateway, "bob", ORDERS[0]) is None
        named = [e for e in _events(audit_log, "shadow") if e["principal"] == "User:bob"]
        assert any((e["operation"], e["resource_type"], e["resource_name"], e["decision"], e["live"], e["shadow"])
                   == ("WRITE", "TOPIC", ORDERS[0], "WOULD_DENY", "ALLOWED", "DENIED") for e in named), named
        assert all(e["principal"] == "User:bob" for e in _events(audit_log, "shadow"))

        # Replay and live agree (issue #22): replayed offline on the same traffic, the candidate set gives the
        # verdicts the gateway gave live — the decisions the shadow events named are replay's changes.
        segment = tmp_path / "shadow-phase.log"
        segment.write_text("\n".join(audit_log.read_text().splitlines()[shadow_phase_starts:]) + "\n")
        replay = tmp_path / "replay-shadow-phase"
        _audit_command("replay", "--input", str(segment), "--acls", str(candidate), "--output", str(replay))
        with open(replay / "changes.csv", newline="", encoding="utf-8") as changes:
            offline = {(r["principal"], r["operation"], r["resource_type"], r["resource_name"])
                       for r in csv.DictReader(changes) if r["live"] != r["candidate"]}
        live = {(e["principal"], e["operation"], e["resource_type"], e["resource_name"])
                for e in _events(audit_log, "shadow")}
        assert offline == live

        # 6. Promote: the shadow set is the live one; alice keeps working, bob is refused as announced.
        _acls(config, "--promote")
        _until(lambda: authorization.authorizer.acl_count > 0 and not shadow.active, "the promotion", polled)
        for topic in ORDERS:
            assert produce_one(gateway, "alice", topic) is None, f"the promoted ACLs do not cover {topic}"
        assert produce_one(gateway, "bob", ORDERS[0]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert [e["action"] for e in _events(audit_log, "acl_change")] == ["load", "promote"]
    finally:
        gateway.stop()
