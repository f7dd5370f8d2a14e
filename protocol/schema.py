"""The schema model and the parser for ksgate's compact message-schema format.

A schema file (``protocol/schemas/*.ks``) describes one API: its request and response,
field by field, with the versions each field exists in.  The format, line by line::

    # comment
    request Produce key=0 versions=0-12 flexible=9+
      transactional_id  string   v=3+ null=3+
      topic_data        []
        name            string
        partition_data  []
          index         int32
          records       records  null=0+
    response Produce key=0 versions=0-12 flexible=9+
      ...

Children are indented two spaces under an ``[]`` (array of struct) or ``{}`` (struct)
field.  Attributes: ``v=`` versions the field exists in (default: all), ``null=``
versions in which it may be null, ``tag=N`` makes it a tagged field (``tagged=`` its
versions, default ``v``), ``default=`` the value used when it is absent, ``entity=`` what
Kafka entity the field names (as ``entityType`` in Kafka's message JSON): ``topicName``,
``topicId``, ``configResourceName`` (a topic name when the sibling ``resource_type`` is 2),
``groupId``, ``transactionalId``, ``producerId``, ``brokerId`` (a node id), or ``none`` for
a field that looks like one but is not (a regex, an ACL's host, a Streams app endpoint).

A broker endpoint (a struct, or the message itself, that tells a client where a broker
listens) marks its host ``entity=brokerHost`` and its port ``entity=brokerPort``; its node id
is the one scalar ``entity=brokerId`` field beside them (checked at import)::

    brokers      []
      node_id    int32   entity=brokerId
      host       string  entity=brokerHost
      port       int32   entity=brokerPort

Protections and the address rewrite find topics, groups, transactional ids and endpoints
through these annotations, never through hand-written field paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
     "string", "bytes", "uuid", "records"}
)
_INT_TYPES = frozenset({"int8", "int16", "uint16", "int32", "uint32", "int64"})
# The values of ``entity=`` and the field types each may annotate.
ENTITY_TYPES: dict[str, frozenset[str]] = {
    "topicName": frozenset({"string", "[]string"}),
    "topicId": frozenset({"uuid", "[]uuid"}),
    "configResourceName": frozenset({"string"}),
    "groupId": frozenset({"string", "[]string"}),
    "transactionalId": frozenset({"string", "[]string"}),
    "producerId": frozenset({"int64", "[]int64"}),
    "brokerId": frozenset({"int32", "[]int32"}),
    "brokerHost": frozenset({"string"}),
    "brokerPort": frozenset({"int32"}),
    "none": frozenset({"string", "[]string", "uuid", "[]uuid", "int32", "uint16"}),
}
ENDPOINT_ENTITIES = ("brokerId", "brokerHost", "brokerPort")


class SchemaError(ValueError):
    """A schema file does not follow the format (a bug in ksgate, found at import)."""


@dataclass(slots=True, frozen=True)
class VersionRange:
    """An inclusive version range; ``high`` of None means 'and every later version'."""

    low: int
    high: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        if text == "none":
            return cls(1, 0)  # empty
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return version >= self.low and (self.high is None or version <= self.high)


ALL_VERSIONS = VersionRange(0, None)
NO_VERSIONS = VersionRange(1, 0)


@dataclass(slots=True)
class FieldSpec:
    """One field of a message or struct."""

    name: str
    type: str  # a primitive, "[]<primitive>", "[]" (array of struct) or "{}" (struct)
    versions: VersionRange = ALL_VERSIONS
    nullable: VersionRange = NO_VERSIONS
    tag: int | None = None
    tagged_versions: VersionRange = NO_VERSIONS
    default: object = None
    has_default: bool = False  # an explicit default= (which may be null)
    entity: str | None = None  # see ENTITY_TYPES
    fields: list[FieldSpec] = field(default_factory=list)

    @property
    def is_struct_array(self) -> bool:
        return self.type == "[]"

    @property
    def is_struct(self) -> bool:
        return self.type == "{}"

    @property
    def element_type(self) -> str | None:
        """For ``[]int32`` style arrays, the primitive element type."""
        if self.type.startswith("[]") and len(self.type) > 2:
            return self.type[2:]
        return None

    def in_tags(self, version: int) -> bool:
        """Whether at ``version`` the field travels in its struct's tag section rather than in its body."""
        return self.tag is not None and version in self.tagged_versions


def body_fields(fields: list[FieldSpec], version: int) -> list[FieldSpec]:
    """The fields a struct's body holds at ``version``, in wire order: present, and not in the tag section."""
    return [f for f in fields if version in f.versions and not f.in_tags(version)]


def tagged_fields(fields: list[FieldSpec], version: int) -> list[FieldSpec]:
    """The fields a struct's tag section may hold at ``version``, in schema order."""
    return [f for f in fields if version in f.versions and f.in_tags(version)]


@dataclass(slots=True)
class MessageSpec:
    """A request or response body definition."""

    kind: str  # "request" or "response"
    name: str
    api_key: int
    versions: VersionRange
    flexible: VersionRange
    fields: list[FieldSpec] = field(default_factory=list)


_HEADER_RE = re.compile(r"^(request|response)\s+(\w+)\s+(.*)$")


def parse_schema_text(text: str, source: str = "<schema>") -> list[MessageSpec]:
    """Parse one schema file into its message specs."""
    messages: list[MessageSpec] = []
    # stack of (indent, list that children at indent+2 are appended to)
    stack: list[tuple[int, list[FieldSpec]]] = []
    last_field: FieldSpec | None = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            messages.append(_parse_message_header(line, where))
            stack = [(0, messages[-1].fields)]
            last_field = None
            continue
        if not messages:
            raise SchemaError(f"{where}: field before any request/response line")
        if indent % 2:
            raise SchemaError(f"{where}: indentation must be a multiple of two spaces")
        level_indent = stack[-1][0] + 2
        if indent > level_indent:
            if last_field is None or not (last_field.is_struct or last_field.is_struct_array):
                raise SchemaError(f"{where}: only [] and {{}} fields have children")
            if indent != level_indent + 2:
                raise SchemaError(f"{where}: indented too far")
            stack.append((level_indent, last_field.fields))
        while indent < stack[-1][0] + 2:
            stack.pop()
            if not stack:
                raise SchemaError(f"{where}: bad dedent")
        spec = _parse_field(line.strip(), where)
        stack[-1][1].append(spec)
        last_field = spec
    for message in messages:
        _check_fields(message.fields, f"{source}:{message.kind} {message.name}")
    return messages


def _parse_attrs(parts: list[str], where: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in parts:
        if "=" not in part:
            raise SchemaError(f"{where}: expected key=value, got {part!r}")
        key, value = part.split("=", 1)
        attrs[key] = value
    return attrs


def _parse_message_header(line: str, where: str) -> MessageSpec:
    m = _HEADER_RE.match(line)
    if not m:
        raise SchemaError(f"{where}: expected 'request|response Name key=N versions=R flexible=R'")
    attrs = _parse_attrs(m.group(3).split(), where)
    unknown = set(attrs) - {"key", "versions", "flexible"}
    if unknown or "key" not in attrs or "versions" not in attrs:
        raise SchemaError(f"{where}: needs key= and versions= (flexible= optional), got {sorted(attrs)}")
    return MessageSpec(
        kind=m.group(1),
        name=m.group(2),
        api_key=int(attrs["key"]),
        versions=VersionRange.parse(attrs["versions"]),
        flexible=VersionRange.parse(attrs.get("flexible", "none")),
    )


def _parse_field(text: str, where: str) -> FieldSpec:
    parts = text.split()
    if len(parts) < 2:
        raise SchemaError(f"{where}: expected 'name type [attrs]'")
    name, ftype = parts[0], parts[1]
    if ftype not in ("[]", "{}") and ftype.removeprefix("[]") not in PRIMITIVES:
        raise SchemaError(f"{where}: unknown type {ftype!r}")
    attrs = _parse_attrs(parts[2:], where)
    spec = FieldSpec(name=name, type=ftype)
    if "v" in attrs:
        spec.versions = VersionRange.parse(attrs.pop("v"))
    if "null" in attrs:
        spec.nullable = VersionRange.parse(attrs.pop("null"))
    if "tag" in attrs:
        spec.tag = int(attrs.pop("tag"))
        spec.tagged_versions = VersionRange.parse(attrs.pop("tagged", _range_text(spec.versions)))
    if "default" in attrs:
        spec.default = _parse_default(ftype, attrs.pop("default"), where)
        spec.has_default = True
    if "entity" in attrs:
        spec.entity = attrs.pop("entity")
        allowed_types = ENTITY_TYPES.get(spec.entity)
        if allowed_types is None or ftype not in allowed_types:
            raise SchemaError(f"{where}: entity={spec.entity} does not fit a {ftype} field")
    if attrs:
        raise SchemaError(f"{where}: unknown attributes {sorted(attrs)}")
    return spec


def _range_text(r: VersionRange) -> str:
    return f"{r.low}+" if r.high is None else f"{r.low}-{r.high}"


def _parse_default(ftype: str, text: str, where: str) -> object:
    if text == "null":
        return None
    if ftype in _INT_TYPES:
        return int(text, 0)
    if ftype == "bool":
        if text not in ("true", "false"):
            raise SchemaError(f"{where}: bool default must be true or false")
        return text == "true"
    if ftype == "float64":
        return float(text)
    if ftype == "string":
        return text
    raise SchemaError(f"{where}: defaults are only supported for scalar types")


def _check_fields(fields: list[FieldSpec], where: str) -> None:
    names: set[str] = set()
    tags: set[int] = set()
    for spec in fields:
        if spec.name in names:
            raise SchemaError(f"{where}: duplicate field {spec.name}")
        names.add(spec.name)
        if spec.tag is not None:
            if spec.tag in tags:
                raise SchemaError(f"{where}: duplicate tag {spec.tag}")
            tags.add(spec.tag)
        if (spec.is_struct or spec.is_struct_array) and not spec.fields:
            raise SchemaError(f"{where}: {spec.name} has no child fields")
        _check_fields(spec.fields, f"{where}.{spec.name}")
    _check_endpoint(fields, where)


def _check_endpoint(fields: list[FieldSpec], where: str) -> None:
    """A struct with a brokerHost or brokerPort has one of each and one scalar brokerId, in the same versions."""
    marked = {e: [f for f in fields if f.entity == e and f.element_type is None] for e in ENDPOINT_ENTITIES}
    if not marked["brokerHost"] and not marked["brokerPort"]:
        return
    if any(len(found) != 1 for found in marked.values()):
        raise SchemaError(f"{where}: an endpoint needs one brokerId, one brokerHost and one brokerPort field")
    if len({marked[e][0].versions for e in ENDPOINT_ENTITIES}) != 1:
        raise SchemaError(f"{where}: an endpoint's brokerId, brokerHost and brokerPort differ in versions")
