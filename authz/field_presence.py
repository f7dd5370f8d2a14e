"""Whether a request or response field exists (or may be null) at a version, read from the schemas.

Policies ask this instead of restating the version Kafka added a field in as a literal.
"""

from __future__ import annotations

from functools import lru_cache

from protocol.registry import api
from protocol.schema import FieldSpec


def request_has(api_key: int, version: int, *path: str) -> bool:
    """Whether the request of ``api_key`` at ``version`` has the field at ``path`` (struct names, then the field)."""
    return _field(api_key, "request", version, path) is not None


def response_has(api_key: int, version: int, *path: str) -> bool:
    return _field(api_key, "response", version, path) is not None


def response_nullable(api_key: int, version: int, *path: str) -> bool:
    """Whether the response field at ``path`` exists and may be null at ``version``."""
    found = _field(api_key, "response", version, path)
    return found is not None and version in found.nullable


@lru_cache(maxsize=512)  # (api key, kind, version, path): the policies ask a few dozen
def _field(api_key: int, kind: str, version: int, path: tuple[str, ...]) -> FieldSpec | None:
    schema = api(api_key)
    if schema is None:
        raise KeyError(f"no schema for api key {api_key}")  # a typo in a policy, found by its tests
    fields = schema.request.fields if kind == "request" else schema.response.fields
    found: FieldSpec | None = None
    for name in path:
        found = next((f for f in fields if f.name == name), None)
        if found is None:
            raise KeyError(f"{schema.name} {kind} has no field {'.'.join(path)}")  # a typo, not a version question
        if version not in found.versions:
            return None
        fields = found.fields
    return found
