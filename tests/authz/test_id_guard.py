"""The id guard: no policy relays a group or transactional id it did not allow (sans-IO sweep over the schemas)."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from auth.principal import KafkaPrincipal
from authz.authorizer import StandardAuthorizer
from authz.id_guard import unallowed_id
from authz.model import AclOperation, PatternType, ResourceType
from authz.policies import all_policies
from authz.request_policy import Refuse, Relay, Rewrite
from gateway.authorization import GatewayAuthorization
from gateway.ops.audit import AuditLog
from gateway.session.policy_check import authorize
from protocol.api_keys import ApiKey
from protocol.entities.ids import entity_values, names_entity
from protocol.registry import api
from tests.authz.helpers import acl
from tests.gateway.session.session_driver import ROUTES, requester
from tests.protocol.sample_values import sample_message

ALICE = KafkaPrincipal("User", "alice")
SAMPLES = 12


def _cases() -> list[tuple[int, int]]:
    cases = []
    for key in sorted(all_policies()):
        schema = api(key)
        assert schema is not None
        for version in range(schema.min_version, schema.max_version + 1):
            if names_entity(schema.request, version, "groupId") or \
                    names_entity(schema.request, version, "transactionalId"):
                cases.append((key, version))
    return cases


def _who() -> Any:
    return requester(ALICE)


def _shared(tmp_path: Path, allow_everyone: bool) -> GatewayAuthorization:
    authorizer = StandardAuthorizer([], allow_everyone)
    if not allow_everyone:  # every topic right, no group or transactional id right
        authorizer.load([acl("*", AclOperation.ALL), acl("kafka-cluster", AclOperation.ALL,
                                                         resource_type=ResourceType.CLUSTER),
                         acl("a", AclOperation.ALL, resource_type=ResourceType.GROUP, pattern=PatternType.PREFIXED),
                         acl("a", AclOperation.ALL, resource_type=ResourceType.TRANSACTIONAL_ID,
                             pattern=PatternType.PREFIXED)])
    return GatewayAuthorization(authorizer, None, AuditLog(str(tmp_path / "audit.log"), False))  # type: ignore[arg-type]


@pytest.mark.parametrize("allow_everyone", [True, False], ids=["all-allowed", "only-ids-starting-with-a"])
@pytest.mark.parametrize(("key", "version"), _cases(), ids=lambda v: str(v))
def test_no_policy_relays_an_id_it_did_not_allow(key: int, version: int, allow_everyone: bool,
                                                 tmp_path: Path) -> None:
    schema = api(key)
    assert schema is not None
    shared, rng = _shared(tmp_path, allow_everyone), random.Random(f"{key}/{version}")
    for _ in range(SAMPLES):
        body = schema.request_codec(version).decode(bytes(schema.request_codec(version).encode(
            sample_message(schema.request, version, rng))))
        verdict = authorize(_who(), shared, ROUTES[key], version, body)
        assert not (isinstance(verdict, Refuse) and "without allowing it" in verdict.reason), verdict.reason


def test_the_guard_finds_an_id_the_policy_never_allowed() -> None:
    schema = api(ApiKey.OFFSET_FETCH)
    assert schema is not None
    body = {"groups": [{"group_id": "g1", "member_id": None, "member_epoch": -1, "topics": None},
                       {"group_id": "g2", "member_id": None, "member_epoch": -1, "topics": None}],
            "require_stable": False}
    allowed = {(ResourceType.GROUP, "g1")}
    assert unallowed_id(schema.request, 9, body, allowed) == (ResourceType.GROUP, "g2")
    assert unallowed_id(schema.request, 9, body, allowed | {(ResourceType.GROUP, "g2")}) is None


def test_a_policy_that_forgets_a_group_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = _shared(tmp_path, allow_everyone=True)
    checks_nothing = replace(ROUTES[ApiKey.HEARTBEAT], policy=lambda request, version, view: Relay())
    body = {"group_id": "g1", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    verdict = authorize(_who(), shared, checks_nothing, 4, body)
    assert isinstance(verdict, Refuse) and "GROUP 'g1'" in verdict.reason
    rewrites = replace(ROUTES[ApiKey.HEARTBEAT], policy=lambda request, version, view: Rewrite(request, lambda r: r))
    assert isinstance(authorize(_who(), shared, rewrites, 4, body), Refuse)


def _unallowed_id_by_every_entity(spec: Any, version: int, relayed: dict[str, Any], allowed: Any,
                                  not_checked: frozenset[Any]) -> tuple[ResourceType, str] | None:
    """The guard as it read before its per-message plan: every entity looked up in every body."""
    for entity, resource_type in (("groupId", ResourceType.GROUP), ("transactionalId", ResourceType.TRANSACTIONAL_ID)):
        if entity in not_checked:
            continue
        for value in entity_values(spec, version, relayed, entity):
            if (resource_type, value) not in allowed:
                return resource_type, value
    return None


@pytest.mark.parametrize("not_checked", [frozenset(), frozenset({"transactionalId"}), frozenset({"groupId"})])
def test_the_guards_plan_per_message_finds_what_looking_up_every_entity_finds(not_checked: frozenset[Any]) -> None:
    rng = random.Random(f"id plan {sorted(not_checked)}")
    found = 0
    for key in sorted(all_policies()):
        schema = api(key)
        assert schema is not None
        for version in range(schema.min_version, schema.max_version + 1):
            body = sample_message(schema.request, version, rng)
            expected = _unallowed_id_by_every_entity(schema.request, version, body, set(), not_checked)
            assert unallowed_id(schema.request, version, body, set(), not_checked) == expected, (key, version)
            found += expected is not None
            if expected is not None:  # once that id is allowed, the next one (or none) as before
                allowed = {expected}
                assert unallowed_id(schema.request, version, body, allowed, not_checked) == \
                    _unallowed_id_by_every_entity(schema.request, version, body, allowed, not_checked)
    assert found > 20
