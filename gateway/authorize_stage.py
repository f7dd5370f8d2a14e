"""The authorize stage: run the API's policy for the connection's principal.

APIs without a policy are refused (fail closed).  The ACL admin APIs, once authorized,
are answered from the gateway's own store instead of being relayed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from auth.credentials import CredentialStore
from authz.request_policy import Refuse, Verdict
from gateway.acl_admin import create_acls, delete_acls, describe_acls
from gateway.authorization import ConnectionAuthzView, GatewayAuthorization
from gateway.scram_admin import alter_user_scram_credentials, describe_user_scram_credentials
from protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from gateway.connection import ClientConnection

Body = dict[str, Any]
LocalHandler = Callable[[GatewayAuthorization, Body, int], Body]


def local_handlers(credentials: CredentialStore | None) -> dict[int, LocalHandler]:
    """The APIs ksgate answers itself (the upstream never sees them), once authorized.

    The ACL APIs always; the KIP-554 credential APIs when ksgate has a credential store.
    """
    handlers: dict[int, LocalHandler] = {
        ApiKey.CREATE_ACLS: lambda shared, body, version: create_acls(shared.store, body, version),
        ApiKey.DELETE_ACLS: lambda shared, body, version: delete_acls(shared.store, body, version),
        ApiKey.DESCRIBE_ACLS: lambda shared, body, version: describe_acls(shared.authorizer, body, version),
    }
    if credentials is not None:
        handlers[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] = \
            lambda _shared, body, version: describe_user_scram_credentials(credentials, body, version)
        handlers[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] = \
            lambda _shared, body, version: alter_user_scram_credentials(credentials, body, version)
    return handlers


def authorize(conn: ClientConnection, shared: GatewayAuthorization, key: int, version: int, body: Body) -> Verdict:
    policy = shared.policies.get(key)
    if policy is None:
        return Refuse(f"no authorization policy for api key {key}")
    assert conn.principal is not None
    view = ConnectionAuthzView(shared, conn.principal, conn.client_host, conn.client_port, conn.listener.name,
                               key, version, conn.ctx.cluster.topic_names)
    return policy(body, version, view)
