"""One client connection: frames in, authentication, the request pipeline, relay, responses out.

The connection owns its upstream link, which is opened only once the client has
authenticated.  Reading from either side pauses while the other side's write buffer is
over its bound, and while too many requests are in flight, so the memory a connection can
hold is bounded; before authentication frames are limited to sasl.server.max.receive.size.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any, cast

from auth.principal import KafkaPrincipal
from auth.sasl.first_frame import diagnose_non_kafka
from auth.sasl.server import Authenticated, Close, SaslServerAuthenticator
from gateway.context import GatewayContext
from gateway.edge.sni_routing import Node
from gateway.ops.logs import get_logger
from gateway.session.address_rewrite import needs_rewrite
from gateway.session.request_stage import PipelineRefusal, handle_request, match_response, response_pieces
from gateway.session.response_queue import ResponseQueue, Slot, WireBytes, with_correlation_id
from gateway.session.sasl_stage import authenticate_frame, new_authenticator, principal_at_connect
from gateway.transport.upstream_link import UpstreamLink
from gateway.transport.worker_thread import (
    fill_response_off_loop,
    handle_request_off_loop,
    offloads_request,
    offloads_response,
)
from gateway.upstream.login import LinkRequester, UpstreamAuthError, sasl_exchange
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.frame_receiver import FrameReceiver
from protocol.framing import Frame, FrameTooLarge

_ids = itertools.count(1)
# Before authentication a receive buffer is reserved at most this far ahead of the bytes a
# peer actually sent (SASL frames are small; larger ones grow as they arrive).
_PREALLOC_BEFORE_AUTHENTICATION = 4 * 1024


class ClientConnection(asyncio.BufferedProtocol):
    """Client bytes are received straight into frame buffers (get_buffer/buffer_updated):
    a large Produce request lands in one buffer of its own, with no per-read copy."""

    def __init__(self, ctx: GatewayContext, listener_name: str, node_id: int | None,
                 on_close: Any = None, client_address: tuple[str, int] | None = None) -> None:
        self.ctx = ctx
        self.listener = next(lst for lst in ctx.config.listeners if lst.name == listener_name)
        self.node_id = node_id
        self.id = next(_ids)
        self.log = get_logger(conn=self.id, listener=listener_name, node=node_id)
        self.splitter = FrameReceiver(ctx.config.socket_request_max_bytes, pool=ctx.frame_buffers)
        self.traffic = ctx.metrics.traffic(listener_name)  # bytes in/out by API, added to per frame
        self.responses = ResponseQueue(ctx.metrics.observe_latency, self.traffic.response)
        self._stream_api = -1  # the API of the response being streamed (for its byte count)
        self.transport: asyncio.Transport | None = None
        self.upstream: UpstreamLink | None = None
        self._paused_reasons: set[str] = set()
        self._reading_paused = False
        self._closing = False
        self._draining = False
        self._on_close = on_close
        # Frames accepted before the upstream link is up (uvloop may deliver data even
        # though reading was paused in connection_made); bounded by queued.max.requests.
        self._backlog: list[WireBytes] = []
        self._streaming = False
        self._counted = False  # connection_made ran (a failed TLS handshake never gets there)
        self.last_active = asyncio.get_event_loop().time()
        self.drained = asyncio.Event()
        self.drained.set()
        self.client_host = "?"
        self.client_port = 0
        self.security = ctx.security[listener_name]
        self.principal: KafkaPrincipal | None = None
        self.authenticator: SaslServerAuthenticator | None = None
        # True while a password is checked off the event loop (gateway.session.sasl_stage); the
        # frames that arrived meanwhile wait in _held (reading is paused: at most one read's worth).
        self.verifying = False
        self._held: list[Frame] = []
        self._auth_timer: asyncio.TimerHandle | None = None
        # The last local answer still being computed (a store write): later local answers
        # wait for it, so a connection sees its own admin changes, as on a Kafka broker.
        self.local_chain: asyncio.Future[None] | None = None
        # The client's address as a trusted load balancer's PROXY header states it (else the socket's peer).
        self._client_address = client_address
        # While a large request is handled in the worker thread (transport/worker_thread.py), later frames wait in
        # _held too, as they do during a password check.
        self._offloaded = False
        self._worker_tasks: set[asyncio.Task[None]] = set()  # referenced until done (asyncio keeps weak refs)

    # --- client socket events ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # cast, not isinstance: uvloop's transports are not asyncio.Transport subclasses
        self.transport = tr = cast(asyncio.Transport, transport)
        self.ctx.metrics.connection_opened(self.listener.name)
        self._counted = True
        peer = self._client_address or tr.get_extra_info("peername")
        self.client_host = str(peer[0]) if peer else "?"
        self.client_port = int(peer[1]) if peer else 0
        self.log = self.log.bind(client=f"{peer[0]}:{peer[1]}" if peer else "?")
        tr.set_write_buffer_limits(high=self.ctx.config.connection_buffer_max_bytes)
        if self.listener.sni is not None and self.security.tls is not None:
            # One port for every broker: the handshake's server name said which node this connection is for.
            route = self.security.tls.route_of(tr.get_extra_info("ssl_object"))
            self.node_id = route.node_id if isinstance(route, Node) else None
            self.log = self.log.bind(node=self.node_id)
        try:
            self.principal = principal_at_connect(self, self.security)
        except Exception as exc:  # e.g. no ssl.principal.mapping.rules rule matched the DN
            self.abort(f"cannot build a principal: {exc}")
            return
        if self.principal is not None:
            self.log = self.log.bind(principal=str(self.principal))
            self._count_principal(self.principal)
            self._start_upstream()
            return
        self.authenticator = new_authenticator(self, self.security)
        self.splitter.limit = self.ctx.config.sasl_server_max_receive_size
        self.splitter.prealloc = _PREALLOC_BEFORE_AUTHENTICATION
        self._auth_timer = asyncio.get_running_loop().call_later(
            self.ctx.config.authentication_timeout_ms / 1000, self.abort, "authentication timed out")

    def _start_upstream(self) -> None:
        self.set_read_paused("connecting", True)
        asyncio.get_running_loop().create_task(self._connect_upstream())

    async def _connect_upstream(self) -> None:
        loop = asyncio.get_running_loop()
        config = self.ctx.config.upstream
        for host, port in self._upstream_targets():
            try:
                _, link = await asyncio.wait_for(loop.create_connection(
                    lambda: UpstreamLink(self, self.ctx.config.socket_request_max_bytes), host, port,
                    ssl=self.ctx.upstream_ssl, server_hostname=host if self.ctx.upstream_ssl else None,
                ), config.connect_timeout_ms / 1000)
            except (TimeoutError, OSError) as exc:
                self.ctx.metrics.upstream_error("connect")
                self.log.warning("upstream_connect_failed", upstream=f"{host}:{port}", error=repr(exc))
                continue
            if self._closing:
                assert link.transport is not None
                link.transport.close()
                return
            assert link.transport is not None
            link.transport.set_write_buffer_limits(high=self.ctx.config.connection_buffer_max_bytes)
            if config.uses_sasl and not await self._authenticate_upstream(link):
                return
            self.upstream = link
            self.ctx.counters.upstream_connections += 1
            self.ctx.upstream_health.answered(loop.time())
            self.log = self.log.bind(upstream=f"{host}:{port}")
            if self._backlog:
                link.transport.writelines(self._backlog)
                self._backlog = []
            self.set_read_paused("connecting", False)
            return
        self.ctx.metrics.upstream_error("unreachable")
        self.abort("no upstream broker reachable")

    async def _authenticate_upstream(self, link: UpstreamLink) -> bool:
        """SASL as the gateway's service principal before any client request is relayed."""
        assert link.transport is not None
        transport = link.transport
        requester = LinkRequester(transport.write, self.ctx.config.upstream.connect_timeout_ms / 1000)
        link.auth_inbox = requester.deliver
        version = min(2, self.ctx.cluster.api_ranges.get(ApiKey.SASL_AUTHENTICATE, (0, 2))[1])
        try:
            await sasl_exchange(requester, self.ctx.config.upstream, version)
        except (TimeoutError, UpstreamAuthError, DecodeError) as exc:
            self.ctx.metrics.upstream_error("protocol" if isinstance(exc, DecodeError) else "authentication")
            transport.close()
            self.abort(f"upstream authentication failed: {exc!r}")
            return False
        link.auth_inbox = None
        return not self._closing

    def _upstream_targets(self) -> list[tuple[str, int]]:
        if self.node_id is None:
            return list(self.ctx.config.upstream.bootstrap_servers)
        address = self.ctx.cluster.nodes.get(self.node_id)
        return [address] if address else []

    def get_buffer(self, sizehint: int) -> memoryview:
        # sizehint is ignored: the receiver sizes buffers by the frame being received.
        return self.splitter.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = asyncio.get_running_loop().time()
        try:
            frames = self.splitter.buffer_updated(nbytes)
        except FrameTooLarge as exc:
            if self.principal is None:
                self.abort(f"frame too large before authentication ({exc}; sasl.server.max.receive.size): "
                           f"{diagnose_non_kafka(self.splitter.peek())}")
            else:
                self.abort(f"request too large: {exc} (socket.request.max.bytes)")
            return
        except DecodeError as exc:
            self.abort(f"bad framing: {exc}")
            return
        if not frames:
            return
        self._handle_frames(frames)

    def _handle_frames(self, frames: list[Frame]) -> None:
        outgoing: list[WireBytes] = []
        for index, frame in enumerate(frames):
            if self.verifying or self._offloaded:  # in order: later frames wait for the password check or worker
                self._held.extend(frames[index:])
                break
            self.traffic.request_frame(frame.wire)
            if self.principal is None:
                if self._closing:
                    return
                authenticate_frame(self, frame)
                continue
            if offloads_request(self, frame):
                self._offloaded = True
                self._held.extend(frames[index + 1 :])
                self.set_read_paused("large-request", True)
                self._in_worker(self._handle_off_loop(frame))
                break
            try:
                relay = handle_request(self, frame)
            except Exception as exc:  # a refusal, or a gateway bug: either closes this connection only
                self._request_failed(exc)
                return
            if relay is not None:
                outgoing.extend(relay)
        self._send_upstream(outgoing)
        self._flush()
        if len(self.responses) >= self.ctx.config.queued_max_requests:
            self.set_read_paused("in-flight", True)

    async def _handle_off_loop(self, frame: Frame) -> None:
        """A large request, decoded and authorized in the worker (transport/worker_thread.py); then the held frames."""
        try:
            relay = await handle_request_off_loop(self, frame)
        except Exception as exc:  # a refusal, or a gateway bug: either closes this connection only
            self._request_failed(exc)
            return
        if self._closing:
            return
        self._send_upstream(relay or [])
        self._offloaded = False
        held, self._held = self._held, []
        self.set_read_paused("large-request", False)
        self._handle_frames(held)

    def _request_failed(self, exc: Exception) -> None:
        """Fail closed on a request, on the loop or from the worker; called inside the caller's ``except``."""
        if isinstance(exc, PipelineRefusal):
            self.abort(str(exc))
            return
        self.log.exception("request_pipeline_error")  # a gateway bug: its traceback goes to the log
        self.abort("internal error in the request pipeline")

    def _response_failed(self, exc: Exception) -> None:
        """Fail closed on an upstream response (it is not Kafka, or the gateway has a bug)."""
        if isinstance(exc, DecodeError | PipelineRefusal):
            self.ctx.metrics.upstream_error("protocol")
            self.abort(f"upstream response refused: {exc}")
            return
        self.log.exception("response_pipeline_error")
        self.abort("internal error in the response pipeline")

    def _in_worker(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._worker_tasks.add(task)
        task.add_done_callback(self._worker_tasks.discard)

    def _send_upstream(self, outgoing: list[WireBytes]) -> None:
        if not outgoing:
            return
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.writelines(outgoing)
        else:
            self._backlog.extend(outgoing)

    def pause_writing(self) -> None:
        # The client is slow to read: stop reading responses from the upstream.
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._counted:
            self.ctx.metrics.connection_closed(self.listener.name)
        if self._auth_timer is not None:
            self._auth_timer.cancel()
        self.log.info("client_disconnected", in_flight=len(self.responses))
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()
        self.drained.set()
        if self._on_close is not None:
            self._on_close(self)

    # --- upstream events -----------------------------------------------------------

    def on_upstream_frames(self, frames: list[Frame]) -> None:
        for frame in frames:
            try:
                slot = match_response(self, frame)
                if slot is not None and offloads_response(slot, frame):
                    self._in_worker(self._fill_off_loop(slot, frame))
                elif slot is not None:
                    slot.response = response_pieces(slot, frame, self.ctx.cluster, self.ctx.address_book(self.listener))
                    slot.ready = True
            except Exception as exc:  # a refused response, or a gateway bug: either closes this connection only
                self._response_failed(exc)
                return
        self._flush()
        if len(self.responses) < self.ctx.config.queued_max_requests:
            self.set_read_paused("in-flight", False)

    async def _fill_off_loop(self, slot: Slot, frame: Frame) -> None:
        """A large response to decode (an authorization hook, addresses), in the worker; it keeps its slot."""
        try:
            await fill_response_off_loop(self, slot, frame)
        except Exception as exc:  # a refused response, or a gateway bug: either closes this connection only
            self._response_failed(exc)
            return
        self._flush()

    # --- streamed responses (large frames that need no rewriting) ------------------------

    STREAM_MIN_BYTES = 64 * 1024  # smaller frames arrive whole anyway: not worth it

    def may_stream(self, upstream_id: int, size: int) -> bool:
        if size < self.STREAM_MIN_BYTES or self._streaming or self._closing:
            return False
        slot = self.responses.streamable(upstream_id)
        return slot is not None and not needs_rewrite(slot.api_key, slot.api_version)

    def stream_start(self, upstream_id: int, head: bytearray) -> None:
        slot = self.responses.start_streaming(upstream_id)
        self._streaming = True
        self._stream_api = slot.api_key
        self.traffic.response(slot.api_key, len(head))
        self.ctx.counters.streamed_responses += 1
        view = memoryview(head)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(with_correlation_id(view, 4, slot.correlation_id))

    def stream_chunk(self, chunk: memoryview) -> None:
        self.traffic.response(self._stream_api, len(chunk))
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(chunk)

    def stream_end(self) -> None:
        self._streaming = False
        self._flush()
        if len(self.responses) < self.ctx.config.queued_max_requests:
            self.set_read_paused("in-flight", False)

    def on_upstream_error(self, reason: str) -> None:
        self.ctx.metrics.upstream_error("protocol")  # the upstream's bytes are not Kafka frames
        self.abort(reason)

    def on_upstream_lost(self, exc: Exception | None) -> None:
        if not self._closing:
            self.ctx.metrics.upstream_error("disconnected")
            self.log.info("upstream_disconnected", error=repr(exc) if exc else None)
            self.abort("upstream closed the connection")

    # --- authentication ------------------------------------------------------------

    def on_authenticated(self, step: Authenticated) -> None:
        first = self.principal is None
        self.principal = step.principal
        self.log = self.log.bind(principal=str(step.principal))
        self.log.info("authenticated", mechanism=step.mechanism, reauthenticated=step.reauthenticated,
                      session_expiry_ms=step.session_expiry_ms)
        self._count_principal(step.principal, step.mechanism)
        if first:
            if self._auth_timer is not None:
                self._auth_timer.cancel()
            self.splitter.limit = self.ctx.config.socket_request_max_bytes
            self.splitter.prealloc = FrameReceiver.PREALLOC_BYTES
            self._start_upstream()

    @property
    def closing(self) -> bool:
        return self._closing

    def release_held_frames(self) -> None:
        """A password check finished: write its answer, then handle the frames that arrived meanwhile."""
        held, self._held = self._held, []
        if not self._closing:
            self._handle_frames(held)

    def _count_principal(self, principal: KafkaPrincipal, mechanism: str | None = None) -> None:
        self.ctx.metrics.authentication(mechanism or self.listener.security_protocol, "success")
        key = str(principal)
        self.ctx.counters.authenticated[key] = self.ctx.counters.authenticated.get(key, 0) + 1
        if self.ctx.authorization is not None:
            self.ctx.authorization.audit.authentication(
                principal=key, attempted_user=None, client_host=self.client_host, client_port=self.client_port,
                listener=self.listener.name, mechanism=mechanism or self.listener.security_protocol, succeeded=True)

    def refuse_authentication(self, step: Close) -> None:
        """Answer (after Kafka's failed-authentication delay, to slow brute force) and close."""
        throttle = self.ctx.login_throttle
        if step.failure_class == "throttled":  # one warning when the throttle engages, not one per attempt
            self.log.debug("authentication_failed", reason=step.reason, mechanism_failure=True)
        else:
            self.log.warning("authentication_failed", reason=step.reason,
                             mechanism_failure=step.authentication_failure)
        self.ctx.counters.authentication_failures += 1
        if step.failure_class == "bad_credentials" and throttle.record_failure(self.client_host):
            self.log.warning("authentication_throttled", client_host=self.client_host, failures=throttle.limit,
                             window_ms=throttle.window_ms)  # not throttled/overloaded: those checked nothing
        self.ctx.metrics.authentication(self.authenticator.mechanism if self.authenticator else None,
                                        step.failure_class)
        if self.ctx.authorization is not None:
            self.ctx.authorization.audit.authentication(
                principal=None, attempted_user=self.authenticator.attempted_user if self.authenticator else None,
                client_host=self.client_host, client_port=self.client_port, listener=self.listener.name,
                mechanism=self.authenticator.mechanism if self.authenticator else None,
                succeeded=False, failure=step.failure_class)
        self.set_read_paused("auth-failed", True)
        self._closing = True
        delay = self.ctx.config.failed_authentication_delay_ms / 1000 if step.authentication_failure else 0

        def finish() -> None:
            if step.frame is not None:
                self.responses.add_local(0, ApiKey.SASL_AUTHENTICATE, 0, step.frame)  # prebuilt: ids unused
                self._flush()
            self.close()

        if delay:
            asyncio.get_running_loop().call_later(delay, finish)
        else:
            finish()

    # --- helpers -------------------------------------------------------------------

    def flush_responses(self) -> None:
        """Write out the responses that are ready, in order (after a deferred local answer completes)."""
        self._flush()

    def _flush(self) -> None:
        if self._streaming:  # a streamed response is mid-way on the socket: nothing may interleave
            return
        ready = self.responses.pop_ready()
        if ready and self.transport is not None and not self.transport.is_closing():
            self.transport.writelines(ready)
        if not len(self.responses):
            self.drained.set()
            if self._draining:
                self.close()
        else:
            self.drained.clear()

    def set_read_paused(self, reason: str, paused: bool) -> None:
        if paused:
            self._paused_reasons.add(reason)
        else:
            self._paused_reasons.discard(reason)
        want = bool(self._paused_reasons) or self._draining
        if self.transport is None or want == self._reading_paused or self.transport.is_closing():
            return
        self._reading_paused = want
        if want:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def idle_for(self, now: float) -> float:
        """Seconds since the client last sent anything, or 0 while responses are outstanding."""
        return 0.0 if len(self.responses) or self._streaming else now - self.last_active

    def begin_drain(self) -> None:
        """Graceful shutdown: read no new requests, close once in-flight ones are answered."""
        self._draining = True
        self.set_read_paused("draining", True)
        if not len(self.responses):
            self.close()

    def abort(self, reason: str) -> None:
        if self._closing:
            return
        self.log.warning("connection_refused", reason=reason)
        self.close()

    def close(self) -> None:
        self._closing = True
        if self.transport is not None:
            self.transport.close()
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()
