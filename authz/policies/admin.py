"""Admin APIs: configs, log dirs, reassignments, quotas, features, SCRAM, tokens, cluster and ACLs.
As Kafka 4's KafkaApis/ControllerApis: whole-request CLUSTER checks, per-resource config splits, filtered tokens."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from auth.principal import KafkaPrincipal
from authz.field_presence import response_has
from authz.model import AclOperation, ResourceType
from authz.policies._kit import CLUSTER_OPERATIONS, NOT_REQUESTED, answer, cluster_allowed, item
from authz.policies.merge import merge_items
from authz.request_policy import CLUSTER_NAME, Action, Answer, ApiPolicy, AuthzView, Body, Relay, Rewrite, Verdict
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError

# Kafka's ConfigResource.Type ids.
TOPIC_CONFIG = 2
BROKER_CONFIG = 4
BROKER_LOGGER_CONFIG = 8
CLIENT_METRICS_CONFIG = 16
GROUP_CONFIG = 32

# AuthHelper.authorizeClusterOperation throws "Request <the broker's RequestChannel.Request> is not authorized.",
# a text made of the broker's processor, connection id, session and listener that a gateway can neither reproduce
# nor should reveal: null instead, which clients render as Kafka's default "Cluster authorization failed.".
CLUSTER_DENIED_MESSAGE: str | None = None


# --- shared helpers ---------------------------------------------------------------------

def _requester(view: AuthzView) -> KafkaPrincipal | None:
    """The connection's principal: the delegation-token rules compare it with owners."""
    return view.principal


# --- configs ------------------------------------------------------------------------------

def _config_acl(resource: Body) -> tuple[ResourceType, str, int] | None:
    """The ACL resource guarding a config resource and the error of a denial (ConfigHelper, ControllerApis)."""
    resource_type, name = resource["resource_type"], resource["resource_name"]
    if resource_type == TOPIC_CONFIG:
        return ResourceType.TOPIC, name, KafkaError.TOPIC_AUTHORIZATION_FAILED
    if resource_type == GROUP_CONFIG:
        return ResourceType.GROUP, name, KafkaError.GROUP_AUTHORIZATION_FAILED
    if resource_type in (BROKER_CONFIG, BROKER_LOGGER_CONFIG, CLIENT_METRICS_CONFIG):
        return ResourceType.CLUSTER, CLUSTER_NAME, KafkaError.CLUSTER_AUTHORIZATION_FAILED
    return None


def _describe_configs_error(resource: Body, version: int, error: int) -> Body:
    return item(ApiKey.DESCRIBE_CONFIGS, version, ("results",), error_code=error,
                 error_message=KafkaError(error).message, resource_type=resource["resource_type"],
                 resource_name=resource["resource_name"], configs=[])


def authorize_describe_configs(request: Body, version: int, view: AuthzView) -> Verdict:
    resources = request["resources"]
    targets = [_config_acl(r) for r in resources]
    if any(target is None for target in targets):
        # ConfigHelper throws InvalidRequestException on an unknown type: every resource fails with INVALID_REQUEST.
        return answer(ApiKey.DESCRIBE_CONFIGS, version,
                       results=[_describe_configs_error(r, version, KafkaError.INVALID_REQUEST) for r in resources])
    allowed, denied = [], []
    for resource, target in zip(resources, targets, strict=True):
        assert target is not None
        if view.allowed(Action(AclOperation.DESCRIBE_CONFIGS, target[0], target[1])):
            allowed.append(resource)
        else:
            denied.append(_describe_configs_error(resource, version, target[2]))
    if not denied:
        return Relay()
    if not allowed:
        return answer(ApiKey.DESCRIBE_CONFIGS, version, results=denied)

    # Kafka answers the authorized resources first, then the unauthorized ones (ConfigHelper: authorized ++ denied).
    slots = [*((None, _resource_key(r)) for r in allowed), *((entry, _resource_key(entry)) for entry in denied)]

    def merge(response: Body) -> Body:
        response["results"] = merge_items(slots, response["results"], lambda r: (_resource_key(r),))
        return response

    return Rewrite({**request, "resources": allowed}, merge)


Failure = tuple[int, str | None]


def _alter_precheck(resource: Body, duplicated: bool, known_types: frozenset[int],
                    needs_value: Callable[[Body], bool]) -> Failure | None:
    """ConfigAdminManager.preprocess's refusals, which Kafka gives before (and instead of) any authorization."""
    if duplicated:
        return KafkaError.INVALID_REQUEST, "Each resource must appear at most once."
    names = [config["name"] for config in resource["configs"]]
    if len(set(names)) != len(names):
        return KafkaError.INVALID_REQUEST, "Error due to duplicate config keys"
    nulls = [config["name"] for config in resource["configs"] if config["value"] is None and needs_value(config)]
    if nulls:
        return KafkaError.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls)
    if resource["resource_type"] not in known_types:
        return KafkaError.INVALID_REQUEST, f"Unknown resource type {resource['resource_type']}"
    return None


def _alter_denial(resource: Body, view: AuthzView) -> Failure | None:
    target = _config_acl(resource)
    assert target is not None, "unknown types are refused by _alter_precheck"
    if view.allowed(Action(AclOperation.ALTER_CONFIGS, target[0], target[1])):
        return None
    if resource["resource_type"] == BROKER_LOGGER_CONFIG:
        # RuntimeLoggerManager throws with the default text, which ApiError.fromThrowable turns into null.
        return target[2], None
    return target[2], KafkaError(target[2]).message  # ControllerApis.authorizeAlterResource: new ApiError(error)


def _resource_key(resource: Body) -> tuple[int, str]:
    return resource["resource_type"], resource["resource_name"]


def _authorize_alter_configs(request: Body, version: int, view: AuthzView, api_key: ApiKey,
                             known_types: frozenset[int], needs_value: Callable[[Body], bool]) -> Verdict:
    resources = request["resources"]
    counts = Counter(_resource_key(r) for r in resources)
    failures: dict[int, Failure] = {}
    for index, resource in enumerate(resources):
        failure = (_alter_precheck(resource, counts[_resource_key(resource)] > 1, known_types, needs_value)
                   or _alter_denial(resource, view))
        if failure is not None:
            failures[index] = failure
    if not failures:
        return Relay()

    def entry(resource: Body, failure: Failure) -> Body:
        return item(api_key, version, ("responses",), error_code=failure[0], error_message=failure[1],
                     resource_type=resource["resource_type"], resource_name=resource["resource_name"])

    if len(failures) == len(resources):
        return answer(api_key, version, responses=[entry(r, failures[i]) for i, r in enumerate(resources)])

    slots = [(entry(r, failures[i]) if i in failures else None, _resource_key(r)) for i, r in enumerate(resources)]

    def missing(key: Any) -> Body:
        resource_type, resource_name = key
        return entry({"resource_type": resource_type, "resource_name": resource_name},
                     (KafkaError.UNKNOWN_SERVER_ERROR, None))

    def merge(response: Body) -> Body:
        # ConfigAdminManager.reassemble*Response: the client's order; a missing answer is UNKNOWN_SERVER_ERROR.
        response["responses"] = merge_items(slots, response["responses"], lambda r: (_resource_key(r),),
                                            unanswered=missing)
        return response

    return Rewrite({**request, "resources": [r for i, r in enumerate(resources) if i not in failures]}, merge)


def authorize_alter_configs(request: Body, version: int, view: AuthzView) -> Verdict:
    # The legacy API has no BROKER_LOGGER: preprocess refuses it as an unknown type; every null value is refused.
    return _authorize_alter_configs(request, version, view, ApiKey.ALTER_CONFIGS,
                                    frozenset({TOPIC_CONFIG, BROKER_CONFIG, CLIENT_METRICS_CONFIG, GROUP_CONFIG}),
                                    lambda config: True)


def authorize_incremental_alter_configs(request: Body, version: int, view: AuthzView) -> Verdict:
    # Only DELETE (operation 1) may carry a null value.
    return _authorize_alter_configs(request, version, view, ApiKey.INCREMENTAL_ALTER_CONFIGS,
                                    frozenset({TOPIC_CONFIG, BROKER_CONFIG, BROKER_LOGGER_CONFIG,
                                               CLIENT_METRICS_CONFIG, GROUP_CONFIG}),
                                    lambda config: config["config_operation"] != 1)


# --- log dirs, leaders, reassignments -----------------------------------------------------

def authorize_alter_replica_log_dirs(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.ALTER):
        return Relay()
    key = ApiKey.ALTER_REPLICA_LOG_DIRS
    # AlterReplicaLogDirsRequest.getErrorResponse: one result per (dir, topic) entry, not merged across dirs.
    results = [item(key, version, ("results",), topic_name=topic["name"], partitions=[
        item(key, version, ("results", "partitions"), partition_index=p,
              error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
        for p in topic["partitions"]]) for log_dir in request["dirs"] for topic in log_dir["topics"]]
    return answer(key, version, results=results)


def authorize_describe_log_dirs(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.DESCRIBE):
        return Relay()
    # No log dirs; the top-level error code exists from v3 (before, the answer is just empty).
    return answer(ApiKey.DESCRIBE_LOG_DIRS, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED, results=[])


def authorize_elect_leaders(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.ALTER):
        return Relay()
    key = ApiKey.ELECT_LEADERS
    # ElectLeadersRequest.getErrorResponse: no per-partition results when all partitions were asked (null).
    results = [item(key, version, ("replica_election_results",), topic=topic["topic"], partition_result=[
        item(key, version, ("replica_election_results", "partition_result"), partition_id=p,
              error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED, error_message=CLUSTER_DENIED_MESSAGE)
        for p in topic["partitions"]]) for topic in request["topic_partitions"] or []]
    return answer(key, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED, replica_election_results=results)


def authorize_alter_partition_reassignments(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.ALTER):
        return Relay()
    key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    responses = [item(key, version, ("responses",), name=topic["name"], partitions=[
        item(key, version, ("responses", "partitions"), partition_index=p["partition_index"],
              error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED, error_message=CLUSTER_DENIED_MESSAGE)
        for p in topic["partitions"]]) for topic in request["topics"]]
    return answer(key, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=CLUSTER_DENIED_MESSAGE, responses=responses,
                   allow_replication_factor_change=request["allow_replication_factor_change"])


def authorize_list_partition_reassignments(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.DESCRIBE):
        return Relay()
    key = ApiKey.LIST_PARTITION_REASSIGNMENTS
    # ListPartitionReassignmentsRequest.getErrorResponse echoes the asked partitions with empty replica lists.
    topics = [item(key, version, ("topics",), name=topic["name"], partitions=[
        item(key, version, ("topics", "partitions"), partition_index=p) for p in topic["partition_indexes"]])
        for topic in request["topics"] or []]
    return answer(key, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=CLUSTER_DENIED_MESSAGE, topics=topics)


# --- quotas, SCRAM, features, client metrics -----------------------------------------------

def authorize_describe_client_quotas(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.DESCRIBE_CONFIGS):
        return Relay()
    # Errors.CLUSTER_AUTHORIZATION_FAILED.exception carries the default text, so ApiError gives a null message.
    return answer(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=None, entries=None)


def authorize_alter_client_quotas(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.ALTER_CONFIGS):
        return Relay()
    key = ApiKey.ALTER_CLIENT_QUOTAS
    # AlterClientQuotasRequest.getErrorResponse uses Errors.message(): the default text, per entry.
    entries = [item(key, version, ("entries",), error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                     error_message=KafkaError.CLUSTER_AUTHORIZATION_FAILED.message, entity=[
                         item(key, version, ("entries", "entity"), entity_type=e["entity_type"],
                               entity_name=e["entity_name"]) for e in entry["entity"]])
               for entry in request["entries"]]
    return answer(key, version, entries=entries)


def authorize_describe_user_scram_credentials(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.DESCRIBE):
        return Relay()
    key = ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS
    # DescribeUserScramCredentialsRequest.getErrorResponse: one result per asked user, its name left empty.
    results = [item(key, version, ("results",), error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED, error_message=None)
               for _ in request["users"] or []]
    return answer(key, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED, error_message=None,
                   results=results)


def authorize_alter_user_scram_credentials(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.ALTER):
        return Relay()
    key = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    # AlterUserScramCredentialsRequest.getErrorResponse: each distinct user once, sorted as Java Strings.
    users = {d["name"] for d in request["deletions"]} | {u["name"] for u in request["upsertions"]}
    results = [item(key, version, ("results",), user=user, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                     error_message=CLUSTER_DENIED_MESSAGE)
               for user in sorted(users, key=lambda name: name.encode("utf-16-be"))]
    return answer(key, version, results=results)


def authorize_update_features(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.ALTER):
        return Relay()
    # UpdateFeaturesResponse.createWithErrors lists no per-feature results for a top-level error.
    return answer(ApiKey.UPDATE_FEATURES, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=CLUSTER_DENIED_MESSAGE, results=[])


def authorize_list_client_metrics_resources(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.DESCRIBE_CONFIGS):
        return Relay()
    return answer(ApiKey.LIST_CLIENT_METRICS_RESOURCES, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                   config_resources=[])


def authorize_get_telemetry_subscriptions(request: Body, version: int, view: AuthzView) -> Verdict:
    return Relay()  # KIP-714: ClientMetricsManager serves any authenticated client, no ACL


def authorize_push_telemetry(request: Body, version: int, view: AuthzView) -> Verdict:
    return Relay()  # KIP-714: no ACL


# --- cluster ------------------------------------------------------------------------------

def _cluster_authorized_operations(request: Body, view: AuthzView) -> int:
    # AuthHelper.computeDescribeClusterResponse: a wrong endpoint type is answered before any authorization.
    if not request["include_cluster_authorized_operations"] or request["endpoint_type"] != 1:
        return NOT_REQUESTED
    if not cluster_allowed(view, AclOperation.DESCRIBE):
        return 0
    return view.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)


def authorize_describe_cluster(request: Body, version: int, view: AuthzView) -> Verdict:
    # The request itself needs no ACL on a broker; only the bit field depends on the caller.
    operations = _cluster_authorized_operations(request, view)

    def set_operations(response: Body) -> Body:
        response["cluster_authorized_operations"] = operations if response["error_code"] == 0 else NOT_REQUESTED
        return response

    return Relay(set_operations)


# --- delegation tokens ----------------------------------------------------------------------

def _create_token_error(version: int, error: int, owner: tuple[str, str], requester: tuple[str, str]) -> Answer:
    """CreateDelegationTokenResponse.prepareResponse for an error: no token, timestamps -1."""
    return answer(ApiKey.CREATE_DELEGATION_TOKEN, version, error_code=error,
                   principal_type=owner[0], principal_name=owner[1],
                   token_requester_principal_type=requester[0], token_requester_principal_name=requester[1],
                   issue_timestamp_ms=-1, expiry_timestamp_ms=-1, max_timestamp_ms=-1, token_id="", hmac=b"")


def authorize_create_delegation_token(request: Body, version: int, view: AuthzView) -> Verdict:
    owner_type, owner_name = request["owner_principal_type"], request["owner_principal_name"]
    if not owner_name:
        return Relay()  # the owner is the requester: "always allowed to create token for self"
    if owner_type is None:
        # new KafkaPrincipal(null, name) throws NullPointerException: UNKNOWN_SERVER_ERROR, principals ANONYMOUS.
        anonymous = ("User", "ANONYMOUS")
        return _create_token_error(version, KafkaError.UNKNOWN_SERVER_ERROR, anonymous, anonymous)
    requester = _requester(view)
    if requester is not None and (requester.principal_type, requester.name) == (owner_type, owner_name):
        return Relay()
    if view.allowed(Action(AclOperation.CREATE_TOKENS, ResourceType.USER, f"{owner_type}:{owner_name}")):
        return Relay()
    who = (requester.principal_type, requester.name) if requester is not None else ("", "")
    return _create_token_error(version, KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED, (owner_type, owner_name), who)


def authorize_renew_delegation_token(request: Body, version: int, view: AuthzView) -> Verdict:
    # No ACL: the controller lets only the token's owner or renewers renew it (DELEGATION_TOKEN_OWNER_MISMATCH).
    return Relay()


def authorize_expire_delegation_token(request: Body, version: int, view: AuthzView) -> Verdict:
    # No ACL: as renewing, only the token's owner or renewers may expire it.
    return Relay()


def _may_describe_token(token: Body, version: int, requester: KafkaPrincipal | None, view: AuthzView) -> bool:
    """DelegationTokenManager.filterToken: owner, requester and renewers see a token; others need an ACL."""
    owner = (token["principal_type"], token["principal_name"])
    involved = {owner, *((r["principal_type"], r["principal_name"]) for r in token["renewers"])}
    if response_has(ApiKey.DESCRIBE_DELEGATION_TOKEN, version, "tokens", "token_requester_principal_type"):
        involved.add((token["token_requester_principal_type"], token["token_requester_principal_name"]))
    if requester is not None and (requester.principal_type, requester.name) in involved:
        return True
    return (view.allowed(Action(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token["token_id"]))
            or view.allowed(Action(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, f"{owner[0]}:{owner[1]}")))


def authorize_describe_delegation_token(request: Body, version: int, view: AuthzView) -> Verdict:
    if request["owners"] == []:
        return Relay()  # Kafka answers an empty owner list with no tokens, before any authorization
    requester = _requester(view)

    def filter_tokens(response: Body) -> Body:
        # Kafka never fails DescribeDelegationToken for authorization: it silently leaves tokens out.
        if response["error_code"] == 0:
            response["tokens"] = [t for t in response["tokens"] if _may_describe_token(t, version, requester, view)]
        return response

    return Relay(filter_tokens)


# --- ACLs (answered by ksgate itself once authorized) ---------------------------------------

def authorize_describe_acls(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.DESCRIBE):
        return Relay()
    return answer(ApiKey.DESCRIBE_ACLS, version, error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=CLUSTER_DENIED_MESSAGE, resources=[])


def authorize_create_acls(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.ALTER):
        return Relay()
    key = ApiKey.CREATE_ACLS
    results = [item(key, version, ("results",), error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                     error_message=CLUSTER_DENIED_MESSAGE) for _ in request["creations"]]
    return answer(key, version, results=results)


def authorize_delete_acls(request: Body, version: int, view: AuthzView) -> Verdict:
    if cluster_allowed(view, AclOperation.ALTER):
        return Relay()
    key = ApiKey.DELETE_ACLS
    results = [item(key, version, ("filter_results",), error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                     error_message=CLUSTER_DENIED_MESSAGE, matching_acls=[]) for _ in request["filters"]]
    return answer(key, version, filter_results=results)


POLICIES: dict[int, ApiPolicy] = {
    ApiKey.DESCRIBE_ACLS: authorize_describe_acls,
    ApiKey.CREATE_ACLS: authorize_create_acls,
    ApiKey.DELETE_ACLS: authorize_delete_acls,
    ApiKey.DESCRIBE_CONFIGS: authorize_describe_configs,
    ApiKey.ALTER_CONFIGS: authorize_alter_configs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: authorize_alter_replica_log_dirs,
    ApiKey.DESCRIBE_LOG_DIRS: authorize_describe_log_dirs,
    ApiKey.CREATE_DELEGATION_TOKEN: authorize_create_delegation_token,
    ApiKey.RENEW_DELEGATION_TOKEN: authorize_renew_delegation_token,
    ApiKey.EXPIRE_DELEGATION_TOKEN: authorize_expire_delegation_token,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: authorize_describe_delegation_token,
    ApiKey.ELECT_LEADERS: authorize_elect_leaders,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: authorize_incremental_alter_configs,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: authorize_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: authorize_list_partition_reassignments,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: authorize_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: authorize_alter_client_quotas,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: authorize_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: authorize_alter_user_scram_credentials,
    ApiKey.UPDATE_FEATURES: authorize_update_features,
    ApiKey.DESCRIBE_CLUSTER: authorize_describe_cluster,
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: authorize_get_telemetry_subscriptions,
    ApiKey.PUSH_TELEMETRY: authorize_push_telemetry,
    ApiKey.LIST_CLIENT_METRICS_RESOURCES: authorize_list_client_metrics_resources,
}

TABLE: list[tuple[ApiKey, str, str, str]] = [
    (ApiKey.DESCRIBE_ACLS, "Describe", "Cluster", "whole request; answered by ksgate"),
    (ApiKey.CREATE_ACLS, "Alter", "Cluster", "whole request; answered by ksgate"),
    (ApiKey.DELETE_ACLS, "Alter", "Cluster", "whole request; answered by ksgate"),
    (ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", "Topic", "each TOPIC resource"),
    (ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", "Group", "each GROUP resource"),
    (ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", "Cluster",
     "BROKER, BROKER_LOGGER and CLIENT_METRICS resources; an unknown type fails the request (INVALID_REQUEST)"),
    (ApiKey.ALTER_CONFIGS, "AlterConfigs", "Topic", "each TOPIC resource"),
    (ApiKey.ALTER_CONFIGS, "AlterConfigs", "Group", "each GROUP resource"),
    (ApiKey.ALTER_CONFIGS, "AlterConfigs", "Cluster", "BROKER and CLIENT_METRICS resources"),
    (ApiKey.ALTER_REPLICA_LOG_DIRS, "Alter", "Cluster", "whole request"),
    (ApiKey.DESCRIBE_LOG_DIRS, "Describe", "Cluster", "whole request; denied: no log dirs (error code from v3)"),
    (ApiKey.CREATE_DELEGATION_TOKEN, "CreateTokens", "User", "the owner, when it is not the requester"),
    (ApiKey.RENEW_DELEGATION_TOKEN, "", "", "no ACL: only the token's owner or a renewer"),
    (ApiKey.EXPIRE_DELEGATION_TOKEN, "", "", "no ACL: only the token's owner or a renewer"),
    (ApiKey.DESCRIBE_DELEGATION_TOKEN, "Describe", "DelegationToken",
     "each token the caller neither owns, requested nor renews; tokens denied both ways are left out"),
    (ApiKey.DESCRIBE_DELEGATION_TOKEN, "DescribeTokens", "User", "the owner of such a token (either row suffices)"),
    (ApiKey.ELECT_LEADERS, "Alter", "Cluster", "whole request"),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterConfigs", "Topic", "each TOPIC resource"),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterConfigs", "Group", "each GROUP resource"),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, "AlterConfigs", "Cluster", "BROKER, BROKER_LOGGER and CLIENT_METRICS resources"),
    (ApiKey.ALTER_PARTITION_REASSIGNMENTS, "Alter", "Cluster", "whole request"),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, "Describe", "Cluster", "whole request"),
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, "DescribeConfigs", "Cluster", "whole request"),
    (ApiKey.ALTER_CLIENT_QUOTAS, "AlterConfigs", "Cluster", "whole request"),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "Describe", "Cluster", "whole request"),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "Alter", "Cluster", "whole request"),
    (ApiKey.UPDATE_FEATURES, "Alter", "Cluster", "whole request"),
    (ApiKey.DESCRIBE_CLUSTER, "Describe", "Cluster",
     "only for cluster_authorized_operations when requested (0 when denied); the request needs no ACL"),
    (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, "", "", "no ACL"),
    (ApiKey.PUSH_TELEMETRY, "", "", "no ACL"),
    (ApiKey.LIST_CLIENT_METRICS_RESOURCES, "DescribeConfigs", "Cluster", "whole request"),
]
