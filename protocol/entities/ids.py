"""The group ids, transactional ids, producer ids and broker ids a decoded message names.

Found through the schemas' ``entity=`` annotations (compiled once per message, version and
entity into the paths that lead to the annotated fields), never through hand-written paths.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from protocol.schema import FieldSpec, MessageSpec

Entity = Literal["groupId", "transactionalId", "producerId", "brokerId"]


@dataclass(slots=True, frozen=True)
class EntityPath:
    """The field names from the body down to one annotated field (every step but the last is a struct)."""

    fields: tuple[str, ...]
    many: bool  # the annotated field is an array of values


_plans: dict[tuple[str, int, int, str], tuple[EntityPath, ...]] = {}


def entity_paths(spec: MessageSpec, version: int, entity: Entity) -> tuple[EntityPath, ...]:
    """Where ``spec`` at ``version`` names ``entity``, in field order (empty when it never does)."""
    key = (spec.kind, spec.api_key, version, entity)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = tuple(_compile(spec.fields, version, entity, ()))
    return plan


def names_entity(spec: MessageSpec, version: int, entity: Entity) -> bool:
    return bool(entity_paths(spec, version, entity))


def _compile(fields: list[FieldSpec], version: int, entity: Entity, prefix: tuple[str, ...]) -> Iterator[EntityPath]:
    for spec in fields:
        if version not in spec.versions:
            continue
        if spec.entity == entity:
            yield EntityPath((*prefix, spec.name), spec.element_type is not None)
        elif spec.is_struct or spec.is_struct_array:
            yield from _compile(spec.fields, version, entity, (*prefix, spec.name))


def entity_values(spec: MessageSpec, version: int, body: dict[str, Any], entity: Entity) -> Iterator[Any]:
    """Every non-null ``entity`` value ``body`` holds, in field order (duplicates included)."""
    for path in entity_paths(spec, version, entity):
        for value in _values(body, path.fields):
            if path.many:
                yield from (item for item in value if item is not None)
            else:
                yield value


def _values(struct: dict[str, Any], fields: tuple[str, ...]) -> Iterator[Any]:
    value = struct.get(fields[0])
    if value is None:
        return
    if len(fields) == 1:
        yield value
        return
    for element in value if isinstance(value, list) else (value,):
        yield from _values(element, fields[1:])


def group_ids(spec: MessageSpec, version: int, body: dict[str, Any]) -> list[str]:
    return list(entity_values(spec, version, body, "groupId"))


def transactional_ids(spec: MessageSpec, version: int, body: dict[str, Any]) -> list[str]:
    return list(entity_values(spec, version, body, "transactionalId"))


def producer_ids(spec: MessageSpec, version: int, body: dict[str, Any]) -> list[int]:
    return list(entity_values(spec, version, body, "producerId"))


def broker_ids(spec: MessageSpec, version: int, body: dict[str, Any]) -> list[int]:
    return list(entity_values(spec, version, body, "brokerId"))
