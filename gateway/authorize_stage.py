"""The authorize stage: run the API's policy for the connection's principal.

APIs without a policy are refused (fail closed).  The ACL admin APIs, once authorized,
are answered from the gateway's own store instead of being relayed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from authz.request_policy import Refuse, Verdict
from gateway.acl_admin import create_acls, delete_acls, describe_acls
from gateway.authorization import ConnectionAuthzView, GatewayAuthorization
from protocol.api_keys import ApiKey

if TYPE_CHECKING:
    from gateway.connection import ClientConnection

Body = dict[str, Any]
LocalHandler = Callable[[GatewayAuthorization, Body, int], Body]

# APIs ksgate answers itself (the upstream never sees them).
LOCAL_HANDLERS: dict[int, LocalHandler] = {
    ApiKey.CREATE_ACLS: lambda shared, body, version: create_acls(shared.store, body, version),
    ApiKey.DELETE_ACLS: lambda shared, body, version: delete_acls(shared.store, body, version),
    ApiKey.DESCRIBE_ACLS: lambda shared, body, version: describe_acls(shared.authorizer, body, version),
}


def authorize(conn: ClientConnection, shared: GatewayAuthorization, key: int, version: int, body: Body) -> Verdict:
    policy = shared.policies.get(key)
    if policy is None:
        return Refuse(f"no authorization policy for api key {key}")
    assert conn.principal is not None
    view = ConnectionAuthzView(shared, conn.principal, conn.client_host, conn.client_port, conn.listener.name,
                               key, version, conn.ctx.cluster.topic_names)
    return policy(body, version, view)
