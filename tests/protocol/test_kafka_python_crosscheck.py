"""Cross-check our schemas and codec against kafka-python's independent implementation.

kafka-python 3.x builds its messages from Apache Kafka's own JSON message definitions
(``kafka/protocol/schemas/resources/*.json``), so agreeing with it byte for byte is agreeing
with the canonical protocol description.  For every (api key, version, request/response)
that both sides know, the tests below check, in both directions:

* the two schemas line up field by field (name, type, nullability, tag, defaults);
* bytes we encode decode in kafka-python to the same values and re-encode to the same bytes;
* a message built and encoded by kafka-python decodes with our codec to the values it was
  built from, and our encoder produces the very same bytes.

Versions kafka-python only has as legacy hand-written structs (older than the JSON files'
``validVersions``, e.g. Produce v0-2) get a byte-level round trip through those structs.

Schemas are being added continuously; whatever exists at collection time is covered, and a
floor on the number of cross-checked (api, version) pairs keeps the module from passing
vacuously.
"""

from __future__ import annotations

import importlib
import io
import pkgutil
import random
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from protocol.codec import UNKNOWN_TAGS, ZERO_UUID, MessageCodec, default_value
from protocol.header import decode_request_header, request_header_version
from protocol.registry import all_apis, codec_for
from protocol.schema import FieldSpec, MessageSpec
from tests.protocol.sample_values import sample_message

with warnings.catch_warnings():  # kafka-python reads its JSON files with deprecated importlib calls
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol
    from kafka.protocol.api_header import RequestHeader as KpRequestHeader
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.old.api import Request as LegacyRequest
    from kafka.protocol.old.api import Response as LegacyResponse


# 234 (api, version) pairs were cross-checked when this was written; schemas only get added,
# so far fewer means the cross-check has silently stopped running.
MIN_CROSSCHECKED_PAIRS = 200
# The APIs every client uses: cross-checked whenever we have a schema for them.
CORE_APIS = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
             9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
             13: "LeaveGroup", 14: "SyncGroup", 17: "SaslHandshake", 18: "ApiVersions",
             36: "SaslAuthenticate"}
SAMPLES_PER_CASE = 6


# --- discovering kafka-python's message classes ---------------------------------------

def _import_all() -> None:
    """Import every kafka.protocol module so each message class is defined (and findable)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
            if not info.name.endswith(".generate_stubs"):
                importlib.import_module(info.name)


def _subclasses(cls: Any) -> Iterator[Any]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _kp_json_classes() -> dict[tuple[int, str], Any]:
    """(api key, 'request'|'response') → kafka-python's JSON-defined primary message class."""
    _import_all()
    found: dict[tuple[int, str], Any] = {}
    for cls in _subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is not None or getattr(cls, "_json", None) is None:
            continue
        found.setdefault((cls.API_KEY, cls.type), cls)
    return found


def _kp_legacy_classes() -> dict[tuple[int, str, int], Any]:
    """(api key, kind, version) → kafka-python's legacy hand-written Struct class."""
    _import_all()
    found: dict[tuple[int, str, int], Any] = {}
    for base, kind in ((LegacyRequest, "request"), (LegacyResponse, "response")):
        for cls in _subclasses(base):
            key, version = getattr(cls, "API_KEY", None), getattr(cls, "API_VERSION", None)
            if isinstance(key, int) and isinstance(version, int):
                found.setdefault((key, kind, version), cls)
    return found


KP_CLASSES = _kp_json_classes()
KP_LEGACY = _kp_legacy_classes()


@dataclass(frozen=True)
class Case:
    spec: MessageSpec
    version: int
    kp_class: Any  # JSON-defined class, or a legacy versioned Struct class

    @property
    def codec(self) -> MessageCodec:
        return codec_for(self.spec, self.version)

    @property
    def id(self) -> str:
        return f"{self.spec.name}-v{self.version}"


def _our_versions(spec: MessageSpec) -> range:
    return range(spec.versions.low, (spec.versions.high or 0) + 1)


def _json_cases() -> list[Case]:
    cases: list[Case] = []
    for schema in all_apis().values():
        for spec in (schema.request, schema.response):
            kp = KP_CLASSES.get((spec.api_key, spec.kind))
            if kp is None or kp.valid_versions is None:
                continue
            low, high = kp.valid_versions
            cases.extend(Case(spec, v, kp) for v in _our_versions(spec) if low <= v <= high)
    return cases


def _legacy_cases() -> list[Case]:
    covered = {(c.spec.api_key, c.spec.kind, c.version) for c in JSON_CASES}
    cases = []
    for schema in all_apis().values():
        for spec in (schema.request, schema.response):
            for v in _our_versions(spec):
                legacy = KP_LEGACY.get((spec.api_key, spec.kind, v))
                if legacy is not None and (spec.api_key, spec.kind, v) not in covered:
                    cases.append(Case(spec, v, legacy))
    return cases


JSON_CASES = _json_cases()
LEGACY_CASES = _legacy_cases()


def _ids(cases: list[Case]) -> list[str]:
    return [c.id for c in cases]


# --- pairing our fields with kafka-python's -------------------------------------------

def _in_version(spec: FieldSpec, version: int) -> bool:
    return version in spec.versions


def _tagged(spec: FieldSpec, version: int) -> bool:
    return spec.tag is not None and version in spec.tagged_versions


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


def _kp_name(kp_field: Any) -> str:
    return str(kp_field._name)


def _names_match(ours: FieldSpec, kp_field: Any) -> bool:
    theirs = _norm(_kp_name(kp_field))
    if _norm(ours.name) == theirs:
        return True
    # kafka-python renames e.g. TopicAuthorizedOperations to authorized_operations (bitfield)
    return bool(kp_field.type_str == "bitfield" and _norm(ours.name).endswith(theirs))


def _types_match(ours: FieldSpec, kp_field: Any) -> bool:
    if ours.is_struct_array:
        return bool(kp_field.is_struct_array())
    if ours.is_struct:
        return bool(kp_field.is_struct())
    element = ours.element_type
    if element is not None:
        return bool(kp_field.is_array() and not kp_field.is_struct_array()
                    and kp_field._type_str == f"[]{element}")
    if ours.type == "int32" and kp_field.type_str == "bitfield":
        return True
    return bool(not kp_field.is_array() and not kp_field.is_struct()
                and kp_field.type_str == ours.type)


@dataclass(frozen=True)
class Pair:
    ours: FieldSpec
    kp: Any  # kafka-python field


def _pairs(fields: list[FieldSpec], kp_struct: Any, version: int, where: str) -> list[Pair]:
    """Match our in-version fields with kafka-python's: untagged by position, tagged by tag."""
    ours_plain = [f for f in fields if _in_version(f, version) and not _tagged(f, version)]
    kp_plain = list(kp_struct.untagged_fields(version))
    ours_names = [f.name for f in ours_plain]
    kp_names = [_kp_name(f) for f in kp_plain]
    assert len(ours_plain) == len(kp_plain), \
        f"{where} v{version}: field lists differ: ours {ours_names}, Kafka {kp_names}"
    pairs = [Pair(o, k) for o, k in zip(ours_plain, kp_plain, strict=True)]
    ours_tagged = {f.tag or 0: f for f in fields if _in_version(f, version) and _tagged(f, version)}
    kp_tagged = {f.tag: f for f in kp_struct.tagged_fields(version)._fields}
    assert set(ours_tagged) == set(kp_tagged), \
        f"{where} v{version}: tagged fields differ: ours {sorted(ours_tagged)}, Kafka {sorted(kp_tagged)}"
    pairs += [Pair(ours_tagged[t], kp_tagged[t]) for t in sorted(ours_tagged)]
    return pairs


def _check_schema(fields: list[FieldSpec], kp_struct: Any, version: int, where: str) -> int:
    """Assert the two schemas agree at this version; returns how many fields were compared."""
    compared = 0
    for pair in _pairs(fields, kp_struct, version, where):
        o, k = pair.ours, pair.kp
        here = f"{where}.{o.name} v{version}"
        assert _names_match(o, k), f"{here}: Kafka calls this field {_kp_name(k)}"
        assert _types_match(o, k), f"{here}: ours is {o.type}, Kafka's is {k._type_str}"
        assert (version in o.nullable) == bool(k.nullable_for_version_q(version)), \
            f"{here}: nullability differs (Kafka nullableVersions {k._nullable_versions})"
        if _tagged(o, version) and not (o.is_struct or o.is_struct_array or o.element_type):
            assert _same_scalar(o, k, default_value(o, version), k.default), \
                f"{here}: tagged default differs: ours {default_value(o, version)!r}, Kafka {k.default!r}"
        compared += 1
        if o.is_struct or o.is_struct_array:
            compared += _check_schema(o.fields, k, version, f"{where}.{o.name}")
    return compared


def _check_absent_defaults(fields: list[FieldSpec], kp_struct: Any, version: int, where: str) -> None:
    """Fields absent from this version read as the same default on both sides."""
    kp_by_name = {_norm(f._name): f for f in kp_struct._fields}
    for o in fields:
        k = kp_by_name.get(_norm(o.name))
        if k is None or _in_version(o, version) or k.for_version_q(version):
            continue
        if o.is_struct or o.is_struct_array or o.element_type or k.is_array() or k.is_struct():
            continue
        assert _same_scalar(o, k, default_value(o, version), k.default), \
            f"{where}.{o.name} v{version} (absent): default differs: ours " \
            f"{default_value(o, version)!r}, Kafka {k.default!r}"


# --- comparing values -----------------------------------------------------------------

def _bits(value: int) -> set[int] | None:
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def _same_scalar(ours: FieldSpec, kp_field: Any, mine: Any, theirs: Any) -> bool:
    ftype = ours.element_type or ours.type
    if kp_field.type_str == "bitfield":
        return mine is not None and _bits(mine) == theirs
    if mine is None or theirs is None:
        if ftype == "uuid":
            return (mine or ZERO_UUID) == (theirs or ZERO_UUID)
        return mine is None and theirs is None
    if ftype in ("bytes", "records"):
        return bytes(mine) == bytes(theirs)
    if ftype == "uuid":
        return bool(mine == theirs)
    if ftype == "bool":
        return bool(mine) is bool(theirs)
    return bool(mine == theirs) and type(mine) is type(theirs)


def _compare(fields: list[FieldSpec], kp_struct: Any, version: int, ours: dict[str, Any], theirs: Any,
             where: str) -> None:
    """Our decoded dict and kafka-python's object carry the same values."""
    for pair in _pairs(fields, kp_struct, version, where):
        o, k = pair.ours, pair.kp
        here = f"{where}.{o.name}"
        mine, other = ours[o.name], getattr(theirs, k.name)
        if other is None and o.is_struct and _tagged(o, version):
            # An absent tagged struct: kafka-python leaves None, we fill in its defaults.
            assert mine == default_value(o, version), f"{here}: ours {mine!r}, kafka-python None"
            continue
        if (mine is None or other is None) and o.type not in ("uuid", "int32"):
            assert mine is None and other is None, f"{here}: ours {mine!r}, kafka-python {other!r}"
            continue
        if o.is_struct:
            _compare(o.fields, k, version, mine, other, here)
        elif o.is_struct_array:
            assert len(mine) == len(other), f"{here}: {len(mine)} items vs {len(other)}"
            for i, (a, b) in enumerate(zip(mine, other, strict=True)):
                _compare(o.fields, k, version, a, b, f"{here}[{i}]")
        elif o.element_type is not None:
            assert len(mine) == len(other), f"{here}: {mine!r} vs {other!r}"
            for a, b in zip(mine, other, strict=True):
                assert _same_scalar(o, k.array_of, a, b), f"{here}: {mine!r} vs {other!r}"
        else:
            assert _same_scalar(o, k, mine, other), f"{here}: ours {mine!r}, kafka-python {other!r}"


def _to_kp(fields: list[FieldSpec], kp_struct: Any, version: int, value: dict[str, Any],
           data_class: Any) -> Any:
    """Build kafka-python's object for one of our values (the 'build with kafka-python' side)."""
    kwargs: dict[str, Any] = {}
    for pair in _pairs(fields, kp_struct, version, data_class.__name__):
        o, k = pair.ours, pair.kp
        if o.name not in value:
            continue
        v = value[o.name]
        if v is None:
            kwargs[k.name] = None
        elif o.is_struct:
            kwargs[k.name] = _to_kp(o.fields, k, version, v, k.data_class)
        elif o.is_struct_array:
            kwargs[k.name] = [_to_kp(o.fields, k, version, item, k.data_class) for item in v]
        elif k.type_str == "bitfield":
            kwargs[k.name] = _bits(v)
        elif o.type == "uuid":
            kwargs[k.name] = None if v == ZERO_UUID else v
        elif o.type in ("bytes", "records"):
            kwargs[k.name] = bytes(v)
        else:
            kwargs[k.name] = list(v) if isinstance(v, list) else v
    return data_class(version=version, **kwargs)


def _kp_decode(kp_class: Any, version: int, wire: bytes) -> tuple[Any, int]:
    """kafka-python's decode of a body, plus how many bytes it consumed.

    Goes through the compiled struct decoder (what ``ApiMessage.decode`` uses) because the
    public method neither reports trailing bytes nor decodes an ApiVersions response with a
    non-zero error code at the version asked for (it falls back to v0, as brokers do).
    """
    flexible = kp_class.flexible_version_q(version)
    decode = kp_class._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                                   data_class=kp_class[None])
    obj, pos = decode(memoryview(wire), 0)
    obj._header = None
    return obj, pos


def _sample(case: Case, rng: random.Random) -> dict[str, Any]:
    value = sample_message(case.spec, case.version, rng)
    value.pop(UNKNOWN_TAGS, None)
    return value


def _subset_equal(sent: Any, got: Any) -> bool:
    if isinstance(sent, dict):
        return all(k in got and _subset_equal(v, got[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(got, list) and len(sent) == len(got) and all(
            _subset_equal(a, b) for a, b in zip(sent, got, strict=True))
    if isinstance(sent, bytes | bytearray | memoryview) and isinstance(got, bytes | bytearray | memoryview):
        return bytes(sent) == bytes(got)
    return bool(sent == got)


# --- the tests ------------------------------------------------------------------------

def test_crosscheck_covers_at_least_the_known_api_version_pairs() -> None:
    """Guards against the parametrized tests below silently collecting nothing."""
    pairs = {(c.spec.api_key, c.version) for c in JSON_CASES}
    assert len(pairs) >= MIN_CROSSCHECKED_PAIRS, (
        f"only {len(pairs)} (api, version) pairs cross-checked against kafka-python; "
        f"kafka-python knows {len(KP_CLASSES)} message classes, we have {sorted(all_apis())}")
    missing = sorted(name for key, name in CORE_APIS.items() if key in all_apis()
                     and key not in {k for k, _ in pairs})
    assert not missing, f"core APIs not cross-checked against kafka-python: {missing}"
    # Both directions of every pair are exercised.
    kinds = {(c.spec.api_key, c.version, c.spec.kind) for c in JSON_CASES}
    assert all((k, v, "request") in kinds and (k, v, "response") in kinds for k, v in pairs)


@pytest.mark.parametrize("case", JSON_CASES, ids=_ids(JSON_CASES))
def test_schema_matches_kafkas_json_definition(case: Case) -> None:
    kp = case.kp_class
    assert kp.flexible_version_q(case.version) == (case.version in case.spec.flexible), \
        f"{case.id}: flexible versions differ (Kafka: {kp._flexible_versions})"
    compared = _check_schema(case.spec.fields, kp._struct, case.version, case.spec.name)
    _check_absent_defaults(case.spec.fields, kp._struct, case.version, case.spec.name)
    in_version = [f for f in case.spec.fields if _in_version(f, case.version)]
    assert compared >= len(in_version)


@pytest.mark.parametrize("case", JSON_CASES, ids=_ids(JSON_CASES))
def test_our_encoding_decodes_identically_in_kafka_python(case: Case) -> None:
    codec = case.codec
    rng = random.Random(f"ours->kp:{case.id}")
    for _ in range(SAMPLES_PER_CASE):
        value = _sample(case, rng)
        wire = bytes(codec.encode(value))
        obj, consumed = _kp_decode(case.kp_class, case.version, wire)
        assert consumed == len(wire), f"{case.id}: kafka-python read {consumed} of {len(wire)} bytes"
        _compare(case.spec.fields, case.kp_class._struct, case.version, codec.decode(wire), obj,
                 case.spec.name)
        assert bytes(obj.encode(version=case.version)) == wire, \
            f"{case.id}: kafka-python re-encodes our bytes differently"


@pytest.mark.parametrize("case", JSON_CASES, ids=_ids(JSON_CASES))
def test_kafka_python_encoding_decodes_identically_with_ours(case: Case) -> None:
    codec = case.codec
    rng = random.Random(f"kp->ours:{case.id}")
    for _ in range(SAMPLES_PER_CASE):
        value = _sample(case, rng)
        obj = _to_kp(case.spec.fields, case.kp_class._struct, case.version, value, case.kp_class)
        theirs = bytes(obj.encode(version=case.version))
        decoded = codec.decode(theirs)
        _compare(case.spec.fields, case.kp_class._struct, case.version, decoded, obj, case.spec.name)
        assert _subset_equal(value, decoded), f"{case.id}: a field changed through kafka-python"
        assert bytes(codec.encode(value)) == theirs, f"{case.id}: our bytes differ from kafka-python's"


@pytest.mark.parametrize("case", JSON_CASES, ids=_ids(JSON_CASES))
def test_default_message_encodes_like_kafka_python(case: Case) -> None:
    """A message of all defaults (what a client sends when it sets nothing) is byte-identical."""
    obj = case.kp_class(version=case.version)
    theirs = bytes(obj.encode(version=case.version))
    decoded = case.codec.decode(theirs)
    _compare(case.spec.fields, case.kp_class._struct, case.version, decoded, obj, case.spec.name)
    assert bytes(case.codec.encode(decoded)) == theirs


# Legacy structs that contradict Kafka's own JSON definition (checked by hand).
LEGACY_STRUCT_BUGS = {
    (35, "request", 0): "kafka-python's DescribeLogDirsRequest_v0 has partitions as int32; "
                        "Kafka's JSON (fields 0+) has []int32",
}


@pytest.mark.parametrize("case", LEGACY_CASES, ids=_ids(LEGACY_CASES))
def test_old_versions_roundtrip_through_kafka_python_legacy_structs(case: Case) -> None:
    bug = LEGACY_STRUCT_BUGS.get((case.spec.api_key, case.spec.kind, case.version))
    if bug:
        pytest.skip(bug)
    codec = case.codec
    rng = random.Random(f"legacy:{case.id}")
    for _ in range(SAMPLES_PER_CASE):
        wire = bytes(codec.encode(_sample(case, rng)))
        stream = io.BytesIO(wire)
        obj = case.kp_class.decode(stream)
        assert stream.tell() == len(wire), f"{case.id}: legacy struct read {stream.tell()} of {len(wire)}"
        assert bytes(obj.encode()) == wire, f"{case.id}: legacy struct re-encodes differently"


HEADER_CASES = [(c.spec.api_key, c.version) for c in JSON_CASES if c.spec.kind == "request"]


@pytest.mark.parametrize(("api_key", "version"), HEADER_CASES,
                         ids=[f"key{k}-v{v}" for k, v in HEADER_CASES])
@pytest.mark.parametrize("client_id", ["kafka-python-3", "", None, "clïent"])
def test_kafka_python_request_header_decodes_with_ours(api_key: int, version: int,
                                                        client_id: str | None) -> None:
    schema = all_apis()[api_key]
    flexible = schema.is_flexible(version)
    header = KpRequestHeader(request_api_key=api_key, request_api_version=version,
                             correlation_id=-123456, client_id=client_id)
    wire = bytes(header.encode(flexible=flexible))
    body = bytes(schema.request_codec(version).encode(sample_message(schema.request, version,
                                                                     random.Random(version))))
    ours, parsed_schema = decode_request_header(memoryview(wire + body))
    assert parsed_schema is schema
    assert (ours.api_key, ours.api_version, ours.correlation_id) == (api_key, version, -123456)
    assert ours.client_id == client_id
    assert ours.header_version == request_header_version(schema, version)
    assert ours.size == len(wire)
    assert not ours.unknown_tags

