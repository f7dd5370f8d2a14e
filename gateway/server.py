"""The gateway process: probes the upstream, opens listeners, serves, shuts down gracefully."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from auth.client_address import ClientAddress
from auth.hash_budget import HashBudget
from auth.sasl.mechanism import wall_clock_ms
from auth.tls import TlsConfigError
from auth.tls_handshake import certificate_failure, send_handshake_alerts_to
from authz.policies import all_policies
from gateway.admin.handlers import local_handlers
from gateway.config import DEPRECATED_KEYS, ConfigError, GatewayConfig, ListenerConfig
from gateway.context import GatewayContext
from gateway.edge.acceptor import Acceptor, set_ipv6_only
from gateway.edge.connection_limits import (
    UNLIMITED,
    Admission,
    ConnectionLimits,
    Refusal,
    RefusalSampler,
    limit_settings,
)
from gateway.edge.deferred_wait import PEER_GONE, HangupWatch
from gateway.edge.handshake_budget import HandshakeBudget
from gateway.edge.proxied_listener import proxied_client
from gateway.edge.sni_routing import SniRoutes
from gateway.ops.allocator import give_back_free_memory, keep_large_buffers_on_the_heap
from gateway.ops.descriptors import connections_that_fit, open_files_limit
from gateway.ops.logs import get_logger
from gateway.ops.metrics import Metrics
from gateway.quotas.connection_rate import connection_delay_s
from gateway.quotas.observe import quota_sensors
from gateway.session import actions as act
from gateway.session.api_versions import negotiate
from gateway.session.request_memory import RequestMemoryBudget
from gateway.session.routes import build_routes
from gateway.session.sasl_stage import record_certificate_failure
from gateway.stores.file_quotas import QuotaStore
from gateway.stores.file_tokens import TokenStore
from gateway.stores.security_topic import SecurityTopic
from gateway.stores.setup import (
    build_authorization,
    build_security,
    credential_store,
    follow_quotas,
    quota_store,
    security_topic,
    token_store,
)
from gateway.transport.client_connection import ClientConnection
from gateway.transport.hash_scheduler import HashScheduler
from gateway.transport.verification_pool import VerificationPool
from gateway.upstream.client import (
    API_VERSIONS_FIRST,
    CLIENT_SOFTWARE,
    NoBootstrapAnswered,
    UpstreamClient,
    UpstreamError,
    first_answering_bootstrap,
)
from gateway.upstream.cluster_view import ClusterView
from gateway.upstream.health import UpstreamHealth
from gateway.upstream.login import UpstreamAuthError
from gateway.upstream.tls import upstream_ssl_context
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError

log = get_logger(component="server")


@dataclass(slots=True)
class _Pending:
    """An accepted socket not yet a connection (its PROXY header, its deferral or its handshake
    still ahead) and what it holds until then."""

    sock: socket.socket
    admission: Admission | None  # None until admitted (a PROXY-protocol connection before its header)
    client: ClientAddress
    deferred: bool = False  # counted among its address's connections waiting for the handshake budget
    given: bool = False  # handed to the event loop, whose transport closes the socket from then on
    settled: bool = False  # what it holds is released, or owned by the connection it became


@dataclass(slots=True)
class Gateway:
    config: GatewayConfig
    ctx: GatewayContext = field(init=False)
    _servers: dict[tuple[str, int | None], Acceptor] = field(default_factory=dict)
    # Open connections and the admission each holds (released when it closes): kept here rather than in a
    # closure per connection (~210 bytes each), so every connection shares one close hook.
    _connections: dict[ClientConnection, Admission] = field(default_factory=dict)
    _on_connection_closed: Callable[[ClientConnection], None] = field(init=False)
    # Kafka's connection limits, counted in this process (with --workers N, each worker counts
    # its own connections: N workers behind one port act as N brokers would).
    limits: ConnectionLimits = field(init=False)
    _refusal_audit: RefusalSampler = field(init=False)
    handshake_budget: HandshakeBudget = field(init=False)  # TLS handshakes per client address
    _handshakes: set[asyncio.Task[None]] = field(default_factory=set)  # accepted, TLS not yet complete
    _hangups: HangupWatch | None = None  # deferred connections' peers, watched (made on the loop when first needed)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    tokens: TokenStore | None = None
    security_topic: SecurityTopic | None = None  # the replicated store (ksgate.security.store KAFKA)
    quota_store: QuotaStore | None = None  # client quotas (ksgate.quota.file, or the replicated store)
    _stopping: bool = False
    reuse_port: bool = False  # several worker processes share the listening ports
    started: bool = False  # listeners open and the upstream answered: ready for /readyz
    # Set by start() once the stores are loaded and limits derived: brokers learnt before (the
    # start-up probe's Metadata) get their node listeners from start(), not at discovery.
    _listening: bool = False

    # How often certificate files are checked for changes (SIGHUP reloads at once), and
    # ACL files (an external edit must apply within a second).
    FILE_POLL_S = 5.0
    ACL_POLL_S = 0.5
    TOPIC_REFRESH_MIN_INTERVAL_S = 1.0
    _last_topic_refresh: float = 0.0
    _topics_truncated: bool = False  # the latest topic listing had more than ksgate.topic.cache.max.topics
    # Start-up retries of an upstream that does not answer yet: first delay, doubling up to the max.
    STARTUP_RETRY_S = 0.5
    STARTUP_RETRY_MAX_S = 5.0
    _upstream_silent: bool = False  # the periodic probe's last attempt failed (logged once per outage)
    # Request memory released since the last tick beyond which free heap is given back.
    TRIM_AFTER_BYTES = 16 * 1024 * 1024
    _released_seen: int = 0
    _proxied_pending: int = 0  # accepted on a PROXY-protocol listener, header not read yet

    def discovered(self, found: act.Discovered) -> None:
        """What a connection's traffic taught (reported by its session as an action, carried out here, on
        the loop): brokers a response named (a new one gets its node listeners), topic ids a response
        revealed, and a topic id a request named that nobody knows yet (ask the upstream)."""
        cluster = self.ctx.cluster
        for node_id, host, port in found.nodes:
            self._learn_node(node_id, host, port)
        relist = found.refresh_topic_ids
        if found.topic_ids:
            relist |= cluster.learn_topic_ids(found.topic_ids)
        if found.partition_counts:
            relist |= cluster.learn_partition_counts(found.partition_counts)
        if relist:
            self._request_topic_refresh()

    def _learn_node(self, node_id: int, host: str, port: int) -> None:
        if self.ctx.cluster.learn_node(node_id, host, port):
            self._open_node_listeners(node_id)

    def _request_topic_refresh(self) -> None:
        """A request named an unknown topic id: learn the upstream's ids (at most once a second)."""
        now = asyncio.get_running_loop().time()
        if self._stopping or now - self._last_topic_refresh < self.TOPIC_REFRESH_MIN_INTERVAL_S:
            return
        self._last_topic_refresh = now
        task = asyncio.get_running_loop().create_task(self._refresh_topics())
        self._tasks.append(task)  # cancelled at shutdown; dropped once done (one a second at most, for ever)
        task.add_done_callback(self._forget_task)

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    async def _refresh_topics(self) -> None:
        try:
            await self._with_upstream(self._learn_topics)
        except (UpstreamError, UpstreamAuthError, DecodeError) as exc:  # the periodic listing goes on
            log.warning("topic_refresh_failed", error=str(exc))

    async def _list_topics_periodically(self) -> None:
        """Every ksgate.topic.cache.refresh.ms, list every topic: the learned maps forget deleted topics."""
        interval = self.config.settings["ksgate.topic.cache.refresh.ms"] / 1000
        while not self._stopping:
            await asyncio.sleep(interval)
            self._last_topic_refresh = asyncio.get_running_loop().time()
            await self._refresh_topics()

    async def _learn_topics(self, client: UpstreamClient) -> None:
        """Metadata of every topic, which replaces what the cluster view knows of topics."""
        cluster = self.ctx.cluster
        since = cluster.learned_so_far()
        version = min(12, self.ctx.negotiated.get(ApiKey.METADATA, (0, 0))[1])
        metadata = await client.request(ApiKey.METADATA, version, {
            "topics": None, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
            decode_off_loop=True)
        self._learn_cluster_id(metadata.get("cluster_id"))
        if cluster.relist(metadata["topics"], since) and not self._topics_truncated:
            log.warning("topic_cache_full", topics=len(metadata["topics"]), kept=cluster.max_topics,
                        hint="requests naming the others by topic id get UNKNOWN_TOPIC_ID; raise "
                             "ksgate.topic.cache.max.topics")
        self._topics_truncated = len(metadata["topics"]) > cluster.max_topics

    async def _with_upstream(self, action: Callable[[UpstreamClient], Awaitable[None]]) -> None:
        timeout = self.config.upstream.connect_timeout_ms / 1000
        host, port = self.config.upstream.bootstrap_servers[0]
        client = await UpstreamClient.connect(host, port, self.ctx.upstream_ssl, timeout,
                                              self.ctx.metrics.upstream_error)
        try:
            # ApiVersions v3 first, as any client (it names the gateway's software to the broker), then the login:
            # not the feature levels, which the readiness probe re-reads (FEATURES_REFRESH_S) and ``action`` needs not.
            await client.request(ApiKey.API_VERSIONS, API_VERSIONS_FIRST, CLIENT_SOFTWARE)
            await self._log_in(client)
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
            self._give_back_memory()
            if self.security_topic is not None:
                self.ctx.metrics.set_store_lag(self.security_topic.lag_seconds())
            if self.ctx.authorization is not None:
                # O(ACLs) when the file changed: off the event loop (the swap itself is atomic).
                await asyncio.to_thread(self.ctx.authorization.store.reload_if_changed)
                if self.ctx.authorization.shadow is not None:
                    await asyncio.to_thread(self.ctx.authorization.shadow.refresh)
            if self.quota_store is not None:
                await asyncio.to_thread(self.quota_store.reload_if_changed)
            if self.tokens is not None and tick % max(1, round(
                    self.config.settings["delegation.token.expiry.check.interval.ms"] / 1000 / self.ACL_POLL_S)) == 0:
                await asyncio.to_thread(self.tokens.purge_expired, wall_clock_ms())
            if tick % polls_per_tls_check:
                continue
            for security in self.ctx.security.values():
                if security.tls is not None:
                    await asyncio.to_thread(security.tls.reload_if_changed)

    def _give_back_memory(self) -> None:
        """After large requests: drop idle pooled buffers and return free heap to the kernel,
        so a burst does not leave the process at its peak size (at most once per tick)."""
        released = self.ctx.request_memory.released
        dropped = self.ctx.frame_buffers.drop_idle()
        if dropped or released - self._released_seen >= self.TRIM_AFTER_BYTES:
            give_back_free_memory()
        self._released_seen = released

    def __post_init__(self) -> None:
        self._on_connection_closed = self._connection_closed  # made once, not per connection
        cluster = ClusterView(max_topics=self.config.settings["ksgate.topic.cache.max.topics"])
        self.ctx = GatewayContext(self.config, cluster, upstream_ssl_context(self.config.upstream), {},
                                  metrics=Metrics((listener.name for listener in self.config.listeners), process=True),
                                  upstream_health=UpstreamHealth(
                                      self.config.settings["ksgate.readiness.upstream.timeout.ms"] / 1000))
        self.security_topic = security_topic(self.config, self.ctx.upstream_ssl)
        credentials = credential_store(self.config, self.security_topic)
        self.tokens = token_store(self.config, self.security_topic)
        self.quota_store = quota_store(self.config, self.security_topic)
        if self.quota_store is not None:
            follow_quotas(self.quota_store, self.ctx.quotas)
        settings = self.config.settings
        self.ctx.hashes = HashScheduler(
            VerificationPool(settings["ksgate.authentication.verification.threads"],
                             settings["ksgate.authentication.verification.queue.size"]),
            HashBudget(settings["ksgate.authentication.hash.rate.per.ip"],
                       settings["ksgate.authentication.hash.burst.per.ip"],
                       settings["ksgate.authentication.hash.queue.per.ip"],
                       settings["ksgate.authentication.hash.queue.per.user"],
                       settings["ksgate.authentication.hash.max.tracked.ips"]),
            self.ctx.metrics.password_hashed)
        self.ctx.security = build_security(self.config, credentials, self.tokens)
        self.ctx.authorization = build_authorization(self.config, credentials, self.tokens, self.security_topic,
                                                     self.quota_store)
        # The spine: one route per API, built once. Admin APIs are served here only with an authorizer.
        local = local_handlers(credentials, self.quota_store) if self.ctx.authorization else {}
        self.ctx.routes = build_routes(all_policies(), local)
        self.ctx.discovered = self.discovered
        if self.ctx.authorization is not None:
            self.ctx.metrics.watch_shadow(self.ctx.authorization.shadow)
        self.limits = ConnectionLimits(limit_settings(self.config, _resolve_host), time.monotonic)
        self.ctx.request_memory = memory = RequestMemoryBudget(settings["queued.max.request.bytes"])
        self.ctx.metrics.watch_request_memory(lambda: memory.in_use, memory.waiting)
        self._refusal_audit = RefusalSampler(time.monotonic)
        self.handshake_budget = HandshakeBudget(settings["ksgate.tls.handshake.rate.per.ip"],
                                                settings["ksgate.tls.handshake.burst.per.ip"],
                                                settings["ksgate.tls.handshake.queue.per.ip"],
                                                settings["ksgate.tls.handshake.max.tracked.ips"])
        ctx = self.ctx
        self.ctx.quota_sensors = quota_sensors(settings, ctx.metrics, ctx.authorization.audit if ctx.authorization
                                               else None, lambda kind, label: ctx.quotas.configured(kind, label))

    async def start(self, before_listening: Callable[[], object] | None = None) -> None:
        """Probe the upstream, load the stores, then open the listeners. ``before_listening`` runs
        once all that is done, just before the first port opens: work that holds the event loop
        (``ksgate run`` freezes the start-up heap there) then delays no client."""
        try:
            await self._start(before_listening)
        except BaseException:
            # A gateway that failed to start serves nobody: release what it opened, or its ports would
            # accept clients while the process exits, and its tasks and threads outlive its loop.
            await self._release_after_failed_start()
            raise
        self.started = True
        log.info("gateway_started", listeners=[f"{lst.name}://{lst.bind.host}:{lst.bind.port}"
                                               for lst in self.config.listeners],
                 nodes=sorted(self.ctx.cluster.nodes))

    async def _start(self, before_listening: Callable[[], object] | None) -> None:
        # The receive-buffer pool saves page faults only if the buffers around it (uvloop's
        # per-read bytes, smaller frames) come from the warm heap too (a process-wide setting).
        keep_large_buffers_on_the_heap()
        for key in sorted(DEPRECATED_KEYS.keys() & self.config.raw.keys()):
            log.warning("deprecated_config_key", key=key, hint=DEPRECATED_KEYS[key])
        if self.ctx.authorization is None:
            log.warning("authorization_disabled", hint="authorizer.class.name is empty: every authenticated "
                        "client may do anything; set it to StandardAuthorizer to enforce ACLs")
        await self._probe_until_answered()
        if self.security_topic is not None:
            await self._load_security_store(self.security_topic)
        self._tasks.append(asyncio.get_running_loop().create_task(self._watch_files()))
        self._tasks.append(asyncio.get_running_loop().create_task(self._watch_upstream()))
        self._tasks.append(asyncio.get_running_loop().create_task(self._list_topics_periodically()))
        self._route_server_names()
        self._fit_connections_to_descriptors()
        if before_listening is not None:
            before_listening()
        self._listening = True
        await self._open_listeners()

    async def _release_after_failed_start(self) -> None:
        """Close the listeners opened so far, end the watchers (awaited: a task merely told to stop
        is still pending if the loop closes next), the audit log's file and the security store's thread."""
        self._stopping = True  # a broker learnt from now on gets no listener
        for server in self._servers.values():
            server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.ctx.hashes.close()
        if self.ctx.authorization is not None:
            self.ctx.authorization.audit.close()  # once: a shutdown() after this leaves it closed
        if self.security_topic is not None:
            await asyncio.to_thread(self.security_topic.stop)

    async def _open_listeners(self) -> None:
        for listener in self.config.listeners:
            await self._listen(listener, None)
        # The nodes known now are opened before the gateway counts as started: a node port
        # that cannot be bound fails start-up instead of leaving clients to time out.
        for node_id in sorted(self.ctx.cluster.nodes):
            for listener in self.config.listeners:
                if listener.sni is None:  # a one-port (SNI) listener serves every node on its own port
                    await self._listen(listener, node_id)

    def _fit_connections_to_descriptors(self) -> None:
        """Without max.connections (Kafka's default: none), derive it from the open-files limit,
        leaving descriptors for upstream sockets, listeners, files and /healthz (known nodes counted)."""
        limit = open_files_limit()
        listening = sum(1 if lst.sni is not None else 1 + len(self.ctx.cluster.nodes) for lst in self.config.listeners)
        fits = connections_that_fit(limit.soft, listening)
        configured = self.config.settings["max.connections"]
        if fits is None:
            return
        if configured == UNLIMITED:
            self.limits.settings = dataclasses.replace(self.limits.settings, max_connections=fits)
            log.info("max_connections_derived", max_connections=fits, open_files_limit=limit.soft,
                     hint="each client connection holds two descriptors (client, upstream); set max.connections "
                          "or raise the open-files limit (ulimit -n) to change it")
        elif configured > fits:
            log.warning("max_connections_above_open_files_limit", max_connections=configured,
                        open_files_limit=limit.soft, connections_that_fit=fits,
                        hint="at the limit, accept() fails and /healthz may stop answering")

    async def _load_security_store(self, topic: SecurityTopic) -> None:
        """Replay the security topic before any listener opens: until then nobody can authenticate
        or be authorized (fail closed, as Kafka's authorizer before its metadata has loaded)."""
        timeout_ms = self.config.settings["ksgate.security.store.load.timeout.ms"]
        # The store's links run on its own thread: count their failures on this loop.
        loop, metrics = asyncio.get_running_loop(), self.ctx.metrics

        def count(kind: str) -> None:
            loop.call_soon_threadsafe(metrics.upstream_error, kind)

        topic.on_upstream_error = count
        topic.start()
        if not await asyncio.to_thread(topic.wait_loaded, timeout_ms / 1000):
            await asyncio.to_thread(topic.stop)
            why = f": {topic.stalled}" if topic.stalled else ""
            raise UpstreamError(f"the security topic {topic.settings.topic} was not replayed within {timeout_ms} ms "
                                f"(ksgate.security.store.load.timeout.ms){why}")
        from gateway.stores.replicated import TopicAclStore, TopicCredentialStore

        # SCRAM's decoy salts for unknown users derive from a secret kept in the topic.
        await asyncio.to_thread(TopicCredentialStore(topic).ensure_decoy_secret)
        authorization = self.ctx.authorization
        if authorization is not None:
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

    def readiness_problem(self) -> str | None:
        """Why the gateway cannot serve right now (for /readyz once started), or None."""
        return self.store_problem or self.ctx.upstream_health.problem(asyncio.get_running_loop().time())

    async def _probe_until_answered(self) -> None:
        """probe_upstream, retried for ksgate.upstream.startup.timeout.ms: a broker started
        together with the gateway (compose, systemd, a laptop) may not listen yet."""
        timeout_ms = self.config.settings["ksgate.upstream.startup.timeout.ms"]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                await self.probe_upstream()
            except UpstreamError as exc:
                remaining = deadline - loop.time()
                if not exc.retriable:
                    raise
                if remaining <= 0:
                    raise UpstreamError(
                        f"the upstream did not answer within {timeout_ms} ms (ksgate.upstream.startup.timeout.ms, "
                        f"{attempt} attempt{'s' if attempt > 1 else ''}); is a broker running at "
                        f"upstream.bootstrap.servers? {exc}") from None
                delay = min(self.STARTUP_RETRY_S * 2 ** (attempt - 1), self.STARTUP_RETRY_MAX_S, remaining)
                log.warning("upstream_not_answering", attempt=attempt, error=str(exc),
                            retry_in_ms=round(delay * 1000), gives_up_in_ms=round(remaining * 1000))
                await asyncio.sleep(delay)
                continue
            if attempt > 1:
                log.info("upstream_answered", attempt=attempt)
            return

    async def _watch_upstream(self) -> None:
        """Keep /readyz true to the upstream: ApiVersions to a bootstrap server every few seconds,
        skipped while client links keep proving the upstream alive."""
        health, loop = self.ctx.upstream_health, asyncio.get_running_loop()
        while not self._stopping:
            await asyncio.sleep(health.probe_interval_s)
            if not health.needs_probe(loop.time()):
                continue
            failure = await self._bootstrap_answers()
            if failure is None:
                health.answered(loop.time())
                if self._upstream_silent:
                    log.info("upstream_answering_again")
                    self._request_topic_refresh()  # after an outage: maybe another cluster (its id, its topics)
            else:
                health.probe_failed(failure.reason)
                if not self._upstream_silent:  # once per outage, naming its cause
                    log.warning("upstream_probe_failed", cause=failure.cause, error=failure.reason)
            self._upstream_silent = failure is not None

    async def _bootstrap_answers(self) -> NoBootstrapAnswered | None:
        """None if a bootstrap server would serve a client link (ApiVersions, and the gateway's own
        login on a SASL upstream), else why none would."""
        interval = self.ctx.upstream_health.probe_interval_s
        timeout = min(self.config.upstream.connect_timeout_ms / 1000, max(1.0, interval))
        outcome = await first_answering_bootstrap(self.config.upstream.bootstrap_servers, self.ctx.upstream_ssl,
                                                  timeout, self.ctx.metrics.upstream_error, self._logged_in)
        return outcome if isinstance(outcome, NoBootstrapAnswered) else None

    async def _logged_in(self, client: UpstreamClient, versions: dict[str, Any]) -> None:
        """After ApiVersions (start-up, the readiness probe): the gateway's own login, then the feature levels,
        which replace the known ones (a level changed with kafka-features)."""
        await self._log_in(client)
        await self._learn_features(client, versions)

    async def _log_in(self, client: UpstreamClient) -> None:
        """On a SASL upstream, the gateway's own login, since ApiVersions needs none and a rotated service
        credential would otherwise look healthy."""
        if self.config.upstream.uses_sasl:
            await client.authenticate(self.config.upstream)

    async def _learn_features(self, client: UpstreamClient, versions: dict[str, Any]) -> None:
        """The upstream's feature levels at the highest ApiVersions version both speak (after the login)."""
        self.ctx.cluster.learn_features(await client.latest_api_versions(versions))
        self.ctx.upstream_health.features_read = asyncio.get_running_loop().time()

    async def probe_upstream(self) -> None:
        """Learn the upstream's API versions and brokers; fail start-up if none answers."""
        timeout = self.config.upstream.connect_timeout_ms / 1000
        outcome = await first_answering_bootstrap(self.config.upstream.bootstrap_servers, self.ctx.upstream_ssl,
                                                  timeout, self.ctx.metrics.upstream_error, self._learn_cluster)
        if isinstance(outcome, NoBootstrapAnswered):
            raise UpstreamError("no upstream bootstrap server answered: " + outcome.reason,
                                retriable=outcome.retriable, cause=outcome.cause)

    async def _learn_cluster(self, client: UpstreamClient, versions: dict[str, Any]) -> None:
        """After ApiVersions: negotiate, log in (a SASL upstream), then learn the brokers from Metadata."""
        self.ctx.cluster.learn_api_versions(versions)
        self.ctx.negotiated = negotiate(self.ctx.routes, self.ctx.cluster.api_ranges,
                                        self.ctx.authorization is not None)
        await self._logged_in(client, versions)
        metadata_version = min(12, self.ctx.negotiated.get(ApiKey.METADATA, (0, 0))[1])
        metadata = await client.request(ApiKey.METADATA, metadata_version, {
            "topics": [], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})
        self._learn_cluster_id(metadata.get("cluster_id"))
        for broker in metadata["brokers"]:
            self._learn_node(broker["node_id"], broker["host"], broker["port"])
        self.ctx.upstream_health.answered(asyncio.get_running_loop().time())

    def _learn_cluster_id(self, cluster_id: str | None) -> None:
        """The upstream's cluster id, from start-up's Metadata and each topic listing's: what ApiVersions v5 checks
        a client's intended cluster against (KIP-1242), so an upstream re-pointed at another cluster sends clients
        that still name the old one to re-bootstrap."""
        known = self.ctx.cluster.cluster_id
        if known is not None and cluster_id != known:
            log.warning("upstream_cluster_id_changed", previous=known, current=cluster_id,
                        hint="upstream.bootstrap.servers now reach another cluster; clients naming the previous "
                             "one in ApiVersions are told to re-bootstrap")
        self.ctx.cluster.cluster_id = cluster_id

    def _route_server_names(self) -> None:
        """One-port listeners: refuse handshakes for names they do not serve, and check the certificate covers
        the bootstrap host and every broker name (a wildcard SAN, or each known node's name)."""
        for listener in self.config.listeners:
            sni, tls = listener.sni, self.ctx.security[listener.name].tls
            if sni is None or tls is None:
                continue
            try:
                tls.route_server_names(sni.route, partial(_uncovered, sni, self.ctx.cluster))
            except TlsConfigError as exc:
                raise ConfigError(f"listener.name.{listener.name.lower()}.ksgate.sni.broker.host.pattern: {exc}") \
                    from None

    def _open_node_listeners(self, node_id: int) -> None:
        if not self._listening:  # learnt during start-up: start() opens it with the others, once ready
            return
        for listener in self.config.listeners:
            if listener.sni is not None:
                tls = self.ctx.security[listener.name].tls
                missing = listener.sni.uncovered(tls.current.dns_names, [node_id]) if tls is not None else []
                if missing:
                    log.error("sni_certificate_misses_node", listener=listener.name, missing=missing)
                continue
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
            from gateway.ops.workers import reuse_port_socket

            sock = reuse_port_socket(listener.bind.host, port, ipv6_only=listener.ipv6_only)
        else:
            sock = _bound_socket(listener.bind.host, port, listener.ipv6_only)
        loop = asyncio.get_running_loop()
        self._servers[key] = Acceptor(loop, sock, lambda conn, address: self._accept(listener, node_id, conn, address))
        log.info("listening", listener=listener.name, node=node_id, address=f"{listener.bind.host}:{port}")

    def _accept(self, listener: ListenerConfig, node_id: int | None, sock: socket.socket,
                address: ClientAddress) -> None:
        """A new TCP connection: behind a load balancer, first its PROXY header; then refused at
        once if over a connection limit (no TLS, no Kafka bytes read), otherwise served once its
        TLS handshake (if any) completes."""
        if listener.proxy_protocol:
            # Until its PROXY header is read the connection is counted nowhere: it still holds a
            # descriptor, so those waiting count against max.connections (total) here.
            limit = self.limits.settings.max_connections
            if self.limits.total + self._proxied_pending >= limit:
                self._refused(listener.name, address, Refusal("max.connections", limit, "max_connections"))
                sock.close()
                return
            self._proxied_pending += 1
            pending = _Pending(sock, None, address)
            # released by the task's end, not by a finally inside it: a task cancelled before its first
            # step (at shutdown) never runs its coroutine
            self._track(self._accept_proxied(listener, node_id, pending)).add_done_callback(
                lambda _: self._settle_proxied(pending))
            return
        self._admit(listener, node_id, sock, address)

    async def _accept_proxied(self, listener: ListenerConfig, node_id: int | None, pending: _Pending) -> None:
        try:
            client = await proxied_client(pending.sock, pending.client, listener.proxy_trusted_networks,
                                          self.config.authentication_timeout_ms / 1000, listener.name)
        finally:
            self._header_over(pending)
        if client is not None:  # limits count the client's address, not the balancer's
            pending.given = True
            self._admit(listener, node_id, pending.sock, client)

    def _header_over(self, pending: _Pending) -> None:
        """Its PROXY header read or refused, or its task ended: no longer counted as pending, once."""
        if not pending.settled:
            pending.settled = True
            self._proxied_pending -= 1

    def _settle_proxied(self, pending: _Pending) -> None:
        """Its task ended: a socket not passed on to _admit is closed (cancelled while or before reading)."""
        self._header_over(pending)
        if not pending.given:
            pending.sock.close()

    def _track(self, coroutine: Coroutine[None, None, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)
        return task

    def _admit(self, listener: ListenerConfig, node_id: int | None, sock: socket.socket,
               client: ClientAddress) -> None:
        decision = self.limits.admit(listener.name, client.host)
        if isinstance(decision, Refusal):
            self._refused(listener.name, client, decision)  # recorded before the client can see the close
            sock.close()
            return
        if self._stopping:
            self.limits.release(decision)
            sock.close()
            return
        # connection_creation_rate (KIP-612): an address over its quota waits, alone
        delay = connection_delay_s(self.ctx.quotas, self.ctx.quota_sensors, client.host)
        deferred = False
        if self.ctx.security[listener.name].ssl_context is not None:
            # an address over its TLS handshake budget waits too, alone: the loop stays others'
            slot = self.handshake_budget.offer(client.host)
            if slot is None:  # its bound of connections already waits: a limit, as max.connections.per.ip
                self.limits.release(decision)
                self._refused(listener.name, client, Refusal("ksgate.tls.handshake.queue.per.ip",
                                                             self.handshake_budget.queue_per_ip,
                                                             "tls_handshake_queue_per_ip"))
                sock.close()
                return
            deferred = slot.delay_s > 0
            if deferred:
                self.ctx.metrics.tls_handshake_deferred(listener.name)
            delay = max(delay, slot.delay_s)
        pending = _Pending(sock, decision, client, deferred)
        # What the connection holds is released when its task ends, whichever way: a task cancelled
        # before its first step (at shutdown) never runs its coroutine, so never its finally blocks.
        self._track(self._serve(listener, node_id, pending, delay)).add_done_callback(
            lambda _: self._settle(pending))

    def _refused(self, listener_name: str, address: ClientAddress, refusal: Refusal) -> None:
        self.ctx.metrics.connection_refused(listener_name, refusal.metric_reason)
        log.info("connection_limit_refused", listener=listener_name, client=str(address),
                 limit=refusal.key, value=refusal.limit)
        if self.ctx.authorization is None or not self.ctx.authorization.audit.enabled:
            return
        suppressed = self._refusal_audit.sample()
        if suppressed is not None:
            self.ctx.authorization.audit.connection_refused(
                client_host=address.host, client_port=address.port, listener=listener_name, limit_key=refusal.key,
                limit=refusal.limit, suppressed=suppressed)

    async def _serve(self, listener: ListenerConfig, node_id: int | None, pending: _Pending,
                     delay_s: float = 0.0) -> None:
        """Hand the socket to the event loop; a TLS handshake must complete within the
        authentication timeout (a peer that sends nothing is not held for asyncio's 60 s).
        The timeout starts when the handshake does: a connection ``deferred`` by its address's
        handshake budget waits first (bounded by ksgate.tls.handshake.queue.per.ip / rate), and
        that wait, caused by its address's rate, does not eat its handshake's time.  A peer that
        leaves while it waits is let go at once (gateway/edge/deferred_wait.py)."""
        made: list[ClientConnection] = []
        client, admission = pending.client, pending.admission
        assert admission is not None  # admitted: _admit made it

        def protocol() -> ClientConnection:
            made.append(self._new_connection(listener.name, node_id, admission, client))
            return made[-1]

        context = self.ctx.security[listener.name].ssl_context
        timeout = self.config.authentication_timeout_ms / 1000 if context is not None else None
        if context is not None:
            send_handshake_alerts_to(pending.sock)  # this task's context is the handshake's
        try:
            if delay_s > 0:  # over its address's connection_creation_rate or handshake budget
                try:
                    turn = await self._hangup_watch().wait_turn(pending.sock, delay_s)
                finally:
                    self._end_wait(pending)
                if turn is PEER_GONE:
                    self._let_go(listener, pending, context is not None)
                    return
            pending.given = True  # from here the loop's transport owns the socket, and closes it
            await asyncio.get_running_loop().connect_accepted_socket(
                protocol, pending.sock, ssl=context, ssl_handshake_timeout=timeout)
            pending.settled = True  # the connection holds its admission now: its close hook releases it
        except (OSError, ssl.SSLError, asyncio.CancelledError) as exc:
            # Never connected: the connection's own close hook will not run.
            for conn in made:
                self._connections.pop(conn, None)
            self._settle(pending)
            if isinstance(exc, asyncio.CancelledError):
                raise
            if context is None:  # the peer was gone before the loop took the socket
                log.info("connection_lost_at_accept", listener=listener.name, error=repr(exc))
                return
            kind = "timeout" if isinstance(exc, (ConnectionAbortedError, TimeoutError)) else "failed"
            self.ctx.metrics.tls_handshake_failed(listener.name, kind)
            failure = certificate_failure(exc)
            log.info("tls_handshake_failed", listener=listener.name, client=str(client), kind=kind,
                     failure=failure, error=repr(exc))
            if failure is not None:  # the client's certificate was refused: an authentication failure
                record_certificate_failure(self.ctx, listener, client, failure)

    def _hangup_watch(self) -> HangupWatch:
        if self._hangups is None:
            self._hangups = HangupWatch(asyncio.get_running_loop())
        return self._hangups

    def _let_go(self, listener: ListenerConfig, pending: _Pending, tls: bool) -> None:
        """The peer closed or reset while its connection waited (a ClientHello it sent is left unread):
        closed now, not at its turn.  Counted as the failed handshake it would have become then."""
        self._settle(pending)
        if tls:
            self.ctx.metrics.tls_handshake_failed(listener.name, "failed")
        log.info("connection_lost_while_deferred", listener=listener.name, client=str(pending.client))

    def _end_wait(self, pending: _Pending) -> None:
        """Its wait for its address's handshake budget is over (its turn, its peer gone, or its task ended): once."""
        if pending.deferred:
            pending.deferred = False
            self.handshake_budget.started(pending.client.host)
            self.ctx.metrics.tls_handshake_resumed()

    def _settle(self, pending: _Pending) -> None:
        """Release, once, what an accepted connection holds until the loop has made it a connection:
        its place in its address's wait, its admission (connection counts), and its socket unless the
        loop was given it."""
        self._end_wait(pending)
        if pending.settled:
            return
        pending.settled = True
        if pending.admission is not None:
            self.limits.release(pending.admission)
        if not pending.given:
            pending.sock.close()

    def _new_connection(self, listener_name: str, node_id: int | None, admission: Admission,
                        client: ClientAddress) -> ClientConnection:
        conn = ClientConnection(self.ctx, listener_name, node_id, client, on_close=self._on_connection_closed)
        self._connections[conn] = admission
        if self._stopping:
            conn.begin_drain()
        return conn

    def _connection_closed(self, conn: ClientConnection) -> None:
        if (admission := self._connections.pop(conn, None)) is not None:
            self.limits.release(admission)

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
        for handshake in list(self._handshakes):
            handshake.cancel()
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
        if self._hangups is not None:
            self._hangups.close()
        self.ctx.hashes.close()
        if self.ctx.authorization is not None:
            self.ctx.authorization.audit.close()
        if self.security_topic is not None:
            await asyncio.to_thread(self.security_topic.stop)
        log.info("gateway_stopped")


def _uncovered(sni: SniRoutes, cluster: ClusterView, names: list[str]) -> list[str]:
    return sni.uncovered(names, cluster.nodes)


def _report_listen_failure(task: asyncio.Task[None]) -> None:
    """A node discovered while serving whose port cannot be opened: clients sent there cannot connect."""
    if not task.cancelled() and task.exception() is not None:
        log.error("node_listener_failed", error=str(task.exception()))


def _resolve_host(host: str) -> list[str]:
    """The addresses of a host named in max.connections.per.ip.overrides (resolved at start-up, as Kafka does)."""
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)})
    except OSError as exc:
        raise ConfigError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}") from None


def _bound_socket(host: str, port: int, ipv6_only: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    set_ipv6_only(sock, ipv6_only)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"listeners: cannot bind {host}:{port}: {exc.strerror}") from None
    sock.listen(1024)
    sock.setblocking(False)
    return sock
