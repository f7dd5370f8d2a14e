"""Follows a streamed response, chunk by chunk, to where its top-level tag section (the trailer) starts.

Sans-IO and schema-driven (the MessageSpec the codec reads): only varints (lengths, counts, tags) and
struct markers are read, one byte at a time so a chunk may end anywhere; fixed-size fields and the contents
of every string, bytes and records field and of every nested tagged field are skipped by count as they pass,
never buffered. What precedes the trailer may be forwarded at once; only the trailer is kept, and its size is
known (and bounded) the moment it starts, since the frame's length came first.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from protocol.codec import _FIXED_SIZE
from protocol.errors import DecodeError
from protocol.primitives import Reader
from protocol.registry import api
from protocol.schema import FieldSpec, MessageSpec
from protocol.straight_decode import compile_straight_skip

# The largest trailer kept: node_endpoints of a few hundred brokers. A larger one is refused (the
# connection is closed), as a frame over the size limit is: the walker never holds more than this.
TRAILER_LIMIT = 1 << 20
_MAX_UVARINT_BYTES = 5

# A compiled program is a tuple of steps, each a tuple whose first item says what it is.
_SKIP = 0  # (_SKIP, n): n fixed bytes
_BYTES = 1  # (_BYTES, nullable): compact string, bytes or records: skipped by their length
_ARRAY = 2  # (_ARRAY, nullable, program, skip): compact array of items walked by program (or skipped whole)
_FIXED_ARRAY = 3  # (_FIXED_ARRAY, nullable, item size): compact array of fixed-size items, skipped
_TAGS = 4  # (_TAGS,): a nested tag section, every field skipped by its size
_STRUCT = 5  # (_STRUCT, program): a nullable struct behind its int8 presence marker
Step = tuple[Any, ...]
Program = tuple[Step, ...]
_Wait = Generator[None, None, int]


@dataclass(slots=True, frozen=True)
class WalkPlan:
    """How to follow one response (api key, version) from its payload's first byte (the correlation id)."""

    name: str
    program: Program


@lru_cache(maxsize=64)  # (api key, version) pairs of the responses that may stream with a trailer
def walk_plan(api_key: int, version: int, header_version: int) -> WalkPlan:
    """The plan for a flexible response: its header (correlation id, and the tag section of header v1),
    then its body's fields, up to the body's own tag section."""
    schema = api(api_key)
    if schema is None or version not in schema.response.versions or version not in schema.response.flexible:
        raise ValueError(f"no flexible response for api key {api_key} v{version}")
    header: Program = ((_SKIP, 4), (_TAGS,)) if header_version >= 1 else ((_SKIP, 4),)
    spec = schema.response
    return WalkPlan(f"{schema.name} v{version} response", header + _program(spec.fields, version, spec))


def _program(fields: list[FieldSpec], version: int, spec: MessageSpec) -> Program:
    """The steps of a struct's fields, without its own tag section (the caller adds it where it belongs)."""
    steps: list[Step] = []
    run = 0  # consecutive fixed-size fields are skipped as one
    for f in fields:
        if version not in f.versions or (f.tag is not None and version in f.tagged_versions):
            continue  # absent, or in the tag section
        if f.type in _FIXED_SIZE:
            run += _FIXED_SIZE[f.type]
            continue
        if run:
            steps.append((_SKIP, run))
            run = 0
        steps.extend(_steps(f, version, spec))
    if run:
        steps.append((_SKIP, run))
    return tuple(steps)


def _steps(f: FieldSpec, version: int, spec: MessageSpec) -> Program:
    nullable = version in f.nullable
    if f.is_struct:
        inner = (*_program(f.fields, version, spec), (_TAGS,))
        return ((_STRUCT, inner),) if nullable else inner  # a plain struct is its fields, in line
    if f.is_struct_array:
        # An item wholly in the chunk is skipped by the generated straight-line code (protocol/straight_decode.py,
        # 4x faster than stepping through it); one cut by the chunk's end is stepped through.
        item = MessageSpec("walk-item", f"{spec.name}.{f.name}", spec.api_key, spec.versions, spec.flexible, f.fields)
        return ((_ARRAY, nullable, (*_program(f.fields, version, spec), (_TAGS,)),
                 compile_straight_skip(item, version)),)
    element = f.element_type
    if element is not None:
        if element in _FIXED_SIZE:
            return ((_FIXED_ARRAY, nullable, _FIXED_SIZE[element]),)
        return ((_ARRAY, nullable, ((_BYTES, False),), None),)
    return ((_BYTES, nullable),)


class TrailerWalker:
    """One streamed response's walk: ``feed`` each chunk of its payload in order, forward what it returns,
    then ``trailer()`` gives the kept top-level tag section. Raises DecodeError where the structure cannot
    be followed (the caller closes the connection: nothing after that point may be forwarded)."""

    __slots__ = ("_chunk", "_left", "_limit", "_name", "_pos", "_skipping", "_trailer", "_walk")

    def __init__(self, plan: WalkPlan, payload_size: int, limit: int = TRAILER_LIMIT) -> None:
        self._name = plan.name
        self._left = payload_size  # payload bytes not fed yet
        self._limit = limit
        self._chunk: memoryview = memoryview(b"")
        self._pos = 0
        self._skipping = 0  # bytes of a skipped field (records, mostly) still to pass, counted down by feed
        self._trailer: bytearray | None = None  # set once the walk reached the body's tag section
        self._walk = self._run(plan.program)

    @property
    def held(self) -> int:
        """Bytes kept (the trailer so far): never any records."""
        return len(self._trailer) if self._trailer is not None else 0

    @property
    def complete(self) -> bool:
        """Every payload byte was fed and the trailer found: ``trailer()`` may be called."""
        return not self._left and self._trailer is not None

    def feed(self, chunk: memoryview) -> memoryview:
        """The leading part of ``chunk`` that may be forwarded now; the rest (the trailer) is kept."""
        if len(chunk) > self._left:
            raise DecodeError(f"{self._name}: {len(chunk) - self._left} bytes past the frame's end")
        self._left -= len(chunk)
        if self._trailer is not None:
            self._trailer += chunk
            return chunk[:0]
        if self._skipping > len(chunk):  # inside a records field: nothing to read
            self._skipping -= len(chunk)
            return chunk
        self._chunk, self._pos = chunk, 0
        try:
            self._walk.send(None)
        except StopIteration:
            start = self._pos
            if len(chunk) - start + self._left > self._limit:
                raise DecodeError(f"{self._name}: a tag section of {len(chunk) - start + self._left} bytes "
                                  f"exceeds the limit of {self._limit}") from None
            self._trailer = bytearray(chunk[start:])
            self._chunk = memoryview(b"")
            return chunk[:start]
        self._chunk = memoryview(b"")  # never keep a chunk (or its buffer) past the call
        return chunk

    def trailer(self) -> bytes:
        """The top-level tag section, once every payload byte was fed."""
        if self._left or self._trailer is None or not self._trailer:
            raise DecodeError(f"{self._name}: the frame ended before its tag section")
        return bytes(self._trailer)

    # --- the walk: a generator that yields whenever the chunk is used up ---------------------------

    def _room(self) -> int:
        return len(self._chunk) - self._pos + self._left

    def _run(self, program: Program) -> Generator[None, None, None]:
        # Each field is first read from the bytes at hand (no generator made for it: a response may hold
        # thousands of partitions), and waited for only when it runs past the chunk.
        for step in program:
            kind = step[0]
            if kind == _SKIP:
                if (end := self._pos + step[1]) <= len(self._chunk):
                    self._pos = end
                else:
                    yield from self._skip(step[1])
            elif kind == _BYTES:
                n = self._uvarint_at_hand()
                if n < 0:
                    n = yield from self._uvarint()
                n -= 1
                if n < -1 or (n == -1 and not step[1]):
                    raise DecodeError(f"{self._name}: invalid length {n}")
                if n <= 0:
                    continue
                if (end := self._pos + n) <= len(self._chunk):
                    self._pos = end
                else:
                    yield from self._skip(n)
            elif kind == _TAGS:
                if self._pos < len(self._chunk) and self._chunk[self._pos] == 0:  # the usual empty section
                    self._pos += 1
                else:
                    yield from self._skip_tags()
            elif kind in (_ARRAY, _FIXED_ARRAY):
                n = self._uvarint_at_hand()
                if n < 0:
                    n = yield from self._uvarint()
                n = self._item_count(n - 1, step[1])
                if kind == _FIXED_ARRAY:
                    yield from self._skip(n * step[2])
                    continue
                done = 0
                while done < n:
                    if step[3] is not None:
                        done += self._items_at_hand(step[3], n - done)
                    if done < n:
                        yield from self._run(step[2])
                        done += 1
            else:  # _STRUCT
                marker = yield from self._byte()
                if marker == 1:
                    yield from self._run(step[1])
                elif marker < 0x80:  # 0 and other non-negative markers are invalid, a negative one is null
                    raise DecodeError(f"{self._name}: invalid struct presence marker {marker}")

    def _items_at_hand(self, skip: Callable[[Reader], None], most: int) -> int:
        """How many of the next ``most`` array items lie wholly in the chunk, skipped; the first that does
        not (or that the straight skip refuses) is left to ``_run``, which decides whether it is malformed."""
        reader = Reader(self._chunk, self._pos)
        done = 0
        try:
            while done < most:
                skip(reader)
                if reader.pos < reader.end and reader.buf[reader.pos] == 0:  # the item's empty tag section
                    reader.pos += 1
                else:
                    for _ in range(reader.uvarint()):
                        reader.uvarint()
                        reader.view(reader.uvarint())
                self._pos = reader.pos
                done += 1
        except DecodeError:
            pass
        return done

    def _item_count(self, n: int, nullable: bool) -> int:
        if n < -1 or (n == -1 and not nullable):
            raise DecodeError(f"{self._name}: invalid array length {n}")
        if n > self._room():  # every item takes a byte at least
            raise DecodeError(f"{self._name}: array of {n} items cannot fit in {self._room()} bytes")
        return max(n, 0)

    def _uvarint_at_hand(self) -> int:
        """A varint wholly in the chunk, read; -1 when it is not (the waiting reader takes over)."""
        chunk, pos = self._chunk, self._pos
        stop = min(len(chunk), pos + _MAX_UVARINT_BYTES)
        result = shift = 0
        while pos < stop:
            byte = chunk[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if result > 0xFFFFFFFF:
                    return -1
                self._pos = pos
                return result
            shift += 7
        return -1

    def _skip_tags(self) -> Generator[None, None, None]:
        count = yield from self._uvarint()
        if count * 2 > self._room():
            raise DecodeError(f"{self._name}: {count} tagged fields cannot fit in {self._room()} bytes")
        for _ in range(count):
            yield from self._uvarint()  # the tag
            yield from self._skip((yield from self._uvarint()))

    def _skip(self, n: int) -> Generator[None, None, None]:
        if n > self._room():
            raise DecodeError(f"{self._name}: need {n} bytes, {self._room()} left in the frame")
        avail = len(self._chunk) - self._pos
        if n <= avail:
            self._pos += n
            return
        # The rest is counted down by feed itself (whole chunks of records pass without resuming the walk);
        # the walk resumes with the chunk that holds the skip's end.
        self._skipping = n - avail
        self._pos = len(self._chunk)
        yield
        self._pos, self._skipping = self._skipping, 0

    def _byte(self) -> _Wait:
        while self._pos >= len(self._chunk):
            if not self._left:
                raise DecodeError(f"{self._name}: the frame ended inside its body")
            yield
        byte = self._chunk[self._pos]
        self._pos += 1
        return byte

    def _uvarint(self) -> _Wait:
        result = shift = 0
        for _ in range(_MAX_UVARINT_BYTES):
            byte = yield from self._byte()
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if result > 0xFFFFFFFF:
                    raise DecodeError(f"{self._name}: unsigned varint exceeds 32 bits")
                return result
            shift += 7
        raise DecodeError(f"{self._name}: unsigned varint longer than 5 bytes")
