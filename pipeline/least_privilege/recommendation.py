"""What ``ksgate audit recommend`` learned: the recommended grants and the evidence around them.

Plain values shared by the Spark job (least_privilege.recommend) and its writer (least_privilege.output).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from authz.model import AclBinding
from pipeline.least_privilege.acl_diff import AclDiff


@dataclass(slots=True, frozen=True)
class Grant:
    """A recommended ALLOW binding and the evidence for it."""

    binding: AclBinding
    resources: int
    events: int
    first_seen: str
    last_seen: str


@dataclass(slots=True, frozen=True)
class RefusedRequest:
    """An action that was DENIED in the window: requested, not granted (never recommended)."""

    principal: str
    resource_type: str
    resource_name: str
    operation: str
    events: int
    first_seen: str
    last_seen: str
    rules: tuple[str, ...]
    client_hosts: tuple[str, ...]


@dataclass(slots=True, frozen=True)
class TypeWideCheck:
    """ALLOWED ``resource_name == "*"`` checks (authorizeByResourceType) and whether a grant satisfies them."""

    principal: str
    resource_type: str
    operation: str
    events: int
    covered: bool
    rules: tuple[str, ...]


@dataclass(slots=True, frozen=True)
class SuperUserTraffic:
    """What a super user did (decided by ``SuperUser``, so never part of a recommendation)."""

    principal: str
    events: int
    operations: tuple[str, ...]
    resource_types: tuple[str, ...]
    resources: int
    first_seen: str
    last_seen: str


@dataclass(slots=True)
class Recommendation:
    grants: list[Grant]
    refused: list[RefusedRequest]
    type_wide: list[TypeWideCheck]
    super_users: list[SuperUserTraffic]
    totals: dict[str, int]
    window: tuple[str | None, str | None]
    invalid: list[str] = field(default_factory=list)
    diff: AclDiff | None = None
