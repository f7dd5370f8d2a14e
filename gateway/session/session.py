"""The proxy session of one client connection, sans-IO: events in, actions out.

Like h11 for an HTTP server, the session holds every decision about one connection and no
I/O: the asyncio adapter (gateway/transport/client_connection.py) feeds it events (client
bytes, upstream frames, a finished job, a timer, a full write buffer) and carries out the
actions each event returns (gateway/session/actions.py). The session owns:

- framing limits: sasl.server.max.receive.size before authentication, socket.request.max.bytes after;
- the SASL lifecycle: the state machine, the authentication timeout, password checks off the
  loop (later frames wait, so answers stay in order), Kafka's failed-authentication delay,
  KIP-368 re-authentication and session expiry;
- the upstream link's own KIP-368 lifetime: logged in again (ReauthenticateUpstream) at 85-95 % of the
  lifetime its broker granted, no new request relayed meanwhile (they wait, as before the link was up);
- the request path (request_stage.decide) and its refusals: anything it cannot parse or
  authorize closes the connection, never reaches the upstream;
- ordering: every request reserves its slot in the ResponseQueue; upstream answers carry
  gateway-assigned correlation ids and may arrive in any order; acks=0 expects nothing;
- local answers (admin APIs): one store write at a time per connection, in order;
- large requests and responses, decided or rewritten in the worker thread, in their slot;
- the streaming decision for large responses that need no rewriting;
- backpressure: reading stops while too many requests are queued (queued.max.requests: later
  frames of a read wait for a slot), the client's or the upstream's socket is full, a password
  is checked or a large request is decided, a large frame waits for request memory
  (queued.max.request.bytes, once authenticated), and on drain. While the client's socket is
  full, reading the upstream stops too (remembered until the upstream link exists) and answers
  wait in the client outbox, still counting as queued.
- client quotas (gateway/quotas/connection.py decides): throttle_time_ms set in the answer, and
  reading paused for the throttle time (KIP-219).

The session's phase is a value (gateway/session/state/phase.py): each event first asks the
phase table whether it is handled, ignored (it came late) or impossible, and the session moves
between phases only along the table. The read gate, the off-loop jobs, the local answers and
the client outbox are small objects of their own (gateway/session/state/).

Each request is dispatched through its ApiRoute (gateway/session/routes.py), SASL and
ApiVersions included. Observations (log lines, metrics, audit events) go to the injected sinks
of the shared context; everything that touches a socket, a thread or a timer is an action, and
so is what traffic teaches about the cluster (Discovered: the server applies it). Time is an
input: the session reads the injected clock, never the system's.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from structlog.typing import FilteringBoundLogger

from auth.client_address import ClientAddress
from auth.principal import KafkaPrincipal
from auth.sasl.first_frame import diagnose_non_kafka
from auth.sasl.mechanism import HashClaim
from auth.sasl.reauthentication import reauthentication_delay_s
from auth.sasl.server import Authenticated, Refused, Respond, SaslServerAuthenticator, Step, Verifying
from gateway.admin.handlers import OffLoop
from gateway.clock import SYSTEM_CLOCK, Clock
from gateway.context import GatewayContext
from gateway.edge.sni_routing import Node
from gateway.ops.audit import REASON_CHARS, bounded_name
from gateway.ops.logs import get_logger
from gateway.quotas.connection import AppliedQuotas, ConnectionQuotas, cpu_clock_ns
from gateway.quotas.mutation_request import PartitionCounts
from gateway.session import actions as act
from gateway.session.api_versions import NOT_CHECKED, ServedNode
from gateway.session.authz_view import TopicIdMisses
from gateway.session.request_context import RequestContext
from gateway.session.request_memory import MemoryWaiter, ReceiveGate
from gateway.session.request_stage import AnswerLocally, Decision, RelayRequest, ReplyNow, decide, upstream_pieces
from gateway.session.response_queue import ResponseQueue, ResponseSlot, WireBytes, with_correlation_id
from gateway.session.response_stage import (
    Learned,
    PipelineRefusal,
    RefusedInTurn,
    endpoints_only_in_trailer,
    match_response,
    names_no_endpoints,
    needs_decoding,
    relayed_as_is,
    response_pieces,
)
from gateway.session.routes import ApiRoute, Dispatch
from gateway.session.sasl_stage import (
    looks_like_kafka,
    new_authenticator,
    note_legacy_nonce,
    principal_at_connect,
    record_login,
    record_login_failure,
)
from gateway.session.state.client_outbox import ClientOutbox
from gateway.session.state.local_answers import LocalAnswers
from gateway.session.state.off_loop_jobs import JobThen, OffLoopJobs
from gateway.session.state.phase import FRAMES_DROPPED, STEADY, Event, Move, Phase, PhaseError, SessionPhase
from gateway.session.state.read_gate import ReadGate
from gateway.session.stream_stage import StreamedTrailer, start_trailer_walk
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.frame_receiver import FrameReceiver
from protocol.framing import FrameTooLarge
from protocol.header import peek_api
from protocol.kafka_errors import KafkaError
from protocol.messages import response_frame
from protocol.registry import api

Body = dict[str, Any]
_NOT_CONNECTED = ClientAddress("?", 0)  # a session's client until connected() says who it is
_ids = itertools.count(1)
_CORRELATION = struct.Struct(">i")
# Before authentication a receive buffer is reserved at most this far ahead of the bytes a
# peer actually sent (SASL frames are small; larger ones grow as they arrive).
PREALLOC_BEFORE_AUTHENTICATION = 4 * 1024
# Requests and responses at least this large (size prefix excluded) that must be decoded go to
# the worker thread; below it the thread hop costs more than it saves.
LARGE_BYTES = 32 * 1024
LARGE_WIRE_BYTES = 4 + LARGE_BYTES  # the same, size prefix included (an upstream answer is its wire bytes)
# Responses at least this large that need no rewriting are written on as they arrive.
STREAM_MIN_BYTES = 64 * 1024
_AUTH_TIMER = "authentication"
_FAREWELL_TIMER = "farewell"  # Kafka's failed-authentication delay before the refusal is written
_QUOTA_TIMER = "quota"  # a client over its quota is muted until this fires (KIP-219)
_UPSTREAM_LOGIN_TIMER = "upstream-login"  # the upstream link logs in again (KIP-368)
# While the client's socket is full the upstream is not read, so a login's answer would wait behind the
# answers the client does not take: the login is tried again this much later instead.
UPSTREAM_LOGIN_RETRY_S = 0.05
_TIMER_EVENTS = {_AUTH_TIMER: Event.AUTHENTICATION_TIMEOUT, _FAREWELL_TIMER: Event.FAREWELL_DUE,
                 _QUOTA_TIMER: Event.QUOTA_UNMUTED, _UPSTREAM_LOGIN_TIMER: Event.UPSTREAM_LOGIN_DUE}


class ProxySession:
    """One client connection's proxy: fed events by its adapter, answering each with actions.

    The module docstring lists what it decides; gateway/transport/client_connection.py carries
    the actions out, tests/gateway/session/session_driver.py plays the adapter in tests.
    """

    # Slots: one session per open connection, thousands of them idle; no instance dict each.
    __slots__ = ("_backlog", "_counted", "_farewell", "_gate", "_jobs", "_learned", "_local", "_memory", "_out",
                 "_outbox", "_outgoing", "_phase", "_served", "_topic_id_misses", "_trailer", "_upstream_address",
                 "_upstream_up", "authenticator", "client", "clock", "ctx", "id", "listener", "node_id", "principal",
                 "quota", "receiver", "responses", "security", "traffic")

    def __init__(self, ctx: GatewayContext, listener_name: str, node_id: int | None,
                 waiter: MemoryWaiter | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        """``waiter``: the adapter, which delivers ``memory_granted`` when another connection frees request memory.
        ``clock``: where the session reads the time (tests inject their own)."""
        self.ctx = ctx
        self.clock = clock
        self.listener = next(lst for lst in ctx.config.listeners if lst.name == listener_name)
        self.security = ctx.security[listener_name]
        self.node_id = node_id
        self.id = next(_ids)
        self.receiver = FrameReceiver(ctx.config.socket_request_max_bytes, pool=ctx.frame_buffers)
        self._memory = ReceiveGate(ctx.request_memory, waiter)
        self.traffic = ctx.metrics.traffic(listener_name)  # bytes in/out by API, added to per frame
        self.responses = ResponseQueue(ctx.metrics, self.traffic, clock)
        self.principal: KafkaPrincipal | None = None
        self.authenticator: SaslServerAuthenticator | None = None
        self.client = _NOT_CONNECTED  # until connected()
        self._phase = SessionPhase()  # what the session is doing: gateway/session/state/phase.py
        self._counted = False  # connected() ran (a failed TLS handshake never gets there)
        self._out: list[act.Action] = []
        # Request pieces for the upstream, sent once per event; None between events (no list per idle connection).
        self._outgoing: list[WireBytes] | None = None
        self._upstream_up = False
        self._upstream_address: str | None = None  # the upstream broker's, once its link is up (for the log)
        self._served = NOT_CHECKED  # the cluster and broker the link reaches, once it is up (ApiVersions v5)
        # Frames accepted before the upstream link is up (bounded by queued.max.requests); None when there are none.
        self._backlog: list[WireBytes] | None = None
        self._gate = ReadGate()  # why the client is not read, and the frames read that wait
        self._jobs = OffLoopJobs()
        self._local: LocalAnswers[AnswerLocally] = LocalAnswers()
        self._outbox = ClientOutbox()  # answers on their way to the client
        self._trailer: StreamedTrailer | None = None  # the streamed response's held-back tag section, if it has one
        self._farewell: WireBytes | None = None  # the refusal of a failed login, written after the delay
        # What traffic taught about the cluster, reported as one Discovered action per event.
        self._learned = Learned(ctx.address_book(self.listener), ctx)
        self._topic_id_misses = TopicIdMisses()
        self.quota = ConnectionQuotas(ctx.quotas, ctx.quota_sensors)

    # --- events: the client side ------------------------------------------------------------

    def connected(self, client: ClientAddress, ssl_object: Any = None) -> list[act.Action]:
        """The connection is up (its TLS handshake done); ``client`` is its canonical address, made
        where it entered (the acceptor, or a trusted balancer's PROXY header), never re-derived here."""
        if not self._accepts(Event.CONNECTED):
            return self._take()
        self.ctx.metrics.connection_opened(self.listener.name)
        self._counted = True
        self.client = client
        if self.listener.sni is not None and self.security.tls is not None:
            # One port for every broker: the handshake's server name said which node this connection is for.
            served = self.security.tls.route_of(ssl_object)
            self.node_id = served.node_id if isinstance(served, Node) else None
        try:
            principal = principal_at_connect(self.listener, self.client.host, ssl_object, self.security)
        except Exception as exc:  # e.g. no ssl.principal.mapping.rules rule matched the DN
            self._close(f"cannot build a principal: {exc}")
            return self._take()
        if principal is not None:
            self._move(Move.KNOWN_AT_CONNECT)
            self.principal = principal
            self.quota.bind(principal.name)
            self._count_principal(principal)
            self.receiver.gate = self._memory
            self._open_upstream()
            return self._take()
        self._move(Move.MUST_LOG_IN)
        self.authenticator = new_authenticator(self.ctx, self.listener, self.client.host, self.security)
        self.receiver.limit = self.ctx.config.sasl_server_max_receive_size
        self.receiver.prealloc = PREALLOC_BEFORE_AUTHENTICATION
        self._out.append(act.StartTimer(_AUTH_TIMER, self.ctx.config.authentication_timeout_ms / 1000))
        return self._take()

    @property
    def log(self) -> FilteringBoundLogger:
        """This connection's logger, bound with what is known of it now (client, principal, upstream).

        Made when something is logged (connection events and errors, never per request): a bound
        logger kept by every idle connection was ~0.5 KiB of context dictionaries."""
        fields: dict[str, object] = {"conn": self.id, "listener": self.listener.name, "node": self.node_id}
        if self.client is not _NOT_CONNECTED:
            fields["client"] = str(self.client)
        if self.principal is not None:
            fields["principal"] = bounded_name(str(self.principal))
        if self._upstream_address is not None:
            fields["upstream"] = self._upstream_address
        return get_logger(**fields)

    @property
    def phase(self) -> Phase:
        return self._phase.phase

    @property
    def closing(self) -> bool:
        """Nothing more is read or relayed (a login failed, the connection was refused, or it is gone)."""
        return self._phase.closing

    @property
    def reading_paused(self) -> bool:
        """Whether the client's socket should be paused now (for the adapter to check it is)."""
        return self._gate.paused

    @property
    def upstream_reading_paused(self) -> bool:
        """Whether the upstream socket should be paused now: the client's socket is full."""
        return self._outbox.full

    @property
    def queued_requests(self) -> int:
        """Requests counted against queued.max.requests: answers owed, and answers held for a full client."""
        return len(self.responses) + self._outbox.answers

    @property
    def held_frames(self) -> int:
        """Frames read but not yet handled (they wait for a job or a free slot)."""
        return len(self._gate.held)

    def receive_buffer(self) -> memoryview:
        return self.receiver.get_buffer()

    def received(self, nbytes: int) -> list[act.Action]:
        # The steady phase handles client bytes (phase.py checks that at import): one identity test per read
        # instead of the table's lookups; any other phase asks the table.
        if self._phase.phase is not STEADY and not self._accepts(Event.CLIENT_BYTES):
            return self._take()
        try:
            frames = self.receiver.buffer_updated(nbytes)
        except FrameTooLarge as exc:
            if self.phase is Phase.AUTHENTICATING:
                self._close(f"frame too large before authentication ({exc}; sasl.server.max.receive.size): "
                            f"{diagnose_non_kafka(self.receiver.peek())}")
            else:
                self._close(f"request too large: {exc} (socket.request.max.bytes)")
            return self._take()
        except DecodeError as exc:
            self._close(f"bad framing: {exc}")
            return self._take()
        if frames:
            if self._gate.held:
                self._handle_held(frames)  # behind those that already wait, in order
            else:  # the usual read: _handle_frames makes _handle_held's checks per frame and holds what must wait
                self._handle_frames(frames)
        if self.receiver.waiting:  # the next frame waits for request memory: pause this reader only
            self._set_read_paused("memory", True)
        return self._take()

    def memory_granted(self) -> list[act.Action]:
        """The frame that waited for request memory has it now: read on."""
        if self._accepts(Event.MEMORY_GRANTED) and self.receiver.waiting:
            self.receiver.admitted()
            self._set_read_paused("memory", False)
        return self._take()

    def client_write_paused(self, paused: bool) -> list[act.Action]:
        """The client's socket is full (or drained again): stop (resume) reading both the client and
        the upstream, and hold (write out) the answers that become ready meanwhile."""
        if not self._accepts(Event.CLIENT_WRITE_PAUSED) or paused == self._outbox.full:
            return self._take()
        self._outbox.full = paused
        self._out.append(act.PauseUpstreamReading(paused))  # none yet: upstream_ready applies it
        self._set_read_paused("client-full", paused)
        if not paused:
            self._after_responses()
        return self._take()

    def client_lost(self) -> list[act.Action]:
        if not self._accepts(Event.CLIENT_LOST):
            return self._take()
        self._move(Move.LOST)
        # The buffer of a frame cut short is freed now, not when the connection object is collected.
        self.receiver.close()
        self._memory.complete()
        if self._counted:
            self.ctx.metrics.connection_closed(self.listener.name)
            self._counted = False
        self.log.info("client_disconnected", in_flight=len(self.responses))
        self._out.append(act.Close())
        return self._take()

    def drain(self) -> list[act.Action]:
        """Graceful shutdown: read no new requests, close once in-flight ones are answered."""
        if not self._accepts(Event.DRAIN):
            return self._take()
        if self.phase in (Phase.AUTHENTICATED, Phase.REAUTHENTICATING):
            self._move(Move.DRAIN)
        self._set_read_paused("draining", True)
        if self.phase is not Phase.DRAINING or not len(self.responses):  # before a login nothing is owed
            self._close(None)
        return self._take()

    def abort(self, reason: str) -> list[act.Action]:
        if self._accepts(Event.ABORT):
            self._close(reason)
        return self._take()

    # --- events: the upstream side ----------------------------------------------------------

    def upstream_ready(self, address: str, lifetime_ms: int = 0) -> list[act.Action]:
        """The link is up and logged in; ``lifetime_ms``: the session lifetime its broker granted (KIP-368)."""
        if not self._accepts(Event.UPSTREAM_READY):
            return self._take()
        self._schedule_upstream_login(lifetime_ms)
        self.ctx.counters.upstream_connections += 1
        self._upstream_address = address
        self._served = self._served_by(address)
        self._send_backlog()
        if self._outbox.full:  # the client filled its socket before the upstream link existed
            self._out.append(act.PauseUpstreamReading(True))
        self._set_read_paused("connecting", False)
        return self._take()

    def upstream_logged_in(self, lifetime_ms: int) -> list[act.Action]:
        """The link logged in again (KIP-368): relay what waited meanwhile, read on, and schedule the next login."""
        if not self._accepts(Event.UPSTREAM_LOGGED_IN):
            return self._take()
        self._send_backlog()
        self._set_read_paused("upstream-login", False)
        self._schedule_upstream_login(lifetime_ms)
        return self._take()

    def _schedule_upstream_login(self, lifetime_ms: int) -> None:
        if lifetime_ms > 0:  # 0: the broker set no limit, nothing to do ever (no timer, no cost)
            self._out.append(act.StartTimer(_UPSTREAM_LOGIN_TIMER, reauthentication_delay_s(lifetime_ms)))

    def _upstream_login_due(self) -> None:
        """Log the link in again; meanwhile new requests wait (a broker re-authenticating a connection takes
        only the SASL requests), answers to earlier ones are still served, and the client is not read."""
        if self._outbox.full:
            self._out.append(act.StartTimer(_UPSTREAM_LOGIN_TIMER, UPSTREAM_LOGIN_RETRY_S))
            return
        self._upstream_up = False  # what is relayed meanwhile waits in the backlog (bounded by queued.max.requests)
        self._set_read_paused("upstream-login", True)
        self._out.append(act.ReauthenticateUpstream())

    def upstream_failed(self, reason: str) -> list[act.Action]:
        if self._accepts(Event.UPSTREAM_FAILED):
            self._close(reason)
        return self._take()

    def upstream_write_paused(self, paused: bool) -> list[act.Action]:
        """The upstream socket is full: stop reading more requests from the client meanwhile."""
        if self._accepts(Event.UPSTREAM_WRITE_PAUSED):
            self._set_read_paused("upstream-full", paused)
        return self._take()

    def upstream_frames(self, frames: list[memoryview]) -> list[act.Action]:
        """The upstream's answers, each its frame's wire bytes (size prefix included), as the link split them."""
        if self._phase.phase is not STEADY and not self._accepts(Event.UPSTREAM_FRAMES):  # as in received()
            return self._take()
        routes, learned, responses, quota = self.ctx.routes, self._learned, self.responses, self.quota
        metered = quota.active is not None  # only a request's applies() changes it: once per read, not per answer
        for wire in frames:
            try:
                slot = match_response(responses, wire)
                if slot is None:
                    continue
                as_is = False  # a large Fetch v16+ whose scan found no node_endpoints: relayed untouched
                if (slot.large or len(wire) >= LARGE_WIRE_BYTES) and needs_decoding(slot, routes):
                    as_is = endpoints_only_in_trailer(slot, routes) and names_no_endpoints(slot, wire)
                    if not as_is:
                        self._fill_large(slot, wire)
                        continue
                cpu = cpu_clock_ns() if metered else 0
                # Scanned once: response_pieces would scan a relayed-as-is response again.
                slot.response = relayed_as_is(slot, wire) if as_is else response_pieces(slot, wire, routes, learned)
                slot.ready = True
                if cpu or slot.throttle_ms:
                    self._mute(quota.response_ready(slot, len(wire), cpu and cpu_clock_ns() - cpu))
            except Exception as exc:  # a refused response, or a gateway bug: either closes this connection only
                self._response_failed(exc)
                return self._take()
        self._after_responses()
        return self._take()

    def upstream_error(self, reason: str) -> list[act.Action]:
        if not self._accepts(Event.UPSTREAM_ERROR):
            return self._take()
        self.ctx.metrics.upstream_error("protocol")  # the upstream's bytes are not Kafka frames
        self._close(reason)
        return self._take()

    def upstream_lost(self, error: str | None) -> list[act.Action]:
        if self._accepts(Event.UPSTREAM_LOST):
            self.ctx.metrics.upstream_error("disconnected")
            self.log.info("upstream_disconnected", error=error)
            self._close("upstream closed the connection")
        return self._take()

    # --- events: streamed responses (large frames that need no rewriting) --------------------

    def may_stream(self, upstream_id: int, size: int) -> bool:
        """A query, not an event: may the response now arriving be written on as it arrives?"""
        if size < STREAM_MIN_BYTES or self._outbox.busy or self.closing or self.quota.active is not None:
            return False
        slot = self.responses.streamable(upstream_id)
        return slot is not None and (not needs_decoding(slot, self.ctx.routes)
                                     or endpoints_only_in_trailer(slot, self.ctx.routes))

    def stream_started(self, upstream_id: int, head: bytearray) -> list[act.Action]:
        if not self._accepts(Event.STREAM):
            return self._take()
        slot = self.responses.start_streaming(upstream_id)
        self._outbox.streaming = slot.api_key
        self.ctx.counters.streamed_responses += 1
        if not needs_decoding(slot, self.ctx.routes):
            self.traffic.response(slot.api_key, len(head))
            return [act.SendToClient(with_correlation_id(memoryview(head), 4, slot.correlation_id))]
        # Its broker endpoints can only be in its trailer: the walk holds that back (gateway/session/stream_stage.py).
        self._trailer = start_trailer_walk(slot, head)
        _CORRELATION.pack_into(head, 4, slot.correlation_id)  # the head is the session's to change
        return self._stream_on(memoryview(head)[:4], memoryview(head)[4:])

    def stream_chunk(self, chunk: memoryview) -> list[act.Action]:
        api_key = self._outbox.streaming
        if api_key is None or not self._accepts(Event.STREAM):  # None: its start was ignored (it came late)
            return self._take()
        if self._trailer is not None:
            return self._stream_on(chunk[:0], chunk)
        self.traffic.response(api_key, len(chunk))
        return [act.SendToClient([chunk])]

    def stream_ended(self) -> list[act.Action]:
        if self._outbox.streaming is None or not self._accepts(Event.STREAM):
            return self._take()
        if (streamed := self._trailer) is not None:  # the frame ended before its trailer did: refused
            if not streamed.failed:
                streamed.failed = True
                self._response_failed(DecodeError("a streamed response ended before its tag section"))
            return self._take()  # the stream stays open, unfinished: nothing more may follow it on the socket
        self._outbox.streaming = None
        self._after_responses()
        return self._take()

    def _stream_on(self, prefix: memoryview, chunk: memoryview) -> list[act.Action]:
        """Forward what of a walked response's chunk precedes its trailer (``prefix`` goes first, unwalked);
        with its last chunk, the trailer rewritten (in the same write: usually one byte, the empty section)."""
        streamed = self._trailer
        assert streamed is not None
        if streamed.failed:  # refused already (the connection closes): not one more byte of it goes out
            return []
        pieces: list[WireBytes] = [prefix] if prefix else []
        try:
            forward = streamed.forwardable(chunk)
            if not pieces and not streamed.complete:  # the usual chunk: records passing through
                if not forward:
                    return []
                self.traffic.response(streamed.api_key, len(forward))
                return [act.SendToClient([forward])]
            if forward:
                pieces.append(forward)
            if streamed.complete:
                rewritten = streamed.finish(self._learned)
                pieces.append(rewritten.trailer)
                self._trailer = None
                if rewritten.dropped:
                    self.ctx.metrics.endpoints_dropped(streamed.api_key)
                    self.log.info("streamed_endpoints_dropped", api_key=streamed.api_key,
                                  version=streamed.api_version, trailer_bytes=len(rewritten.trailer))
        except Exception as exc:  # the response cannot be followed, or its trailer rewritten: nothing more goes out
            streamed.failed = True
            self._response_failed(exc)
            return self._take()
        if not pieces:
            return []
        self.traffic.response(streamed.api_key, sum(map(len, pieces)))
        self._out.append(act.SendToClient(pieces))
        return self._take()

    # --- events: jobs and timers ------------------------------------------------------------

    def job_done(self, job_id: int, result: Any) -> list[act.Action]:
        """A RunJob finished: ``result`` is its return value, or the exception it raised."""
        if self._accepts(Event.JOB_DONE) and (then := self._jobs.finish(job_id)) is not None:
            then(result)
        return self._take()

    def timer_fired(self, name: str) -> list[act.Action]:
        event = _TIMER_EVENTS[name]
        if not self._accepts(event):
            return self._take()
        if event is Event.AUTHENTICATION_TIMEOUT:
            self._close("authentication timed out")
        elif event is Event.QUOTA_UNMUTED:
            self._quota_timer()
        elif event is Event.UPSTREAM_LOGIN_DUE:
            self._upstream_login_due()
        else:
            if self._farewell is not None:
                self.responses.add_local(0, ApiKey.SASL_AUTHENTICATE, 0, self._farewell)  # prebuilt: ids unused
                self._flush()
            self._close(None)  # writes the farewell even if it waits for a full client
        return self._take()

    # --- state the adapter and the server read -------------------------------------------------

    @property
    def in_flight(self) -> int:
        return len(self.responses) + (self._outbox.streaming is not None)

    # --- requests ----------------------------------------------------------------------------

    def _handle_held(self, read: Sequence[memoryview] = ()) -> None:
        """Handle the frames that wait, then those just ``read``, unless they must wait on (a job, or no free
        slot). Frames just read go straight on when none waits: no round trip through the gate per read."""
        gate = self._gate
        held = gate.held
        if read:
            held = [*held, *read] if held else read
        if held and gate.waiting_for is None and self._phase.phase not in FRAMES_DROPPED \
                and len(self.responses) + self._outbox.answers < self.ctx.config.queued_max_requests:
            gate.held = ()
            self._handle_frames(held)
        else:
            gate.held = held

    def _handle_frames(self, frames: Sequence[memoryview]) -> None:
        """Handle request frames, each its wire bytes (size prefix + payload) as the receiver split them."""
        limit = self.ctx.config.queued_max_requests
        # Read once per call, not per frame: these objects live as long as the session (their fields change).
        state, gate, responses, outbox, routes = self._phase, self._gate, self.responses, self._outbox, self.ctx.routes
        for index, wire in enumerate(frames):
            if state.phase in FRAMES_DROPPED:  # refused (or a login failed): nothing after it is read or relayed
                break
            queued = len(responses) + outbox.answers  # queued_requests, without its property call
            if queued >= limit:  # answers that are ready free their slots, unless the client is full
                self._send_upstream()
                self._write_ready()
                queued = self.queued_requests
            # In order: later frames wait for the password check or the worker, or for a free slot.
            if gate.waiting_for is not None or queued >= limit:
                gate.hold(frames[index:])
                break
            self.traffic.request_frame(wire)
            if state.phase is Phase.AUTHENTICATING:
                self._authenticate(wire)
                continue
            route = routes.get(wire[4] << 8 | wire[5]) if len(wire) >= 8 else None  # route_of(routes, wire), inline
            if len(wire) >= LARGE_WIRE_BYTES and route is not None and not route.stays_on_loop:
                gate.hold(frames[index + 1 :])
                self._decide_large(wire, route)
                break
            try:
                applied = self.quota.applies(wire)
                if applied is None:
                    self._request(wire, route)
                else:
                    self._request_under_quota(applied, wire, route)
            except Exception as exc:  # a refusal, or a gateway bug: either closes this connection only
                self._request_failed(exc)
                return
        self._send_upstream()
        self._flush()
        if len(responses) + outbox.answers >= limit:
            self._set_read_paused("in-flight", True)

    def _request(self, wire: memoryview, route: ApiRoute | None) -> None:
        if route is not None and route.dispatch is Dispatch.SASL:
            self._sasl_after_authentication(wire)
            return
        if self.authenticator is not None and self.authenticator.takes_every_frame:
            self._apply_step(self.authenticator.on_frame(wire[4:]))  # its refusal, audited as one
            return
        self._apply(decide(self._request_context(), wire, route))

    def _request_context(self) -> RequestContext:
        """What a decision reads, as of now: immutable values and snapshots of the shared state."""
        assert self.principal is not None
        ctx, now_ms = self.ctx, self.clock.wall_ms()
        expired = self.authenticator is not None and self.authenticator.session_expired(now_ms)
        return RequestContext(self.principal, self.client.host, self.client.port, self.listener, ctx.negotiated,
                              ctx.cluster.features, ctx.authorization, ctx.cluster.topic_names,
                              self._topic_id_misses, now_ms, expired, self._served)

    def _served_by(self, upstream_address: str) -> ServedNode:
        """The cluster and broker this connection reaches, worked out once per link (not per request): a node
        port's (or SNI name's) node, else the broker the bootstrap link reached when the cluster view lists its
        address, else unknown (and not checked)."""
        node_id = self.node_id
        if node_id is None:
            node_id = next((node for node, (host, port) in self.ctx.cluster.nodes.items()
                            if f"{host}:{port}" == upstream_address), None)
        return ServedNode(self.ctx.cluster.cluster_id, node_id)

    def _apply(self, decision: Decision, slot: ResponseSlot | None = None) -> None:
        """Carry out a request's decision, in its own slot (reserved earlier for a large request)."""
        if decision.outcome is not None:
            self.ctx.metrics.authorization_decision(decision.key, decision.outcome)
        if isinstance(decision, RelayRequest):  # the usual decision first: one type test per request
            if self.quota.active is None or not self._over_mutation_quota(decision, slot):
                self._relay(decision, slot)
            if decision.then_close is not None:  # its allowed part relayed, as Kafka appends it before it closes
                self._refuse_in_turn(decision.then_close)
        elif isinstance(decision, ReplyNow):
            self._fill(slot, decision.key, decision.version, decision.correlation_id, decision.frame)
        else:
            self._answer_locally(decision, slot)

    def _relay(self, decision: RelayRequest, slot: ResponseSlot | None) -> None:
        if not decision.expects_response:
            assert slot is None  # fire-and-forget APIs stay on the loop (routes)
            upstream_id = self.responses.expect_nothing()
        elif slot is None:
            upstream_id = self.responses.expect_upstream(decision.correlation_id, decision.key, decision.version,
                                                         decision.hook)
        else:
            upstream_id = self.responses.reserve_upstream_id()
            slot.hook = decision.hook
            self.responses.await_upstream(upstream_id, slot)
        self.ctx.counters.relayed_requests += 1
        self.ctx.metrics.relayed(decision.key)
        pieces = upstream_pieces(decision, upstream_id)  # a new list: the first request of an event keeps it
        if self._outgoing is None:
            self._outgoing = pieces
        else:
            self._outgoing.extend(pieces)

    def _fill(self, slot: ResponseSlot | None, key: int, version: int, correlation_id: int, frame: WireBytes) -> None:
        if slot is None:
            self.responses.add_local(correlation_id, key, version, frame)
        else:
            slot.response, slot.ready = [frame], True

    def _send_upstream(self) -> None:
        outgoing, self._outgoing = self._outgoing, None
        if not outgoing:
            return
        if self._upstream_up:
            self._out.append(act.SendToUpstream(outgoing))
        elif self._backlog is None:
            self._backlog = outgoing
        else:
            self._backlog.extend(outgoing)

    def _send_backlog(self) -> None:
        """The link takes requests (again): those that waited go out first, in order."""
        self._upstream_up = True
        if self._backlog:
            self._out.append(act.SendToUpstream(self._backlog))
        self._backlog = None
        if self._phase.phase is not STEADY:  # refused in turn with only an acks=0 Produce owed to the upstream
            self._close_once_answered()

    def _request_failed(self, exc: BaseException) -> None:
        """Fail closed on a request, decided on the loop or in the worker."""
        if isinstance(exc, PipelineRefusal) and exc.refused_api is not None:
            self.ctx.metrics.authorization_decision(exc.refused_api, "refused")
        if isinstance(exc, RefusedInTurn):
            self._refuse_in_turn(str(exc))
            return
        if isinstance(exc, PipelineRefusal):
            self._close(str(exc))
            return
        self.log.error("request_pipeline_error", exc_info=exc)  # a gateway bug: its traceback goes to the log
        self._close("internal error in the request pipeline")

    def _refuse_in_turn(self, reason: str) -> None:
        """Close as Kafka does on a request it refuses by closing (an acks=0 Produce with an error): Kafka handles a
        connection's requests one at a time, so those before it are relayed and answered first; none after it is
        read, handled or relayed (the frames already read are dropped)."""
        self.log.warning("connection_refused", reason=bounded_name(reason, REASON_CHARS))
        self._move(Move.REFUSE_IN_TURN)
        if self._phase.phase is not Phase.REFUSED:  # not a move from this phase: _bug() has closed already
            return
        self._gate.take_held()
        self._set_read_paused("refused", True)
        self._send_upstream()
        self._flush()  # closes now if nothing is owed

    def _response_failed(self, exc: BaseException) -> None:
        """Fail closed on an upstream response (it is not Kafka, or the gateway has a bug)."""
        if isinstance(exc, DecodeError | PipelineRefusal):
            self.ctx.metrics.upstream_error("protocol")
            self._close(f"upstream response refused: {exc}")
            return
        self.log.error("response_pipeline_error", exc_info=exc)
        self._close("internal error in the response pipeline")

    # --- large requests and responses: decided in the worker thread, in their slot ------------

    def _decide_large(self, wire: memoryview, route: ApiRoute) -> None:
        key, version, correlation_id = peek_api(wire, 4)
        slot = self.responses.add_deferred(correlation_id, key, version)
        slot.large = True  # its response is decoded in the worker too, however small
        self._wait_for("large-request")
        if (applied := self.quota.applies(wire)) is not None:  # its CPU is the worker's, not counted
            self._mute(self.quota.request_done(applied, key, len(wire), 0, slot))
        self._job(act.JobKind.LARGE, partial(decide, self._request_context(), wire, route),
                  partial(self._large_decided, slot))

    def _large_decided(self, slot: ResponseSlot, result: Decision | BaseException) -> None:
        if isinstance(result, BaseException):
            self._request_failed(result)
            return
        try:
            self._apply(result, slot)
        except Exception as exc:
            self._request_failed(exc)
            return
        self._send_upstream()
        self._stop_waiting("large-request")

    def _fill_large(self, slot: ResponseSlot, wire: memoryview) -> None:
        # its own: the loop's may grow meanwhile
        learned = Learned(self._learned.book, self._learned.known)
        work = partial(_pieces_and_drop_hook, slot, wire, self.ctx.routes, learned)
        self._job(act.JobKind.LARGE, work, partial(self._large_filled, slot, learned))

    def _large_filled(self, slot: ResponseSlot, learned: Learned, result: list[WireBytes] | BaseException) -> None:
        if isinstance(result, BaseException):
            self._response_failed(result)
            return
        self._learned.take_from(learned)
        slot.response, slot.ready = result, True
        if self.quota.active is not None or slot.throttle_ms:
            try:
                self._mute(self.quota.response_ready(slot, sum(map(len, result)), 0))
            except Exception as exc:
                self._response_failed(exc)
                return
        self._after_responses()

    # --- client quotas (gateway/quotas): throttle_time_ms in the response, and a muted socket ------

    def _request_under_quota(self, applied: AppliedQuotas, wire: memoryview, route: ApiRoute | None) -> None:
        slots = len(self.responses)
        cpu = cpu_clock_ns()
        self._request(wire, route)
        assert route is not None  # a frame without a route is refused: _request raised
        slot = self.responses.newest() if len(self.responses) > slots else None  # None: acks=0, the mute alone
        self._mute(self.quota.request_done(applied, route.api_key, len(wire), cpu_clock_ns() - cpu, slot))

    def _over_mutation_quota(self, decision: RelayRequest, slot: ResponseSlot | None) -> bool:
        """controller_mutation_rate (KIP-599): False when it has no say; else the request was answered here
        (every topic refused) or relayed, without its refused topics, throttled when over the quota."""
        cluster = self.ctx.cluster
        verdict = self.quota.mutation(decision.key, decision.version, decision.wire,
                                      lambda: PartitionCounts(cluster.partition_counts, cluster.topic_names))
        if verdict is None:
            return False
        if verdict.refusal is not None:  # never relayed: the gateway answers, as the broker would
            body = decision.hook(verdict.refusal) if decision.hook is not None else verdict.refusal
            answer = response_frame(decision.key, decision.version, decision.correlation_id, body)
            self._fill(slot, decision.key, decision.version, decision.correlation_id, answer)
        else:
            # some topics refused: relay the others; and watch the answer for topics the upstream refuses
            self._relay(replace(decision, wire=verdict.wire or decision.wire, hook=verdict.hook_before(decision.hook)),
                        slot)
            relayed = slot or self.responses.newest()
            relayed.throttle_ms = max(relayed.throttle_ms, verdict.throttle_ms)
        self._mute(verdict.throttle_ms)
        return True

    def _mute(self, throttle_ms: int) -> None:
        """Stop reading this client for ``throttle_ms`` (longer if already muted for longer)."""
        if throttle_ms <= 0:
            return
        delay = self.quota.mute_for(throttle_ms)
        if delay is not None:
            if self._gate.waiting_for is None:  # frames already read wait too: Kafka reads a muted client no further
                self._wait_for("quota")
            else:
                self._set_read_paused("quota", True)
            self._out.append(act.CancelTimer(_QUOTA_TIMER))
            self._out.append(act.StartTimer(_QUOTA_TIMER, delay))

    def _quota_timer(self) -> None:
        left = self.quota.unmuted()
        if left is None and self._gate.waiting_for == "quota":
            self._stop_waiting("quota")
        elif left is None:
            self._set_read_paused("quota", False)
        else:
            self._out.append(act.StartTimer(_QUOTA_TIMER, left))

    # --- local answers: admin APIs, one store write at a time --------------------------------

    def _answer_locally(self, decision: AnswerLocally, slot: ResponseSlot | None) -> None:
        if self._local.must_wait():  # computed once the earlier local answers are done
            slot = slot or self.responses.add_deferred(decision.correlation_id, decision.key, decision.version)
            self._local.wait(slot, decision)
            return
        result = decision.compute()
        if isinstance(result, OffLoop):
            slot = slot or self.responses.add_deferred(decision.correlation_id, decision.key, decision.version)
            self._store_write(slot, decision, result)
        else:
            self._fill(slot, decision.key, decision.version, decision.correlation_id, _encoded(decision, result))

    def _store_write(self, slot: ResponseSlot, decision: AnswerLocally, work: OffLoop) -> None:
        self._local.busy = True
        self._job(act.JobKind.STORE, work.work, partial(self._stored, slot, decision))

    def _stored(self, slot: ResponseSlot, decision: AnswerLocally, result: Body | BaseException) -> None:
        self._local.busy = False
        try:
            if isinstance(result, BaseException):
                raise result
            slot.response, slot.ready = [_encoded(decision, result)], True
            while (waiting := self._local.next()) is not None:  # until one starts a store write
                slot, decision = waiting
                answer = decision.compute()
                if isinstance(answer, OffLoop):
                    self._store_write(slot, decision, answer)
                else:
                    slot.response, slot.ready = [_encoded(decision, answer)], True
        except Exception as exc:  # a gateway bug: fail closed for this connection only
            self.log.error("local_answer_error", api_key=decision.key, exc_info=exc)
            self._close("internal error while answering a request")
            return
        self._after_responses()

    # --- authentication ----------------------------------------------------------------------

    def _authenticate(self, wire: memoryview) -> None:
        authenticator = self.authenticator
        assert authenticator is not None
        if authenticator.state.value == "INITIAL_REQUEST" and not looks_like_kafka(wire):
            self._close(f"first frame is not a Kafka request: {diagnose_non_kafka(wire)}")
            return
        self._apply_step(authenticator.on_frame(wire[4:]))

    def _sasl_after_authentication(self, wire: memoryview) -> None:
        """SASL frames are never relayed: they would authenticate to the upstream itself.

        On a SASL listener a SaslHandshake may start KIP-368 re-authentication; anything else (and everything on
        other listeners) Kafka answers ILLEGAL_SASL_STATE, keeping the connection.
        """
        try:
            key, version, correlation_id = peek_api(wire, 4)
        except DecodeError as exc:  # a client's malformed frame, refused as decide() refuses it: not a gateway bug
            raise PipelineRefusal(f"not a Kafka request: {exc}") from None
        if self.authenticator is not None and self.authenticator.takes_after_login(key):
            if self.phase is not Phase.REAUTHENTICATING:
                self._move(Move.REAUTHENTICATION)
            self._apply_step(self.authenticator.on_frame(wire[4:]))
            return
        if self.authenticator is not None and self.authenticator.session_expired(self.clock.wall_ms()):
            # Kafka closes an expired session on any request but the SaslHandshake that re-authenticates it.
            raise PipelineRefusal(f"SASL api key {key} after the session expired (connections.max.reauth.ms)")
        schema = api(key)
        if schema is None or not schema.supports(version):
            raise PipelineRefusal(f"SASL api key {key} v{version} is outside the parsable range")
        illegal = KafkaError.ILLEGAL_SASL_STATE
        body: Body = {"error_code": illegal, "mechanisms": []} if key == ApiKey.SASL_HANDSHAKE \
            else {"error_code": illegal, "auth_bytes": b"", "session_lifetime_ms": 0,
                  "error_message": "SaslAuthenticate request received after successful authentication"}
        self.responses.add_local(correlation_id, key, version, response_frame(key, version, correlation_id, body))

    def _apply_step(self, step: Step) -> None:
        if isinstance(step, Respond):
            self.responses.add_local(0, 0, 0, step.frame)  # prebuilt by the state machine: ids unused
        elif isinstance(step, Authenticated):
            self.responses.add_local(0, 0, 0, step.frame)
            self._authenticated(step)
        elif isinstance(step, Verifying):
            self._wait_for("verifying")
            self._job(act.JobKind.VERIFY, step.job, self._verified, step.claim)
        else:
            assert isinstance(step, Refused)
            self._refuse_authentication(step)

    def _verified(self, result: bytes | BaseException) -> None:
        """A password check finished: feed its result to the state machine, then the frames that waited."""
        authenticator = self.authenticator
        assert authenticator is not None
        self._gate.waiting_for = None
        if isinstance(result, act.HashSkipped):
            self._apply_step(authenticator.on_verification_refused(result.reason, result.failure_class, quiet=True))
        elif isinstance(result, act.QueueFull):
            self._apply_step(authenticator.on_verification_refused(
                "the credential verification queue is full (ksgate.authentication.verification.queue.size)",
                "overloaded"))
        elif isinstance(result, BaseException):
            self.log.error("credential_verification_error", error=repr(result))
            self._apply_step(authenticator.on_verification_refused(
                f"credential verification failed: {result!r}", "illegal_state"))
        else:
            self._apply_step(authenticator.on_verified(result))
        self._stop_waiting("verifying")

    def _authenticated(self, step: Authenticated) -> None:
        first = self.phase is Phase.AUTHENTICATING
        self._move(Move.LOGGED_IN)
        self.principal = step.principal
        self.quota.bind(step.principal.name)
        self.log.info("authenticated", mechanism=step.mechanism, reauthenticated=step.reauthenticated,
                      session_expiry_ms=step.session_expiry_ms)
        self._count_principal(step.principal, step.mechanism)
        if step.legacy_nonce:
            note_legacy_nonce(self.ctx, self.log, step)
        if first:
            self._out.append(act.CancelTimer(_AUTH_TIMER))
            self.receiver.limit = self.ctx.config.socket_request_max_bytes
            self.receiver.prealloc = FrameReceiver.PREALLOC_BYTES
            # Only authenticated frames draw on request memory: before that, frames are small
            # (sasl.server.max.receive.size) and buffered no further ahead than what arrived.
            self.receiver.gate = self._memory
            self._open_upstream()

    def _count_principal(self, principal: KafkaPrincipal, mechanism: str | None = None) -> None:
        record_login(self.ctx, self.listener, self.client, principal, mechanism)

    def _refuse_authentication(self, step: Refused) -> None:
        """Answer (after Kafka's failed-authentication delay, to slow brute force) and close."""
        record_login_failure(self.ctx, self.log, self.listener, self.client,
                             self.authenticator, step)
        self._set_read_paused("auth-failed", True)
        self._move(Move.LOGIN_FAILED)  # nothing more is read or relayed; answers already in flight still go out
        self._farewell = step.frame
        delay = self.ctx.config.failed_authentication_delay_ms / 1000 if step.authentication_failure else 0.0
        self._out.append(act.StartTimer(_FAREWELL_TIMER, delay))

    # --- helpers -----------------------------------------------------------------------------

    def _open_upstream(self) -> None:
        self._set_read_paused("connecting", True)
        if self.node_id is None:
            targets = tuple(self.ctx.config.upstream.bootstrap_servers)
        else:
            address = self.ctx.cluster.nodes.get(self.node_id)
            targets = (address,) if address else ()
        self._out.append(act.OpenUpstream(targets))

    def _job(self, kind: act.JobKind, work: Callable[[], Any], then: JobThen, claim: HashClaim | None = None) -> None:
        self._out.append(self._jobs.start(kind, work, then, claim))

    def _wait_for(self, reason: str) -> None:
        self._gate.waiting_for = reason
        self._set_read_paused(reason, True)

    def _stop_waiting(self, reason: str) -> None:
        """The job frames waited for is done: handle them, in order, and read again."""
        self._gate.waiting_for = None
        self._set_read_paused(reason, False)
        self._after_responses()  # the job may have answered (a login step), and frames may wait

    def _after_responses(self) -> None:
        """Slots may have freed: write what is ready, handle frames that waited for a slot, read on."""
        self._flush()
        gate = self._gate
        if gate.held:
            self._handle_held()
        # Only a paused reader has a reason to drop (ReadGate.set): the usual answer skips the call.
        if gate.reasons and self.queued_requests < self.ctx.config.queued_max_requests:
            self._set_read_paused("in-flight", False)

    def _flush(self) -> None:
        outbox = self._outbox
        if not outbox.full and outbox.streaming is None and not outbox.answers:  # _write_ready's usual case, inline
            if ready := self.responses.pop_ready():
                self._out.append(act.SendToClient(ready))
        else:
            self._write_held_back()
        if self._phase.phase is not STEADY:
            self._close_once_answered()

    def _close_once_answered(self) -> None:
        """Draining or refused in turn: close once every answer owed is out and every relayed request is sent
        (the backlog waits for the upstream link; frames still held are owed only while draining)."""
        phase = self._phase.phase
        owed = len(self.responses) or self._backlog is not None
        if not owed and ((phase is Phase.DRAINING and not self._gate.held) or phase is Phase.REFUSED):
            self._close(None)

    def _write_ready(self) -> None:
        outbox = self._outbox
        if not outbox.full and outbox.streaming is None and not outbox.answers:  # the usual: nothing held back
            if ready := self.responses.pop_ready():
                self._out.append(act.SendToClient(ready))
        else:
            self._write_held_back()

    def _write_held_back(self) -> None:
        """_write_ready when answers wait in the outbox, the client is full, or a response streams."""
        outbox = self._outbox
        if outbox.streaming is not None:  # a response is streamed on the socket: nothing may interleave
            return
        if outbox.answers and not outbox.full:
            self._out.append(act.SendToClient(outbox.take()))
        before = len(self.responses) if outbox.full else 0  # only a full client's held answers are counted
        ready = self.responses.pop_ready()
        if ready:
            if outbox.full:  # a client that does not read: its answers keep their place in queued.max.requests
                outbox.hold(ready, before - len(self.responses))
            else:
                self._out.append(act.SendToClient(ready))

    def _set_read_paused(self, reason: str, paused: bool) -> None:
        if (changed := self._gate.set(reason, paused)) is not None:
            self._out.append(act.PauseClientReading(changed))

    def _accepts(self, event: Event) -> bool:
        """Whether the phase handles ``event`` (False: it came late, ignore it); an impossible one closes."""
        try:
            return self._phase.handles(event)
        except PhaseError as exc:
            self._bug(exc)
            return False

    def _move(self, move: Move) -> None:
        try:
            self._phase.move(move)
        except PhaseError as exc:
            self._bug(exc)

    def _bug(self, exc: PhaseError) -> None:
        """A gateway bug (the phase table was not followed): fail closed for this connection only."""
        self.log.error("session_phase_error", error=str(exc))
        if self.phase is not Phase.CLOSED:
            self._phase.phase = Phase.CLOSING
            self._out.append(act.Close("internal error in the session"))

    def _close(self, reason: str | None) -> None:
        if (self.closing and reason is not None) or self.phase is Phase.CLOSED:
            return
        if reason is not None:
            self.log.warning("connection_refused", reason=bounded_name(reason, REASON_CHARS))
        self._move(Move.CLOSE)
        if self._outbox.answers:  # answered before the close: handed to the transport, which writes them first
            self._out.append(act.SendToClient(self._outbox.take()))
        self._out.append(act.Close(reason))

    def _take(self) -> list[act.Action]:
        if self._memory.woken:
            self._out.append(act.WakeReaders(self._memory.take_woken()))
        learned = self._learned
        if learned.nodes or learned.topic_ids or learned.partition_counts or self._topic_id_misses.missed:
            nodes, topic_ids, partition_counts = learned.take()
            self._out.append(act.Discovered(nodes, topic_ids, self._topic_id_misses.take(), partition_counts))
        out, self._out = self._out, []
        return out


def _encoded(decision: AnswerLocally, body: Body) -> bytes:
    if decision.hook is not None:  # e.g. DescribeAcls/DescribeDelegationToken filtering by the policy
        body = decision.hook(body)
    return response_frame(decision.key, decision.version, decision.correlation_id, body)


def _pieces_and_drop_hook(slot: ResponseSlot, wire: memoryview, routes: Any, learned: Learned) -> list[WireBytes]:
    pieces = response_pieces(slot, wire, routes, learned)
    slot.hook = None  # its state (an entry per item of the request) is freed here, in the worker, not on the loop
    return pieces

