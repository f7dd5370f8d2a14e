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

from auth.principal import KafkaPrincipal
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
    from gateway.authorization import GatewayAuthorization
    from gateway.ops.audit import AuditLog
    from gateway.stores.file_quotas import QuotaStore

Body = dict[str, Any]
log = logging.getLogger("ksgate.admin")


@dataclass(slots=True, frozen=True)
class OffLoop:
    """A store write to run off the event loop; its result is the response body."""

    work: Callable[[], Body]


@dataclass(slots=True, frozen=True)
class AdminRequest:
    """Who asks an admin API, and when: all a handler reads of the connection (it may run off the loop)."""

    principal: KafkaPrincipal
    client_host: str
    client_port: int
    listener: str
    security_protocol: str  # the listener's: how a delegation token's requester authenticated
    now_ms: int  # wall-clock time the request arrived (token expiry and renewal)


LocalHandler = Callable[["GatewayAuthorization", AdminRequest, Body, int], "Body | OffLoop"]


def _token_context(authorization: GatewayAuthorization, requester: AdminRequest) -> TokenRequestContext:
    principal = requester.principal
    return TokenRequestContext(principal=principal, token_authenticated=principal.token_authenticated,
                               authenticated_via=authenticated_via(requester.security_protocol),
                               now_ms=requester.now_ms, store=authorization.tokens,
                               settings=authorization.token_settings)


def _audited(authorization: GatewayAuthorization, requester: AdminRequest, key: ApiKey, body: Body, version: int,
             work: Callable[[], Body]) -> OffLoop:
    """``work``, then one audit event saying what it changed (docs/audit-log.md, admin changes)."""

    def run() -> Body:
        response = work()
        if authorization.audit.enabled:
            record_change(authorization.audit, requester, key, version, body, response)
        return response

    return OffLoop(run)


def record_change(audit: AuditLog, requester: AdminRequest, key: ApiKey, version: int, request: Body,
                  response: Body) -> None:
    try:
        change = DESCRIBE_CHANGE[key](request, response)
    except (KeyError, ValueError, TypeError):  # a gateway bug: the change is made, the answer must go out
        log.exception("cannot describe the change of a %s request for the audit log", key.name)
        return
    schema = api(key)
    audit.admin_change(principal=str(requester.principal), client_host=requester.client_host,
                       client_port=requester.client_port,
                       listener=requester.listener, api_key=int(key), api_name=schema.name if schema else key.name,
                       api_version=version, change=change)


def _create_acls(authorization: GatewayAuthorization, requester: AdminRequest, body: Body, version: int) -> OffLoop:
    return _audited(authorization, requester, ApiKey.CREATE_ACLS, body, version,
                    partial(create_acls, authorization.store, body, version))


def _delete_acls(authorization: GatewayAuthorization, requester: AdminRequest, body: Body, version: int) -> OffLoop:
    return _audited(authorization, requester, ApiKey.DELETE_ACLS, body, version,
                    partial(delete_acls, authorization.store, body, version))


def _describe_acls(authorization: GatewayAuthorization, _requester: AdminRequest, body: Body, version: int) -> Body:
    return describe_acls(authorization.authorizer, body, version)


def _create_token(authorization: GatewayAuthorization, requester: AdminRequest, body: Body, version: int) -> OffLoop:
    return _audited(authorization, requester, ApiKey.CREATE_DELEGATION_TOKEN, body, version,
                    partial(create_delegation_token, _token_context(authorization, requester), body, version))


def _renew_token(authorization: GatewayAuthorization, requester: AdminRequest, body: Body, version: int) -> OffLoop:
    return _audited(authorization, requester, ApiKey.RENEW_DELEGATION_TOKEN, body, version,
                    partial(renew_delegation_token, _token_context(authorization, requester), body, version))


def _expire_token(authorization: GatewayAuthorization, requester: AdminRequest, body: Body, version: int) -> OffLoop:
    return _audited(authorization, requester, ApiKey.EXPIRE_DELEGATION_TOKEN, body, version,
                    partial(expire_delegation_token, _token_context(authorization, requester), body, version))


def _describe_tokens(authorization: GatewayAuthorization, requester: AdminRequest, body: Body, version: int) -> Body:
    return describe_delegation_token(_token_context(authorization, requester), body, version)


def _describe_scram(authorization: GatewayAuthorization, _requester: AdminRequest, body: Body, version: int) -> Body:
    assert authorization.credentials is not None  # offered only with a credential store (local_handlers)
    return describe_user_scram_credentials(authorization.credentials, body, version)


def _alter_scram(authorization: GatewayAuthorization, requester: AdminRequest, body: Body, version: int) -> OffLoop:
    assert authorization.credentials is not None
    return _audited(authorization, requester, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body, version,
                    partial(alter_user_scram_credentials, authorization.credentials, body, version))


def _describe_quotas(authorization: GatewayAuthorization, _requester: AdminRequest, body: Body,
                     version: int) -> Body | OffLoop:
    assert authorization.quota_store is not None  # offered only with a quota store (local_handlers)
    quotas = authorization.quota_store.quotas()  # a snapshot: the store replaces its state whole
    if len(quotas) <= INLINE_DESCRIBE_ENTITIES:
        return describe_client_quotas(quotas, body, version)
    # A scan of many entities (7 ms at 10,000) would stall every connection on the loop: a worker does it.
    return OffLoop(partial(describe_client_quotas, quotas, body, version))


def _alter_quotas(authorization: GatewayAuthorization, requester: AdminRequest, body: Body, version: int) -> OffLoop:
    assert authorization.quota_store is not None
    return _audited(authorization, requester, ApiKey.ALTER_CLIENT_QUOTAS, body, version,
                    partial(alter_client_quotas, authorization.quota_store, body, version))


# Every API ksgate answers itself (each is a LOCAL route: gateway/session/routes.py).
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
