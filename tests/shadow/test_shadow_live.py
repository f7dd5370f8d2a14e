"""Live evaluation: every decision the real policies take through ConnectionAuthzView is also asked of the
shadow ACL set; a divergence is an ``"event":"shadow"`` audit event, counted on /metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from auth.principal import KafkaPrincipal
from authz.authorizer import StandardAuthorizer
from authz.model import AclOperation
from authz.shadow import ShadowAcls
from gateway.authorization import GatewayAuthorization
from gateway.ops.audit import AuditLog
from gateway.ops.metrics import Metrics
from gateway.session.policy_check import authorize
from gateway.stores.file_acls import FileAclStore
from protocol.api_keys import ApiKey
from tests.authz.helpers import acl
from tests.authz.test_policies_data import entry, request, response
from tests.gateway.session.session_driver import ROUTES, requester
from tests.gateway.session.test_audit_implicit_checks import metadata_request

Op = AclOperation
ALICE = KafkaPrincipal("User", "alice")
PRODUCE_VERSION, METADATA_VERSION = 9, 12


class Gateway:
    def __init__(self, tmp_path: Path, live: list[Any], shadow: list[Any] | None,
                 record_allowed: bool = False) -> None:
        authorizer = StandardAuthorizer(set(), False)
        authorizer.load(live)
        self.log_path = tmp_path / "audit.jsonl"
        self.audit = AuditLog(str(self.log_path), record_allowed=record_allowed)
        self.shadow = None
        if shadow is not None:
            self.shadow = ShadowAcls(authorizer)
            self.shadow.load(shadow)
        self.authorization = GatewayAuthorization(authorizer, FileAclStore(tmp_path / "acls.json"), self.audit,
                                                  shadow=self.shadow)

    def decide(self, key: ApiKey, version: int, body: dict[str, Any]) -> Any:
        conn = requester(ALICE, "SASL_PLAINTEXT")
        return authorize(conn, self.authorization, ROUTES[key], version, body)

    def events(self, kind: str = "shadow") -> list[dict[str, Any]]:
        self.audit.close()
        if not self.log_path.exists():
            return []
        return [e for line in self.log_path.read_text().splitlines() if (e := json.loads(line))["event"] == kind]


def produce(*topics: str) -> dict[str, Any]:
    data = [{"name": t, "topic_id": None, "partition_data": [{"index": 0, "records": None}]} for t in topics]
    return request(ApiKey.PRODUCE, PRODUCE_VERSION, transactional_id=None, acks=-1, timeout_ms=1000,
                   topic_data=data)


def test_a_produce_the_shadow_set_would_refuse_is_a_would_deny_event_naming_who_what_and_the_rule(
        tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, [acl("orders", Op.WRITE), acl("audit", Op.WRITE)], [acl("orders", Op.WRITE)])
    gateway.decide(ApiKey.PRODUCE, PRODUCE_VERSION, produce("orders", "audit"))
    [event] = gateway.events()
    assert event["principal"] == "User:alice" and event["api_name"] == "Produce"
    assert (event["operation"], event["resource_type"], event["resource_name"]) == ("WRITE", "TOPIC", "audit")
    assert (event["decision"], event["live"], event["shadow"]) == ("WOULD_DENY", "ALLOWED", "DENIED")
    assert event["rule"] == "NoAclDefault" and event["implicit"] is False
    assert "count" not in event
    # Written whatever ksgate.audit.log.allowed says, and the live decision still stands: nothing enforced.
    assert gateway.events("authorization") == []


def test_without_a_shadow_set_nothing_is_written(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, [acl("orders", Op.WRITE)], None)
    gateway.decide(ApiKey.PRODUCE, PRODUCE_VERSION, produce("orders", "audit"))
    assert gateway.events() == []


def test_metadata_filtering_is_evaluated_as_implicit_and_folded_with_a_sample(tmp_path: Path) -> None:
    names = [f"t{i}" for i in range(30)]
    live = [acl(n, Op.DESCRIBE) for n in names]
    gateway = Gateway(tmp_path, live, [acl("other", Op.DESCRIBE)])
    verdict = gateway.decide(ApiKey.METADATA, METADATA_VERSION, {**metadata_request([]), "topics": None})
    answer = response(ApiKey.METADATA, METADATA_VERSION, "topics", [
        entry(ApiKey.METADATA, METADATA_VERSION, "topics", name=n, error_code=0) for n in names])
    verdict.on_response(answer)  # the listing is filtered in the response hook
    events = gateway.events()
    implicit = [e for e in events if e["implicit"]]
    assert implicit, events
    [listing] = implicit
    assert listing["count"] == len(names) and len(listing["sample"]) == 20
    assert (listing["operation"], listing["decision"]) == ("DESCRIBE", "WOULD_DENY")


def test_metrics_count_divergences_by_direction_and_implicitness(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, [acl("orders", Op.WRITE)], [acl("orders", Op.WRITE), acl("audit", Op.WRITE)])
    gateway.decide(ApiKey.PRODUCE, PRODUCE_VERSION, produce("audit"))
    metrics = Metrics()
    metrics.watch_shadow(gateway.shadow)
    text = metrics.registry.render()
    assert 'ksgate_shadow_divergences_total{direction="would_allow",implicit="false"} 1' in text
    assert 'ksgate_shadow_divergences_total{direction="would_deny",implicit="false"} 0' in text
    [event] = gateway.events()
    assert (event["decision"], event["live"], event["shadow"]) == ("WOULD_ALLOW", "DENIED", "ALLOWED")
    assert event["pattern_type"] == "LITERAL" and "audit" in event["rule"]
