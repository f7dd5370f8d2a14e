"""Schema-driven response bodies: every field of a version at its default, ready to fill in."""

from __future__ import annotations

from typing import Any

from protocol.codec import default_value
from protocol.registry import api
from protocol.schema import FieldSpec


def default_response(api_key: int, version: int) -> dict[str, Any]:
    """A response body with all of ``version``'s top-level fields at their defaults."""
    schema = api(api_key)
    assert schema is not None, api_key
    return {f.name: default_value(f, version) for f in schema.response.fields if version in f.versions}


def default_item(api_key: int, version: int, *path: str) -> dict[str, Any]:
    """A default element of the struct array at ``path`` in the response (e.g. "responses", "partitions")."""
    schema = api(api_key)
    assert schema is not None, api_key
    fields: list[FieldSpec] = schema.response.fields
    for name in path:
        spec = next(f for f in fields if f.name == name)
        fields = spec.fields
    return {f.name: default_value(f, version) for f in fields if version in f.versions}
