"""Drives a ProxySession without sockets, threads or timers: the adapter's part, played by a test.

A real GatewayContext (built by Gateway from a configuration, as in production) with a
made-up upstream that supports every version ksgate parses; client bytes are written into
the session's receive buffers, and every action it returns is recorded for the test to read.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from auth.client_address import ClientAddress
from authz.policies import all_policies
from gateway.admin.handlers import LOCAL_HANDLERS
from gateway.clock import SYSTEM_CLOCK, Clock
from gateway.config import build_config
from gateway.server import Gateway
from gateway.session import actions as act
from gateway.session.api_versions import negotiate
from gateway.session.authz_view import TopicIdMisses
from gateway.session.routes import build_routes
from gateway.session.session import ProxySession
from protocol.api_keys import INTERNAL_APIS
from protocol.header import decode_request_header
from protocol.messages import decode_response, response_frame
from protocol.registry import all_apis

UPSTREAM = ("10.9.9.9", 9092)
# The route table a gateway with an authorizer and a credential store builds (gateway/server.py).
ROUTES = build_routes(all_policies(), LOCAL_HANDLERS)
CLIENT = ClientAddress("10.0.0.1", 5000)


def gateway_for(directory: Path, protocol: str = "PLAINTEXT", **extra: Any) -> Gateway:
    settings: dict[str, Any] = {
        "listeners": f"{protocol}://127.0.0.1:19092", "advertised.listeners": f"{protocol}://gw.example:19092",
        "upstream.bootstrap.servers": f"{UPSTREAM[0]}:{UPSTREAM[1]}",
        f"listener.name.{protocol.lower()}.node.port.base": 19100,
        "ksgate.audit.log.file": str(directory / "audit.log"), **extra}
    gateway = Gateway(build_config(settings))
    upstream = {key: (schema.min_version, schema.max_version) for key, schema in all_apis().items()
                if key not in INTERNAL_APIS}
    gateway.ctx.negotiated = negotiate(gateway.ctx.routes, upstream, gateway.ctx.authorization is not None)
    gateway.ctx.cluster.api_ranges = upstream
    return gateway


def requester(principal: Any, listener: str = "PLAINTEXT", topic_names: Mapping[Any, str] | None = None) -> Any:
    """What the policy check reads of a RequestContext, for tests that call it directly."""
    return SimpleNamespace(principal=principal, client_host="10.0.0.1", client_port=5000,
                           listener=SimpleNamespace(name=listener), topic_names=topic_names or {},
                           misses=TopicIdMisses())


@dataclass
class ManualClock:
    """The session's clock, set by the test (Driver.connect(..., clock=)): time passes when the test says."""

    wall: int = 1_700_000_000_000  # ms since the epoch
    mono: float = 1000.0  # s

    def wall_ms(self) -> int:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    @classmethod
    def from_system(cls) -> ManualClock:
        return cls(SYSTEM_CLOCK.wall_ms(), SYSTEM_CLOCK.monotonic())

    def advance(self, seconds: float) -> None:
        self.wall += round(seconds * 1000)
        self.mono += seconds


@dataclass
class UpstreamRequest:
    upstream_id: int
    api_key: int
    version: int
    body: dict[str, Any]


class _Waiter:
    """The adapter's side of request memory: another connection freed some for this one's waiting frame."""

    driver: Driver

    def memory_granted(self) -> None:
        self.driver.record(self.driver.session.memory_granted())


@dataclass
class Driver:
    session: ProxySession
    actions: list[act.Action] = field(default_factory=list)
    client_bytes: bytearray = field(default_factory=bytearray)
    upstream_bytes: bytearray = field(default_factory=bytearray)
    jobs: dict[int, act.RunJob] = field(default_factory=dict)
    timers: dict[str, float] = field(default_factory=dict)
    closed: act.Close | None = None
    reading_paused: bool = False
    upstream_reading_paused: bool = False
    wakes: list[Any] = field(default_factory=list)  # WakeReaders' calls, for the test to make
    discovered: list[act.Discovered] = field(default_factory=list)  # applied to the cluster view as the server does

    @classmethod
    def connect(cls, gateway: Gateway, listener: str = "PLAINTEXT", upstream_up: bool = True,
                clock: Clock = SYSTEM_CLOCK) -> Driver:
        waiter = _Waiter()
        driver = waiter.driver = cls(ProxySession(gateway.ctx, listener, None, waiter=waiter, clock=clock))
        driver.record(driver.session.connected(CLIENT))
        if upstream_up and any(isinstance(a, act.OpenUpstream) for a in driver.actions):
            driver.record(driver.session.upstream_ready(f"{UPSTREAM[0]}:{UPSTREAM[1]}"))
        return driver

    def record(self, actions: Iterable[act.Action]) -> None:
        for action in actions:
            self.actions.append(action)
            if isinstance(action, act.SendToClient):
                self.client_bytes += b"".join(bytes(p) for p in action.pieces)
            elif isinstance(action, act.SendToUpstream):
                self.upstream_bytes += b"".join(bytes(p) for p in action.pieces)
            elif isinstance(action, act.RunJob):
                self.jobs[action.job_id] = action
            elif isinstance(action, act.StartTimer):
                self.timers[action.name] = action.delay_s
            elif isinstance(action, act.CancelTimer):
                self.timers.pop(action.name, None)
            elif isinstance(action, act.Close):
                self.closed = self.closed or action
            elif isinstance(action, act.PauseClientReading):
                self.reading_paused = action.paused
            elif isinstance(action, act.PauseUpstreamReading):
                self.upstream_reading_paused = action.paused
            elif isinstance(action, act.WakeReaders):
                self.wakes.extend(action.wakes)
            elif isinstance(action, act.Discovered):  # the server's part, minus node listeners (no server here)
                self.discovered.append(action)
                cluster = self.session.ctx.cluster
                for node in action.nodes:
                    cluster.learn_node(*node)
                cluster.learn_topic_ids(action.topic_ids)
                cluster.learn_partition_counts(action.partition_counts)

    # --- the client side -------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Client bytes, written into the session's buffers as a socket read would."""
        view = memoryview(data)
        while view:
            buffer = self.session.receive_buffer()
            n = min(len(buffer), len(view))
            buffer[:n] = view[:n]
            view = view[n:]
            self.record(self.session.received(n))

    def responses(self, api_key: int, version: int, count: int | None = None) -> list[tuple[int, dict[str, Any]]]:
        """The next ``count`` (default: all) complete responses the client got, all of one API; consumed."""
        out: list[tuple[int, dict[str, Any]]] = []
        while len(self.client_bytes) >= 4 and (count is None or len(out) < count):
            size = struct.unpack_from(">i", self.client_bytes)[0]
            if len(self.client_bytes) < 4 + size:
                break
            payload = bytes(self.client_bytes[4 : 4 + size])
            del self.client_bytes[: 4 + size]
            out.append(decode_response(payload, api_key, version))
        return out

    def correlation_ids(self) -> list[int]:
        ids = []
        view = bytes(self.client_bytes)
        while len(view) >= 8:
            size = struct.unpack_from(">i", view)[0]
            ids.append(struct.unpack_from(">i", view, 4)[0])
            view = view[4 + size :]
        return ids

    # --- the upstream side -----------------------------------------------------------------

    def upstream_requests(self) -> list[UpstreamRequest]:
        """The requests relayed so far, decoded; consumed."""
        out = []
        while len(self.upstream_bytes) >= 4:
            size = struct.unpack_from(">i", self.upstream_bytes)[0]
            payload = memoryview(bytes(self.upstream_bytes[4 : 4 + size]))
            del self.upstream_bytes[: 4 + size]
            header, schema = decode_request_header(payload)
            body = schema.request_codec(header.api_version).decode(payload[header.size :])
            out.append(UpstreamRequest(header.correlation_id, header.api_key, header.api_version, body))
        return out

    def answer(self, request: UpstreamRequest, body: Mapping[str, Any]) -> None:
        wire = response_frame(request.api_key, request.version, request.upstream_id, dict(body))
        self.record(self.session.upstream_frames([memoryview(wire)]))

    # --- jobs and timers: run when the test says --------------------------------------------

    def run_job(self, kind: act.JobKind, result: Any = None) -> None:
        """Run (or, with ``result``, pretend to run) the oldest pending job of ``kind``."""
        job = next(j for j in self.jobs.values() if j.kind is kind)
        del self.jobs[job.job_id]
        if result is None:
            try:
                result = job.work()
            except Exception as exc:
                result = exc
        self.record(self.session.job_done(job.job_id, result))

    def fire(self, timer: str) -> None:
        assert timer in self.timers, f"{timer} was not started"
        del self.timers[timer]
        self.record(self.session.timer_fired(timer))
