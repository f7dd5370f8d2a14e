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
from protocol.entities.ids import Entity, entity_paths, entity_values
from protocol.schema import MessageSpec

_RESOURCES: tuple[tuple[Entity, ResourceType], ...] = (
    ("groupId", ResourceType.GROUP), ("transactionalId", ResourceType.TRANSACTIONAL_ID))


def unallowed_id(spec: MessageSpec, version: int, relayed: dict[str, Any],
                 allowed: Container[tuple[ResourceType, str]],
                 not_checked: frozenset[Entity] = frozenset()) -> tuple[ResourceType, str] | None:
    """The first group or transactional id ``relayed`` names that is not in ``allowed``, if any.

    ``not_checked``: the entities Kafka's handler of this API does not authorize as such (its route says
    which; its policy says when it checks them).
    """
    for entity, resource_type in _checked(spec, version, not_checked):
        for value in entity_values(spec, version, relayed, entity):
            if (resource_type, value) not in allowed:
                return resource_type, value
    return None


# (kind, api key, version, not checked) → the entities the message names there and the guard checks: most
# messages name none (Fetch, Metadata, Produce's transactional id is its policy's), so most requests loop over
# nothing.  Bounded: the schemas' messages × versions × the routes' exemptions.
_plans: dict[tuple[str, int, int, frozenset[Entity]], tuple[tuple[Entity, ResourceType], ...]] = {}


def _checked(spec: MessageSpec, version: int,
             not_checked: frozenset[Entity]) -> tuple[tuple[Entity, ResourceType], ...]:
    key = (spec.kind, spec.api_key, version, not_checked)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = tuple((entity, resource_type) for entity, resource_type in _RESOURCES
                                   if entity not in not_checked and entity_paths(spec, version, entity))
    return plan
