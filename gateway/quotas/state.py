"""The quota state (entity → its quota values), how a change applies to it, and its JSON form.

The JSON form is what the quota file holds and what a replicated-store record carries:
``{"entity": {"user": "alice", "client-id": null}, "values": {"producer_byte_rate": 1048576}}``,
a null name being the type's ``<default>``.  Everything read back is validated as an
AlterClientQuotas request would be, so a hand-edited file cannot hold what Kafka refuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gateway.quotas.model import QuotaEntity, QuotaError, validate_entity, validate_value
from protocol.kafka_errors import KafkaError

QuotaValues = Mapping[str, float]
QuotaState = Mapping[QuotaEntity, QuotaValues]
# One entity's change: key → new value, or None to remove the key.
QuotaChange = tuple[QuotaEntity, Mapping[str, float | None]]


def _bad(message: str) -> QuotaError:
    return QuotaError(KafkaError.INVALID_REQUEST, message)


def apply_changes(state: QuotaState, changes: Sequence[QuotaChange]) -> dict[QuotaEntity, Mapping[str, float]]:
    """``state`` with ``changes`` applied in order; an entity left with no value disappears (as in Kafka).
    Untouched entities' values are shared with ``state``: a state's maps are never changed in place."""
    new = dict(state)
    for entity, ops in changes:
        values = dict(new.pop(entity, {}))
        for key, value in ops.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = float(value)
        if values:
            new[entity] = dict(sorted(values.items()))
    return new


def entity_to_json(entity: QuotaEntity) -> dict[str, str | None]:
    return dict(entity.parts)


def entity_from_json(obj: object) -> QuotaEntity:
    if not isinstance(obj, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, str))
                                            for k, v in obj.items()):
        raise _bad("an entity must be an object of entity type → name (null: <default>)")
    return validate_entity(obj.items())


def values_from_json(entity: QuotaEntity, obj: object) -> dict[str, float]:
    if not isinstance(obj, dict) or not obj:
        raise _bad(f"{entity.label()}: values must be a non-empty object of quota key → number")
    values: dict[str, float] = {}
    for key, value in obj.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _bad(f"{entity.label()}: {key} must be a number")
        validate_value(entity, key, float(value))
        values[key] = float(value)
    return values


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() and abs(value) < 2**63 else value


def state_to_json(state: QuotaState) -> list[dict[str, Any]]:
    return [{"entity": entity_to_json(entity), "values": {k: _number(v) for k, v in values.items()}}
            for entity, values in state.items()]  # the state's order: stable, and no O(n log n) per change


def state_from_json(items: Iterable[object]) -> dict[QuotaEntity, dict[str, float]]:
    state: dict[QuotaEntity, dict[str, float]] = {}
    for item in items:
        if not isinstance(item, dict):
            raise _bad("each quota must be an object with an entity and its values")
        entity = entity_from_json(item.get("entity"))
        if entity in state:
            raise _bad(f"{entity.label()} is listed twice")
        state[entity] = values_from_json(entity, item.get("values"))
    return state
