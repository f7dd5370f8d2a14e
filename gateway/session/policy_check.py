"""The authorize stage: run the API's policy for the connection's principal.

APIs without a policy are refused (fail closed).  The ACL admin APIs, once authorized,
are answered from the gateway's own store instead of being relayed.
"""

from __future__ import annotations

from asyncio import to_thread
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from auth.credentials import CredentialStore
from auth.sasl.mechanism import wall_clock_ms
from authz.policies import all_policies
from authz.policies.data import is_follower_fetch
from authz.request_policy import Refuse, Relay, Rewrite, Verdict
from authz.topic_guard import TopicGuard, UnrestrictedView
from gateway.admin.acls import create_acls, delete_acls, describe_acls
from gateway.admin.delegation_tokens import (
    TokenRequestContext,
    TokenSettings,
    authenticated_via,
    create_delegation_token,
    describe_delegation_token,
    expire_delegation_token,
    renew_delegation_token,
)
from gateway.admin.scram_credentials import alter_user_scram_credentials, describe_user_scram_credentials
from gateway.session.authz_view import ConnectionAuthzView, GatewayAuthorization
from gateway.stores.file_tokens import TokenStore
from protocol.api_keys import ApiKey
from protocol.registry import api

if TYPE_CHECKING:
    from gateway.transport.client_connection import ClientConnection

Body = dict[str, Any]
# A response body, or an awaitable of one for the APIs that write to a store: those run in a
# worker thread (file fsyncs, PBKDF2, a round trip to the security topic), never on the loop.
LocalHandler = Callable[[GatewayAuthorization, "ClientConnection", Body, int], Body | Awaitable[Body]]


def local_handlers(credentials: CredentialStore | None, tokens: TokenStore | None,
                   token_settings: TokenSettings) -> dict[int, LocalHandler]:
    """The APIs ksgate answers itself (the upstream never sees them), once authorized.

    The ACL and delegation-token APIs always (tokens answer DELEGATION_TOKEN_AUTH_DISABLED
    without delegation.token.secret.key); the KIP-554 APIs when ksgate has a credential store.
    """
    def token_context(conn: ClientConnection) -> TokenRequestContext:
        assert conn.principal is not None
        return TokenRequestContext(principal=conn.principal, token_authenticated=conn.principal.token_authenticated,
                                   authenticated_via=authenticated_via(conn.listener.security_protocol),
                                   now_ms=wall_clock_ms(), store=tokens, settings=token_settings)

    handlers: dict[int, LocalHandler] = {
        ApiKey.CREATE_ACLS:
            lambda shared, _conn, body, version: to_thread(create_acls, shared.store, body, version),
        ApiKey.DELETE_ACLS:
            lambda shared, _conn, body, version: to_thread(delete_acls, shared.store, body, version),
        ApiKey.DESCRIBE_ACLS: lambda shared, _conn, body, version: describe_acls(shared.authorizer, body, version),
        ApiKey.CREATE_DELEGATION_TOKEN:
            lambda _shared, conn, body, version: to_thread(create_delegation_token, token_context(conn), body,
                                                           version),
        ApiKey.RENEW_DELEGATION_TOKEN:
            lambda _shared, conn, body, version: to_thread(renew_delegation_token, token_context(conn), body,
                                                           version),
        ApiKey.EXPIRE_DELEGATION_TOKEN:
            lambda _shared, conn, body, version: to_thread(expire_delegation_token, token_context(conn), body,
                                                           version),
        ApiKey.DESCRIBE_DELEGATION_TOKEN:
            lambda _shared, conn, body, version: describe_delegation_token(token_context(conn), body, version),
    }
    if credentials is not None:
        handlers[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] = \
            lambda _shared, _conn, body, version: describe_user_scram_credentials(credentials, body, version)
        handlers[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] = \
            lambda _shared, _conn, body, version: to_thread(alter_user_scram_credentials, credentials, body,
                                                            version)
    return handlers


def authorize(conn: ClientConnection, shared: GatewayAuthorization, key: int, version: int, body: Body) -> Verdict:
    """The policy's verdict, inside the topic guard that no policy can skip (authz/topic_guard.py)."""
    policy = shared.policies.get(key)
    schema = api(key)
    if policy is None or schema is None:
        return Refuse(f"no authorization policy for api key {key}")
    if key == ApiKey.FETCH and is_follower_fetch(body, version):
        return Refuse("a follower (replica) Fetch: brokers never replicate through the gateway")
    assert conn.principal is not None
    guard = TopicGuard(key, version, schema.request, schema.response, shared.reserved_topics,
                       conn.ctx.cluster.topic_names)
    findings = guard.inspect(body)
    view = ConnectionAuthzView(shared, conn.principal, conn.client_host, conn.client_port, conn.listener.name,
                               key, version, conn.ctx.cluster.topic_names, findings, guard.illegal_denied)
    try:
        verdict = policy(body, version, view)
    finally:
        view.flush_audit()
    return guard.seal(_flushing_hook(verdict, view), findings)


def check_topics(conn: ClientConnection, key: int, version: int, body: Body) -> Verdict:
    """Without an authorizer: the follower refusal and Kafka's topic-name rules, nothing else.

    A request naming an illegal topic runs its API's policy with a view that allows every
    legal action, so the illegal names get the API's own per-item errors.
    """
    schema = api(key)
    if schema is None:
        return Refuse(f"api key {key} has no schema")
    if key == ApiKey.FETCH and is_follower_fetch(body, version):
        return Refuse("a follower (replica) Fetch: brokers never replicate through the gateway")
    guard = TopicGuard(key, version, schema.request, schema.response, frozenset(), conn.ctx.cluster.topic_names)
    findings = guard.inspect(body)
    if not findings.suspicious:
        return _RELAY
    policy = all_policies().get(key)
    if policy is None:
        return Refuse(f"api key {key} v{version} names an illegal topic")
    assert conn.principal is not None
    view = UnrestrictedView(conn.principal, findings.illegal, guard.illegal_denied, conn.ctx.cluster.topic_names)
    return guard.seal(policy(body, version, view), findings)


_RELAY = Relay()


def _flushing_hook(verdict: Verdict, view: ConnectionAuthzView) -> Verdict:
    """A response hook that asks more questions (e.g. all-topics Metadata) writes its audit events once, after."""
    if not isinstance(verdict, Relay | Rewrite) or verdict.on_response is None:
        return verdict
    hook = verdict.on_response

    def audited(response: Body) -> Body:
        try:
            return hook(response)
        finally:
            view.flush_audit()

    return replace(verdict, on_response=audited)
