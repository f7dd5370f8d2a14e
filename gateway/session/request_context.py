"""Who is asking, frozen for one request: what the request stages read instead of the connection.

A stage gets this snapshot, never the session or its adapter, so a large request can be
decided in the worker thread with the very same code (gateway/transport/worker_thread.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from auth.principal import KafkaPrincipal
from gateway.config import ListenerConfig

if TYPE_CHECKING:
    from gateway.context import GatewayContext


@dataclass(slots=True, frozen=True)
class RequestContext:
    principal: KafkaPrincipal
    client_host: str
    client_port: int
    listener: ListenerConfig
    ctx: GatewayContext  # the process's shared state (negotiated versions, cluster view, authorization)
    session_expired: bool = False  # connections.max.reauth.ms passed without re-authentication
