"""A request body for any version from one template: the schema's defaults, overlaid with the template.

Cases are written once, against the newest version's field names; a field an older version lacks is
simply not encoded, and a field the template leaves out takes Kafka's default for that version.
"""

from __future__ import annotations

from typing import Any

from protocol.codec import default_value
from protocol.registry import api
from protocol.schema import FieldSpec


class NotExpressible(ValueError):
    """The template needs a null where this version has no null: the case does not exist at this version."""


def request_body(api_key: int, version: int, template: dict[str, Any]) -> dict[str, Any]:
    schema = api(api_key)
    if schema is None:
        raise KeyError(f"no schema for api key {api_key}")
    return _struct(schema.request.fields, version, template)


def _struct(fields: list[FieldSpec], version: int, template: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in fields:
        if version not in spec.versions:
            continue
        if spec.name not in template:
            out[spec.name] = _default(spec, version)
            continue
        value = template[spec.name]
        if value is None:
            if version not in spec.nullable:
                raise NotExpressible(f"{spec.name} cannot be null at v{version}")
            out[spec.name] = None
        elif spec.is_struct_array:
            out[spec.name] = [_struct(spec.fields, version, item) for item in value]
        elif spec.is_struct:
            out[spec.name] = _struct(spec.fields, version, value)
        else:
            out[spec.name] = value
    return out


def _default(spec: FieldSpec, version: int) -> Any:
    if spec.is_struct:
        return _struct(spec.fields, version, {})
    return default_value(spec, version)
