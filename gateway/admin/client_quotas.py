"""DescribeClientQuotas and AlterClientQuotas, served by the gateway from its own quota store.

Authorization (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster) has already been decided by
the policies; these handlers validate, match and apply as Kafka 4.4's controller does, down
to its messages, so kafka-configs and the admin clients see what they would see on Kafka.
"""

from __future__ import annotations

from typing import Any

from authz.response_defaults import default_response
from gateway.quotas.model import ENTITY_TYPES, IP, QuotaEntity, QuotaError, check_entity, validate_value
from gateway.quotas.state import QuotaChange, QuotaState
from gateway.stores.file_quotas import QuotaStore, QuotaStoreError
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError

Body = dict[str, Any]
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
# Up to this many entities a DescribeClientQuotas scan is answered on the event loop (well under a
# millisecond); beyond, in a worker thread.
INLINE_DESCRIBE_ENTITIES = 1000


def _entity_body(entity: QuotaEntity) -> list[Body]:
    return [{"entity_type": t, "entity_name": n} for t, n in entity.parts]


def _result(entity: QuotaEntity, code: int = KafkaError.NONE, message: str | None = None) -> Body:
    return {"error_code": code, "error_message": message, "entity": _entity_body(entity)}


def _validated(entity: QuotaEntity, ops: dict[str, float | None]) -> None:
    check_entity(entity)
    for key, value in ops.items():
        if value is not None:  # a removal is never checked: Kafka removes even an unknown key
            validate_value(entity, key, value)


def alter_client_quotas(store: QuotaStore, request: Body, version: int) -> Body:
    """Every valid entry is applied in one store change.  As Kafka's controller: one answer per entity,
    an entity named twice (or a key named twice in one entry) answers "Ignoring duplicate entity"
    while the entity's first valid entry still applies."""
    results: dict[QuotaEntity, Body] = {}
    changes: list[QuotaChange] = []
    for entry in request["entries"]:
        entity = QuotaEntity.of((part["entity_type"], part["entity_name"]) for part in entry["entity"])
        ops: dict[str, float | None] = {}
        repeated_key = False
        for op in entry["ops"]:
            repeated_key |= op["key"] in ops
            ops.setdefault(op["key"], None if op["remove"] else float(op["value"]))
        if repeated_key or entity in results:
            results[entity] = _result(entity, KafkaError.INVALID_REQUEST,
                                      f"Ignoring duplicate entity {entity.java_text()}")
            continue
        try:
            _validated(entity, ops)
        except QuotaError as exc:
            results[entity] = _result(entity, exc.code, exc.message)
            continue
        results[entity] = _result(entity)
        changes.append((entity, ops))
    if changes and not request["validate_only"]:
        try:
            store.alter(changes)
        except QuotaStoreError as exc:
            for entity, _ in changes:
                results[entity] = _result(entity, KafkaError.UNKNOWN_SERVER_ERROR, f"quota store: {exc}")
    response = default_response(ApiKey.ALTER_CLIENT_QUOTAS, version)
    response["entries"] = list(results.values())
    return response


def _filter(components: list[Body]) -> tuple[dict[str, str | None], set[str]]:
    """(exact names by type, types that must merely be present), or QuotaError with Kafka's message."""
    exact: dict[str, str | None] = {}
    present: set[str] = set()
    for component in components:
        entity_type, match_type, match = component["entity_type"], component["match_type"], component["match"]
        if not entity_type:
            raise QuotaError(KafkaError.INVALID_REQUEST, "Invalid empty entity type.")
        if entity_type in exact or entity_type in present:
            raise QuotaError(KafkaError.INVALID_REQUEST,
                             f"Entity type {entity_type} cannot appear more than once in the filter.")
        if entity_type not in ENTITY_TYPES:
            raise QuotaError(KafkaError.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaError(KafkaError.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaError(KafkaError.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[entity_type] = None
        elif match_type == MATCH_ANY:
            if match is not None:
                raise QuotaError(KafkaError.INVALID_REQUEST,
                                 "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
            present.add(entity_type)
        else:
            raise QuotaError(KafkaError.INVALID_REQUEST, f"Unknown match type {match_type}")
    named = exact.keys() | present
    if IP in named and len(named) > 1:
        raise QuotaError(KafkaError.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                     "component should not be used with user or clientId filter "
                                                     "component.")
    return exact, present


def _matches(entity: QuotaEntity, exact: dict[str, str | None], present: set[str], strict: bool) -> bool:
    parts = entity.by_type
    if strict and len(parts) != len(exact) + len(present):
        return False
    return all(t in parts and parts[t] == name for t, name in exact.items()) and all(t in parts for t in present)


def describe_client_quotas(quotas: QuotaState, request: Body, version: int) -> Body:
    """The entities the filter matches, as Kafka's quota image answers (an O(entities) scan, as Kafka's)."""
    response = default_response(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
    try:
        exact, present = _filter(request["components"])
    except QuotaError as exc:
        response.update(error_code=exc.code, error_message=exc.message, entries=None)
        return response
    strict = request["strict"]
    response.update(error_code=KafkaError.NONE, error_message="", entries=[
        {"entity": _entity_body(entity), "values": [{"key": k, "value": v} for k, v in values.items()]}
        for entity, values in quotas.items() if _matches(entity, exact, present, strict)])
    return response
