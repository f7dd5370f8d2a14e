"""The asyncio adapter of one client connection: moves bytes and runs the session's actions.

Every decision is the proxy session's (gateway/session/session.py); this class only turns
socket callbacks into session events and the session's actions into socket writes, pauses,
tasks, thread jobs and timers. Client bytes are received straight into the session's frame
buffers (BufferedProtocol): a large Produce request lands in one buffer, with no per-read copy.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from auth.client_address import ClientAddress
from gateway.context import GatewayContext
from gateway.session import actions as act
from gateway.session.session import ProxySession
from gateway.transport.idle_close import IdleWatch
from gateway.transport.upstream_link import UpstreamLink
from gateway.transport.worker_thread import run_large
from gateway.upstream.connector import UpstreamUnavailable, log_in, open_upstream

# uvloop's TLS transport asks for a buffer each time it looks for decrypted bytes, ``pending + 256``
# long, even when nothing is pending; the frame receiver would allocate its 64 KiB scratch buffer for
# that look and keep it while the connection idles (measured: 62 KiB per idle TLS connection). So
# an idle connection asked for this little gets a shared landing buffer instead, copied into the
# receiver if anything lands there (get_buffer and buffer_updated run back to back on the loop).
_PROBE_BYTES = 256
_landing = bytearray(_PROBE_BYTES)


class ClientConnection(asyncio.BufferedProtocol):
    # Slots: thousands of idle connections each carried an instance dict; the containers below
    # that most connections never or only briefly use are made when needed and dropped when empty.
    __slots__ = ("_drained", "_idle", "_landed", "_linking", "_loop", "_lost", "_on_close", "_tasks", "_timers",
                 "client", "ctx", "idle_tick", "last_active", "session", "transport", "upstream")

    def __init__(self, ctx: GatewayContext, listener_name: str, node_id: int | None, client: ClientAddress,
                 on_close: Callable[[ClientConnection], None] | None = None) -> None:
        self.ctx = ctx
        self.client = client  # canonical, made where the connection entered (acceptor or PROXY header)
        self.session = ProxySession(ctx, listener_name, node_id, self)
        self.transport: asyncio.Transport | None = None
        self.upstream: UpstreamLink | None = None
        # The link being opened or logged in, until it is ``upstream``, and the task doing it: ended with the
        # connection, so a login waiting for its answer ends then, not at upstream.connect.timeout.ms (or
        # never, at shutdown).
        self._linking: tuple[UpstreamLink, asyncio.Task[Any] | None] | None = None
        self._on_close = on_close
        self._timers: dict[str, asyncio.TimerHandle] | None = None  # by the session's timer name
        self._tasks: set[asyncio.Future[Any]] | None = None  # referenced until done (asyncio keeps weak refs)
        self._landed = False  # the last get_buffer() handed out _landing
        self._loop = loop = asyncio.get_event_loop()
        self.last_active = loop.time()
        # connections.max.idle.ms (negative: never, as on Kafka)
        limit_ms = ctx.config.connections_max_idle_ms
        self._idle = _idle_watch(ctx, loop) if limit_ms >= 0 else None
        self.idle_tick: int | None = None  # the idle watch's bucket
        # Made when shutdown first waits for it: an idle connection need not carry an Event (~0.8 KiB).
        self._drained: asyncio.Event | None = None
        self._lost = False

    # --- client socket events ------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # cast, not isinstance: uvloop's transports are not asyncio.Transport subclasses
        self.transport = tr = cast(asyncio.Transport, transport)
        tr.set_write_buffer_limits(high=self.ctx.config.connection_buffer_max_bytes)
        if self._idle is not None:
            self._idle.start(self)
        self._do(self.session.connected(self.client, tr.get_extra_info("ssl_object")))

    def get_buffer(self, sizehint: int) -> memoryview:
        receiver = self.session.receiver  # asked directly, not through session.receive_buffer(): once per read
        self._landed = 0 <= sizehint <= _PROBE_BYTES and not receiver.held()
        if self._landed:
            return memoryview(_landing)
        return receiver.get_buffer()  # sized by the frame being received, not by sizehint

    def buffer_updated(self, nbytes: int) -> None:
        # The loop kept, not asked for: asyncio.get_running_loop() checks the process id, a getpid
        # system call on every read (one of the seven a relayed request cost).
        self.last_active = self._loop.time()
        if self._landed:  # the receiver's buffer is at least 4 KiB when it holds nothing
            self._landed = False
            self.session.receive_buffer()[:nbytes] = memoryview(_landing)[:nbytes]
        self._do(self.session.received(nbytes))
        # uvloop starts reading after connection_made returns, whatever it asked there (a pause
        # until the upstream is up): the session's pause is applied again once bytes do arrive.
        if self.session.reading_paused and (tr := self._writable()) is not None and tr.is_reading():
            tr.pause_reading()

    def pause_writing(self) -> None:
        self._do(self.session.client_write_paused(True))

    def resume_writing(self) -> None:
        self._do(self.session.client_write_paused(False))

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._timers or {}).values():
            timer.cancel()
        self._timers = None
        if self._idle is not None:
            self._idle.stop(self)
        self._do(self.session.client_lost())
        self._lost = True
        if self._drained is not None:
            self._drained.set()
        if self._on_close is not None:
            self._on_close(self)

    # --- what the server asks ----------------------------------------------------------------------

    @property
    def drained(self) -> asyncio.Event:
        """Set while no response is outstanding, and once the connection is gone (shutdown waits on it)."""
        if self._drained is None:
            self._drained = asyncio.Event()
            if self._lost or not self.session.in_flight:
                self._drained.set()
        return self._drained

    @property
    def busy(self) -> bool:
        """Responses are outstanding: not idle, however long ago the client last sent."""
        return bool(self.session.in_flight)

    def close_idle(self, reason: str) -> None:
        self.abort(reason)

    def begin_drain(self) -> None:
        self._do(self.session.drain())

    def abort(self, reason: str) -> None:
        self._do(self.session.abort(reason))

    def close(self) -> None:
        self._close(act.Close())

    # --- actions ---------------------------------------------------------------------------------

    def _do(self, actions: list[act.Action]) -> None:
        for action in actions:
            _RUN[type(action)](self, action)
        if self._drained is not None:
            self._drained.clear() if self.session.in_flight else self._drained.set()

    def _writable(self) -> asyncio.Transport | None:
        return self.transport if self.transport is not None and not self.transport.is_closing() else None

    def _send_to_client(self, action: act.SendToClient) -> None:
        # _writable() inline: once per answer. write() for one piece: uvloop tries the socket at once.
        if (tr := self.transport) is not None and not tr.is_closing():
            pieces = action.pieces
            tr.write(pieces[0]) if len(pieces) == 1 else tr.writelines(pieces)

    def _send_to_upstream(self, action: act.SendToUpstream) -> None:
        if self.upstream is not None and (tr := self.upstream.transport) is not None:
            tr.writelines(action.pieces)

    # The pauses apply the session's state as it is now, not the action's flag: a write may fill the
    # client's socket (pause_writing, a nested event) while the rest of an older action list still runs.
    def _pause_client(self, action: act.PauseClientReading) -> None:
        if (tr := self._writable()) is not None:
            tr.pause_reading() if self.session.reading_paused else tr.resume_reading()

    def _pause_upstream(self, action: act.PauseUpstreamReading) -> None:
        if self.upstream is not None and (tr := self.upstream.transport) is not None:
            tr.pause_reading() if self.session.upstream_reading_paused else tr.resume_reading()

    def _open_upstream(self, action: act.OpenUpstream) -> None:
        self._spawn(self._connect(action.targets))

    async def _connect(self, targets: tuple[tuple[str, int], ...]) -> None:
        try:
            link, address, lifetime_ms = await open_upstream(self.ctx, targets, self._new_link, self.session.log)
        except UpstreamUnavailable as exc:
            self._linking = None  # before the close that failure brings: nothing is left to end
            self._do(self.session.upstream_failed(str(exc)))
            return
        finally:
            self._linking = None
        if self.session.closing:
            assert link.transport is not None
            link.transport.close()
            return
        self.upstream = link
        self._do(self.session.upstream_ready(address, lifetime_ms))

    def _new_link(self) -> UpstreamLink:
        link = UpstreamLink(self.session, self._do, self.ctx.config.socket_request_max_bytes)
        self._linking = (link, asyncio.current_task())  # called by open_upstream, inside _connect's task
        return link

    def _reauthenticate_upstream(self, action: act.ReauthenticateUpstream) -> None:
        self._spawn(self._log_in_again())

    async def _log_in_again(self) -> None:
        link = self.upstream
        if link is None or link.transport is None or link.transport.is_closing():
            self._do(self.session.upstream_failed("upstream re-authentication failed: the link is closed"))
            return
        try:
            lifetime_ms = await log_in(self.ctx, link, again=True)
        except UpstreamUnavailable as exc:
            self._do(self.session.upstream_failed(str(exc)))
            return
        self._do(self.session.upstream_logged_in(lifetime_ms))

    def _run_job(self, action: act.RunJob) -> None:
        job_id = action.job_id
        if action.kind is act.JobKind.VERIFY:  # budgeted per address, on the bounded pool: may be refused
            def verified(result: Any) -> None:
                self._do(self.session.job_done(job_id, result))

            self.ctx.hashes.submit(action.claim, action.work, verified, lambda: not self.session.closing)
            return
        future = run_large(action.work) if action.kind is act.JobKind.LARGE \
            else asyncio.get_running_loop().run_in_executor(None, action.work)
        future.add_done_callback(lambda done: self._do(self.session.job_done(job_id, _outcome(done))))
        self._spawn(future)

    def memory_granted(self) -> None:
        """Another connection freed request memory for this one's waiting frame (gateway/session/request_memory.py)."""
        self._do(self.session.memory_granted())

    def _wake_readers(self, action: act.WakeReaders) -> None:
        loop = asyncio.get_running_loop()
        for wake in action.wakes:
            loop.call_soon(wake)

    def _start_timer(self, action: act.StartTimer) -> None:
        if self._timers is None:
            self._timers = {}
        # One timer per name (the session cancels before it restarts one): a fired timer forgets its name.
        if (earlier := self._timers.get(action.name)) is not None:
            earlier.cancel()
        self._timers[action.name] = self._loop.call_later(action.delay_s, self._timer_fired, action.name)

    def _timer_fired(self, name: str) -> None:
        self._forget_timer(name)  # a fired handle is not kept for an idle connection's lifetime
        self._do(self.session.timer_fired(name))

    def _cancel_timer(self, action: act.CancelTimer) -> None:
        if (timer := self._forget_timer(action.name)) is not None:
            timer.cancel()

    def _forget_timer(self, name: str) -> asyncio.TimerHandle | None:
        timers = self._timers
        timer = timers.pop(name, None) if timers is not None else None
        if not timers:
            self._timers = None
        return timer

    def _discovered(self, action: act.Discovered) -> None:
        self.ctx.discovered(action)  # the server applies it to the shared cluster view

    def _close(self, action: act.Close) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()
        if self._linking is not None:
            self._end_linking(*self._linking)

    @staticmethod
    def _end_linking(link: UpstreamLink, task: asyncio.Task[Any] | None) -> None:
        """A link still logging in is closed (its login then fails at once); one still connecting is
        abandoned (cancelled: a transport closed as it is made breaks open_upstream's next call on it)."""
        if link.transport is not None:
            link.transport.close()
        elif task is not None:
            task.cancel()

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        if self._tasks is not None:
            self._tasks.discard(task)
            if not self._tasks:
                self._tasks = None


# One table for every connection (a per-connection dict of bound methods cost ~1.2 KiB each).
_RUN: dict[type, Callable[[ClientConnection, Any], None]] = {
    act.SendToClient: ClientConnection._send_to_client, act.SendToUpstream: ClientConnection._send_to_upstream,
    act.OpenUpstream: ClientConnection._open_upstream, act.PauseClientReading: ClientConnection._pause_client,
    act.ReauthenticateUpstream: ClientConnection._reauthenticate_upstream,
    act.PauseUpstreamReading: ClientConnection._pause_upstream, act.RunJob: ClientConnection._run_job,
    act.StartTimer: ClientConnection._start_timer, act.CancelTimer: ClientConnection._cancel_timer,
    act.Close: ClientConnection._close, act.WakeReaders: ClientConnection._wake_readers,
    act.Discovered: ClientConnection._discovered}


def _idle_watch(ctx: GatewayContext, loop: asyncio.AbstractEventLoop) -> IdleWatch:
    """The loop's one idle watch for the gateway's connections (made with the first connection)."""
    watch = ctx.idle_watch
    if watch is None or watch.clock is not loop:
        watch = ctx.idle_watch = IdleWatch(ctx.config.connections_max_idle_ms, loop)
    return watch


def _outcome(future: asyncio.Future[Any]) -> Any:
    """A finished job's result, or the exception it raised (cancelled: CancelledError)."""
    if future.cancelled():
        return asyncio.CancelledError()
    return future.exception() or future.result()
