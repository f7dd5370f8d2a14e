"""The topics a decoded message names, found through the schemas' ``entity=`` annotations.

A message's annotated fields are compiled once per (message, version) into a small plan;
walking a body with it yields every topic name and id, or drops the elements naming a topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from protocol.errors import DecodeError
from protocol.schema import FieldSpec, MessageSpec

# ConfigResource.Type.TOPIC: a config resource's name is a topic name only for this type.
CONFIG_RESOURCE_TOPIC = 2


@dataclass(slots=True, frozen=True)
class TopicRef:
    """One place a message names a topic: by name or by id (exactly one is set)."""

    name: str | None = None
    topic_id: uuid.UUID | None = None


@dataclass(slots=True, frozen=True)
class _Node:
    """A field of the plan: a topic leaf (``name``/``id``/``config``) or a struct holding some."""

    field: str
    kind: str  # "name", "id", "config", "struct"
    many: bool  # an array: of structs for "struct", of strings/uuids for leaves
    nullable: bool
    children: tuple[_Node, ...] = ()


_LEAF_KINDS = {"topicName": "name", "topicId": "id", "configResourceName": "config"}
_plans: dict[tuple[str, int, int], tuple[_Node, ...]] = {}


def topic_plan(spec: MessageSpec, version: int) -> tuple[_Node, ...]:
    """The annotated fields of ``spec`` at ``version`` (empty when it names no topic)."""
    key = (spec.kind, spec.api_key, version)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _compile(spec.fields, version)
    return plan


def names_topics(spec: MessageSpec, version: int) -> bool:
    return bool(topic_plan(spec, version))


def _compile(fields: list[FieldSpec], version: int) -> tuple[_Node, ...]:
    nodes: list[_Node] = []
    for spec in fields:
        if version not in spec.versions:
            continue
        nullable = version in spec.nullable
        if spec.entity in _LEAF_KINDS:
            nodes.append(_Node(spec.name, _LEAF_KINDS[spec.entity], spec.type.startswith("[]"), nullable))
        elif spec.is_struct or spec.is_struct_array:
            children = _compile(spec.fields, version)
            if children:
                nodes.append(_Node(spec.name, "struct", spec.is_struct_array, nullable, children))
    return tuple(nodes)


def topic_refs(spec: MessageSpec, version: int, body: dict[str, Any]) -> Iterator[TopicRef]:
    """Every topic ``body`` names, in field order (duplicates included)."""
    return _walk(topic_plan(spec, version), body)


def _walk(plan: tuple[_Node, ...], struct: dict[str, Any]) -> Iterator[TopicRef]:
    for node in plan:
        value = struct.get(node.field)
        if value is None:
            continue
        if node.kind == "struct":
            for element in value if node.many else (value,):
                yield from _walk(node.children, element)
            continue
        for item in value if node.many else (value,):
            ref = _leaf_ref(node, item, struct)
            if ref is not None:
                yield ref


def names_and_ids(spec: MessageSpec, version: int, body: dict[str, Any]) -> tuple[list[str], list[uuid.UUID]]:
    """The topics ``body`` names by name and by id, each in field order: what topic_refs yields, collected
    by straight-line code generated from the plan (the topic guard reads every request's topics this way)."""
    key = (spec.kind, spec.api_key, version)
    collect = _collectors.get(key)
    if collect is None:
        collect = _collectors[key] = _compile_collector(topic_plan(spec, version), f"{spec.name} v{version}")
    names: list[str] = []
    ids: list[uuid.UUID] = []
    collect(body, names, ids)
    return names, ids


Collector = Callable[[dict[str, Any], list[str], list[uuid.UUID]], None]
_collectors: dict[tuple[str, int, int], Collector] = {}


def _compile_collector(plan: tuple[_Node, ...], label: str) -> Collector:
    """The plan as one function without recursion, generator or TopicRef: per field a ``get`` and a None check,
    a loop per struct array.  Field names come from the schemas and are written as literals (repr)."""
    lines = ["def collect(body, names, ids):", "    pass"]
    _emit_collect(plan, "body", 1, lines, [0])
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(lines), f"<topics {label}>", "exec"), namespace)  # the schemas' code, as straight_decode
    collect: Collector = namespace["collect"]
    return collect


def _emit_collect(plan: tuple[_Node, ...], struct: str, depth: int, lines: list[str], counter: list[int]) -> None:
    pad = "    " * depth
    for node in plan:
        counter[0] += 1
        value = f"v{counter[0]}"
        lines += [f"{pad}{value} = {struct}.get({node.field!r})", f"{pad}if {value} is not None:"]
        inner = pad + "    "
        if node.kind == "struct":
            if node.many:
                lines.append(f"{inner}for e{counter[0]} in {value}:")
                _emit_collect(node.children, f"e{counter[0]}", depth + 2, lines, counter)
            else:
                _emit_collect(node.children, value, depth + 1, lines, counter)
            continue
        if node.kind == "config":  # a config resource names a topic only when its type says so
            lines.append(f"{inner}if {struct}.get('resource_type') == {CONFIG_RESOURCE_TOPIC}:")
            inner += "    "
        found = "ids" if node.kind == "id" else "names"
        lines.append(f"{inner}{found}.extend([item for item in {value} if item is not None])" if node.many
                     else f"{inner}{found}.append({value})")  # a null element names nothing


def _leaf_ref(node: _Node, value: Any, struct: dict[str, Any]) -> TopicRef | None:
    if value is None:
        return None
    if node.kind == "id":
        return TopicRef(topic_id=value)
    if node.kind == "config" and struct.get("resource_type") != CONFIG_RESOURCE_TOPIC:
        return None
    return TopicRef(name=value)


class CannotDrop(DecodeError):
    """A hidden topic sits where no element can be dropped (a required scalar): refuse the message."""


def drop_topics(spec: MessageSpec, version: int, body: dict[str, Any],
                hidden: Callable[[TopicRef], bool]) -> bool:
    """Remove from ``body`` every array element (or nullable struct) that names a hidden topic.

    Returns whether anything was removed; raises CannotDrop where a hidden topic cannot be
    removed without breaking the message (the caller fails closed).
    """
    return _drop(topic_plan(spec, version), body, hidden)


def _drop(plan: tuple[_Node, ...], struct: dict[str, Any], hidden: Callable[[TopicRef], bool]) -> bool:
    changed = False
    for node in plan:
        value = struct.get(node.field)
        if value is None:
            continue
        if node.kind != "struct":
            if node.many:
                kept = [item for item in value if not _is_hidden(node, item, struct, hidden)]
                if len(kept) != len(value):
                    struct[node.field] = kept
                    changed = True
            elif _is_hidden(node, value, struct, hidden):
                raise CannotDrop(f"field {node.field} names a hidden topic")
            continue
        if node.many:
            kept = [element for element in value if not _names_hidden_directly(node.children, element, hidden)]
            if len(kept) != len(value):
                struct[node.field] = kept
                changed = True
            for element in kept:
                changed |= _drop(node.children, element, hidden)
        elif _names_hidden_directly(node.children, value, hidden):
            if not node.nullable:
                raise CannotDrop(f"struct {node.field} names a hidden topic")
            struct[node.field] = None
            changed = True
        else:
            changed |= _drop(node.children, value, hidden)
    return changed


def _is_hidden(node: _Node, value: Any, struct: dict[str, Any], hidden: Callable[[TopicRef], bool]) -> bool:
    ref = _leaf_ref(node, value, struct)
    return ref is not None and hidden(ref)


def _names_hidden_directly(plan: tuple[_Node, ...], element: dict[str, Any],
                           hidden: Callable[[TopicRef], bool]) -> bool:
    """Whether a scalar topic field of ``element`` itself (not of its sub-arrays) is hidden."""
    return any(node.kind != "struct" and not node.many and _is_hidden(node, element.get(node.field), element, hidden)
               for node in plan)


def elements_naming(spec: MessageSpec, version: int, body: dict[str, Any],
                    wanted: Callable[[TopicRef], bool]) -> Iterator[tuple[dict[str, Any], TopicRef]]:
    """Each struct (or the body itself) with a scalar topic field that ``wanted`` picks, with that topic."""
    return _elements(topic_plan(spec, version), body, wanted)


def _elements(plan: tuple[_Node, ...], struct: dict[str, Any],
              wanted: Callable[[TopicRef], bool]) -> Iterator[tuple[dict[str, Any], TopicRef]]:
    for node in plan:
        value = struct.get(node.field)
        if value is None:
            continue
        if node.kind == "struct":
            for element in value if node.many else (value,):
                yield from _elements(node.children, element, wanted)
        elif not node.many:
            ref = _leaf_ref(node, value, struct)
            if ref is not None and wanted(ref):
                yield struct, ref
