"""The topics a request names and the few top-level fields the relay reads, walked straight off its bytes.

Without an authorizer nothing reads a relayed Produce's body but the topic-name rules and ``acks``: building
its dicts, then walking them again for the topic names, is work nobody uses.  This module generates, from the
same schema and with protocol/straight_decode.py's emitter, a walk that makes exactly the decoder's checks in
the decoder's order (same DecodeError, same message) but builds no body: it collects the topic names and ids
(the ``entity=`` annotations, as protocol/entities/topics.py finds them in a decoded body) and keeps the named
fields.  With ``ANY_TRANSACTIONAL`` among the kept names it also reads each records field's batch attributes in place
(protocol/record_batch.any_transactional), all that the Produce policy reads of the records, for the walk with an
authorizer (authz/policies/produce.py, WALKED_PRODUCE).
tests/protocol/entities/test_topic_prepass.py pins the equivalence for every version of every message it compiles.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from protocol.codec import _FIXED_SIZE, default_value
from protocol.record_batch import any_transactional
from protocol.schema import FieldSpec, MessageSpec, body_fields, tagged_fields
from protocol.straight_decode import _FORMAT, _Emitter

# (body, names, ids) → (the kept fields, bytes used); names and ids are appended to in field order.
Prepass = Callable[[memoryview | bytes, list[str], list[uuid.UUID]], tuple[dict[str, Any], int]]

_TOPIC_ENTITIES = ("topicName", "topicId")
# A kept name that is no field (no field name has a dot): whether any records field holds a transactional batch.
ANY_TRANSACTIONAL = "records.transactional"
_compiled: dict[tuple[str, int, int, tuple[str, ...]], Prepass] = {}  # bounded: the routes' rows × versions


def prepass_for(spec: MessageSpec, version: int, keep: tuple[str, ...]) -> Prepass:
    """The walk of ``spec`` at ``version`` keeping the top-level fields ``keep``, compiled once."""
    key = (spec.kind, spec.api_key, version, keep)
    walk = _compiled.get(key)
    if walk is None:
        walk = _compiled[key] = compile_prepass(spec, version, keep)
    return walk


def compile_prepass(spec: MessageSpec, version: int, keep: tuple[str, ...]) -> Prepass:
    source, namespace = prepass_source(spec, version, keep)
    # The source is built from ksgate's own schema files only, never from anything on the wire.
    exec(compile(source, f"<prepass {spec.name} v{version}>", "exec"), namespace)
    walk: Prepass = namespace["prepass"]
    return walk


def prepass_source(spec: MessageSpec, version: int, keep: tuple[str, ...]) -> tuple[str, dict[str, Any]]:
    """The generated source of ``prepass`` and the names it refers to.  Raises ValueError for what the walk
    cannot answer the way a decoded body would: a kept field not at the top level, a topic in a tagged
    field, a config resource name (a topic only by its type)."""
    if version not in spec.versions:
        raise ValueError(f"{spec.name} has no version {version}")
    unknown = set(keep) - {f.name for f in spec.fields} - {ANY_TRANSACTIONAL}
    if unknown:
        raise ValueError(f"{spec.name} has no top-level field {sorted(unknown)}")
    walker = _Walker(version, version in spec.flexible, frozenset(keep))
    lines = ["def prepass(buf, names, ids):", "    pos = 0", "    end = len(buf)"]
    if walker.transactional:
        lines.append("    transactional = False")
    kept = walker.walk_struct(spec.fields, f"{spec.name} v{version}", lines, 1, top=True)
    if ANY_TRANSACTIONAL in keep:
        kept[ANY_TRANSACTIONAL] = "transactional"
    for f in spec.fields:
        if f.name in keep and f.name not in kept:  # absent at this version: its default, as the decoder's
            kept[f.name] = walker.const(default_value(f, version))
    entries = ", ".join(f"{name!r}: {kept[name]}" for name in keep)
    lines.append(f"    return {{{entries}}}, pos")
    return "\n".join(lines), walker.namespace


def _tagged_problem(f: FieldSpec) -> bool:
    return f.entity in _TOPIC_ENTITIES or any(_tagged_problem(child) for child in f.fields)


class _Walker(_Emitter):
    """_Emitter's checks and messages without the values: a field is decoded only when kept, a topic, or a
    string (the decoder refuses invalid UTF-8 anywhere).  Not straight_decode's _Skipper, which checks only the
    structure (tag_scan's walk over answers): a request relayed undecoded must be refused wherever the decoder
    would refuse it, invalid UTF-8 and malformed known tagged fields included."""

    def __init__(self, version: int, flexible: bool, keep: frozenset[str]) -> None:
        super().__init__(version, flexible, lazy_reader=True)  # given the body's buffer, not a Reader
        self.keep = keep
        self.transactional = ANY_TRANSACTIONAL in keep  # records fields are read for their batches' attributes

    def walk_struct(self, fields: list[FieldSpec], where: str, out: list[str], depth: int,
                    top: bool = False) -> dict[str, str]:
        """Emit the walk of a struct; at the top level return the kept fields' variables by name."""
        version, pad = self.version, "    " * depth
        kept: dict[str, str] = {}
        plain = body_fields(fields, version)
        run: list[FieldSpec] = []
        out.append(f"{pad}pass")  # a struct with nothing to walk still makes a block
        for f in plain:
            if f.entity == "configResourceName":
                raise ValueError(f"{where}.{f.name}: a config resource names a topic only by its type")
            if f.type in _FORMAT:
                run.append(f)
                continue
            self.walk_run(run, out, depth, kept if top else None)
            run = []
            value = self.walk_field(f, f"{where}.{f.name}", out, depth, top and f.name in self.keep)
            if value is not None:
                kept[f.name] = value
        self.walk_run(run, out, depth, kept if top else None)
        if self.flexible:
            for f in tagged_fields(fields, version):
                if _tagged_problem(f) or (top and f.name in self.keep):
                    raise ValueError(f"{where}.{f.name}: a tagged field the walk would have to keep")
            # The decoder's own tag section reader (known tags decoded, and refused, as it does), into a scratch dict.
            out += [f"{pad}if pos < end and buf[pos] == 0:", f"{pad}    pos += 1", f"{pad}else:",
                    f"{pad}    pos = _tags({self.reader}, pos, {self.known_tags(fields, where)}, {{}}, {where!r})"]
        return kept

    def walk_run(self, run: list[FieldSpec], out: list[str], depth: int, kept: dict[str, str] | None) -> None:
        """Consecutive fixed-size fields: the decoder's one bounds check; unpacked only when one is kept."""
        if not run:
            return
        pad = "    " * depth
        size = sum(_FIXED_SIZE[f.type] for f in run)
        out.append(f"{pad}if pos + {size} > end: _short({size}, pos, end)")
        wanted = [f for f in run if kept is not None and f.name in self.keep]
        if wanted:
            assert kept is not None
            names = [self.fresh("v") for _ in run]
            layout = "".join(_FORMAT[f.type] for f in run)
            unpack = self.const(struct.Struct(">" + layout).unpack_from, "unpack")
            out.append(f"{pad}{', '.join(names)}, = {unpack}(buf, pos)")
            for f, name in zip(run, names, strict=True):
                if f.name in self.keep:
                    kept[f.name] = name
        out.append(f"{pad}pos += {size}")

    def walk_field(self, spec: FieldSpec, where: str, out: list[str], depth: int, keep: bool) -> str | None:
        pad = "    " * depth
        nullable = self.version in spec.nullable
        if spec.is_struct:
            if keep:
                raise ValueError(f"{where}: only scalars are kept")
            if not nullable:
                self.walk_struct(spec.fields, where, out, depth)
                return None
            marker = self.scalar("int8", False, where, out, depth)  # the decoder's nullable_struct, valueless
            out += [f"{pad}if {marker} < 0:", f"{pad}    pass",
                    f"{pad}elif {marker} != 1:", f"{pad}    _bad_marker({where!r}, {marker})",
                    f"{pad}else:"]
            self.walk_struct(spec.fields, where, out, depth + 1)
            return None
        element = spec.element_type
        if spec.is_struct_array or element is not None:
            if keep:
                raise ValueError(f"{where}: only scalars are kept")
            self.walk_array(spec, element, nullable, where, out, depth)
            return None
        topic = spec.entity in _TOPIC_ENTITIES
        if not (keep or topic or spec.type == "string"):
            self.walk_scalar(spec.type, nullable, where, out, depth)
            return None
        value = self.scalar(spec.type, nullable, where, out, depth)
        if topic:  # a null names nothing (entities/topics.py)
            found = f"{'ids' if spec.entity == 'topicId' else 'names'}.append({value})"
            out.append(f"{pad}if {value} is not None: {found}" if nullable else f"{pad}{found}")
        return value if keep else None

    def walk_array(self, spec: FieldSpec, element: str | None, nullable: bool, where: str,
                   out: list[str], depth: int) -> None:
        pad = "    " * depth
        min_size = self.item_min(spec, element, where)
        n = self.length(4, out, depth)
        self.negative_length(n, nullable, "_bad_array", self.fresh("a"), where, out, depth)
        out += [f"{pad}else:",
                f"{pad}    if {n} * {min_size} > end - pos: _too_many({n}, end - pos)",
                f"{pad}    for _ in range({n}):"]
        if element is None:
            self.walk_struct(spec.fields, where, out, depth + 2)
            return
        topic = spec.entity in _TOPIC_ENTITIES
        if not (topic or element == "string"):
            self.walk_scalar(element, False, where, out, depth + 2)
            out.append(f"{pad}        pass")
            return
        item = self.scalar(element, False, where, out, depth + 2)
        if topic:
            out.append(f"{pad}        {'ids' if spec.entity == 'topicId' else 'names'}.append({item})")

    def walk_scalar(self, ftype: str, nullable: bool, where: str, out: list[str], depth: int) -> None:
        """A scalar nobody reads: the decoder's checks for it, nothing built."""
        pad = "    " * depth
        if ftype in _FIXED_SIZE:
            size = _FIXED_SIZE[ftype]
            out += [f"{pad}if pos + {size} > end: _short({size}, pos, end)", f"{pad}pos += {size}"]
            return
        n = self.length(2 if ftype == "string" else 4, out, depth)
        self.negative_length(n, nullable, "_bad_length", self.fresh("s"), where, out, depth)
        out += [f"{pad}else:",
                f"{pad}    if pos + {n} > end: _short({n}, pos, end)"]
        if ftype == "records" and self.transactional:  # one transactional batch answers for the request
            check = self.const(any_transactional, "any_transactional")
            out.append(f"{pad}    if not transactional: transactional = {check}(buf, pos, pos + {n})")
        out.append(f"{pad}    pos += {n}")
