"""Compiles a MessageSpec for one version into fast decode/encode functions.

Decoded messages are plain dicts keyed by the schema's field names; fields absent in the
version carry their defaults so callers can read any field uniformly.  ``records`` fields
decode to zero-copy memoryview slices of the frame, which is what lets Produce requests
and Fetch responses be inspected without touching record batches.  Unknown tagged fields
are kept under ``_unknown_tags`` and written back unchanged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from protocol.errors import DecodeError, EncodeError
from protocol.primitives import Reader, Writer
from protocol.schema import FieldSpec, MessageSpec

UNKNOWN_TAGS = "_unknown_tags"
ZERO_UUID = uuid.UUID(int=0)

DecodeFn = Callable[[Reader], Any]
EncodeFn = Callable[[Writer, Any], None]

_FIXED_SIZE = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
               "int64": 8, "float64": 8, "uuid": 16}


@dataclass(slots=True, frozen=True)
class MessageCodec:
    """Decode and encode one message (request or response body) at one version."""

    name: str
    version: int
    flexible: bool
    decode_from: DecodeFn
    encode_into: EncodeFn

    def decode(self, data: memoryview | bytes | bytearray) -> dict[str, Any]:
        value, consumed = self.decode_prefix(data)
        if consumed != len(data):
            raise DecodeError(f"{self.name} v{self.version}: {len(data) - consumed} trailing bytes")
        return value

    def decode_prefix(self, data: memoryview | bytes | bytearray) -> tuple[dict[str, Any], int]:
        """Decode a message at the start of data; also return how many bytes it used.

        Kafka's brokers ignore bytes after a request body (and librdkafka relies on that:
        its Metadata v9+ "all topics" request leaves a 4-byte placeholder), so the gateway
        must be able to parse such requests, then relay only what it parsed.
        """
        reader = Reader(data)
        value: dict[str, Any] = self.decode_from(reader)
        return value, reader.pos

    def encode(self, value: dict[str, Any]) -> bytearray:
        writer = Writer()
        self.encode_into(writer, value)
        return writer.out


def compile_message(spec: MessageSpec, version: int) -> MessageCodec:
    if version not in spec.versions:
        raise ValueError(f"{spec.name} has no version {version}")
    flexible = version in spec.flexible
    decode, encode, _ = _struct(spec.fields, version, flexible, f"{spec.name} v{version}")
    return MessageCodec(spec.name, version, flexible, decode, encode)


# --- defaults -----------------------------------------------------------------------

def default_value(spec: FieldSpec, version: int) -> Any:
    """The value a field has when absent from the wire (Kafka's defaulting rules)."""
    if spec.has_default:
        return spec.default
    t = spec.type
    if t.startswith("[]"):
        return []
    if t == "{}":
        return {f.name: default_value(f, version) for f in spec.fields}
    return _TYPE_DEFAULTS[t]


_TYPE_DEFAULTS: dict[str, Any] = {
    "bool": False, "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
    "float64": 0.0, "string": "", "bytes": b"", "uuid": ZERO_UUID, "records": None,
}


# --- scalars ------------------------------------------------------------------------

def _scalar(ftype: str, nullable: bool, flexible: bool, where: str) -> tuple[DecodeFn, EncodeFn, int]:
    if ftype in _FIXED_SIZE:
        read = getattr(Reader, {"bool": "boolean"}.get(ftype, ftype))
        write = getattr(Writer, {"bool": "boolean"}.get(ftype, ftype))
        return read, write, _FIXED_SIZE[ftype]
    if ftype == "string":
        return (*_length_prefixed(nullable, flexible, 2, where, _read_text, _write_text), 1 if flexible else 2)
    if ftype == "bytes":
        return (*_length_prefixed(nullable, flexible, 4, where, _read_bytes, _write_raw), 1 if flexible else 4)
    if ftype == "records":
        return (*_length_prefixed(nullable, flexible, 4, where, Reader.view, _write_raw), 1 if flexible else 4)
    raise AssertionError(ftype)


def _read_text(r: Reader, n: int) -> str:
    return r.text(n)


def _read_bytes(r: Reader, n: int) -> bytes:
    return bytes(r.view(n))


def _write_text(v: Any) -> bytes:
    data: bytes = v.encode("utf-8")
    return data


def _write_raw(v: Any) -> Any:
    return v


def _length_prefixed(
    nullable: bool, flexible: bool, width: int, where: str,
    read_body: Callable[[Reader, int], Any], prepare: Callable[[Any], Any],
) -> tuple[DecodeFn, EncodeFn]:
    """Strings, bytes and records: a length (or compact length + 1) then the body."""
    read_len = Reader.int16 if width == 2 else Reader.int32
    write_len = Writer.int16 if width == 2 else Writer.int32

    def decode(r: Reader) -> Any:
        n = r.uvarint() - 1 if flexible else read_len(r)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise DecodeError(f"{where}: invalid length {n}")
        return read_body(r, n)

    def encode(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"{where}: null in a non-nullable field")
            w.uvarint(0) if flexible else write_len(w, -1)
            return
        data = prepare(v)
        n = len(data)
        w.uvarint(n + 1) if flexible else write_len(w, n)
        w.raw(data)

    return decode, encode


# --- arrays and structs -------------------------------------------------------------

def _array(item_dec: DecodeFn, item_enc: EncodeFn, item_min: int, nullable: bool,
           flexible: bool, where: str) -> tuple[DecodeFn, EncodeFn]:
    min_size = max(item_min, 1)

    def decode(r: Reader) -> Any:
        n = r.uvarint() - 1 if flexible else r.int32()
        if n < 0:
            if n == -1 and nullable:
                return None
            raise DecodeError(f"{where}: invalid array length {n}")
        r.count(n, min_size)
        return [item_dec(r) for _ in range(n)]

    def encode(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"{where}: null array in a non-nullable field")
            w.uvarint(0) if flexible else w.int32(-1)
            return
        w.uvarint(len(v) + 1) if flexible else w.int32(len(v))
        for item in v:
            item_enc(w, item)

    return decode, encode


def _field(spec: FieldSpec, version: int, flexible: bool, where: str) -> tuple[DecodeFn, EncodeFn, int]:
    nullable = version in spec.nullable
    here = f"{where}.{spec.name}"
    if spec.is_struct or spec.is_struct_array:
        dec, enc, size = _struct(spec.fields, version, flexible, here)
        if spec.is_struct:
            return (*_nullable_struct(dec, enc, here), 1) if nullable else (dec, enc, size)
        adec, aenc = _array(dec, enc, size, nullable, flexible, here)
        return adec, aenc, 1 if flexible else 4
    element = spec.element_type
    if element is not None:
        dec, enc, size = _scalar(element, False, flexible, here)
        adec, aenc = _array(dec, enc, size, nullable, flexible, here)
        return adec, aenc, 1 if flexible else 4
    return _scalar(spec.type, nullable, flexible, here)


def _nullable_struct(dec: DecodeFn, enc: EncodeFn, where: str) -> tuple[DecodeFn, EncodeFn]:
    """A nullable struct is preceded by a marker byte: -1 null, 1 present."""

    def decode(r: Reader) -> Any:
        marker = r.int8()
        if marker < 0:
            return None
        if marker != 1:
            raise DecodeError(f"{where}: invalid struct presence marker {marker}")
        return dec(r)

    def encode(w: Writer, v: Any) -> None:
        if v is None:
            w.int8(-1)
            return
        w.int8(1)
        enc(w, v)

    return decode, encode


def _struct(fields: list[FieldSpec], version: int, flexible: bool, where: str) -> tuple[DecodeFn, EncodeFn, int]:
    plain: list[tuple[str, DecodeFn, EncodeFn]] = []
    tagged: dict[int, tuple[str, DecodeFn, EncodeFn, Any]] = {}
    absent: list[tuple[str, Any]] = []
    min_size = 1 if flexible else 0
    for spec in fields:
        if version not in spec.versions:
            absent.append((spec.name, spec))
            continue
        dec, enc, size = _field(spec, version, flexible, where)
        if spec.tag is not None and version in spec.tagged_versions:
            if not flexible:
                raise EncodeError(f"{where}.{spec.name}: tagged field in a non-flexible version")
            tagged[spec.tag] = (spec.name, dec, enc, default_value(spec, version))
            absent.append((spec.name, spec))
        else:
            plain.append((spec.name, dec, enc))
            min_size += size
    tag_order = sorted(tagged.items())

    def fresh_defaults() -> dict[str, Any]:
        return {name: default_value(spec, version) for name, spec in absent}

    def decode(r: Reader) -> dict[str, Any]:
        out = fresh_defaults() if absent else {}
        for name, dec, _ in plain:
            out[name] = dec(r)
        if flexible:
            _decode_tags(r, tagged, out, where)
        return out

    def encode(w: Writer, v: dict[str, Any]) -> None:
        for name, _, enc in plain:
            try:
                value = v[name]
            except KeyError:
                raise EncodeError(f"{where}: missing field {name}") from None
            enc(w, value)
        if flexible:
            _encode_tags(w, tag_order, v)

    return decode, encode, min_size


def _decode_tags(r: Reader, tagged: dict[int, tuple[str, DecodeFn, EncodeFn, Any]],
                 out: dict[str, Any], where: str) -> None:
    count = r.count(r.uvarint(), 2)
    last = -1
    for _ in range(count):
        tag = r.uvarint()
        if tag <= last:
            raise DecodeError(f"{where}: tagged fields out of order ({tag} after {last})")
        last = tag
        size = r.uvarint()
        body = r.view(size)
        known = tagged.get(tag)
        if known is None:
            out.setdefault(UNKNOWN_TAGS, []).append((tag, bytes(body)))
            continue
        sub = Reader(body)
        out[known[0]] = known[1](sub)
        if sub.remaining():
            raise DecodeError(f"{where}: tagged field {known[0]} has trailing bytes")


def _encode_tags(w: Writer, tag_order: list[tuple[int, tuple[str, DecodeFn, EncodeFn, Any]]],
                 v: dict[str, Any]) -> None:
    entries: list[tuple[int, bytes | bytearray]] = []
    for tag, (name, _, enc, default) in tag_order:
        value = v.get(name, default)
        if value == default:
            continue
        sub = Writer()
        enc(sub, value)
        entries.append((tag, sub.out))
    unknown = v.get(UNKNOWN_TAGS)
    if unknown:
        entries.extend(unknown)
        entries.sort(key=lambda item: item[0])
    w.uvarint(len(entries))
    for tag, body in entries:
        w.uvarint(tag)
        w.uvarint(len(body))
        w.raw(body)
