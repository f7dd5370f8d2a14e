"""Acceptance: Kafka's 'Operations and Resources on Protocols' table, API by API, through the gateway to Tansu.

For every relayed API the gateway negotiates with Tansu (at its highest negotiated version; two extra cases
cover rows that only exist at lower ones: Metadata v10, AddPartitionsToTxn v3), a concrete request on fresh
resources (``authz_cases.CASES``) is sent on a raw SCRAM connection as User:alice, who has exactly the ACLs
that ``authz.policies.table()`` names for it:

* with all of them, no authorization error comes back (Tansu's other errors are fine);
* without any single one of them (the others kept), Kafka's error comes back at Kafka's place — and a
  table row whose removal changes nothing fails the test as a table/policy mismatch.

An ACL implied by another granted one (DELETE implies DESCRIBE) cannot be revoked by removing it alone;
it is then also denied, as an operator would.  ACLs are managed through the gateway's ACL store from the
test thread, which updates the authorizer synchronously.  Every send works on resources created for it (a
granted DeleteTopics, CreateTopics or EndTxn uses its resources up).

Where Tansu cannot answer a request at all (``Case.relayed_only``: it closes the connection), "succeeds" means
the gateway authorized and relayed it (its relayed-request counter moved); the denial is the gateway's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from authz.model import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    operation_matches,
    parse_operation,
    parse_resource_type,
)
from authz.policies import all_policies, table
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_acls import AclStore
from protocol.api_keys import ApiKey
from tests.gateway.session.authz_cases import (
    ALTERNATIVES,
    AUTHZ_ERRORS,
    CAROL,
    CASES,
    CORE,
    NOT_EXERCISED,
    SKIPPED,
    Admin,
    Body,
    Case,
    Need,
    Res,
    Session,
)
from tests.harness import GatewayThread, secured_gateway

ALICE = "User:alice"
RELAYED = "<relayed to Tansu, which closed the connection>"


@pytest.fixture(scope="module")
def table_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    gateway = secured_gateway(broker.bootstrap, tmp_path_factory.mktemp("authz-table"))
    yield gateway
    gateway.stop()


class Env:
    """The gateway under test, the super user's connection, and alice's ACLs."""

    def __init__(self, gateway: GatewayThread) -> None:
        self.gateway = gateway
        self.ctx = gateway.gateway.ctx
        authorization = self.ctx.authorization
        assert authorization is not None, "the gateway runs without an authorizer"
        self.store: AclStore = authorization.store
        self.admin = Admin(gateway.bootstrap)

    def version(self, case: Case) -> int:
        """The version to test the case at (skips when the gateway does not negotiate it)."""
        negotiated = self.ctx.negotiated.get(case.api_key)
        if negotiated is None:
            pytest.skip(f"{ApiKey(case.api_key).name}: not in the gateway's negotiated set (Tansu does not offer it)")
        low, high = negotiated
        version = high if case.version is None else case.version
        if not low <= version <= high:
            pytest.skip(f"{case.name}: v{version} is not negotiated (v{low}-{high})")
        assert case.versions[0] <= version <= case.versions[1], (
            f"{case.name} is written for v{case.versions[0]}-{case.versions[1]}, the gateway negotiates "
            f"v{version}: update the case")
        return version

    def runnable(self, case: Case) -> bool:
        negotiated = self.ctx.negotiated.get(case.api_key)
        if negotiated is None:
            return False
        version = negotiated[1] if case.version is None else case.version
        return negotiated[0] <= version <= negotiated[1]

    def clear(self) -> None:
        self.store.remove_matching([AclBindingFilter(entry_filter=AccessControlEntryFilter(principal=p))
                                    for p in (ALICE, CAROL)])

    def send(self, case: Case, version: int, res: Res) -> Body | str:
        """Alice sends the case's request on a fresh connection: the response, or RELAYED (see relayed_only)."""
        request = case.request(res, version)
        counters = self.ctx.counters
        session = Session(self.gateway.bootstrap, "alice")
        before = counters.relayed_requests
        try:
            return session.call(case.api_key, version, request, case.prefix)
        except ConnectionError:
            relayed = counters.relayed_requests - before
            if case.relayed_only and relayed == 1:
                return RELAYED
            raise AssertionError(f"{case.name}: the connection closed ({relayed} request(s) relayed)") from None
        finally:
            session.close()


@pytest.fixture(scope="module")
def env(table_gateway: GatewayThread) -> Iterator[Env]:
    running = Env(table_gateway)
    yield running
    running.admin.close()


@pytest.fixture(autouse=True)
def _fresh_acls(env: Env) -> Iterator[None]:
    env.clear()
    yield
    env.clear()


def _binding(need: Need, res: Res, permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(need.resource_type, need.resource_name(res), PatternType.LITERAL),
                      AccessControlEntry(ALICE, "*", need.operation, permission))


def _implied_by_others(case: Case, revoked: Need) -> Need | None:
    """Another need whose ALLOW also allows ``revoked`` (Kafka: READ/WRITE/DELETE/ALTER imply DESCRIBE, …)."""
    for other in case.needs:
        if other != revoked and (other.resource_type, other.role) == (revoked.resource_type, revoked.role) \
                and operation_matches(other.operation, AclPermissionType.ALLOW, revoked.operation):
            return other
    return None


def _authz_errors(node: Any, path: str = "") -> list[str]:
    """Every *error_code in the response that is an authorization error."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key.endswith("error_code") and value in AUTHZ_ERRORS:
                found.append(f"{path}.{key}={value}".lstrip("."))
            found += _authz_errors(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _authz_errors(value, f"{path}[{index}]")
    return found


def _assert_granted(case: Case, response: Body | str, res: Res) -> None:
    if response == RELAYED:
        return  # relayed_only: the gateway authorized and relayed it; Tansu cannot answer
    assert isinstance(response, dict)
    assert not _authz_errors(response), (
        f"{case.name} with every tabled ACL got authorization errors: {_authz_errors(response)}\n{response}")
    for need in case.needs:
        for effect in (e for e in need.effects if e.changes):
            seen = effect.observe(response, res)
            assert seen != effect.denied and seen not in AUTHZ_ERRORS, (
                f"{case.name} with every tabled ACL: {effect.place} is {seen!r}, what Kafka answers without "
                f"{need.label}\n{response}")


def _need_id(case: Case, need: Need) -> str:
    return f"{case.name}-without-{need.label}" + ("-denied" if _implied_by_others(case, need) else "")


# --- coverage -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("api_key", sorted(all_policies()), ids=lambda key: ApiKey(key).name)
def test_every_relayed_api_is_tested_or_skipped_with_a_reason(api_key: int, env: Env) -> None:
    name = ApiKey(api_key).name
    negotiated = env.ctx.negotiated.get(api_key)
    if negotiated is None:
        pytest.skip(f"{name}: not in the gateway's negotiated set (Tansu does not offer it)")
    if api_key in SKIPPED:
        pytest.skip(f"{name}: {SKIPPED[api_key]}")
    cases = [case.name for case in CASES if case.api_key == api_key and env.runnable(case)]
    assert cases, f"{name} is relayed (negotiated v{negotiated[0]}-{negotiated[1]}) but no case tests it"


def test_the_core_apis_are_all_tested(env: Env) -> None:
    tested = {case.api_key for case in CASES if env.runnable(case)}
    assert not CORE - tested, f"core APIs without a runnable case: {sorted(ApiKey(k).name for k in CORE - tested)}"


def test_every_table_row_of_a_tested_api_is_exercised_and_nothing_else_is_granted(env: Env) -> None:
    rows: dict[int, set[tuple[AclOperation, ResourceType]]] = {}
    for row_api, row_operation, row_resource, _ in table():
        tabled = rows.setdefault(row_api, set())
        if row_operation:  # "" is a row saying the API needs no ACL
            tabled.add((parse_operation(row_operation), parse_resource_type(row_resource)))
    problems = []
    for api_key in sorted({case.api_key for case in CASES if env.runnable(case)}):
        name = ApiKey(api_key).name
        assert api_key in rows, f"{name} has a case but no row in the table"
        granted = {(need.operation, need.resource_type) for case in CASES
                   if case.api_key == api_key and env.runnable(case) for need in case.needs}
        for operation, resource_type in sorted(rows[api_key] - granted):
            if (api_key, operation, resource_type) not in NOT_EXERCISED:
                problems.append(f"{name}: the row {operation.name} {resource_type.name} is exercised by no case")
        for operation, resource_type in sorted(granted - rows[api_key]):
            alternative = ALTERNATIVES.get((api_key, operation, resource_type))
            if alternative is None or alternative not in rows[api_key]:
                problems.append(f"{name}: a case grants {operation.name} {resource_type.name}, which no row names")
    for (key, operation, resource_type), reason in NOT_EXERCISED.items():
        if (operation, resource_type) not in rows.get(key, set()):
            problems.append(f"NOT_EXERCISED names {ApiKey(key).name} {operation.name} {resource_type.name}, "
                            f"which is not in the table ({reason})")
    assert not problems, "table/case mismatch:\n" + "\n".join(problems)


# --- the table, request by request -------------------------------------------------------------------

@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{case.name}-all-granted")
def test_exactly_the_tabled_acls_authorize_the_request(case: Case, env: Env) -> None:
    version = env.version(case)
    res = case.setup(env.admin)
    env.store.add([_binding(need, res) for need in case.needs])
    _assert_granted(case, env.send(case, version, res), res)


@pytest.mark.parametrize(("case", "need"), [pytest.param(case, need, id=_need_id(case, need))
                                            for case in CASES for need in case.needs])
def test_without_one_tabled_acl_kafkas_error_comes_back(case: Case, need: Need, env: Env) -> None:
    version = env.version(case)
    # The outcome with every ACL, for comparison (a request may use its resources up: fresh ones below).
    first = case.setup(env.admin)
    env.store.add([_binding(n, first) for n in case.needs])
    granted = env.send(case, version, first)
    _assert_granted(case, granted, first)
    env.clear()

    res = case.setup(env.admin)
    env.store.add([_binding(n, res) for n in case.needs])
    allow = _binding(need, res)
    assert env.store.remove_matching([allow.to_filter()]) == [allow]
    implied_by = _implied_by_others(case, need)
    deny = _binding(need, res, AclPermissionType.DENY)
    if implied_by is not None:  # removing the ALLOW alone would change nothing: deny it as well
        env.store.add([deny])
    try:
        denied = env.send(case, version, res)
    finally:
        env.store.remove_matching([deny.to_filter()])
        env.store.add([allow])  # restored
    assert isinstance(denied, dict), f"{case.name} without {need.label}: {denied}"
    for effect in need.effects:
        seen = effect.observe(denied, res)
        before = effect.observe(granted, first) if isinstance(granted, dict) else granted
        assert seen != before or not effect.changes, (
            f"TABLE/POLICY MISMATCH: the table says {ApiKey(case.api_key).name} needs {need.label} "
            f"({need.operation.name} on {need.resource_type.name} {need.resource_name(res)!r}), but without it "
            f"{effect.place} is {seen!r} as with it\nresponse: {denied}")
        assert seen == effect.denied, (
            f"{case.name} v{version} without {need.label}: Kafka answers {effect.denied!r} at {effect.place}, "
            f"the gateway answered {seen!r}\nresponse: {denied}")


# --- regressions: gateway bugs this test found (both fixed in authz/policies/data.py) -----------------------

def test_metadata_denied_for_every_named_topic_still_lists_brokers_cluster_id_and_controller(env: Env) -> None:
    case = next(c for c in CASES if c.name == "Metadata-named-topic")
    version = env.version(case)
    res: Res = {}
    env.admin.topic(res)
    request = case.request(res, version)
    admin_view = env.admin.call(ApiKey.METADATA, version, **request)
    denied = env.send(case, version, res)  # alice has no ACL at all
    assert isinstance(denied, dict)
    assert [t["error_code"] for t in denied["topics"]] == [29]
    assert admin_view["brokers"], "the super user sees the brokers"
    cluster = ("brokers", "cluster_id", "controller_id")
    assert {k: denied[k] for k in cluster} == {k: admin_view[k] for k in cluster}


def test_metadata_with_an_empty_topic_list_reveals_no_topic(env: Env) -> None:
    case = next(c for c in CASES if c.name == "Metadata-named-topic")
    version = env.version(case)
    res: Res = {}
    hidden = env.admin.topic(res)
    request = {**case.request(res, version), "topics": []}
    alice = Session(env.gateway.bootstrap, "alice")  # no ACL at all
    try:
        response = alice.call(ApiKey.METADATA, version, request)
    finally:
        alice.close()
    assert response["topics"] == [], f"{hidden} (and every other topic) leaked: {response['topics']}"
