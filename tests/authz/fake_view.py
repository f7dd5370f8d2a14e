"""An AuthzView for policy tests: grants exactly what it is given and records what it was asked."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from auth.principal import KafkaPrincipal
from authz.model import AclOperation, ResourceType
from authz.request_policy import Action

ALICE = KafkaPrincipal("User", "alice")


class FakeView:
    """Grants exactly ``granted`` (or everything); ``asked`` lists every action the policy asked about."""

    def __init__(self, granted: Iterable[Action] = (), *, everything: bool = False,
                 principal: KafkaPrincipal = ALICE, topics: Mapping[uuid.UUID, str] | None = None) -> None:
        self.granted = set(granted)
        self.everything = everything
        self.principal = principal
        self.topics = dict(topics or {})
        self.asked: list[Action] = []

    def allowed(self, action: Action) -> bool:
        self.asked.append(action)
        return self.everything or action in self.granted

    def allowed_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        return self.everything or any(a.operation == operation and a.resource_type == resource_type
                                      for a in self.granted)

    def authorized_operations(self, resource_type: ResourceType, name: str, candidates: Iterable[AclOperation]) -> int:
        return sum(1 << op for op in candidates if self.allowed(Action(op, resource_type, name)))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.topics.get(topic_id)
