"""Hypothesis strategies for message bodies described by our own schemas (bounded sizes).

Arrays hold at most three items (one below the second nesting level) and strings and byte
fields stay short, so that a sweep over every API and version runs in seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st

from protocol.schema import FieldSpec, MessageSpec

_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_UINT_BITS = {"uint16": 16, "uint32": 32}


Overrides = Mapping[str, st.SearchStrategy[Any]]


def message_bodies(spec: MessageSpec, version: int, overrides: Overrides | None = None,
                   ) -> st.SearchStrategy[dict[str, Any]]:
    """Random bodies of ``spec`` at ``version``, as our codec's dicts.

    ``overrides`` narrows the values of scalar fields by name (e.g. to the error codes a
    second implementation can represent).
    """
    return _struct(spec.fields, version, overrides or {}, depth=0)


def _struct(fields: list[FieldSpec], version: int, overrides: Overrides, depth: int,
            ) -> st.SearchStrategy[dict[str, Any]]:
    present = {f.name: _field(f, version, overrides, depth) for f in fields if version in f.versions}
    return st.fixed_dictionaries(present)


def _field(spec: FieldSpec, version: int, overrides: Overrides, depth: int) -> st.SearchStrategy[Any]:
    base = _non_null(spec, version, overrides, depth)
    return st.none() | base if version in spec.nullable else base


def _non_null(spec: FieldSpec, version: int, overrides: Overrides, depth: int) -> st.SearchStrategy[Any]:
    if spec.is_struct:
        return _struct(spec.fields, version, overrides, depth + 1)
    if spec.is_struct_array:
        return st.lists(_struct(spec.fields, version, overrides, depth + 1), max_size=3 if depth < 2 else 1)
    element = spec.element_type
    if element is not None:
        return st.lists(scalars(element), max_size=4)
    if spec.name in overrides:
        return overrides[spec.name]
    return scalars(spec.type)


def scalars(ftype: str) -> st.SearchStrategy[Any]:
    """Any value of one of our primitive types."""
    if ftype in _INT_BITS:
        half = 1 << (_INT_BITS[ftype] - 1)
        return st.integers(-half, half - 1)
    if ftype in _UINT_BITS:
        return st.integers(0, (1 << _UINT_BITS[ftype]) - 1)
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False, allow_infinity=False)
    if ftype == "string":
        return st.text(max_size=12)
    if ftype in ("bytes", "records"):
        return st.binary(max_size=40)
    if ftype == "uuid":
        return st.uuids(allow_nil=True)
    raise AssertionError(f"no strategy for {ftype}")
