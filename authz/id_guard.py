"""Every group id and transactional id a relayed request names was allowed by its policy.

The topic guard finds topics through the schema annotations; this guard does the same for the
ids of groups and transactions (``entity=groupId`` / ``transactionalId``). A policy that missed
one (a field a new schema version adds, say) would relay an id nobody authorized: the request
is refused instead, fail closed, whatever the policy said.

Where Kafka itself does not check an id the request carries, the guard does not either:
a Produce's transactional id is checked only when its batches are transactional, and a request
authorized as a broker's (CLUSTER_ACTION, e.g. AddPartitionsToTxn v4+) names ids on others' behalf.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from authz.model import ResourceType
from protocol.api_keys import ApiKey
from protocol.entities.ids import Entity, entity_values
from protocol.schema import MessageSpec

_RESOURCES: tuple[tuple[Entity, ResourceType], ...] = (
    ("groupId", ResourceType.GROUP), ("transactionalId", ResourceType.TRANSACTIONAL_ID))
# (api key, entity): ids Kafka's handler does not authorize as such (its policy says when it checks them).
_NOT_CHECKED_BY_KAFKA = frozenset({(ApiKey.PRODUCE, "transactionalId")})


def unallowed_id(api_key: int, spec: MessageSpec, version: int, relayed: dict[str, Any],
                 allowed: Container[tuple[ResourceType, str]]) -> tuple[ResourceType, str] | None:
    """The first group or transactional id ``relayed`` names that is not in ``allowed``, if any."""
    for entity, resource_type in _RESOURCES:
        if (api_key, entity) in _NOT_CHECKED_BY_KAFKA:
            continue
        for value in entity_values(spec, version, relayed, entity):
            if (resource_type, value) not in allowed:
                return resource_type, value
    return None
