"""What every connection shares when authorization is on: the authorizer, its store, the audit log.

Built once when the gateway is wired (gateway/stores/setup.py). The per-API policies and
admin handlers are not here: each API's route carries its own (gateway/session/routes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from auth.credentials import CredentialStore
from authz.authorizer import StandardAuthorizer
from authz.shadow import ShadowAcls
from gateway.admin.delegation_tokens import TokenSettings
from gateway.ops.audit import AuditLog
from gateway.stores.file_acls import AclStore
from gateway.stores.file_quotas import QuotaStore
from gateway.stores.file_tokens import TokenStore


@dataclass(slots=True)
class GatewayAuthorization:
    """What every connection shares when authorization is on."""

    authorizer: StandardAuthorizer
    store: AclStore
    audit: AuditLog
    # Topics only the gateway itself uses (the replicated security store's): no client may
    # touch or even see them, super users included; they hold derived credential keys.
    reserved_topics: frozenset[str] = frozenset()
    # What the locally answered admin APIs work on besides the ACL store.
    credentials: CredentialStore | None = None
    tokens: TokenStore | None = None
    quota_store: QuotaStore | None = None  # DescribeClientQuotas / AlterClientQuotas (gateway/admin/client_quotas.py)
    token_settings: TokenSettings = field(default_factory=TokenSettings)
    # A candidate ACL set every decision is also evaluated against, enforcing nothing (authz/shadow.py).
    shadow: ShadowAcls | None = None
