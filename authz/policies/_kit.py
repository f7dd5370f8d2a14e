"""What the policy modules share: Kafka's sentinel values and topic sets, the operations of the
*_authorized_operations bit fields, and the small builders of error entries and gateway answers."""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable
from typing import Any, TypeVar

from authz.model import AclOperation, ResourceType
from authz.request_policy import CLUSTER_NAME, Action, Answer, AuthzView, Body
from authz.response_defaults import default_item, default_response

Op = AclOperation

# The schema default of every *_authorized_operations field: the client did not ask (AUTHORIZED_OPERATIONS_OMITTED).
NOT_REQUESTED = -2147483648
ZERO_UUID = uuid.UUID(int=0)
# Topic.isInternal.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

# AclEntry.supportedOperations: the candidates of the *_authorized_operations bit fields, per resource type.
TOPIC_OPERATIONS = (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER, Op.DESCRIBE_CONFIGS,
                    Op.ALTER_CONFIGS)
GROUP_OPERATIONS = (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)
CLUSTER_OPERATIONS = (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE,
                      Op.ALTER, Op.DESCRIBE)

H = TypeVar("H", bound=Hashable)


def cluster_allowed(view: AuthzView, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
    """``operation`` on the cluster; ``log_if_denied=False`` where Kafka uses it as a shortcut or probe."""
    return view.allowed(Action(operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied))


class OncePerName:
    """One operation on one resource type, asked once per name per request (as Kafka's filterByAuthorized does);
    ``log_if_denied=False`` for Kafka's implicit checks (filters and probes), whose denials are not audited."""

    __slots__ = ("_log_if_denied", "_operation", "_seen", "_type", "_view")

    def __init__(self, view: AuthzView, operation: AclOperation, resource_type: ResourceType = ResourceType.TOPIC,
                 *, log_if_denied: bool = True) -> None:
        self._view, self._operation, self._type = view, operation, resource_type
        self._log_if_denied = log_if_denied
        self._seen: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        if name not in self._seen:
            self._seen[name] = self._view.allowed(Action(self._operation, self._type, name,
                                                         log_if_denied=self._log_if_denied))
        return self._seen[name]


def item(api_key: int, version: int, path: tuple[str, ...], **fields: Any) -> Body:
    """An element of the response array at ``path``, at its defaults, with ``fields`` set (those the version
    does not have are skipped, so one call serves every version)."""
    entry = default_item(api_key, version, *path)
    entry.update((name, value) for name, value in fields.items() if name in entry)
    return entry


def answer(api_key: int, version: int, **fields: Any) -> Answer:
    """The gateway's own response of ``version`` with ``fields`` set (those the version lacks are skipped)."""
    response = default_response(api_key, version)
    response.update((name, value) for name, value in fields.items() if name in response)
    return Answer(response)


def distinct(names: Iterable[H]) -> list[H]:
    """``names`` without repeats, in first-seen order (Kafka's handlers answer a repeated name once)."""
    return list(dict.fromkeys(names))
