"""Seeded random values for any message spec at any version, for round-trip tests."""

from __future__ import annotations

import random
import uuid
from typing import Any

from protocol.schema import FieldSpec, MessageSpec

_INT_BOUNDS = {"int8": 7, "int16": 15, "uint16": 16, "int32": 31, "uint32": 32, "int64": 63}


def sample_message(spec: MessageSpec, version: int, rng: random.Random) -> dict[str, Any]:
    return _struct(spec.fields, version, rng, depth=0)


def _struct(fields: list[FieldSpec], version: int, rng: random.Random, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in fields:
        if version in spec.versions:
            out[spec.name] = _value(spec, version, rng, depth)
    return out


def _value(spec: FieldSpec, version: int, rng: random.Random, depth: int) -> Any:
    if version in spec.nullable and rng.random() < 0.2:
        return None
    if spec.is_struct:
        return _struct(spec.fields, version, rng, depth + 1)
    if spec.is_struct_array:
        n = rng.randint(0, 3 if depth < 2 else 1)
        return [_struct(spec.fields, version, rng, depth + 1) for _ in range(n)]
    element = spec.element_type
    if element is not None:
        return [_scalar(element, rng) for _ in range(rng.randint(0, 4))]
    return _scalar(spec.type, rng)


def _scalar(ftype: str, rng: random.Random) -> Any:
    if ftype in _INT_BOUNDS:
        bits = _INT_BOUNDS[ftype]
        if ftype.startswith("u"):
            return rng.randint(0, (1 << bits) - 1)
        return rng.randint(-(1 << bits), (1 << bits) - 1)
    if ftype == "bool":
        return rng.random() < 0.5
    if ftype == "float64":
        return rng.uniform(-1e6, 1e6)
    if ftype == "string":
        return "".join(rng.choice("abcxyz-._é") for _ in range(rng.randint(0, 12)))
    if ftype in ("bytes", "records"):
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
    if ftype == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(ftype)
