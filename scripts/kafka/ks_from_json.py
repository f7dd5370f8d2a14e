"""Prototype: build our schema model from Apache Kafka's message JSON and diff it with protocol/schemas.

Run: ``PYTHONPATH=. python scripts/kafka/ks_from_json.py [kafka-clients.jar] [--emit DIR]``.  The jar
(default: the one scripts/kafka/fetch.sh resolved) carries ``common/message/*.json``; each request and
response is turned into a MessageSpec, compared field by field (name, type, versions, nullability, tag,
entity) with the hand-written one, and the differences are printed and counted by kind.  ``--emit``
also writes the generated specs as .ks files.  It changes nothing under protocol/.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from protocol.codec import default_value
from protocol.registry import all_apis
from protocol.schema import PRIMITIVES, FieldSpec, MessageSpec, VersionRange

# Kafka's entityType values that mean the same as our entity=; Kafka has no others but "unknown".
KAFKA_ENTITIES = {"topicName", "groupId", "transactionalId", "producerId", "brokerId"}
# Our entity= values Kafka's JSON has no word for (kept in a hand-written overlay if we generated).
OURS_ONLY_ENTITIES = {"topicId", "configResourceName", "brokerHost", "brokerPort", "none"}


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _range(text: str | None) -> VersionRange:
    return VersionRange.parse(text) if text else VersionRange(1, 0)


def _type(kafka_type: str, has_fields: bool) -> str:
    if kafka_type.startswith("[]"):
        return "[]" if kafka_type[2:] not in PRIMITIVES else kafka_type
    if kafka_type in PRIMITIVES:
        return kafka_type
    if has_fields:
        return "{}"
    raise ValueError(f"unknown type {kafka_type}")


def _field(raw: dict[str, Any], common: dict[str, list[dict[str, Any]]]) -> FieldSpec:
    element = raw["type"].removeprefix("[]")
    children = raw.get("fields") or common.get(element, [])
    spec = FieldSpec(snake(raw["name"]), _type(raw["type"], bool(children)), _range(raw.get("versions")),
                     _range(raw.get("nullableVersions")))
    if "tag" in raw:
        spec.tag = int(raw["tag"])
        spec.tagged_versions = _range(raw.get("taggedVersions") or raw.get("versions"))
    if "default" in raw and spec.type in PRIMITIVES:
        spec.default, spec.has_default = _default(spec.type, str(raw["default"])), True
    entity = raw.get("entityType")
    spec.entity = entity if entity in KAFKA_ENTITIES else None
    spec.fields = [_field(child, common) for child in children]
    return spec


def _default(ftype: str, text: str) -> object:
    if text == "null":
        return None
    if ftype == "bool":
        return text == "true"
    if ftype == "float64":
        return float(text)
    if ftype.startswith(("int", "uint")):
        return int(text, 0)
    return text


def message_spec(raw: dict[str, Any]) -> MessageSpec:
    common = {s["name"]: s["fields"] for s in raw.get("commonStructs", [])}
    return MessageSpec(raw["type"], raw["name"], int(raw["apiKey"]), _range(raw["validVersions"]),
                       _range(raw.get("flexibleVersions", "none")), [_field(f, common) for f in raw.get("fields", [])])


def load_json_specs(jar: Path) -> dict[tuple[int, str], MessageSpec]:
    found: dict[tuple[int, str], MessageSpec] = {}
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            if not (name.startswith("common/message/") and name.endswith(".json")):
                continue
            text = "\n".join(line for line in archive.read(name).decode().splitlines()
                             if not line.lstrip().startswith("//"))
            raw = json.loads(text)
            if raw.get("type") in ("request", "response") and "apiKey" in raw:
                found[(int(raw["apiKey"]), raw["type"])] = message_spec(raw)
    return found


def _versions(r: VersionRange, cap: int) -> set[int]:
    return {v for v in range(r.low, (r.high if r.high is not None else cap) + 1)}


def _diff_fields(ours: list[FieldSpec], theirs: list[FieldSpec], version: int, where: str,
                 out: list[tuple[str, str]]) -> None:
    mine = {f.name.replace("_", ""): f for f in ours if version in f.versions}
    kafka = {f.name.replace("_", ""): f for f in theirs if version in f.versions}
    for key in sorted(mine.keys() | kafka.keys()):
        a, b = mine.get(key), kafka.get(key)
        here = f"{where}.{(a or b).name}"  # type: ignore[union-attr]
        if a is None or b is None:
            out.append(("field only in " + ("Kafka" if a is None else "ours"), here))
            continue
        if a.type != b.type:
            out.append(("type", f"{here}: {a.type} vs {b.type}"))
        if (version in a.nullable) != (version in b.nullable):
            out.append(("nullability", here))
        tag_a = a.tag if version in a.tagged_versions else None
        tag_b = b.tag if version in b.tagged_versions else None
        if tag_a != tag_b:
            out.append(("tag", f"{here}: {tag_a} vs {tag_b}"))
        if a.type in PRIMITIVES and default_value(a, version) != default_value(b, version):
            out.append(("default", f"{here}: {default_value(a, version)!r} vs {default_value(b, version)!r}"))
        if b.entity and a.entity != b.entity:
            out.append(("entity Kafka names, ours lacks", f"{here}: {b.entity} vs {a.entity}"))
        elif a.entity and not b.entity:
            kind = "ours-only entity kind" if a.entity in OURS_ONLY_ENTITIES else "entity ours names, Kafka lacks"
            out.append((kind, f"{here}: {a.entity}"))
        _diff_fields(a.fields, b.fields, version, here, out)


def diff(json_specs: dict[tuple[int, str], MessageSpec]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    apis = all_apis()
    for key, schema in sorted(apis.items()):
        for ours in (schema.request, schema.response):
            theirs = json_specs.get((key, ours.kind))
            if theirs is None:
                out.append(("api missing from Kafka", ours.name))
                continue
            high = max(ours.versions.high or 0, theirs.versions.high or 0)
            mine, kafka = _versions(ours.versions, high), _versions(theirs.versions, high)
            if mine - kafka:
                out.append(("versions only ours", f"{ours.name} {sorted(mine - kafka)}"))
            if kafka - mine:
                out.append(("versions only Kafka", f"{ours.name} {sorted(kafka - mine)}"))
            for version in sorted(mine & kafka):
                if (version in ours.flexible) != (version in theirs.flexible):
                    out.append(("flexibility", f"{ours.name} v{version}"))
                # Entity differences repeat in every version; report them once, at the newest.
                found: list[tuple[str, str]] = []
                _diff_fields(ours.fields, theirs.fields, version, f"{ours.name} v{version}", found)
                newest = version == max(mine & kafka)
                out.extend(d for d in found if newest or not d[0].startswith(("entity", "ours-only")))
    client_apis = {k for k, _ in json_specs}
    for key in sorted(client_apis - set(apis)):
        out.append(("api only in Kafka", json_specs[(key, "request")].name))
    return out


def to_ks(spec: MessageSpec) -> str:
    """One message in our .ks format (the generator's output, for reading; never installed)."""
    def text(r: VersionRange) -> str:
        return "none" if r.low > (r.high if r.high is not None else r.low) else (
            f"{r.low}+" if r.high is None else f"{r.low}-{r.high}")

    lines = [f"{spec.kind} {spec.name} key={spec.api_key} versions={text(spec.versions)} "
             f"flexible={text(spec.flexible)}"]

    def emit(fields: list[FieldSpec], depth: int) -> None:
        for f in fields:
            attrs = [f"v={text(f.versions)}"] if f.versions != VersionRange(0, None) else []
            if f.nullable.low <= (f.nullable.high if f.nullable.high is not None else f.nullable.low):
                attrs.append(f"null={text(f.nullable)}")
            if f.tag is not None:
                attrs += [f"tag={f.tag}", f"tagged={text(f.tagged_versions)}"]
            if f.has_default:
                attrs.append(f"default={'null' if f.default is None else str(f.default).lower()}")
            if f.entity:
                attrs.append(f"entity={f.entity}")
            lines.append("  " * (depth + 1) + f"{f.name:<24} {f.type:<8} {' '.join(attrs)}".rstrip())
            emit(f.fields, depth + 1)

    emit(spec.fields, 0)
    return "\n".join(lines) + "\n"


def _default_jar() -> Path:
    lib = os.environ.get("REFERENCE_KAFKA_LIB") or subprocess.run(
        ["bash", str(Path(__file__).with_name("fetch.sh"))], check=True, capture_output=True, text=True).stdout.strip()
    return next(Path(lib).glob("kafka-clients-*.jar"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jar", nargs="?", type=Path, help="kafka-clients jar (default: scripts/kafka/fetch.sh's)")
    parser.add_argument("--emit", type=Path, help="also write the generated .ks files here")
    parser.add_argument("--quiet", action="store_true", help="print only the counts")
    args = parser.parse_args()
    jar = args.jar or _default_jar()
    specs = load_json_specs(jar)
    if args.emit:
        args.emit.mkdir(parents=True, exist_ok=True)
        for key in sorted({k for k, _ in specs}):
            req, resp = specs.get((key, "request")), specs.get((key, "response"))
            if req and resp:
                target = args.emit / f"{snake(req.name.removesuffix('Request'))}.ks"
                target.write_text(to_ks(req) + "\n" + to_ks(resp))
    found = diff(specs)
    if not args.quiet:
        for kind, where in found:
            print(f"{kind:<34} {where}")
    print(f"\n{jar.name}: {len(specs)} request/response specs; {len(found)} differences", file=sys.stderr)
    for kind, count in collections.Counter(k for k, _ in found).most_common():
        print(f"  {count:>5}  {kind}", file=sys.stderr)


if __name__ == "__main__":
    main()
