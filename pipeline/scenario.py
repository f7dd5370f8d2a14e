"""The synthetic cluster ``ksgate audit generate`` draws events from: actors, their habits, the ACLs in force.

Each Template is one kind of event with a relative weight and a time window (fractions of the period).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from authz.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from pipeline.least_privilege.acl_diff import rule_text
from pipeline.schema import AUTHENTICATION, AUTHORIZATION

Api = tuple[int, str, int]  # (api_key, api_name, api_version)
PRODUCE: Api = (0, "Produce", 9)
FETCH: Api = (1, "Fetch", 13)
LIST_OFFSETS: Api = (2, "ListOffsets", 7)
METADATA: Api = (3, "Metadata", 12)
OFFSET_COMMIT: Api = (8, "OffsetCommit", 8)
OFFSET_FETCH: Api = (9, "OffsetFetch", 8)
FIND_COORDINATOR: Api = (10, "FindCoordinator", 4)
JOIN_GROUP: Api = (11, "JoinGroup", 9)
HEARTBEAT: Api = (12, "Heartbeat", 4)
SYNC_GROUP: Api = (14, "SyncGroup", 5)
CREATE_TOPICS: Api = (19, "CreateTopics", 7)
DELETE_TOPICS: Api = (20, "DeleteTopics", 6)
INIT_PRODUCER_ID: Api = (22, "InitProducerId", 4)
DESCRIBE_ACLS: Api = (29, "DescribeAcls", 3)
DESCRIBE_CONFIGS: Api = (32, "DescribeConfigs", 4)
INCREMENTAL_ALTER_CONFIGS: Api = (44, "IncrementalAlterConfigs", 1)
DESCRIBE_CLUSTER: Api = (60, "DescribeCluster", 1)

ORDERS = tuple(f"orders-{i}" for i in range(1, 31))
PAYMENTS = ("payments.eu.card", "payments.eu.sepa", "payments.us.card", "payments.us.ach")
SECRETS = ("secret-keys", "secret-tokens", "payroll", "hr.salaries", "customers.pii")
GUESSED_USERS = ("admin", "root", "kafka", "alice", "bob", "test", "operator", "billing", "analytics", "superuser",
                 "guest", "user", "ksgate", "zookeeper", "broker")

SUPER_USER = "User:admin"
SCANNER_HOST = "10.66.0.7"
STUFFING_HOST = "10.66.6.6"
BRUTE_FORCE_HOST = "10.77.7.7"


@dataclass(slots=True, frozen=True)
class Template:
    """One kind of event; authorization fields are None for authentication templates and vice versa."""

    event: str
    weight: float
    principal: str | None
    hosts: tuple[str, ...]
    listener: str = "SASL_SSL"
    api: Api | None = None
    operation: str | None = None
    resource_type: str | None = None
    names: tuple[str | None, ...] = (None,)
    decision: str = "ALLOWED"
    rule: str | None = None
    pattern_type: str | None = None
    attempted_users: tuple[str | None, ...] = (None,)
    mechanism: str | None = None
    failure: str | None = None
    window: tuple[float, float] = (0.0, 1.0)  # [start, end) as fractions of the generated period


@dataclass(slots=True)
class Scenario:
    templates: list[Template] = field(default_factory=list)
    acls: list[AclBinding] = field(default_factory=list)


def acl(principal: str, resource_type: ResourceType, name: str, operation: AclOperation,
        pattern_type: PatternType = PatternType.LITERAL,
        permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type),
                      AccessControlEntry(principal, "*", operation, permission))


def _hosts(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}.{10 + i}" for i in range(count))


def authorized(binding: AclBinding, weight: float, hosts: tuple[str, ...], api: Api, operation: AclOperation,
               names: tuple[str, ...], window: tuple[float, float] = (0.0, 1.0)) -> Template:
    """Requests allowed (or, for a DENY binding, denied) by ``binding``."""
    allowed = binding.entry.permission_type == AclPermissionType.ALLOW
    return Template(AUTHORIZATION, weight, binding.entry.principal, hosts, api=api, operation=operation.name,
                    resource_type=binding.pattern.resource_type.name, names=names,
                    decision="ALLOWED" if allowed else "DENIED", rule=rule_text(binding),
                    pattern_type=binding.pattern.pattern_type.name, window=window)


def decided(principal: str, weight: float, hosts: tuple[str, ...], api: Api, operation: AclOperation,
            resource_type: ResourceType, names: tuple[str, ...], rule: str,
            window: tuple[float, float] = (0.0, 1.0)) -> Template:
    """Requests decided without a binding: ``SuperUser`` (allowed) or another rule such as ``NoAclDefault`` (denied)."""
    return Template(AUTHORIZATION, weight, principal, hosts, api=api, operation=operation.name,
                    resource_type=resource_type.name, names=names,
                    decision="ALLOWED" if rule == "SuperUser" else "DENIED", rule=rule, window=window)


def login(principal: str, weight: float, hosts: tuple[str, ...], mechanism: str = "SCRAM-SHA-512",
          listener: str = "SASL_SSL") -> Template:
    return Template(AUTHENTICATION, weight, principal, hosts, listener=listener, mechanism=mechanism,
                    decision="SUCCEEDED")


def failed_login(weight: float, hosts: tuple[str, ...], users: tuple[str | None, ...], mechanism: str,
                 failure: str = "bad_credentials", window: tuple[float, float] = (0.0, 1.0)) -> Template:
    return Template(AUTHENTICATION, weight, None, hosts, mechanism=mechanism, decision="FAILED", failure=failure,
                    attempted_users=users, window=window)


def _hour_window(days: int, day: int, hour: int, minutes: int) -> tuple[float, float]:
    total = days * 24 * 60
    start = (day * 24 + hour) * 60
    return start / total, (start + minutes) / total


def _producers(s: Scenario) -> None:
    orders = acl("User:orders-producer", ResourceType.TOPIC, "orders-", AclOperation.WRITE, PatternType.PREFIXED)
    payments = acl("User:payments-producer", ResourceType.TOPIC, "payments.", AclOperation.WRITE, PatternType.PREFIXED)
    tx = acl("User:payments-producer", ResourceType.TRANSACTIONAL_ID, "payments-tx-", AclOperation.WRITE,
             PatternType.PREFIXED)
    s.acls += [orders, payments, tx]
    order_hosts, payment_hosts = _hosts("10.1.1", 3), _hosts("10.1.2", 2)
    s.templates += [
        authorized(orders, 30, order_hosts, PRODUCE, AclOperation.WRITE, ORDERS),
        authorized(orders, 3, order_hosts, METADATA, AclOperation.DESCRIBE, ORDERS),
        authorized(orders, 0.3, order_hosts, INIT_PRODUCER_ID, AclOperation.WRITE, ("*",)),
        login("User:orders-producer", 0.3, order_hosts),
        authorized(payments, 10, payment_hosts, PRODUCE, AclOperation.WRITE, PAYMENTS),
        authorized(payments, 1, payment_hosts, METADATA, AclOperation.DESCRIBE, PAYMENTS),
        authorized(tx, 1, payment_hosts, INIT_PRODUCER_ID, AclOperation.WRITE, ("payments-tx-1", "payments-tx-2",
                                                                                "payments-tx-3")),
        authorized(tx, 0.3, payment_hosts, FIND_COORDINATOR, AclOperation.DESCRIBE, ("payments-tx-1",)),
        login("User:payments-producer", 0.2, payment_hosts),
    ]


def _consumers(s: Scenario, days: int) -> None:
    billing = "User:billing"
    topics = acl(billing, ResourceType.TOPIC, "orders-", AclOperation.READ, PatternType.PREFIXED)
    group = acl(billing, ResourceType.GROUP, "billing", AclOperation.READ)
    refunds = acl(billing, ResourceType.TOPIC, "refunds", AclOperation.READ)
    analytics = "User:analytics"
    everything = acl(analytics, ResourceType.TOPIC, "*", AclOperation.READ)
    configs = acl(analytics, ResourceType.TOPIC, "*", AclOperation.DESCRIBE_CONFIGS)
    groups = acl(analytics, ResourceType.GROUP, "analytics-", AclOperation.READ, PatternType.PREFIXED)
    reader = acl("User:audit-reader", ResourceType.TOPIC, "*", AclOperation.DESCRIBE)
    s.acls += [topics, group, refunds, everything, configs, groups, reader]
    billing_hosts, analytics_hosts = _hosts("10.2.1", 4), _hosts("10.2.2", 2)
    last_day = ((days - 1) / days, 1.0)
    s.templates += [
        authorized(topics, 25, billing_hosts, FETCH, AclOperation.READ, ORDERS),
        authorized(topics, 1, billing_hosts, LIST_OFFSETS, AclOperation.DESCRIBE, ORDERS),
        authorized(topics, 0.5, billing_hosts, OFFSET_FETCH, AclOperation.DESCRIBE, ORDERS),
        authorized(group, 5, billing_hosts, HEARTBEAT, AclOperation.READ, ("billing",)),
        authorized(group, 3, billing_hosts, OFFSET_COMMIT, AclOperation.READ, ("billing",)),
        authorized(group, 0.3, billing_hosts, JOIN_GROUP, AclOperation.READ, ("billing",)),
        authorized(group, 0.3, billing_hosts, SYNC_GROUP, AclOperation.READ, ("billing",)),
        authorized(group, 0.3, billing_hosts, FIND_COORDINATOR, AclOperation.DESCRIBE, ("billing",)),
        authorized(refunds, 1, billing_hosts, FETCH, AclOperation.READ, ("refunds",), window=last_day),
        login(billing, 0.5, billing_hosts),
        failed_login(0.03, billing_hosts, ("billing",), "SCRAM-SHA-512"),
        authorized(everything, 8, analytics_hosts, FETCH, AclOperation.READ, ORDERS + PAYMENTS),
        authorized(configs, 0.3, analytics_hosts, DESCRIBE_CONFIGS, AclOperation.DESCRIBE_CONFIGS, ORDERS),
        authorized(groups, 2, analytics_hosts, HEARTBEAT, AclOperation.READ, ("analytics-etl", "analytics-adhoc")),
        login(analytics, 0.2, analytics_hosts),
        authorized(reader, 0.5, ("10.3.0.5",), METADATA, AclOperation.DESCRIBE, (*ORDERS[:5], "payments.eu.card")),
        login("User:audit-reader", 0.05, ("10.3.0.5",)),
    ]


def _operators(s: Scenario) -> None:
    metrics = "User:CN=metrics-exporter,OU=ops"
    cluster = acl(metrics, ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
    s.acls += [cluster, acl("User:legacy-app", ResourceType.TOPIC, "legacy-events", AclOperation.READ)]
    admin_hosts = ("10.0.0.5",)
    s.templates += [
        authorized(cluster, 1, ("10.4.0.9",), DESCRIBE_CLUSTER, AclOperation.DESCRIBE, ("kafka-cluster",)),
        Template(AUTHENTICATION, 0.05, metrics, ("10.4.0.9",), listener="SSL", mechanism="SSL",
                 decision="SUCCEEDED"),
        decided(SUPER_USER, 0.3, admin_hosts, CREATE_TOPICS, AclOperation.CREATE, ResourceType.CLUSTER,
                ("kafka-cluster",), "SuperUser"),
        decided(SUPER_USER, 0.3, admin_hosts, CREATE_TOPICS, AclOperation.CREATE, ResourceType.TOPIC,
                ("orders-31", "payments.eu.ideal", "refunds"), "SuperUser"),
        decided(SUPER_USER, 0.1, admin_hosts, DELETE_TOPICS, AclOperation.DELETE, ResourceType.TOPIC,
                ("tmp-load-test",), "SuperUser"),
        decided(SUPER_USER, 0.3, admin_hosts, INCREMENTAL_ALTER_CONFIGS, AclOperation.ALTER_CONFIGS,
                ResourceType.TOPIC, ORDERS, "SuperUser"),
        decided(SUPER_USER, 1, admin_hosts, DESCRIBE_ACLS, AclOperation.DESCRIBE, ResourceType.CLUSTER,
                ("kafka-cluster",), "SuperUser"),
        login(SUPER_USER, 0.05, admin_hosts),
    ]


def _attackers(s: Scenario, days: int) -> None:
    deny = acl("User:*", ResourceType.TOPIC, "payroll", AclOperation.READ, permission=AclPermissionType.DENY)
    s.acls.append(deny)
    scanner = (SCANNER_HOST,)
    s.templates += [
        decided("User:scanner", 1, scanner, METADATA, AclOperation.DESCRIBE, ResourceType.TOPIC, SECRETS,
                "NoAclDefault"),
        decided("User:scanner", 1.5, scanner, METADATA, AclOperation.DESCRIBE, ResourceType.TOPIC, SECRETS,
                "NoAclDefault", window=_hour_window(days, days // 2, 14, 60)),
        decided("User:scanner", 0.5, scanner, FETCH, AclOperation.READ, ResourceType.TOPIC,
                ("secret-keys", "customers.pii"), "NoAclDefault"),
        Template(AUTHORIZATION, 0.2, "User:scanner", scanner, api=FETCH, operation="READ", resource_type="TOPIC",
                 names=("payroll",), decision="DENIED", rule=rule_text(deny), pattern_type="LITERAL"),
        login("User:scanner", 0.05, scanner),
        failed_login(2, (STUFFING_HOST,), GUESSED_USERS, "SCRAM-SHA-256",
                     window=_hour_window(days, days - 1, 2, 30)),
        failed_login(1, (BRUTE_FORCE_HOST,), ("admin",), "PLAIN", window=_hour_window(days, 0, 3, 20)),
        failed_login(0.02, ("10.5.0.8",), (None,), "GSSAPI", failure="unsupported_mechanism"),
    ]


def build_scenario(days: int) -> Scenario:
    """Every template and the ACLs they were decided by, for a log of ``days`` days."""
    scenario = Scenario()
    _producers(scenario)
    _consumers(scenario, days)
    _operators(scenario)
    _attackers(scenario, days)
    return scenario
