"""Every API's authorization policy, assembled from the per-area modules."""

from __future__ import annotations

from authz.model import display_name, parse_operation, parse_resource_type
from authz.policies import admin, data, groups, produce, rules
from authz.request_policy import ApiPolicy
from protocol.api_keys import ApiKey

# rules: the APIs authorized by one declarative row each (one ACL per item); the others are code.
_MODULES = (admin, data, groups, rules)


def all_policies() -> dict[int, ApiPolicy]:
    policies: dict[int, ApiPolicy] = {ApiKey.PRODUCE: produce.authorize_produce}
    for module in _MODULES:
        overlap = set(policies) & set(module.POLICIES)
        if overlap:
            raise AssertionError(f"api keys with two policies: {sorted(overlap)}")
        policies.update(module.POLICIES)
    return policies


def table() -> list[tuple[int, str, str, str]]:
    """Kafka's 'Operations and Resources on Protocols' table, as ksgate enforces it, in Kafka's names
    (``Describe``, ``TransactionalId``); "" for an API that needs no ACL."""
    rows: list[tuple[int, str, str, str]] = [
        (ApiKey.PRODUCE, "WRITE", "TRANSACTIONAL_ID", "the transactional id, when batches are transactional"),
        (ApiKey.PRODUCE, "WRITE", "TOPIC", "each topic"),
    ]
    for module in _MODULES:
        rows.extend(module.TABLE)
    return [(api_key, _operation(operation), _resource(resource), note) for api_key, operation, resource, note in rows]


def _operation(text: str) -> str:
    return text and display_name(parse_operation(text))


def _resource(text: str) -> str:
    return text and display_name(parse_resource_type(text))

