"""Acceptance, end to end: the gateway's real audit log → report and recommend → the recommended
ACLs, applied with `ksgate acls` to a fresh gateway, let the same workload run with no denial
and nothing beyond it."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from tests.harness import GatewayThread, produce_one, scram_client

RUN = uuid.uuid4().hex[:6]
ORDERS = [f"orders{RUN}-{i}" for i in range(1, 4)]
OUTSIDE = f"payments{RUN}-1"


def _gateway(broker: EmbeddedBroker, users: Path, acls: Path, audit: Path, everyone: bool) -> GatewayThread:
    return GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ksgate.credentials.file": str(users),
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": everyone, "ksgate.acl.file": str(acls),
        "ksgate.audit.log.file": str(audit), "ksgate.audit.log.allowed": True}, protocol="SASL_PLAINTEXT").start()


def _audit(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "gateway", "audit", *args], check=True, timeout=300,
                   env={**os.environ, "PYSPARK_PYTHON": sys.executable}, capture_output=True)


def test_recommended_acls_allow_exactly_the_observed_workload(broker: EmbeddedBroker, tmp_path: Path) -> None:
    users = tmp_path / "users.json"
    store = FileCredentialStore(users)
    store.upsert_user("admin", "admin-secret")
    store.upsert_user("alice", "alice-secret")
    observed = _gateway(broker, users, tmp_path / "acls-before.json", tmp_path / "audit.log", everyone=True)
    try:
        admin = AdminClient(scram_client(observed, "admin"))
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in [*ORDERS, OUTSIDE]]).values():
            future.result(timeout=15)
        for topic in ORDERS:  # the workload: alice writes to three orders topics
            assert produce_one(observed, "alice", topic) is None
    finally:
        observed.stop()

    report, recommend = tmp_path / "report", tmp_path / "recommend"
    _audit("report", "--input", str(tmp_path / "audit.log"), "--output", str(report))
    assert (report / "summary.md").exists()
    _audit("recommend", "--input", str(tmp_path / "audit.log"), "--output", str(recommend),
           "--min-prefix-group", "3")
    script = (recommend / "ksgate-acls.sh").read_text()
    assert f"--topic orders{RUN}- --resource-pattern-type prefixed" in script.replace("'", "").replace('"', "")

    # Apply the script, as an operator would, to a fresh gateway's ACL file.
    acls = tmp_path / "acls-after.json"
    subprocess.run(["bash", str(recommend / "ksgate-acls.sh")], check=True, timeout=120,
                   env={**os.environ, "ACL_FILE": str(acls),
                        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    enforced = _gateway(broker, users, acls, tmp_path / "audit-after.log", everyone=False)
    try:
        for topic in ORDERS:
            assert produce_one(enforced, "alice", topic) is None, f"the recommended ACLs do not cover {topic}"
        assert produce_one(enforced, "alice", OUTSIDE) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        enforced.stop()
