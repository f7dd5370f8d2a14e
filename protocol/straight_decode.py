"""Compiles a MessageSpec version into one straight-line Python decode function (generated source).

The interpreted codec (protocol/codec.py) calls a closure and three Reader methods per field; on
the relay's hot path that was most of a Produce request's cost.  This module emits, from the same
schema, one function per (message, version) that keeps the cursor in a local, unpacks runs of
fixed-size fields with one ``struct`` call and inlines the one-byte varint, so there is still no
hand-written per-API parsing.  It must accept exactly what the interpreted decoder accepts and
fail (DecodeError) exactly where it fails: tests/protocol/test_straight_decode.py pins that.
Tagged fields, rare on the hot path, are decoded by the interpreted codec.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from protocol.codec import (
    _FIXED_SIZE,
    UNKNOWN_TAGS,
    DecodeFn,
    EncodeFn,
    _decode_tags,
    _field,
    _struct,
    default_value,
)
from protocol.errors import DecodeError
from protocol.primitives import Reader
from protocol.schema import FieldSpec, MessageSpec, body_fields, tagged_fields

_IMMUTABLE = (bool, int, float, str, bytes, uuid.UUID)
# struct format letters of the fixed-size types that unpack to their final value ("?" is
# ``byte != 0``, as Reader.boolean); uuid is 16 raw bytes turned into a UUID afterwards.
_FORMAT = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
           "int64": "q", "float64": "d"}


def compile_straight_decoder(spec: MessageSpec, version: int) -> DecodeFn:
    """The decode function of ``spec`` at ``version``: takes a Reader, returns the body's dict."""
    source, namespace = straight_decoder_source(spec, version)
    # The source is built from ksgate's own schema files only, never from anything on the wire.
    exec(compile(source, f"<decode {spec.name} v{version}>", "exec"), namespace)
    decode: DecodeFn = namespace["decode"]
    return decode


def straight_decoder_source(spec: MessageSpec, version: int) -> tuple[str, dict[str, Any]]:
    """The generated source of ``decode`` and the names it refers to; apart from the compiler,
    tests/protocol/test_straight_source.py reads it to pin what the emitter writes."""
    if version not in spec.versions:
        raise ValueError(f"{spec.name} has no version {version}")
    emitter = _Emitter(version, version in spec.flexible)
    lines = ["def decode(r):", "    buf = r.buf", "    pos = r.pos", "    end = r.end"]
    result = emitter.struct(spec.fields, f"{spec.name} v{version}", lines, 1)
    lines += ["    r.pos = pos", f"    return {result}"]
    return "\n".join(lines), emitter.namespace


def _short(n: int, pos: int, end: int) -> None:
    """Reader._take's failure, word for word."""
    raise DecodeError(f"need {n} bytes at offset {pos}, have {end - pos}")


def _bad_length(where: str, n: int) -> None:
    raise DecodeError(f"{where}: invalid length {n}")


def _bad_array(where: str, n: int) -> None:
    raise DecodeError(f"{where}: invalid array length {n}")


def _too_many(n: int, left: int) -> None:
    raise DecodeError(f"array of {n} items cannot fit in {left} bytes")


def _bad_marker(where: str, marker: int) -> None:
    raise DecodeError(f"{where}: invalid struct presence marker {marker}")


def _text(raw: memoryview) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string: {exc.reason}") from None


def _tags(r: Reader, pos: int, tagged: Any, out: dict[str, Any], where: str) -> int:
    """The interpreted codec's tag section reader, from ``pos``; returns the new position."""
    r.pos = pos
    _decode_tags(r, tagged, out, where)
    new_pos: int = r.pos
    return new_pos


class _Emitter:
    """Accumulates generated lines and the constants they refer to (by name in ``namespace``)."""

    def __init__(self, version: int, flexible: bool, lazy_reader: bool = False) -> None:
        self.version = version
        self.flexible = flexible
        # False: the function is given a Reader ``r``; True: a buffer ``buf``, a Reader made only where a long
        # varint or a tag section needs one (protocol/entities/topic_prepass.py, protocol/tag_scan.py).
        self.lazy_reader = lazy_reader
        self.counter = 0
        self.namespace: dict[str, Any] = {
            "DecodeError": DecodeError, "UUID": uuid.UUID, "_short": _short, "_bad_length": _bad_length,
            "_bad_array": _bad_array, "_too_many": _too_many, "_bad_marker": _bad_marker, "_text": _text,
            "_tags": _tags, "UNKNOWN_TAGS": UNKNOWN_TAGS, "Reader": Reader,
        }
        self.reader = "Reader(buf)" if lazy_reader else "r"  # what a tag section's helper is given

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any, prefix: str = "k") -> str:
        name = self.fresh(f"_{prefix}")
        self.namespace[name] = value
        return name

    # -- structs --------------------------------------------------------------------

    def struct(self, fields: list[FieldSpec], where: str, out: list[str], depth: int) -> str:
        """Emit the decode of a struct; return the name of the variable holding its dict."""
        version, flexible = self.version, self.flexible
        pad = "    " * depth
        target = self.fresh("d")
        plain = body_fields(fields, version)
        plain_ids = {id(f) for f in plain}
        absent = [f for f in fields if id(f) not in plain_ids]
        # Absent fields hold their defaults, in schema order; a mutable default (a list, a dict)
        # is built afresh per decode, as the interpreted codec does.
        entries = []
        for f in absent:
            default = default_value(f, version)
            if isinstance(default, _IMMUTABLE) or default is None:
                entries.append(f"{f.name!r}: {self.const(default)}")
            else:
                entries.append(f"{f.name!r}: _default({self.const(f)}, {version})")
                self.namespace["_default"] = default_value
        out.append(f"{pad}{target} = {{{', '.join(entries)}}}")
        run: list[FieldSpec] = []
        for f in plain:
            if f.type in _FORMAT:
                run.append(f)
                continue
            self.fixed_run(run, target, out, depth)
            run = []
            value = self.field(f, f"{where}.{f.name}", out, depth)
            out.append(f"{pad}{target}[{f.name!r}] = {value}")
        self.fixed_run(run, target, out, depth)
        if flexible:
            # Nearly every tag section is empty (one zero byte): only the others go to _decode_tags.
            out += [f"{pad}if pos < end and buf[pos] == 0:", f"{pad}    pos += 1", f"{pad}else:",
                    f"{pad}    pos = _tags(r, pos, {self.known_tags(fields, where)}, {target}, {where!r})"]
        return target

    def known_tags(self, fields: list[FieldSpec], where: str) -> str:
        """The constant naming the tag table _tags decodes a struct's known tagged fields with (as the codec)."""
        tagged: dict[int, tuple[str, DecodeFn, EncodeFn, Any]] = {}
        for f in tagged_fields(fields, self.version):
            assert f.tag is not None  # tagged_fields: a tag at this version
            dec, enc, _ = _field(f, self.version, self.flexible, where)
            tagged[f.tag] = (f.name, dec, enc, default_value(f, self.version))
        return self.const(tagged, "tagged")

    def fixed_run(self, run: list[FieldSpec], target: str, out: list[str], depth: int) -> None:
        """Consecutive fixed-size fields: one bounds check and one unpack (same accept/fail set)."""
        if not run:
            return
        pad = "    " * depth
        layout = struct.Struct(">" + "".join(_FORMAT[f.type] for f in run))
        out.append(f"{pad}if pos + {layout.size} > end: _short({layout.size}, pos, end)")
        names = [self.fresh("v") for _ in run]
        unpack = self.const(layout.unpack_from, "unpack")
        out.append(f"{pad}{', '.join(names)}, = {unpack}(buf, pos)")
        out.append(f"{pad}pos += {layout.size}")
        for f, name in zip(run, names, strict=True):
            out.append(f"{pad}{target}[{f.name!r}] = {name}")

    # -- fields -----------------------------------------------------------------------

    def field(self, spec: FieldSpec, where: str, out: list[str], depth: int) -> str:
        nullable = self.version in spec.nullable
        if spec.is_struct:
            if not nullable:
                return self.struct(spec.fields, where, out, depth)
            return self.nullable_struct(spec, where, out, depth)
        if spec.is_struct_array:
            return self.array(spec, None, nullable, where, out, depth)
        element = spec.element_type
        if element is not None:
            return self.array(spec, element, nullable, where, out, depth)
        return self.scalar(spec.type, nullable, where, out, depth)

    def scalar(self, ftype: str, nullable: bool, where: str, out: list[str], depth: int) -> str:
        pad = "    " * depth
        value = self.fresh("s")
        if ftype in _FORMAT:
            size = _FIXED_SIZE[ftype]
            unpack = self.const(struct.Struct(">" + _FORMAT[ftype]).unpack_from, "unpack")
            out += [f"{pad}if pos + {size} > end: _short({size}, pos, end)",
                    f"{pad}{value}, = {unpack}(buf, pos)", f"{pad}pos += {size}"]
            return value
        if ftype == "uuid":
            out += [f"{pad}if pos + 16 > end: _short(16, pos, end)",
                    f"{pad}{value} = UUID(bytes=bytes(buf[pos:pos + 16]))", f"{pad}pos += 16"]
            return value
        width = 2 if ftype == "string" else 4
        n = self.length(width, out, depth)
        body = {"string": f"_text(buf[pos:pos + {n}])", "bytes": f"bytes(buf[pos:pos + {n}])",
                "records": f"buf[pos:pos + {n}]"}[ftype]
        self.negative_length(n, nullable, "_bad_length", value, where, out, depth)
        out += [f"{pad}else:",
                f"{pad}    if pos + {n} > end: _short({n}, pos, end)",
                f"{pad}    {value} = {body}",
                f"{pad}    pos += {n}"]
        return value

    def length(self, width: int, out: list[str], depth: int) -> str:
        """A length or count: compact (uvarint - 1) when flexible, else int16/int32."""
        pad = "    " * depth
        n = self.fresh("n")
        if self.flexible and self.lazy_reader:
            # Reader.uvarint's one- and two-byte fast paths inline, longer ones through it (its checks, its errors).
            second = self.fresh("b")
            out += [f"{pad}if pos < end and ({n} := buf[pos]) < 0x80:",
                    f"{pad}    pos += 1",
                    f"{pad}elif pos + 1 < end and ({second} := buf[pos + 1]) < 0x80:",
                    f"{pad}    {n} = ({n} & 0x7F) | ({second} << 7)",
                    f"{pad}    pos += 2",
                    f"{pad}else:",
                    f"{pad}    r = Reader(buf, pos)",
                    f"{pad}    {n} = r.uvarint()",
                    f"{pad}    pos = r.pos",
                    f"{pad}{n} -= 1"]
            return n
        if self.flexible:
            # The one-byte varint inline; longer ones through Reader.uvarint (its checks, its errors).
            out += [f"{pad}if pos < end and ({n} := buf[pos]) < 0x80:",
                    f"{pad}    pos += 1",
                    f"{pad}else:",
                    f"{pad}    r.pos = pos",
                    f"{pad}    {n} = r.uvarint()",
                    f"{pad}    pos = r.pos",
                    f"{pad}{n} -= 1"]
            return n
        unpack = self.const(struct.Struct(">h" if width == 2 else ">i").unpack_from, "unpack")
        out += [f"{pad}if pos + {width} > end: _short({width}, pos, end)",
                f"{pad}{n}, = {unpack}(buf, pos)", f"{pad}pos += {width}"]
        return n

    def negative_length(self, n: str, nullable: bool, fail: str, value: str, where: str, out: list[str],
                        depth: int) -> None:
        """The ``if n < 0:`` branch of a length or count: -1 is null (``value = None``) where the field
        is nullable, any other negative ``n`` fails through ``fail``; the caller writes the else."""
        pad = "    " * depth
        out.append(f"{pad}if {n} < 0:")
        if nullable:
            out += [f"{pad}    if {n} != -1: {fail}({where!r}, {n})", f"{pad}    {value} = None"]
        else:
            out.append(f"{pad}    {fail}({where!r}, {n})")

    def item_min(self, spec: FieldSpec, element: str | None, where: str) -> int:
        """The fewest bytes one element of the array ``spec`` takes, at least 1: a count is checked against the
        bytes left before anything is made for it."""
        if element is None:
            return max(_struct(spec.fields, self.version, self.flexible, where)[2], 1)
        return max(_field(FieldSpec(spec.name, element), self.version, self.flexible, where)[2], 1)

    def array(self, spec: FieldSpec, element: str | None, nullable: bool, where: str,
              out: list[str], depth: int) -> str:
        pad = "    " * depth
        min_size = self.item_min(spec, element, where)
        n = self.length(4, out, depth)
        value = self.fresh("a")
        self.negative_length(n, nullable, "_bad_array", value, where, out, depth)
        out += [f"{pad}else:",
                f"{pad}    if {n} * {min_size} > end - pos: _too_many({n}, end - pos)",
                f"{pad}    {value} = []",
                f"{pad}    for _ in range({n}):"]
        inner: list[str] = []
        if element is None:
            item = self.struct(spec.fields, where, inner, depth + 2)
        else:
            item = self.scalar(element, False, where, inner, depth + 2)
        out += inner
        out.append(f"{pad}        {value}.append({item})")
        return value

    def nullable_struct(self, spec: FieldSpec, where: str, out: list[str], depth: int) -> str:
        pad = "    " * depth
        marker = self.scalar("int8", False, where, out, depth)
        value = self.fresh("o")
        out += [f"{pad}if {marker} < 0:", f"{pad}    {value} = None",
                f"{pad}elif {marker} != 1:", f"{pad}    _bad_marker({where!r}, {marker})",
                f"{pad}else:"]
        inner = self.struct(spec.fields, where, out, depth + 1)
        out.append(f"{pad}    {value} = {inner}")
        return value


# --- skipping (for tag_scan: walk a body's structure without building values) --------------

def compile_straight_skip(spec: MessageSpec, version: int) -> Callable[[Reader], None]:
    """A function moving a Reader past ``spec``'s fields at ``version``, up to (not over) its top-level
    tag section, checking lengths, counts, nulls and markers as protocol/tag_scan.py's walk does
    (string contents are not read)."""
    source, namespace = straight_skip_source(spec, version)
    exec(compile(source, f"<skip {spec.name} v{version}>", "exec"), namespace)
    skip: Callable[[Reader], None] = namespace["skip"]
    return skip


def straight_skip_source(spec: MessageSpec, version: int) -> tuple[str, dict[str, Any]]:
    """The generated source of ``skip`` and the names it refers to (see straight_decoder_source)."""
    skipper = _Skipper(version, version in spec.flexible)
    lines = ["def skip(r):", "    buf = r.buf", "    pos = r.pos", "    end = r.end"]
    skipper.skip_struct(spec.fields, lines, 1, own_tags=False)
    lines.append("    r.pos = pos")
    return "\n".join(lines), skipper.namespace


def _invalid(what: str, n: int) -> None:
    raise DecodeError(f"invalid {what} {n}")


def _skip_tags(r: Reader, pos: int) -> int:
    r.pos = pos
    for _ in range(r.count(r.uvarint(), 2)):
        r.uvarint()
        size = r.uvarint()
        if r.pos + size > r.end:
            _short(size, r.pos, r.end)
        r.pos += size
    new_pos: int = r.pos
    return new_pos


class _Skipper(_Emitter):
    """The same walk as _Emitter without the values: bounds and structure checks only (string contents and
    tagged fields unread, tag_scan's reference messages).  The request walk that refuses exactly what the
    decoder refuses is protocol/entities/topic_prepass.py's _Walker."""

    def __init__(self, version: int, flexible: bool, lazy_reader: bool = False) -> None:
        super().__init__(version, flexible, lazy_reader)
        self.namespace.update({"_invalid": _invalid, "_skip_tags": _skip_tags})

    def skip_struct(self, fields: list[FieldSpec], out: list[str], depth: int, own_tags: bool = True) -> None:
        pad = "    " * depth
        run = 0  # consecutive fixed-size fields: one bounds check
        for f in body_fields(fields, self.version):
            if f.type in _FIXED_SIZE:
                run += _FIXED_SIZE[f.type]
                continue
            self.skip_bytes(str(run), out, depth)
            run = 0
            self.skip_field(f, out, depth)
        self.skip_bytes(str(run), out, depth)
        if self.flexible and own_tags:
            out += [f"{pad}if pos < end and buf[pos] == 0:", f"{pad}    pos += 1", f"{pad}else:",
                    f"{pad}    pos = _skip_tags({self.reader}, pos)"]
        out.append(f"{pad}pass")  # a struct with nothing to skip still makes a block

    def skip_bytes(self, size: str, out: list[str], depth: int) -> None:
        if size == "0":
            return
        pad = "    " * depth
        out += [f"{pad}if pos + {size} > end: _short({size}, pos, end)", f"{pad}pos += {size}"]

    def skip_field(self, spec: FieldSpec, out: list[str], depth: int) -> None:
        pad = "    " * depth
        nullable = self.version in spec.nullable
        if spec.is_struct:
            if not nullable:
                self.skip_struct(spec.fields, out, depth)
                return
            marker = self.scalar("int8", False, "", out, depth)
            out += [f"{pad}if {marker} == 1:"]
            self.skip_struct(spec.fields, out, depth + 1)
            out += [f"{pad}elif {marker} >= 0:", f"{pad}    _bad_marker('', {marker})"]
            return
        element = spec.element_type
        if not spec.is_struct_array and element is None:
            self.skip_scalar(spec.type, nullable, out, depth)
            return
        n = self.length(4, out, depth)
        out.append(f"{pad}if {n} < {-1 if nullable else 0}: _invalid('array length', {n})")
        if element is not None and element in _FIXED_SIZE:
            out.append(f"{pad}if {n} > 0:")
            self.skip_bytes(f"{n} * {_FIXED_SIZE[element]}", out, depth + 1)
            return
        out += [f"{pad}if {n} > 0:",
                f"{pad}    if {n} > end - pos: _too_many({n}, end - pos)",
                f"{pad}    for _ in range({n}):"]
        if element is None:
            self.skip_struct(spec.fields, out, depth + 2)
        else:
            self.skip_scalar(element, False, out, depth + 2)

    def skip_scalar(self, ftype: str, nullable: bool, out: list[str], depth: int) -> None:
        pad = "    " * depth
        if ftype in _FIXED_SIZE:
            self.skip_bytes(str(_FIXED_SIZE[ftype]), out, depth)
            return
        n = self.length(2 if ftype == "string" else 4, out, depth)
        out += [f"{pad}if {n} < {-1 if nullable else 0}: _invalid('length', {n})",
                f"{pad}if {n} > 0:"]
        self.skip_bytes(n, out, depth + 1)
