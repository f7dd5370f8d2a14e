"""The broker endpoints (node id, host, port) a decoded message names.

An endpoint is a struct, or the message itself, whose fields carry ``entity=brokerHost``,
``entity=brokerPort`` and one scalar ``entity=brokerId`` (see protocol/schema.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from protocol.schema import FieldSpec, MessageSpec


@dataclass(slots=True, frozen=True)
class EndpointPlace:
    """Where a message holds endpoints: the struct fields down to them (``()`` for the body itself)."""

    path: tuple[str, ...]
    id_field: str
    host_field: str
    port_field: str
    tag: int | None  # the tag of the top-level field holding them when it is a tagged field


@dataclass(slots=True, frozen=True)
class Endpoint:
    """One endpoint struct of a decoded body, and which of its fields are the node id, host and port."""

    struct: dict[str, Any]
    place: EndpointPlace

    @property
    def node_id(self) -> int:
        node_id: int = self.struct[self.place.id_field]
        return node_id

    @property
    def address(self) -> tuple[str, int]:
        return self.struct[self.place.host_field], self.struct[self.place.port_field]

    def set_address(self, host: str, port: int) -> None:
        self.struct[self.place.host_field], self.struct[self.place.port_field] = host, port


_plans: dict[tuple[str, int, int], tuple[EndpointPlace, ...]] = {}


def endpoint_places(spec: MessageSpec, version: int) -> tuple[EndpointPlace, ...]:
    """Every place ``spec`` at ``version`` holds endpoints, in field order (empty when it has none)."""
    key = (spec.kind, spec.api_key, version)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = tuple(_compile(spec.fields, version, (), None))
    return plan


def names_endpoints(spec: MessageSpec, version: int) -> bool:
    return bool(endpoint_places(spec, version))


def _compile(fields: list[FieldSpec], version: int, prefix: tuple[str, ...],
             tag: int | None) -> Iterator[EndpointPlace]:
    present = [f for f in fields if version in f.versions]
    marked = {f.entity: f.name for f in present if f.entity is not None and f.element_type is None}
    if "brokerHost" in marked:  # the schema parser checked the three come together
        yield EndpointPlace(prefix, marked["brokerId"], marked["brokerHost"], marked["brokerPort"], tag)
    for spec in present:
        if spec.is_struct or spec.is_struct_array:
            field_tag = tag
            if not prefix and spec.in_tags(version):
                field_tag = spec.tag
            yield from _compile(spec.fields, version, (*prefix, spec.name), field_tag)


def endpoints(spec: MessageSpec, version: int, body: dict[str, Any]) -> Iterator[Endpoint]:
    """Every endpoint struct in ``body`` (absent or null structs and arrays hold none)."""
    for place in endpoint_places(spec, version):
        for struct in _structs(body, place.path):
            yield Endpoint(struct, place)


def _structs(struct: dict[str, Any], path: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    if not path:
        yield struct
        return
    value = struct.get(path[0])
    if value is None:
        return
    for element in value if isinstance(value, list) else (value,):
        yield from _structs(element, path[1:])
