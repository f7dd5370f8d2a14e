"""ksgate audit recommend: exact recommendations for hand-built logs, the ACL diff and the output files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from authz.acl_json import decode_acl_file, encode_acl_file
from authz.model import AclBinding, AclOperation, AclPermissionType, PatternType
from authz.model import ResourceType as RT
from pipeline.least_privilege.compaction import compact
from pipeline.least_privilege.output import bindings_to_apply
from pipeline.least_privilege.recommend import Recommendation, recommend
from tests.pipeline.events import authorization, binding, write_events

Key = tuple[str, str, str, str]  # (resource_type, pattern_type, name, operation)

ORDERS_READ = binding("User:consumer", RT.TOPIC, "orders-", AclOperation.READ, PatternType.PREFIXED)
BILLING_READ = binding("User:consumer", RT.GROUP, "billing", AclOperation.READ)
ORDERS_OLD = binding("User:consumer", RT.TOPIC, "orders-old", AclOperation.READ)
INVENTORY = binding("User:describer", RT.TOPIC, "inventory", AclOperation.DESCRIBE)
PAYMENTS_WRITE = binding("User:producer", RT.TOPIC, "payments.", AclOperation.WRITE, PatternType.PREFIXED)
IDEMPOTENT = binding("User:producer", RT.CLUSTER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)
MIXED_ALL = binding("User:mixed", RT.TOPIC, "*", AclOperation.READ)
LEGACY = binding("User:legacy", RT.TOPIC, "legacy-events", AclOperation.READ)
DENY_SECRET = binding("User:*", RT.TOPIC, "stock-secret", AclOperation.READ, permission=AclPermissionType.DENY)
PUBLIC = binding("User:*", RT.TOPIC, "public-", AclOperation.DESCRIBE, PatternType.PREFIXED)
CURRENT = [ORDERS_READ, BILLING_READ, ORDERS_OLD, INVENTORY, PAYMENTS_WRITE, IDEMPOTENT, MIXED_ALL, LEGACY,
           DENY_SECRET, PUBLIC]


def _events() -> list[dict[str, Any]]:
    a = authorization
    events = [a("User:consumer", "READ", "TOPIC", f"orders-{i}", rule=ORDERS_READ, at=i) for i in range(1, 31)]
    events += [
        a("User:consumer", "READ", "GROUP", "billing", rule=BILLING_READ, at=40),
        a("User:consumer", "DESCRIBE", "TOPIC", "orders-7", rule=ORDERS_READ, at=41),  # implied by READ
        a("User:consumer", "DESCRIBE", "GROUP", "billing", rule=BILLING_READ, at=42),  # implied by READ
        a("User:describer", "DESCRIBE", "TOPIC", "inventory", rule=INVENTORY, at=5),
        a("User:describer", "DESCRIBE", "TOPIC", "inventory", rule=INVENTORY, at=6),
        # Logged without rules: the diff must match them against the ACLs itself.
        a("User:producer", "WRITE", "TOPIC", "payments.eu.card", at=1),
        a("User:producer", "WRITE", "TOPIC", "payments.eu.sepa", at=2),
        a("User:producer", "WRITE", "TOPIC", "payments.us.card", at=3),
        a("User:producer", "WRITE", "TOPIC", "audit", at=4),
        a("User:producer", "IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster", at=5),
        a("User:producer", "WRITE", "TOPIC", "*", at=6),  # authorizeByResourceType
        a("User:producer", "READ", "TOPIC", "payments.eu.card", decision="DENIED", rule="NoMatchingAcl", at=7),
        a("User:mixed", "READ", "TOPIC", "logs-a", rule=MIXED_ALL),
        a("User:mixed", "READ", "TOPIC", "logs-b", rule=MIXED_ALL),
        *(a("User:mixed", "READ", "TOPIC", f"app.{n}", rule=MIXED_ALL) for n in ("x.one", "x.two", "x.three", "y.1")),
        *(a("User:noboundary", "READ", "TOPIC", n, rule="NoAclDefault") for n in ("ordersA", "ordersB", "ordersC")),
        *(a("User:blocked", "READ", "TOPIC", f"stock-{i}", rule="NoAclDefault") for i in (1, 2, 3)),
        a("User:blocked", "READ", "TOPIC", "stock-secret", decision="DENIED", rule=DENY_SECRET, at=9),
        a("User:admin", "CREATE", "TOPIC", "brand-new", rule="SuperUser", at=1),
        a("User:admin", "ALTER_CONFIGS", "TOPIC", "orders-1", rule="SuperUser", at=2),
        a("User:admin", "CREATE", "CLUSTER", "kafka-cluster", rule="SuperUser", at=3),
        a("User:idem", "WRITE", "TOPIC", "*", rule="NoAclDefault"),
        a("User:configs", "DESCRIBE_CONFIGS", "TOPIC", "t1", rule="NoAclDefault"),
        a("User:configs", "ALTER_CONFIGS", "TOPIC", "t1", rule="NoAclDefault"),
        a("User:configs", "DESCRIBE_CONFIGS", "TOPIC", "t2", rule="NoAclDefault"),
        a("User:reader2", "DESCRIBE", "TOPIC", "public-news", host="10.0.0.9"),
        a("User:scanner", "DESCRIBE", "TOPIC", "secret", decision="DENIED", rule="NoMatchingAcl", at=3),
        a("User:scanner", "DESCRIBE", "TOPIC", "secret", decision="DENIED", rule="NoMatchingAcl", at=8),
    ]
    return events


@pytest.fixture(scope="module")
def outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("recommend")


@pytest.fixture(scope="module")
def result(spark: SparkSession, outdir: Path) -> Recommendation:
    log = write_events(outdir / "in", _events())
    acl_file = outdir / "acls.json"
    acl_file.write_bytes(encode_acl_file(CURRENT))
    return recommend(spark, [log], str(outdir / "out"), str(acl_file), min_group=3)


def _key(b: AclBinding) -> Key:
    return (b.pattern.resource_type.name, b.pattern.pattern_type.name, b.pattern.name, b.entry.operation.name)


def grants_of(result: Recommendation, principal: str) -> set[Key]:
    return {_key(g.binding) for g in result.grants if g.binding.entry.principal == principal}


def test_consumer_of_thirty_topics_gets_one_prefixed_read_and_its_group(result: Recommendation) -> None:
    assert grants_of(result, "User:consumer") == {("TOPIC", "PREFIXED", "orders-", "READ"),
                                                   ("GROUP", "LITERAL", "billing", "READ")}
    prefixed = next(g for g in result.grants if _key(g.binding) == ("TOPIC", "PREFIXED", "orders-", "READ"))
    assert (prefixed.resources, prefixed.events) == (30, 30)
    assert prefixed.first_seen == "2026-11-20T00:01:00.000Z" and prefixed.last_seen == "2026-11-20T00:30:00.000Z"


def test_topic_only_described_gets_describe_and_nothing_more(result: Recommendation) -> None:
    assert grants_of(result, "User:describer") == {("TOPIC", "LITERAL", "inventory", "DESCRIBE")}


def test_every_binding_is_an_allow_for_any_host(result: Recommendation) -> None:
    assert {(g.binding.entry.host, g.binding.entry.permission_type) for g in result.grants} == {
        ("*", AclPermissionType.ALLOW)}


def test_prefix_needs_k_resources_at_a_name_boundary_and_cluster_stays_literal(result: Recommendation) -> None:
    assert grants_of(result, "User:producer") == {("TOPIC", "PREFIXED", "payments.", "WRITE"),
                                                   ("TOPIC", "LITERAL", "audit", "WRITE"),
                                                   ("CLUSTER", "LITERAL", "kafka-cluster", "IDEMPOTENT_WRITE")}
    # app.x. (3) sits inside app. (4, with app.y.1): the outer prefix wins; 2 logs-* stay literal.
    assert grants_of(result, "User:mixed") == {("TOPIC", "PREFIXED", "app.", "READ"),
                                                ("TOPIC", "LITERAL", "logs-a", "READ"),
                                                ("TOPIC", "LITERAL", "logs-b", "READ")}
    assert grants_of(result, "User:noboundary") == {("TOPIC", "LITERAL", n, "READ")
                                                    for n in ("ordersA", "ordersB", "ordersC")}


def test_prefix_never_covers_a_denied_resource(result: Recommendation) -> None:
    assert grants_of(result, "User:blocked") == {("TOPIC", "LITERAL", f"stock-{i}", "READ") for i in (1, 2, 3)}


def test_alter_configs_implies_describe_configs(result: Recommendation) -> None:
    assert grants_of(result, "User:configs") == {("TOPIC", "LITERAL", "t1", "ALTER_CONFIGS"),
                                                  ("TOPIC", "LITERAL", "t2", "DESCRIBE_CONFIGS")}


def test_denied_actions_are_requested_not_granted(result: Recommendation) -> None:
    refused = {(r.principal, r.resource_type, r.resource_name, r.operation, r.events, r.rules)
               for r in result.refused}
    assert refused == {
        ("User:producer", "TOPIC", "payments.eu.card", "READ", 1, ("NoMatchingAcl",)),
        ("User:blocked", "TOPIC", "stock-secret", "READ", 1, (f"AclBinding({DENY_SECRET})",)),
        ("User:scanner", "TOPIC", "secret", "DESCRIBE", 2, ("NoMatchingAcl",)),
    }
    assert grants_of(result, "User:scanner") == set()


def test_super_user_traffic_is_excluded_and_summarised(result: Recommendation) -> None:
    assert grants_of(result, "User:admin") == set()
    [admin] = result.super_users
    assert (admin.principal, admin.events, admin.operations, admin.resource_types, admin.resources) == (
        "User:admin", 3, ("ALTER_CONFIGS", "CREATE"), ("CLUSTER", "TOPIC"), 3)
    assert result.totals["super_user"] == 3


def test_type_wide_checks_are_covered_by_a_concrete_binding_or_listed(result: Recommendation) -> None:
    checks = {(c.principal, c.resource_type, c.operation, c.covered) for c in result.type_wide}
    assert checks == {("User:producer", "TOPIC", "WRITE", True), ("User:idem", "TOPIC", "WRITE", False)}
    assert grants_of(result, "User:idem") == set()
    assert all(g.binding.pattern.name != "*" for g in result.grants)


def test_diff_lists_unused_bindings_and_what_to_add(result: Recommendation) -> None:
    diff = result.diff
    assert diff is not None
    assert set(diff.unused) == {ORDERS_OLD, LEGACY}
    assert set(diff.used) == {ORDERS_READ, BILLING_READ, INVENTORY, PAYMENTS_WRITE, IDEMPOTENT, MIXED_ALL, PUBLIC}
    assert {_key(b) for b in diff.already_present} == {_key(b) for b in
                                                       (ORDERS_READ, BILLING_READ, INVENTORY, PAYMENTS_WRITE,
                                                        IDEMPOTENT)}
    assert {(b.entry.principal, *_key(b)) for b in diff.to_add} == {
        ("User:producer", "TOPIC", "LITERAL", "audit", "WRITE"),
        *(("User:noboundary", "TOPIC", "LITERAL", n, "READ") for n in ("ordersA", "ordersB", "ordersC")),
        *(("User:blocked", "TOPIC", "LITERAL", f"stock-{i}", "READ") for i in (1, 2, 3)),
        ("User:configs", "TOPIC", "LITERAL", "t1", "ALTER_CONFIGS"),
        ("User:configs", "TOPIC", "LITERAL", "t2", "DESCRIBE_CONFIGS"),
    }
    assert {(r.entry.principal, r.pattern.name, e) for r, e in diff.covered} == {
        ("User:mixed", "app.", MIXED_ALL), ("User:mixed", "logs-a", MIXED_ALL), ("User:mixed", "logs-b", MIXED_ALL),
        ("User:reader2", "public-news", PUBLIC)}


def test_output_files(result: Recommendation, outdir: Path) -> None:
    out = outdir / "out"
    assert decode_acl_file((out / "recommended-acls.json").read_bytes()) == [g.binding for g in result.grants]
    ksgate = (out / "ksgate-acls.sh").read_text().splitlines()
    assert ksgate[0] == "#!/bin/sh" and "set -eu" in ksgate
    assert ('ksgate acls --acl-file "$ACL_FILE" --add --allow-principal User:producer --operation Write '
            "--topic audit --resource-pattern-type literal") in ksgate
    assert not any("orders-" in line for line in ksgate)  # already present in the ACL file
    kafka = (out / "kafka-acls.sh").read_text()
    assert ('kafka-acls.sh --bootstrap-server "$BOOTSTRAP_SERVER" ${COMMAND_CONFIG:+--command-config '
            '"$COMMAND_CONFIG"} --add --allow-principal User:configs --operation AlterConfigs --topic t1 '
            "--resource-pattern-type literal") in kafka
    removal = (out / "remove-unused.sh").read_text()
    assert ("# ksgate acls --acl-file \"$ACL_FILE\" --remove --allow-principal User:legacy --operation Read "
            "--topic legacy-events --resource-pattern-type literal --force") in removal
    diff = json.loads((out / "acl-diff.json").read_text())
    assert {b["resourceName"] for b in diff["unused"]} == {"orders-old", "legacy-events"}
    refused = [json.loads(line) for line in (out / "requested-not-granted.jsonl").read_text().splitlines()]
    assert {r["principal"] for r in refused} == {"User:producer", "User:blocked", "User:scanner"}
    markdown = (out / "recommendations.md").read_text()
    for heading in ("## Recommended ALLOW bindings", "## Requested, not granted", "## Super-user traffic",
                    "## Unused in the window (candidates to remove)", "## Type-wide checks"):
        assert heading in markdown


def test_scripts_cover_everything_without_an_acl_file(result: Recommendation) -> None:
    alone = Recommendation(result.grants, [], [], [], result.totals, result.window)
    assert bindings_to_apply(alone) == [g.binding for g in result.grants]


def test_compaction_takes_the_longest_prefix_and_respects_k(spark: SparkSession) -> None:
    names = [f"orders-{region}-{i}" for region in ("eu", "us") for i in (1, 2, 3)]
    rows = [("User:c", "TOPIC", "READ", n, 1, None, None) for n in names] + [
        ("User:c", "GROUP", "READ", g, 1, None, None) for g in ("team-a", "team-b")]
    observed = spark.createDataFrame(rows, "principal string, resource_type string, operation string, "
                                           "resource_name string, events long, first_seen timestamp, "
                                           "last_seen timestamp")
    refused = observed.limit(0).select("principal", "resource_type", "operation", "resource_name")
    by_k = {}
    for k in (2, 3, 7):
        by_k[k] = {(r["resource_type"], r["pattern_type"], r["pattern_name"], r["resources"])
                   for r in compact(observed, refused, k).collect()}
    assert by_k[3] == {("TOPIC", "PREFIXED", "orders-eu-", 3), ("TOPIC", "PREFIXED", "orders-us-", 3),
                       ("GROUP", "LITERAL", "team-a", 1), ("GROUP", "LITERAL", "team-b", 1)}
    assert by_k[2] == {("TOPIC", "PREFIXED", "orders-eu-", 3), ("TOPIC", "PREFIXED", "orders-us-", 3),
                       ("GROUP", "PREFIXED", "team-", 2)}
    assert by_k[7] == {("TOPIC", "LITERAL", n, 1) for n in names} | {("GROUP", "LITERAL", "team-a", 1),
                                                                     ("GROUP", "LITERAL", "team-b", 1)}


def test_a_producers_auto_creating_metadata_suggests_no_create(spark: SparkSession, tmp_path: Path) -> None:
    # What a producer's client sends (Metadata with auto-creation for an existing topic), through the real
    # policies and audit log: the implicit CREATE probes are not denials, so nothing suggests CREATE.
    from authz.request_policy import Rewrite
    from protocol.api_keys import ApiKey
    from tests.authz.helpers import acl
    from tests.gateway.session.test_audit_implicit_checks import (
        METADATA_VERSION,
        Gateway,
        metadata_answer,
        metadata_request,
    )

    gateway = Gateway(tmp_path, acl("orders", AclOperation.DESCRIBE), record_allowed=True)
    for _ in range(3):
        verdict = gateway.decide(ApiKey.METADATA, METADATA_VERSION, metadata_request(["orders"]))
        assert isinstance(verdict, Rewrite)
        verdict.on_response(metadata_answer(("orders", 0)))
    gateway.audit.close()
    result = recommend(spark, [str(gateway.log_path)], str(tmp_path / "out"))
    assert {r.operation for r in result.refused} == set()
    assert {_key(g.binding) for g in result.grants} == {("TOPIC", "LITERAL", "orders", "DESCRIBE")}
