"""Schema-driven response bodies: every field of a version at its default, ready to fill in."""

from __future__ import annotations

from functools import lru_cache
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
    # Built per topic in answers to requests naming 100,000 topics: copy a cached template.
    return {name: _fresh(value) for name, value in _item_template(api_key, version, path).items()}


def _fresh(value: Any) -> Any:
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return value


@lru_cache(maxsize=1024)
def _item_template(api_key: int, version: int, path: tuple[str, ...]) -> dict[str, Any]:
    schema = api(api_key)
    assert schema is not None, api_key
    fields: list[FieldSpec] = schema.response.fields
    for name in path:
        spec = next(f for f in fields if f.name == name)
        fields = spec.fields
    return {f.name: default_value(f, version) for f in fields if version in f.versions}
