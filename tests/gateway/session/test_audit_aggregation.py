"""One audit event per decision kind per request: exact counts, bounded samples, bounded bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from auth.principal import KafkaPrincipal
from authz.authorizer import StandardAuthorizer
from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from authz.request_policy import Action, Relay
from authz.response_defaults import default_item, default_response
from authz.shadow import ShadowAcls
from gateway.authorization import GatewayAuthorization
from gateway.ops.audit import AuditLog
from gateway.ops.audit_batch import MAX_KINDS, SAMPLE_NAME_CHARS, SAMPLE_SIZE
from gateway.session.authz_view import ConnectionAuthzView, TopicIdMisses
from gateway.session.policy_check import authorize
from protocol.api_keys import ApiKey
from tests.gateway.session.session_driver import ROUTES, requester

ALICE = KafkaPrincipal("User", "alice")


def _shared(tmp_path: Path, bindings: list[AclBinding], record_allowed: bool = False) -> GatewayAuthorization:
    authorizer = StandardAuthorizer([], False)
    authorizer.load(bindings)
    audit = AuditLog(str(tmp_path / "audit.log"), record_allowed)
    return GatewayAuthorization(authorizer, None, audit)  # type: ignore[arg-type]


def _view(shared: GatewayAuthorization, key: int = ApiKey.METADATA) -> ConnectionAuthzView:
    return ConnectionAuthzView(shared, ALICE, "10.0.0.1", 5000, "PLAINTEXT", key, 9, {}, TopicIdMisses())


def _events(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]


def _allow_topic(name: str, pattern: PatternType = PatternType.LITERAL,
                 operation: AclOperation = AclOperation.DESCRIBE) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, name, pattern),
                      AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW))


def test_ten_thousand_denied_topics_write_one_event_with_the_exact_count_and_a_bounded_sample(
        tmp_path: Path) -> None:
    shared = _shared(tmp_path, [])
    view = _view(shared)
    for i in range(10_000):
        assert not view.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, f"topic-{i}"))
    view.flush_audit()
    [event] = _events(tmp_path)
    assert event["count"] == 10_000 and event["decision"] == "DENIED"
    assert event["sample"] == [f"topic-{i}" for i in range(SAMPLE_SIZE)]
    assert event["resource_name"] == "topic-0" and event["operation"] == "DESCRIBE"
    assert event["api_name"] == "Metadata" and event["principal"] == "User:alice"


def test_a_single_decision_is_written_as_before_without_count_or_sample(tmp_path: Path) -> None:
    view = _view(_shared(tmp_path, []))
    view.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, "lonely"))
    view.flush_audit()
    [event] = _events(tmp_path)
    assert "count" not in event and "sample" not in event
    assert event["resource_name"] == "lonely" and event["decision"] == "DENIED"


def test_a_single_decision_on_a_huge_name_is_cut_and_escaped_like_a_sampled_one(tmp_path: Path) -> None:
    view = _view(_shared(tmp_path, []), ApiKey.JOIN_GROUP)
    name = "g\n" + "x" * 100_000  # group ids have no length limit
    view.allowed(Action(AclOperation.READ, ResourceType.GROUP, name))
    view.flush_audit()
    [event] = _events(tmp_path)
    assert event["resource_name"] == "g\\n" + "x" * (SAMPLE_NAME_CHARS - 3)


def test_decisions_of_different_kinds_are_separate_events(tmp_path: Path) -> None:
    shared = _shared(tmp_path, [_allow_topic("mine.", PatternType.PREFIXED)], record_allowed=True)
    view = _view(shared)
    for i in range(5):
        view.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, f"mine.{i}"))
        view.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, f"theirs.{i}"))
    view.allowed(Action(AclOperation.CREATE, ResourceType.CLUSTER, "kafka-cluster"))
    view.flush_audit()
    by_kind = {(e["operation"], e["resource_type"], e["decision"]): e for e in _events(tmp_path)}
    assert set(by_kind) == {("DESCRIBE", "TOPIC", "ALLOWED"), ("DESCRIBE", "TOPIC", "DENIED"),
                            ("CREATE", "CLUSTER", "DENIED")}
    allowed = by_kind["DESCRIBE", "TOPIC", "ALLOWED"]
    assert allowed["count"] == 5 and allowed["sample"] == [f"mine.{i}" for i in range(5)]
    assert allowed["pattern_type"] == "PREFIXED"
    assert by_kind["DESCRIBE", "TOPIC", "DENIED"]["count"] == 5
    assert "count" not in by_kind["CREATE", "CLUSTER", "DENIED"]


def test_audit_bytes_per_request_are_capped_whatever_the_item_count(tmp_path: Path) -> None:
    # The worst case: every item matched by a rule of its own (distinct kinds), with long names.
    names = [f"{i:05d}" + "x" * 5000 for i in range(2_000)]
    shared = _shared(tmp_path, [_allow_topic(name) for name in names], record_allowed=True)
    view = _view(shared)
    for name in names:
        assert view.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, name))
    view.flush_audit()
    events = _events(tmp_path)
    written = (tmp_path / "audit.log").stat().st_size
    assert sum(e.get("count", 1) for e in events) == len(names)
    assert len(events) <= MAX_KINDS + 1
    assert all(len(name) <= SAMPLE_NAME_CHARS for e in events for name in e.get("sample", []))
    # kinds × (sample × name length + the event's own fields, its rule text included)
    assert written < (MAX_KINDS + 1) * (SAMPLE_SIZE * (SAMPLE_NAME_CHARS + 4) + 12_000)
    assert written < sum(len(name) for name in names) // 10


def test_decisions_a_response_hook_makes_are_written_once_after_it_ran(tmp_path: Path) -> None:
    # An all-topics Metadata asks DESCRIBE for every topic in its hook. Kafka logs those checks when allowed
    # (logIfAllowed) but never when denied (a listing filter), so the allowed ones are what is written.
    shared = _shared(tmp_path, [_allow_topic("t", PatternType.PREFIXED)], record_allowed=True)
    conn = requester(ALICE)
    all_topics = {"topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
                  "include_topic_authorized_operations": False}
    verdict = authorize(conn, shared, ROUTES[ApiKey.METADATA], 9, all_topics)  # type: ignore[arg-type]
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    assert _events(tmp_path) == []
    response = default_response(ApiKey.METADATA, 9)
    names = [f"t{i}" for i in range(3_000)]
    response["topics"] = [{**default_item(ApiKey.METADATA, 9, "topics"), "name": name}
                          for name in [*names, "other.a"]]
    filtered = verdict.on_response(response)
    assert [t["name"] for t in filtered["topics"]] == names
    [event] = _events(tmp_path)
    assert event["count"] == 3_000 and len(event["sample"]) == SAMPLE_SIZE and event["decision"] == "ALLOWED"


def test_an_allowed_decision_records_nothing_by_default_and_a_denial_still_does(tmp_path: Path) -> None:
    view = _view(_shared(tmp_path, [_allow_topic("mine")]))
    assert view.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, "mine"))
    assert not view.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, "theirs"))
    view.flush_audit()
    [event] = _events(tmp_path)
    assert (event["resource_name"], event["decision"], event["operation"]) == ("theirs", "DENIED", "DESCRIBE")
    assert view.allowed_names == {(ResourceType.TOPIC, "mine")}  # what the id guard reads, recorded or not


def test_an_allowed_decision_is_recorded_with_log_allowed_and_compared_with_shadow_acls(tmp_path: Path) -> None:
    logged = _view(_shared(tmp_path, [_allow_topic("mine")], record_allowed=True))
    assert logged.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, "mine"))
    logged.flush_audit()
    assert [(e["resource_name"], e["decision"]) for e in _events(tmp_path)] == [("mine", "ALLOWED")]
    # Allowed decisions not logged, but a shadow set that would deny one: its divergence is written all the same.
    (tmp_path / "shadowed").mkdir()
    shared = _shared(tmp_path / "shadowed", [_allow_topic("mine")])
    shadow = ShadowAcls(shared.authorizer)
    shadow.load([_allow_topic("other")])
    shared.shadow = shadow
    view = _view(shared)
    assert view.allowed(Action(AclOperation.DESCRIBE, ResourceType.TOPIC, "mine"))
    view.flush_audit()
    [event] = _events(tmp_path / "shadowed")
    assert (event["event"], event["decision"], event["live"], event["resource_name"]) == (
        "shadow", "WOULD_DENY", "ALLOWED", "mine")
