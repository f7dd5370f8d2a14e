"""The audit log records a denial only where Kafka would (Action.logIfDenied): implicit checks stay out.

The real policies ask the gateway's ConnectionAuthzView over a real StandardAuthorizer and a real audit
file; the probes of auto-creation, the cluster-wide shortcuts and the filters of listings leave no DENIED.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from auth.principal import KafkaPrincipal
from authz.authorizer import StandardAuthorizer
from authz.model import AclOperation, ResourceType
from authz.request_policy import Relay, Rewrite, Verdict
from gateway.authorization import GatewayAuthorization
from gateway.ops.audit import AuditLog
from gateway.session.policy_check import authorize
from gateway.stores.file_acls import FileAclStore
from protocol.api_keys import ApiKey
from tests.authz.helpers import acl
from tests.authz.test_policies_data import entry, request, response
from tests.gateway.session.session_driver import ROUTES, requester

Op = AclOperation
ALICE = KafkaPrincipal("User", "alice")
METADATA_VERSION = 12


class Gateway:
    """One principal's requests through the real policies; the audit file's events as dicts."""

    def __init__(self, tmp_path: Path, *bindings: Any, record_allowed: bool = False) -> None:
        authorizer = StandardAuthorizer(set(), False)
        authorizer.load(bindings)
        self.log_path = tmp_path / "audit.jsonl"
        self.audit = AuditLog(str(self.log_path), record_allowed=record_allowed)
        self.shared = GatewayAuthorization(authorizer, FileAclStore(tmp_path / "acls.json"), self.audit)

    def decide(self, key: ApiKey, version: int, body: dict[str, Any]) -> Verdict:
        """Through the real authorize stage: its audit batch is written after the policy and after any hook."""
        conn = requester(ALICE, "SASL_PLAINTEXT")
        return authorize(conn, self.shared, ROUTES[key], version, body)  # type: ignore[arg-type]

    def events(self) -> list[dict[str, Any]]:
        self.audit.close()
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def denied(self) -> list[tuple[str, str, str]]:
        return [(e["operation"], e["resource_type"], e["resource_name"]) for e in self.events()
                if e["decision"] == "DENIED"]


@pytest.fixture
def alice_describes_orders(tmp_path: Path) -> Gateway:
    return Gateway(tmp_path, acl("orders", Op.DESCRIBE), acl("missing", Op.DESCRIBE))


def metadata_request(names: list[str]) -> dict[str, Any]:
    topics = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
    return request(ApiKey.METADATA, METADATA_VERSION, topics=topics, allow_auto_topic_creation=True)


def metadata_answer(*topics: tuple[str, int]) -> dict[str, Any]:
    return response(ApiKey.METADATA, METADATA_VERSION, "topics", [
        entry(ApiKey.METADATA, METADATA_VERSION, "topics", name=name, error_code=error) for name, error in topics])


def test_auto_creation_probe_for_an_existing_topic_logs_no_denial(alice_describes_orders: Gateway) -> None:
    verdict = alice_describes_orders.decide(ApiKey.METADATA, METADATA_VERSION, metadata_request(["orders"]))
    assert isinstance(verdict, Rewrite) and verdict.request["allow_auto_topic_creation"] is False
    out = verdict.on_response(metadata_answer(("orders", 0)))
    assert [(t["name"], t["error_code"]) for t in out["topics"]] == [("orders", 0)]
    assert alice_describes_orders.denied() == []


def test_a_missing_topic_alice_may_not_create_logs_one_create_denial(alice_describes_orders: Gateway) -> None:
    # Kafka asks (and logs) CREATE on a topic only once it knows the topic is missing; never on the cluster.
    verdict = alice_describes_orders.decide(ApiKey.METADATA, METADATA_VERSION, metadata_request(["orders", "missing"]))
    assert isinstance(verdict, Rewrite)
    out = verdict.on_response(metadata_answer(("orders", 0), ("missing", 3)))
    assert [(t["name"], t["error_code"]) for t in out["topics"]] == [("orders", 0), ("missing", 29)]
    assert alice_describes_orders.denied() == [("CREATE", "TOPIC", "missing")]


def test_an_explicit_create_topics_denial_is_still_logged(alice_describes_orders: Gateway) -> None:
    body = request(ApiKey.CREATE_TOPICS, 7, topics=[
        {"name": "orders", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}])
    alice_describes_orders.decide(ApiKey.CREATE_TOPICS, 7, body)
    # The cluster-wide shortcut and DESCRIBE_CONFIGS are implicit; the topic's CREATE is what was refused.
    assert alice_describes_orders.denied() == [("CREATE", "TOPIC", "orders")]


def test_all_topics_metadata_filters_without_logging(alice_describes_orders: Gateway) -> None:
    body = request(ApiKey.METADATA, METADATA_VERSION, topics=None)
    verdict = alice_describes_orders.decide(ApiKey.METADATA, METADATA_VERSION, body)
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    out = verdict.on_response(metadata_answer(("orders", 0), ("secret", 0)))
    assert [t["name"] for t in out["topics"]] == ["orders"]
    assert alice_describes_orders.denied() == []


def test_a_named_topic_without_describe_is_still_logged(alice_describes_orders: Gateway) -> None:
    alice_describes_orders.decide(ApiKey.METADATA, METADATA_VERSION, metadata_request(["secret"]))
    assert alice_describes_orders.denied() == [("DESCRIBE", "TOPIC", "secret")]


def test_list_groups_filters_without_logging(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, acl("mine", Op.DESCRIBE, resource_type=ResourceType.GROUP))
    verdict = gateway.decide(ApiKey.LIST_GROUPS, 4, request(ApiKey.LIST_GROUPS, 4))
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    groups = [entry(ApiKey.LIST_GROUPS, 4, "groups", group_id=g) for g in ("mine", "theirs")]
    out = verdict.on_response(response(ApiKey.LIST_GROUPS, 4, "groups", groups))
    assert [g["group_id"] for g in out["groups"]] == ["mine"]
    assert gateway.denied() == []


def test_idempotent_producer_with_write_on_a_topic_logs_no_denial(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, acl("orders", Op.WRITE))
    body = request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=60000)
    assert isinstance(gateway.decide(ApiKey.INIT_PRODUCER_ID, 4, body), Relay)
    assert gateway.denied() == []


def test_a_refused_idempotent_producer_is_not_logged_either(tmp_path: Path) -> None:
    # Kafka: IDEMPOTENT_WRITE with logIfDenied=false, then authorizeByResourceType, which never logs.
    gateway = Gateway(tmp_path)
    body = request(ApiKey.INIT_PRODUCER_ID, 4, transactional_id=None, transaction_timeout_ms=60000)
    assert not isinstance(gateway.decide(ApiKey.INIT_PRODUCER_ID, 4, body), Relay)
    assert gateway.denied() == []


def test_an_allowed_implicit_check_is_logged_when_allowed_decisions_are(tmp_path: Path) -> None:
    gateway = Gateway(tmp_path, acl("orders", Op.DESCRIBE), record_allowed=True)
    body = request(ApiKey.METADATA, METADATA_VERSION, topics=None)
    verdict = gateway.decide(ApiKey.METADATA, METADATA_VERSION, body)
    assert isinstance(verdict, Relay) and verdict.on_response is not None
    verdict.on_response(metadata_answer(("orders", 0), ("secret", 0)))
    decisions = [(e["resource_name"], e["decision"]) for e in gateway.events()]
    assert decisions == [("orders", "ALLOWED")]
