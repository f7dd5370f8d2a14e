"""The admin APIs ksgate answers itself, once authorized: the upstream never sees them.

Relayed, they would act as the gateway's own upstream principal (minting its tokens,
changing its ACLs or users). A handler returns the response body, or ``OffLoop`` with the
work that writes to a store (file fsyncs, PBKDF2, a round trip to the security topic): the
session runs that off the event loop and keeps the answer in its place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from auth.sasl.mechanism import wall_clock_ms
from gateway.admin.acls import create_acls, delete_acls, describe_acls
from gateway.admin.change_audit import DESCRIBE_CHANGE
from gateway.admin.client_quotas import INLINE_DESCRIBE_ENTITIES, alter_client_quotas, describe_client_quotas
from gateway.admin.delegation_tokens import (
    TokenRequestContext,
    authenticated_via,
    create_delegation_token,
    describe_delegation_token,
    expire_delegation_token,
    renew_delegation_token,
)
from gateway.admin.scram_credentials import alter_user_scram_credentials, describe_user_scram_credentials
from protocol.api_keys import ApiKey
from protocol.registry import api

if TYPE_CHECKING:
    from auth.credentials import CredentialStore
    from gateway.ops.audit import AuditLog
    from gateway.session.authz_view import GatewayAuthorization
    from gateway.session.request_context import RequestContext
    from gateway.stores.file_quotas import QuotaStore

Body = dict[str, Any]
log = logging.getLogger("ksgate.admin")


@dataclass(slots=True, frozen=True)
class OffLoop:
    """A store write to run off the event loop; its result is the response body."""

    work: Callable[[], Body]


LocalHandler = Callable[["GatewayAuthorization", "RequestContext", Body, int], "Body | OffLoop"]


def _token_context(shared: GatewayAuthorization, who: RequestContext) -> TokenRequestContext:
    return TokenRequestContext(principal=who.principal, token_authenticated=who.principal.token_authenticated,
                               authenticated_via=authenticated_via(who.listener.security_protocol),
                               now_ms=wall_clock_ms(), store=shared.tokens, settings=shared.token_settings)


def _audited(shared: GatewayAuthorization, who: RequestContext, key: ApiKey, body: Body, version: int,
             work: Callable[[], Body]) -> OffLoop:
    """``work``, then one audit event saying what it changed (docs/audit-log.md, admin changes)."""

    def run() -> Body:
        response = work()
        if shared.audit.enabled:
            record_change(shared.audit, who, key, version, body, response)
        return response

    return OffLoop(run)


def record_change(audit: AuditLog, who: RequestContext, key: ApiKey, version: int, request: Body,
                  response: Body) -> None:
    try:
        change = DESCRIBE_CHANGE[key](request, response)
    except (KeyError, ValueError, TypeError):  # a gateway bug: the change is made, the answer must go out
        log.exception("cannot describe the change of a %s request for the audit log", key.name)
        return
    schema = api(key)
    audit.admin_change(principal=str(who.principal), client_host=who.client_host, client_port=who.client_port,
                       listener=who.listener.name, api_key=int(key), api_name=schema.name if schema else key.name,
                       api_version=version, change=change)


def _create_acls(shared: GatewayAuthorization, who: RequestContext, body: Body, version: int) -> OffLoop:
    return _audited(shared, who, ApiKey.CREATE_ACLS, body, version, partial(create_acls, shared.store, body, version))


def _delete_acls(shared: GatewayAuthorization, who: RequestContext, body: Body, version: int) -> OffLoop:
    return _audited(shared, who, ApiKey.DELETE_ACLS, body, version, partial(delete_acls, shared.store, body, version))


def _describe_acls(shared: GatewayAuthorization, _who: RequestContext, body: Body, version: int) -> Body:
    return describe_acls(shared.authorizer, body, version)


def _create_token(shared: GatewayAuthorization, who: RequestContext, body: Body, version: int) -> OffLoop:
    return _audited(shared, who, ApiKey.CREATE_DELEGATION_TOKEN, body, version,
                    partial(create_delegation_token, _token_context(shared, who), body, version))


def _renew_token(shared: GatewayAuthorization, who: RequestContext, body: Body, version: int) -> OffLoop:
    return _audited(shared, who, ApiKey.RENEW_DELEGATION_TOKEN, body, version,
                    partial(renew_delegation_token, _token_context(shared, who), body, version))


def _expire_token(shared: GatewayAuthorization, who: RequestContext, body: Body, version: int) -> OffLoop:
    return _audited(shared, who, ApiKey.EXPIRE_DELEGATION_TOKEN, body, version,
                    partial(expire_delegation_token, _token_context(shared, who), body, version))


def _describe_tokens(shared: GatewayAuthorization, who: RequestContext, body: Body, version: int) -> Body:
    return describe_delegation_token(_token_context(shared, who), body, version)


def _describe_scram(shared: GatewayAuthorization, _who: RequestContext, body: Body, version: int) -> Body:
    assert shared.credentials is not None  # offered only with a credential store (local_handlers)
    return describe_user_scram_credentials(shared.credentials, body, version)


def _alter_scram(shared: GatewayAuthorization, who: RequestContext, body: Body, version: int) -> OffLoop:
    assert shared.credentials is not None
    return _audited(shared, who, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, version,
                    partial(alter_user_scram_credentials, shared.credentials, body, version))


def _describe_quotas(shared: GatewayAuthorization, _who: RequestContext, body: Body, version: int) -> Body | OffLoop:
    assert shared.quota_store is not None  # offered only with a quota store (local_handlers)
    quotas = shared.quota_store.quotas()  # a snapshot: a store replaces its state whole, never edits it
    if len(quotas) <= INLINE_DESCRIBE_ENTITIES:
        return describe_client_quotas(quotas, body, version)
    # A scan of many entities (7 ms at 10,000) would stall every connection on the loop: a worker does it.
    return OffLoop(partial(describe_client_quotas, quotas, body, version))


def _alter_quotas(shared: GatewayAuthorization, who: RequestContext, body: Body, version: int) -> OffLoop:
    assert shared.quota_store is not None
    return _audited(shared, who, ApiKey.ALTER_CLIENT_QUOTAS, body, version,
                    partial(alter_client_quotas, shared.quota_store, body, version))


# Every API ksgate answers itself (the route table, gateway/session/routes.py, lists them per API).
LOCAL_HANDLERS: dict[int, LocalHandler] = {
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.DESCRIBE_ACLS: _describe_acls,
    ApiKey.CREATE_DELEGATION_TOKEN: _create_token,
    ApiKey.RENEW_DELEGATION_TOKEN: _renew_token,
    ApiKey.EXPIRE_DELEGATION_TOKEN: _expire_token,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: _describe_tokens,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_scram,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_scram,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _describe_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_quotas,
}
_NEED_CREDENTIALS = frozenset({ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS})
_NEED_QUOTA_STORE = frozenset({ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS})


def local_handlers(credentials: CredentialStore | None, quotas: QuotaStore | None = None) -> dict[int, LocalHandler]:
    """The handlers this gateway offers: the ACL and delegation-token APIs always (tokens answer
    DELEGATION_TOKEN_AUTH_DISABLED without delegation.token.secret.key); the KIP-554 APIs only
    with a credential store; the client-quota APIs only with a quota store (never relayed: on the
    broker they would read and set the quotas of the gateway's own principal)."""
    return {key: handler for key, handler in LOCAL_HANDLERS.items()
            if (credentials is not None or key not in _NEED_CREDENTIALS)
            and (quotas is not None or key not in _NEED_QUOTA_STORE)}
