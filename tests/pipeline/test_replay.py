"""ksgate audit replay on hand-built logs: weights, hosts, patterns, super users, deny rules and the outputs."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from authz.acl_json import encode_acl_file
from authz.model import AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, ResourcePattern
from authz.model import ResourceType as RT
from pipeline.progress import QUIET
from pipeline.replay.command import replay
from pipeline.replay.settings import GivenSettings
from tests.pipeline.events import authorization, binding, write_events

ORDERS = binding("User:app", RT.TOPIC, "orders-", AclOperation.WRITE, PatternType.PREFIXED)
AUDIT = binding("User:app", RT.TOPIC, "audit", AclOperation.READ)
SECRET = binding("User:app", RT.TOPIC, "orders-secret", AclOperation.WRITE, permission=AclPermissionType.DENY)
GROUP_FROM_OFFICE = AclBinding(ResourcePattern(RT.GROUP, "billing", PatternType.LITERAL),
                               AccessControlEntry("User:app", "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW))
LIVE = [ORDERS, AUDIT, GROUP_FROM_OFFICE]
LEARNED = GivenSettings()  # nothing given: learned from the log


def _aggregated(event: dict[str, Any], names: list[str], count: int) -> dict[str, Any]:
    return {**event, "resource_name": names[0], "count": count, "sample": names}


def _events() -> list[dict[str, Any]]:
    a = authorization
    return [
        # One Produce to 25 topics, one kind: 20 names sampled, 5 beyond the sample.
        _aggregated(a("User:app", "WRITE", "TOPIC", "orders-0", rule=ORDERS, at=1),
                    [f"orders-{i}" for i in range(20)], 25),
        # Three decisions, all sampled, one of them the secret topic.
        _aggregated(a("User:app", "WRITE", "TOPIC", "orders-a", rule=ORDERS, at=2),
                    ["orders-a", "orders-b", "orders-secret"], 3),
        a("User:app", "READ", "TOPIC", "audit", rule=AUDIT, at=3),
        a("User:app", "READ", "TOPIC", "audit", rule=AUDIT, at=4),
        a("User:app", "READ", "GROUP", "billing", rule=GROUP_FROM_OFFICE, host="10.0.0.1", at=5),
        a("User:app", "READ", "GROUP", "billing", decision="DENIED", rule="NoMatchingAcl", host="10.0.0.2", at=6),
        # Implicit: InitProducerId's "WRITE on any topic", allowed by the prefixed binding.
        a("User:app", "WRITE", "TOPIC", "*", rule=ORDERS, at=7),
        a("User:admin", "ALTER_CONFIGS", "TOPIC", "payments", rule="SuperUser", at=8),
        a("User:app", "READ", "TOPIC", "payments", decision="DENIED", rule="NoMatchingAcl", at=9),
        a("User:app", "WRITE", "TOPIC", "__ksgate_security", decision="DENIED", rule="GatewayReserved", at=10),
    ]


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_events(tmp_path_factory.mktemp("replay-in"), _events())


def _replay(spark: SparkSession, log: str, out: Path, candidate: list[AclBinding],
            given: GivenSettings = LEARNED) -> dict[str, Any]:
    acls = out.parent / f"{out.name}.json"
    acls.write_bytes(encode_acl_file(candidate))
    return replay(spark, [log], str(out), str(acls), given, progress=QUIET)


def _changes(out: Path) -> list[dict[str, str]]:
    with (out / "changes.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_live_acls_replay_unchanged(spark: SparkSession, log: str, tmp_path: Path) -> None:
    summary = _replay(spark, log, tmp_path / "same", LIVE)
    # 25 + 3 + 2 + 1 + 1 + 1 + 1 + 1 + 1 decisions; the 5 beyond the first event's sample have no name.
    assert (summary["decisions"], summary["replayed"], summary["not_replayed"]) == (36, 31, 5)
    assert summary["not_replayed_by_reason"] == {"unsampled": 5}
    assert (summary["unchanged"], summary["would_deny"], summary["would_allow"]) == (31, 0, 0)
    assert (summary["super_users"], summary["super_users_from"]) == (["User:admin"], "log")
    assert _changes(tmp_path / "same") == []
    assert json.loads((tmp_path / "same" / "replay.json").read_text()) == summary
    assert "No decision changes" in (tmp_path / "same" / "report.md").read_text()
    assert (tmp_path / "same" / "replay_changes.png").stat().st_size > 0


def test_a_deny_rule_and_a_removed_binding_are_named_with_their_counts(spark: SparkSession, log: str,
                                                                       tmp_path: Path) -> None:
    summary = _replay(spark, log, tmp_path / "deny", [ORDERS, SECRET, GROUP_FROM_OFFICE])
    assert (summary["would_deny"], summary["would_allow"]) == (3, 0)  # orders-secret once, audit twice
    assert summary["principals"]["User:app"]["would_deny"] == 3
    rows = _changes(tmp_path / "deny")
    assert [(r["operation"], r["resource_name"], r["live"], r["candidate"], r["count"]) for r in rows] == [
        ("READ", "audit", "ALLOWED", "DENIED", "2"), ("WRITE", "orders-secret", "ALLOWED", "DENIED", "1")]
    assert (rows[0]["first_seen"], rows[0]["last_seen"]) == ("2026-11-20T00:03:00.000Z", "2026-11-20T00:04:00.000Z")


def test_hosts_and_the_any_resource_check_are_replayed(spark: SparkSession, log: str, tmp_path: Path) -> None:
    anywhere = binding("User:app", RT.GROUP, "billing", AclOperation.READ)
    summary = _replay(spark, log, tmp_path / "hosts", [AUDIT, anywhere])
    rows = {(r["operation"], r["resource_type"], r["resource_name"], r["live"]): int(r["count"])
            for r in _changes(tmp_path / "hosts")}
    # The group is now allowed from 10.0.0.2 too; without ORDERS every WRITE, "*" included, would be denied.
    assert rows[("READ", "GROUP", "billing", "DENIED")] == 1
    assert rows[("WRITE", "TOPIC", "*", "ALLOWED")] == 1
    assert sum(n for (op, *_), n in rows.items() if op == "WRITE") == 20 + 3 + 1
    assert (summary["would_deny"], summary["would_allow"]) == (24, 1)


def test_super_users_given_replace_those_the_log_shows(spark: SparkSession, log: str, tmp_path: Path) -> None:
    summary = _replay(spark, log, tmp_path / "nosuper", LIVE, GivenSettings(frozenset(), False))
    assert summary["super_users_from"] == "option"
    assert [(r["principal"], r["resource_name"]) for r in _changes(tmp_path / "nosuper")] == \
        [("User:admin", "payments")]
    everyone = _replay(spark, log, tmp_path / "everyone", LIVE, GivenSettings(frozenset(), True))
    # Now "payments" (named by no ACL) is allowed to everyone: admin keeps it, app's denial would be lifted.
    assert (everyone["would_deny"], everyone["would_allow"]) == (0, 1)
