"""State shared by all connections of one gateway process."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from gateway.config import GatewayConfig, ListenerConfig
from gateway.ops.metrics import Metrics
from gateway.quotas.lookup import NoQuotas, QuotaLookup
from gateway.quotas.sensors import QuotaSensors
from gateway.session.api_versions import VersionRanges
from gateway.session.authz_view import GatewayAuthorization
from gateway.session.request_memory import RequestMemoryBudget
from gateway.session.sasl_stage import ListenerSecurity
from gateway.transport.hash_scheduler import HashScheduler
from gateway.transport.verification_pool import VerificationPool
from gateway.upstream.cluster_view import ClusterView
from gateway.upstream.health import UpstreamHealth
from protocol.frame_receiver import BufferPool


@dataclass(slots=True)
class ListenerAddressBook:
    """Maps upstream node ids to this listener's advertised host and node ports."""

    listener: ListenerConfig
    config: GatewayConfig
    cluster: ClusterView

    def learn(self, node_id: int, host: str, port: int) -> None:
        self.cluster.learn_node(node_id, host, port)

    def client_address(self, node_id: int) -> tuple[str, int]:
        if self.listener.sni is not None:  # one port for every broker: the node is told apart by its name
            return self.listener.sni.host_of(node_id), self.listener.advertised.port
        return self.listener.advertised.host, self.config.node_port(self.listener, node_id)


@dataclass(slots=True)
class Counters:
    """Plain counters (the metrics endpoint exports them; tests read them)."""

    upstream_connections: int = 0
    relayed_requests: int = 0
    streamed_responses: int = 0  # large responses forwarded as they arrived (not held whole)
    authentication_failures: int = 0
    authenticated: dict[str, int] = field(default_factory=dict)  # principal → successful authentications


@dataclass(slots=True)
class GatewayContext:
    config: GatewayConfig
    cluster: ClusterView
    upstream_ssl: ssl.SSLContext | None
    negotiated: VersionRanges = field(default_factory=dict)
    address_books: dict[str, ListenerAddressBook] = field(default_factory=dict)
    security: dict[str, ListenerSecurity] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)
    metrics: Metrics = field(default_factory=lambda: Metrics(()))
    authorization: GatewayAuthorization | None = None  # None: authorizer.class.name is empty
    # Receive buffers of large requests, reused across connections (one event loop, one pool).
    frame_buffers: BufferPool = field(default_factory=BufferPool)
    # queued.max.request.bytes: buffers of large requests being received, all connections together.
    request_memory: RequestMemoryBudget = field(default_factory=RequestMemoryBudget)
    # When an upstream broker last answered (/readyz); the server probes it periodically.
    upstream_health: UpstreamHealth = field(default_factory=lambda: UpstreamHealth(15.0))
    # Where password hashes run, off the event loop (ksgate.authentication.verification.*), and
    # when: within each client address's budget (ksgate.authentication.hash.*).
    hashes: HashScheduler = field(default_factory=lambda: HashScheduler(VerificationPool()))
    # Client quotas: the bounds in force (gateway/quotas/book.py) and the rates measured against them.
    quotas: QuotaLookup = field(default_factory=NoQuotas)
    quota_sensors: QuotaSensors = field(default_factory=QuotaSensors)

    def address_book(self, listener: ListenerConfig) -> ListenerAddressBook:
        book = self.address_books.get(listener.name)
        if book is None:
            book = self.address_books[listener.name] = ListenerAddressBook(listener, self.config, self.cluster)
        return book
