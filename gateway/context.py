"""State shared by all connections of one gateway process."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from auth.listener_security import ListenerSecurity
from gateway.authorization import GatewayAuthorization
from gateway.config import GatewayConfig, ListenerConfig
from gateway.ops.metrics import Metrics
from gateway.quotas.book import QuotaBook
from gateway.quotas.sensors import QuotaSensors
from gateway.session.actions import Discovered
from gateway.session.request_memory import RequestMemoryBudget
from gateway.session.routes import RouteTable, VersionRanges
from gateway.transport.hash_scheduler import HashScheduler
from gateway.transport.idle_close import IdleWatch
from gateway.transport.verification_pool import VerificationPool
from gateway.upstream.cluster_view import ClusterView
from gateway.upstream.health import UpstreamHealth
from protocol.frame_receiver import BufferPool


@dataclass(slots=True)
class ListenerAddressBook:
    """Maps upstream node ids to this listener's advertised host and node ports.

    Learns nothing itself: a node a response names is a discovery the session reports as an
    action (LearnNodes), and the server carries it out (it may open a listener)."""

    listener: ListenerConfig
    config: GatewayConfig

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
    routes: RouteTable  # one ApiRoute per API, built once when the gateway is wired (gateway/server.py)
    negotiated: VersionRanges = field(default_factory=dict)  # replaced whole on each negotiation, never edited
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
    # Client quotas: the bounds in force (gateway/quotas/book.py, kept in step with the quota store)
    # and the rates measured against them.
    quotas: QuotaBook = field(default_factory=QuotaBook)
    quota_sensors: QuotaSensors = field(default_factory=QuotaSensors)
    # Carries out what a session discovered (the server applies it to the cluster view, opens node
    # listeners, asks for topic ids); the adapter calls it with each Discovered action, on the loop.
    discovered: Callable[[Discovered], None] = field(default=lambda _: None)
    # connections.max.idle.ms for every connection on the loop (gateway/transport/idle_close.py).
    idle_watch: IdleWatch | None = None
    # How a SASL authenticator answers ApiVersions (gateway/session/sasl_stage.py): one for every
    # connection, made with the first (each logged-in connection keeps it for KIP-368).
    sasl_api_versions: Callable[[memoryview, int, int], tuple[bytes, bool]] | None = None

    # Read through the context each time (never a copy): what a connection's Learned compares against.
    def topic_names(self) -> Mapping[uuid.UUID, str]:
        return self.cluster.topic_names

    def partition_counts(self) -> Mapping[str, int]:
        return self.cluster.partition_counts

    def address_book(self, listener: ListenerConfig) -> ListenerAddressBook:
        book = self.address_books.get(listener.name)
        if book is None:
            book = self.address_books[listener.name] = ListenerAddressBook(listener, self.config)
        return book
