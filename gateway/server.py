"""The gateway process: probes the upstream, opens listeners, serves, shuts down gracefully."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from auth.mechanism import wall_clock_ms
from auth.token_store import TokenStore
from gateway.allocator import keep_large_buffers_on_the_heap
from gateway.api_versions import negotiate
from gateway.cluster_view import ClusterView
from gateway.config import ConfigError, GatewayConfig, ListenerConfig
from gateway.connection import ClientConnection
from gateway.context import GatewayContext
from gateway.logs import get_logger
from gateway.metrics import Metrics
from gateway.request_pipeline import NEVER_RELAYED
from gateway.security_setup import build_authorization, build_security, credential_store, security_topic, token_store
from gateway.security_topic import SecurityTopic
from gateway.upstream_auth import UpstreamAuthError
from gateway.upstream_client import UpstreamClient, UpstreamError
from gateway.upstream_tls import upstream_ssl_context
from protocol.api_keys import ApiKey

log = get_logger(component="server")


@dataclass(slots=True)
class Gateway:
    config: GatewayConfig
    ctx: GatewayContext = field(init=False)
    _servers: dict[tuple[str, int | None], asyncio.base_events.Server] = field(default_factory=dict)
    _connections: set[ClientConnection] = field(default_factory=set)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    tokens: TokenStore | None = None
    security_topic: SecurityTopic | None = None  # the replicated store (ksgate.security.store KAFKA)
    _stopping: bool = False
    reuse_port: bool = False  # several worker processes share the listening ports
    started: bool = False  # listeners open and the upstream answered: ready for /readyz

    # How often certificate files are checked for changes (SIGHUP reloads at once), and
    # ACL files (an external edit must apply within a second).
    FILE_POLL_S = 5.0
    ACL_POLL_S = 0.5
    TOPIC_REFRESH_MIN_INTERVAL_S = 1.0
    _last_topic_refresh: float = 0.0
    _loop: asyncio.AbstractEventLoop | None = None

    def _policed_apis(self) -> tuple[set[int], set[int]] | None:
        """(APIs with a policy, APIs the gateway serves itself); None when authorization is off."""
        if self.ctx.authorization is None:
            return None
        return set(self.ctx.authorization.policies), set(self.ctx.authorization.local)

    def _request_topic_refresh(self) -> None:
        """A request named an unknown topic id: learn the upstream's ids (at most once a second)."""
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # asked by a large request's authorization in the worker (gateway/offload.py)
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._request_topic_refresh)
            return
        if self._stopping or now - self._last_topic_refresh < self.TOPIC_REFRESH_MIN_INTERVAL_S:
            return
        self._last_topic_refresh = now
        self._tasks.append(asyncio.get_running_loop().create_task(self._refresh_topics()))

    async def _refresh_topics(self) -> None:
        try:
            await self._with_upstream(self._learn_topics)
        except (UpstreamError, UpstreamAuthError) as exc:
            log.warning("topic_refresh_failed", error=str(exc))

    async def _learn_topics(self, client: UpstreamClient) -> None:
        version = min(12, self.ctx.negotiated.get(ApiKey.METADATA, (0, 0))[1])
        metadata = await client.request(ApiKey.METADATA, version, {
            "topics": None, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False})
        self.ctx.cluster.learn_topics(metadata["topics"])

    async def _with_upstream(self, action: Callable[[UpstreamClient], Awaitable[None]]) -> None:
        timeout = self.config.upstream.connect_timeout_ms / 1000
        host, port = self.config.upstream.bootstrap_servers[0]
        client = await UpstreamClient.connect(host, port, self.ctx.upstream_ssl, timeout)
        try:
            await client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "ksgate",
                                                         "client_software_version": "0.1.0"})
            if self.config.upstream.uses_sasl:
                await client.authenticate(self.config.upstream)
            await action(client)
        finally:
            await client.close()

    async def reload_tls(self) -> None:
        """Re-read every listener's certificates; new connections get them, open ones keep theirs."""
        for name, security in self.ctx.security.items():
            if security.tls is not None:
                changed = await asyncio.to_thread(security.tls.reload)
                log.info("tls_reloaded", listener=name, accepted=changed)

    async def _watch_files(self) -> None:
        polls_per_tls_check = max(1, round(self.FILE_POLL_S / self.ACL_POLL_S))
        tick = 0
        while not self._stopping:
            await asyncio.sleep(self.ACL_POLL_S)
            tick += 1
            self._close_idle_connections()
            if self.security_topic is not None:
                self.ctx.metrics.set_store_lag(self.security_topic.lag_seconds())
            if self.ctx.authorization is not None:
                # O(ACLs) when the file changed: off the event loop (the swap itself is atomic).
                await asyncio.to_thread(self.ctx.authorization.store.reload_if_changed)
            if self.tokens is not None and tick % max(1, round(
                    self.config.settings["delegation.token.expiry.check.interval.ms"] / 1000 / self.ACL_POLL_S)) == 0:
                await asyncio.to_thread(self.tokens.purge_expired, wall_clock_ms())
            if tick % polls_per_tls_check:
                continue
            for security in self.ctx.security.values():
                if security.tls is not None:
                    await asyncio.to_thread(security.tls.reload_if_changed)

    def __post_init__(self) -> None:
        cluster = ClusterView()
        self.ctx = GatewayContext(self.config, cluster, upstream_ssl_context(self.config.upstream),
                                  metrics=Metrics(listener.name for listener in self.config.listeners))
        self.security_topic = security_topic(self.config, self.ctx.upstream_ssl)
        credentials = credential_store(self.config, self.security_topic)
        self.tokens = token_store(self.config, self.security_topic)
        self.ctx.security = build_security(self.config, credentials, self.tokens)
        self.ctx.authorization = build_authorization(self.config, self._request_topic_refresh, credentials,
                                                     self.tokens, self.security_topic)
        cluster.on_new_node.append(self._open_node_listeners)

    async def start(self) -> None:
        # The receive-buffer pool saves page faults only if the buffers around it (uvloop's
        # per-read bytes, smaller frames) come from the warm heap too (a process-wide setting).
        keep_large_buffers_on_the_heap()
        self._loop = asyncio.get_running_loop()
        if self.ctx.authorization is None:
            log.warning("authorization_disabled", hint="authorizer.class.name is empty: every authenticated "
                        "client may do anything; set it to StandardAuthorizer to enforce ACLs")
        await self.probe_upstream()
        if self.security_topic is not None:
            await self._load_security_store(self.security_topic)
        self._tasks.append(asyncio.get_running_loop().create_task(self._watch_files()))
        for listener in self.config.listeners:
            await self._listen(listener, None)
        # The nodes known now are opened before the gateway counts as started: a node port
        # that cannot be bound fails start-up instead of leaving clients to time out.
        for node_id in sorted(self.ctx.cluster.nodes):
            for listener in self.config.listeners:
                await self._listen(listener, node_id)
        self.started = True
        log.info("gateway_started", listeners=[f"{lst.name}://{lst.bind.host}:{lst.bind.port}"
                                               for lst in self.config.listeners],
                 nodes=sorted(self.ctx.cluster.nodes))

    async def _load_security_store(self, topic: SecurityTopic) -> None:
        """Replay the security topic before any listener opens: until then nobody can authenticate
        or be authorized (fail closed, as Kafka's authorizer before its metadata has loaded)."""
        timeout_ms = self.config.settings["ksgate.security.store.load.timeout.ms"]
        topic.start()
        if not await asyncio.to_thread(topic.wait_loaded, timeout_ms / 1000):
            await asyncio.to_thread(topic.stop)
            why = f": {topic.stalled}" if topic.stalled else ""
            raise UpstreamError(f"the security topic {topic.settings.topic} was not replayed within {timeout_ms} ms "
                                f"(ksgate.security.store.load.timeout.ms){why}")
        authorization = self.ctx.authorization
        if authorization is not None:
            from gateway.replicated_stores import TopicAclStore

            assert isinstance(authorization.store, TopicAclStore)
            authorization.store.load_and_subscribe(authorization.authorizer.load, authorization.authorizer.apply)

    @property
    def store_problem(self) -> str | None:
        """Why the security store cannot be trusted right now (for /readyz), or None."""
        topic = self.security_topic
        if topic is None:
            return None
        if topic.stalled is not None:
            return f"security store stalled: {topic.stalled}"
        return None if topic.loaded else "security store loading"

    async def probe_upstream(self) -> None:
        """Learn the upstream's API versions and brokers; fail start-up if none answers."""
        timeout = self.config.upstream.connect_timeout_ms / 1000
        errors = []
        for host, port in self.config.upstream.bootstrap_servers:
            try:
                client = await UpstreamClient.connect(host, port, self.ctx.upstream_ssl, timeout)
            except UpstreamError as exc:
                errors.append(str(exc))
                continue
            try:
                versions = await client.request(ApiKey.API_VERSIONS, 3, {
                    "client_software_name": "ksgate", "client_software_version": "0.1.0"})
                self.ctx.cluster.learn_api_versions(versions)
                self.ctx.negotiated = negotiate(self.ctx.cluster.api_ranges, self._policed_apis(), NEVER_RELAYED)
                if self.config.upstream.uses_sasl:
                    await client.authenticate(self.config.upstream)
                metadata_version = min(12, self.ctx.negotiated.get(ApiKey.METADATA, (0, 0))[1])
                metadata = await client.request(ApiKey.METADATA, metadata_version, {
                    "topics": [], "allow_auto_topic_creation": False,
                    "include_cluster_authorized_operations": False,
                    "include_topic_authorized_operations": False})
                for broker in metadata["brokers"]:
                    self.ctx.cluster.learn_node(broker["node_id"], broker["host"], broker["port"])
                return
            except (UpstreamError, UpstreamAuthError) as exc:
                errors.append(str(exc))
            finally:
                await client.close()
        raise UpstreamError("no upstream bootstrap server answered: " + "; ".join(errors))

    def _close_idle_connections(self) -> None:
        """Kafka's connections.max.idle.ms: close connections that have sent nothing for that long."""
        limit = self.config.connections_max_idle_ms / 1000
        now = asyncio.get_running_loop().time()
        for conn in list(self._connections):
            if conn.idle_for(now) > limit:
                conn.abort(f"idle for more than {self.config.connections_max_idle_ms} ms (connections.max.idle.ms)")

    def _open_node_listeners(self, node_id: int) -> None:
        for listener in self.config.listeners:
            if (listener.name, node_id) not in self._servers and not self._stopping:
                try:
                    self.config.node_port(listener, node_id)
                except ConfigError as exc:
                    log.error("node_out_of_range", error=str(exc))
                    continue
                task = asyncio.get_running_loop().create_task(self._listen(listener, node_id))
                task.add_done_callback(_report_listen_failure)

    async def _listen(self, listener: ListenerConfig, node_id: int | None) -> None:
        key = (listener.name, node_id)
        if key in self._servers:
            return
        port = listener.bind.port if node_id is None else self.config.node_port(listener, node_id)
        # Bind synchronously so a client that just read this address in a Metadata
        # response finds the port open (queued in the backlog) even before accept starts.
        if self.reuse_port:
            from gateway.workers import reuse_port_socket

            sock = reuse_port_socket(listener.bind.host, port)
        else:
            sock = _bound_socket(listener.bind.host, port)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: self._new_connection(listener.name, node_id), sock=sock, backlog=1024,
            ssl=self.ctx.security[listener.name].ssl_context)
        self._servers[key] = server
        log.info("listening", listener=listener.name, node=node_id, address=f"{listener.bind.host}:{port}")

    def _new_connection(self, listener_name: str, node_id: int | None) -> ClientConnection:
        conn = ClientConnection(self.ctx, listener_name, node_id, on_close=self._connections.discard)
        self._connections.add(conn)
        if self._stopping:
            conn.begin_drain()
        return conn

    def bound_port(self, listener_name: str, node_id: int | None = None) -> int:
        server = self._servers[(listener_name, node_id)]
        port: int = server.sockets[0].getsockname()[1]
        return port

    async def shutdown(self) -> None:
        """Stop accepting, let in-flight requests finish (bounded), then close everything."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for server in self._servers.values():
            server.close()
        for conn in list(self._connections):
            conn.begin_drain()
        waits = [asyncio.ensure_future(c.drained.wait()) for c in self._connections]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=self.config.shutdown_timeout_ms / 1000)
            for waiter in pending:
                waiter.cancel()
        for conn in list(self._connections):
            conn.close()
        for server in self._servers.values():
            await server.wait_closed()
        if self.ctx.authorization is not None:
            self.ctx.authorization.audit.close()
        if self.security_topic is not None:
            await asyncio.to_thread(self.security_topic.stop)
        log.info("gateway_stopped")


def _report_listen_failure(task: asyncio.Task[None]) -> None:
    """A node discovered while serving whose port cannot be opened: clients sent there cannot connect."""
    if not task.cancelled() and task.exception() is not None:
        log.error("node_listener_failed", error=str(task.exception()))


def _bound_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"listeners: cannot bind {host}:{port}: {exc.strerror}") from None
    sock.listen(1024)
    sock.setblocking(False)
    return sock
