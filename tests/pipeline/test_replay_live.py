"""Replay agrees with the gateway: real clients through a gateway whose live ACLs are the candidate set, then
``ksgate audit replay`` of its audit log against the same set (nothing changes) and against the set less one
binding (exactly that binding's traffic would be denied)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from authz.acl_json import encode_acl_file
from authz.model import AclOperation, PatternType
from authz.model import ResourceType as RT
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from tests.harness import GatewayThread, produce_one, scram_client
from tests.pipeline.events import binding

pytestmark = pytest.mark.spark  # the replay runs `ksgate audit replay`, which starts Spark

RUN = uuid.uuid4().hex[:6]
ORDERS = [f"orders{RUN}-{i}" for i in range(1, 4)]
PAYMENTS = f"payments{RUN}"
FORBIDDEN = f"forbidden{RUN}"
ORDERS_WRITE = binding("User:alice", RT.TOPIC, f"orders{RUN}-", AclOperation.WRITE, PatternType.PREFIXED)
PAYMENTS_WRITE = binding("User:alice", RT.TOPIC, PAYMENTS, AclOperation.WRITE)
CANDIDATE = [ORDERS_WRITE, PAYMENTS_WRITE]


def _replay(log: Path, acls: Path, out: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "gateway", "audit", "replay", "--input", str(log), "--acls",
                           str(acls), "--output", str(out), "--master", "local[2]"],
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ksgate audit replay: ") and "see " in done.stdout
    summary: dict[str, Any] = json.loads((out / "replay.json").read_text())
    return summary


def _live_allowed_on(log: Path, principal: str, topic: str) -> int:
    """The ALLOWED decisions the gateway logged for ``principal`` on ``topic`` (one per sampled name)."""
    total = 0
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "authorization" and event["decision"] == "ALLOWED" \
                and event["principal"] == principal:
            total += (event.get("sample") or [event["resource_name"]]).count(topic)
    return total


def test_replay_gives_the_verdicts_the_gateway_gave(broker: EmbeddedBroker, tmp_path: Path) -> None:
    users, acls, log = tmp_path / "users.json", tmp_path / "candidate.json", tmp_path / "audit.log"
    store = FileCredentialStore(users)
    store.upsert_user("admin", "admin-secret")
    store.upsert_user("alice", "alice-secret")
    acls.write_bytes(encode_acl_file(CANDIDATE))
    gateway = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ksgate.credentials.file": str(users),
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": False, "ksgate.acl.file": str(acls),
        "ksgate.audit.log.file": str(log), "ksgate.audit.log.allowed": True}, protocol="SASL_PLAINTEXT").start()
    try:
        admin = AdminClient(scram_client(gateway, "admin"))
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in [*ORDERS, PAYMENTS, FORBIDDEN]]).values():
            future.result(timeout=15)
        for topic in [*ORDERS, PAYMENTS]:
            assert produce_one(gateway, "alice", topic) is None
        assert produce_one(gateway, "alice", FORBIDDEN) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        gateway.stop()

    same = _replay(log, acls, tmp_path / "same")
    assert same["decisions"] == same["replayed"] > 0
    assert (same["unchanged"], same["would_deny"], same["would_allow"]) == (same["replayed"], 0, 0)
    assert same["super_users"] == ["User:admin"]  # learned from the log: admin's decisions were SuperUser
    assert same["principals"]["User:alice"]["unchanged"] > 0  # alice's allowed and denied decisions both

    reduced = tmp_path / "reduced.json"
    reduced.write_bytes(encode_acl_file([ORDERS_WRITE]))
    less = _replay(log, reduced, tmp_path / "less")
    with (tmp_path / "less" / "changes.csv").open(newline="") as handle:
        changes = list(csv.DictReader(handle))
    assert {(c["principal"], c["resource_type"], c["resource_name"], c["live"], c["candidate"]) for c in changes} \
        == {("User:alice", "TOPIC", PAYMENTS, "ALLOWED", "DENIED")}
    alices = _live_allowed_on(log, "User:alice", PAYMENTS)
    assert less["would_deny"] == sum(int(c["count"]) for c in changes) == alices > 0
    assert (less["would_allow"], less["unchanged"]) == (0, same["replayed"] - less["would_deny"])
