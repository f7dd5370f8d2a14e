"""Who is asking, and what a decision reads, frozen for one request: what the request stages get
instead of the connection or the process.

Every field is immutable or a snapshot (the negotiated versions and the topic-id cache are
replaced whole, never edited), so a large request is decided in the worker thread with the
very same code (gateway/transport/worker_thread.py) and reads no state the loop is changing.
The authorizer swaps its ACLs atomically; ``misses`` is the one thing a decision writes.

A NamedTuple rather than a frozen dataclass: as immutable, and built per request in ~15
bytecodes where the frozen dataclass's ``__init__`` took ~100 (one ``object.__setattr__`` per field).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from auth.principal import KafkaPrincipal
from gateway.admin.handlers import AdminRequest
from gateway.authorization import GatewayAuthorization
from gateway.config import ListenerConfig
from gateway.session.api_versions import NOT_CHECKED, ServedNode
from gateway.session.authz_view import TopicIdMisses
from gateway.session.routes import VersionRanges


class RequestContext(NamedTuple):
    principal: KafkaPrincipal
    client_host: str
    client_port: int
    listener: ListenerConfig
    negotiated: VersionRanges  # what this gateway offers clients (ApiVersions), by api key
    features: Mapping[str, Any]  # the upstream's feature fields, passed on in ApiVersions answers
    authorization: GatewayAuthorization | None  # None: authorizer.class.name is empty
    topic_names: Mapping[uuid.UUID, str]  # the topic id → name cache as it was when the request arrived
    misses: TopicIdMisses  # the connection's: a topic id the request names that the cache lacks
    now_ms: int  # wall-clock time the request arrived (the session's clock)
    session_expired: bool = False  # connections.max.reauth.ms passed without re-authentication
    served: ServedNode = NOT_CHECKED  # the cluster and broker the connection reaches (ApiVersions v5, KIP-1242)

    def admin_request(self) -> AdminRequest:
        """What an admin handler reads of this request (gateway/admin/handlers.py)."""
        return AdminRequest(self.principal, self.client_host, self.client_port, self.listener.name,
                            self.listener.security_protocol, self.now_ms)
