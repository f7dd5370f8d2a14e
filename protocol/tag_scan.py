"""Which top-level tagged fields a message carries, found by skipping its body without decoding it.

Much cheaper than MessageCodec.decode (no dicts, strings or lists are built), so a caller can
decide whether a response needs decoding at all, e.g. whether a Fetch carries ``node_endpoints``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from protocol.codec import _FIXED_SIZE
from protocol.errors import DecodeError
from protocol.primitives import Reader
from protocol.schema import FieldSpec, MessageSpec, body_fields
from protocol.straight_decode import _Skipper

Skip = Callable[[Reader], None]
TagScan = Callable[[memoryview | bytes | bytearray], frozenset[int]]


def compile_tag_scan(spec: MessageSpec, version: int, *, straight: bool = True) -> TagScan:
    """A function returning the tags in ``spec``'s top-level tag section (empty if not flexible).

    It checks the structure it walks (lengths, counts, nulls, trailing bytes) and raises DecodeError
    where the full decoder would; string contents (UTF-8) are not read, as on the undecoded fast path.
    The walk is generated straight-line code (protocol/straight_decode.py's skip, with the tag section and
    the trailing-bytes check in the same function); ``straight=False`` gives
    the interpreted walk below, the reference the generated one is tested against.
    """
    if version not in spec.versions:
        raise ValueError(f"{spec.name} has no version {version}")
    if straight:
        return compile_straight_scan(spec, version)
    flexible = version in spec.flexible
    skip_fields = _skip_fields(spec.fields, version, flexible, own_tags=False)  # scan reads them

    def scan(data: memoryview | bytes | bytearray) -> frozenset[int]:
        reader = Reader(data)
        skip_fields(reader)
        pos, end = reader.pos, reader.end
        if not flexible:
            tags = _NO_TAGS
        elif pos < end and reader.buf[pos] == 0:  # the usual empty section, read here: once per relayed answer
            tags, pos = _NO_TAGS, pos + 1
        else:
            tags, pos = _read_tags(reader), reader.pos
        if pos != end:
            raise DecodeError(f"{spec.name} v{version}: {end - pos} trailing bytes")
        return tags

    return scan


def compile_straight_scan(spec: MessageSpec, version: int) -> TagScan:
    """The scan as one generated function over the buffer: the straight skip (a Reader made only for a long
    varint or a non-empty nested tag section), then the top-level tag section and the trailing-bytes check."""
    skipper = _Skipper(version, version in spec.flexible, lazy_reader=True)
    lines = ["def scan(buf):", "    pos = 0", "    end = len(buf)"]
    skipper.skip_struct(spec.fields, lines, 1, own_tags=False)
    if version in spec.flexible:  # the usual empty section inline: once per relayed answer
        lines += ["    if pos < end and buf[pos] == 0:", "        tags = _NO_TAGS", "        pos += 1",
                  "    else:", "        tags, pos = _section_tags(buf, pos)"]
    else:
        lines.append("    tags = _NO_TAGS")
    lines += ["    if pos != end: _trailing(end - pos)", "    return tags"]
    namespace = skipper.namespace
    namespace.update({"_NO_TAGS": _NO_TAGS, "_section_tags": _section_tags,
                      "_trailing": partial(_trailing, f"{spec.name} v{version}")})
    # The source is built from ksgate's own schema files only, never from anything on the wire.
    exec(compile("\n".join(lines), f"<scan {spec.name} v{version}>", "exec"), namespace)
    scan: TagScan = namespace["scan"]
    return scan


def _section_tags(buf: memoryview | bytes | bytearray, pos: int) -> tuple[frozenset[int], int]:
    reader = Reader(buf, pos)
    tags = _read_tags(reader)
    return tags, reader.pos


def _trailing(where: str, n: int) -> None:
    raise DecodeError(f"{where}: {n} trailing bytes")


def _skip_bytes(reader: Reader, n: int) -> None:
    end = reader.pos + n
    if n < 0 or end > reader.end:
        raise DecodeError(f"need {n} bytes at offset {reader.pos}, have {reader.end - reader.pos}")
    reader.pos = end


_NO_TAGS: frozenset[int] = frozenset()


def _read_tags(reader: Reader) -> frozenset[int]:
    if reader.pos < reader.end and reader.buf[reader.pos] == 0:  # the usual empty section
        reader.pos += 1
        return _NO_TAGS
    count = reader.count(reader.uvarint(), 2)
    tags: list[int] = []
    for _ in range(count):
        tags.append(reader.uvarint())
        _skip_bytes(reader, reader.uvarint())
    return frozenset(tags)


def _skip_tags(reader: Reader) -> None:
    for _ in range(reader.count(reader.uvarint(), 2)):
        reader.uvarint()
        _skip_bytes(reader, reader.uvarint())


def _skip_fields(fields: list[FieldSpec], version: int, flexible: bool, own_tags: bool = True) -> Skip:
    # Tagged fields live in the tag section, skipped whole by its sizes.
    skips: list[Skip] = []
    run = 0  # consecutive fixed-size fields are skipped as one
    for f in body_fields(fields, version):
        if f.type in _FIXED_SIZE:
            run += _FIXED_SIZE[f.type]
            continue
        if run:
            skips.append(_skip_fixed(run))
            run = 0
        skips.append(_skip_field(f, version, flexible))
    if run:
        skips.append(_skip_fixed(run))
    fixed = _fixed_struct_size(fields, version, flexible)
    if fixed is not None:
        return lambda reader: _skip_bytes(reader, fixed)

    def skip(reader: Reader) -> None:
        for one in skips:
            one(reader)
        if flexible and own_tags:
            _skip_tags(reader)

    return skip


def _skip_fixed(size: int) -> Skip:
    return lambda reader: _skip_bytes(reader, size)


def _fixed_struct_size(fields: list[FieldSpec], version: int, flexible: bool) -> int | None:
    """The size of a struct made only of fixed-size fields and no tag section, else None."""
    if flexible:
        return None
    total = 0
    for f in fields:
        if version not in f.versions:
            continue
        if f.type not in _FIXED_SIZE:
            return None
        total += _FIXED_SIZE[f.type]
    return total


def _skip_field(spec: FieldSpec, version: int, flexible: bool) -> Skip:
    nullable = version in spec.nullable
    if spec.is_struct:
        inner = _skip_fields(spec.fields, version, flexible)
        return _nullable_struct(inner) if nullable else inner
    if spec.is_struct_array:
        return _array(_skip_fields(spec.fields, version, flexible), None, nullable, flexible)
    element = spec.element_type
    if element is not None:
        return _array(None, _FIXED_SIZE[element], nullable, flexible) if element in _FIXED_SIZE \
            else _array(_skip_scalar(element, False, flexible), None, nullable, flexible)
    return _skip_scalar(spec.type, nullable, flexible)


def _skip_scalar(ftype: str, nullable: bool, flexible: bool) -> Skip:
    if ftype in _FIXED_SIZE:
        size = _FIXED_SIZE[ftype]
        return lambda reader: _skip_bytes(reader, size)
    width = 2 if ftype == "string" else 4

    def skip(reader: Reader) -> None:
        n = reader.uvarint() - 1 if flexible else (reader.int16() if width == 2 else reader.int32())
        if n < -1 or (n == -1 and not nullable):
            raise DecodeError(f"invalid length {n}")
        if n > 0:
            _skip_bytes(reader, n)

    return skip


def _array(item: Skip | None, item_size: int | None, nullable: bool, flexible: bool) -> Skip:
    def skip(reader: Reader) -> None:
        n = reader.uvarint() - 1 if flexible else reader.int32()
        if n < -1 or (n == -1 and not nullable):
            raise DecodeError(f"invalid array length {n}")
        if n <= 0:
            return
        if item_size is not None:
            _skip_bytes(reader, n * item_size)
            return
        assert item is not None
        reader.count(n, 1)
        for _ in range(n):
            item(reader)

    return skip


def _nullable_struct(inner: Skip) -> Skip:
    def skip(reader: Reader) -> None:
        marker = reader.int8()
        if marker == 1:
            inner(reader)
        elif marker >= 0:
            raise DecodeError(f"invalid struct presence marker {marker}")

    return skip
