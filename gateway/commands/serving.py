"""Runs one configured gateway until SIGINT/SIGTERM: its metrics endpoint, signal handlers and graceful drain.

Shared by ``ksgate run`` (gateway.commands.cli) and ``ksgate quickstart`` (gateway.commands.quickstart).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

from gateway.config import GatewayConfig, parse_metrics_listener
from gateway.ops.collector import CollectorPauses, freeze_start_up_heap
from gateway.ops.descriptors import raise_open_files_limit
from gateway.ops.http_endpoints import MetricsServer
from gateway.ops.logs import get_logger
from gateway.server import Gateway


def install_event_loop_policy() -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux/macOS
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(config: GatewayConfig, on_started: object = None, worker: int | None = None) -> None:
    """Run a gateway until SIGINT/SIGTERM, then shut it down gracefully.

    As worker ``worker`` of several, listeners are shared with SO_REUSEPORT, metrics are
    served on the configured port + the worker index, and the worker stops if orphaned.
    """
    limit = raise_open_files_limit()  # before anything is opened; max.connections is derived from it
    if limit.raised_from is not None:
        get_logger().info("open_files_limit_raised", soft=limit.soft, was=limit.raised_from)
    gateway = Gateway(config, reuse_port=worker is not None)
    http = _metrics_server(config, gateway, worker or 0)
    if worker is not None:
        from gateway.ops.workers import watch_parent

        watch_parent(asyncio.get_running_loop(), lambda: os.kill(os.getpid(), signal.SIGTERM))
    if http is not None:
        await http.start()  # health answers while the upstream is probed; /readyz says "starting"
    pauses = CollectorPauses(gateway.ctx.metrics.gc_pauses)
    pauses.install()
    try:
        await _serve(gateway, on_started)
    finally:
        pauses.remove()
        if http is not None:
            await http.close()


def _metrics_server(config: GatewayConfig, gateway: Gateway, worker: int) -> MetricsServer | None:
    listener = config.settings.get("ksgate.metrics.listener")
    if listener is None:
        return None
    host, port = parse_metrics_listener(listener)
    port += worker  # one metrics port per worker: a shared port would answer for a random worker

    def ready() -> bool | str:
        if gateway._stopping:
            return "shutting down"
        if not gateway.started:
            return "starting: probing the upstream" + (" and loading the security store"
                                                        if gateway.security_topic is not None else "")
        return gateway.readiness_problem() or True

    return MetricsServer(host, port, gateway.ctx.metrics, ready=ready, live=lambda: True)


def _freeze_start_up_heap() -> None:
    """Run by start() once the stores are loaded, just before the first port opens: the collection
    holds the loop for tens of ms, which then delays no client (none can connect yet); once the
    ports accept, it would stall the first clients. Passed here, not built into Gateway.start():
    a test process starts many gateways and must collect them."""
    began = time.perf_counter()
    objects = freeze_start_up_heap()
    get_logger().info("start_up_heap_frozen", objects=objects, took_ms=round((time.perf_counter() - began) * 1000, 1))


async def _serve(gateway: Gateway, on_started: object) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # Installed before start-up (a signal right after "gateway_started" must drain, not kill);
    # during start-up a signal abandons the start.
    starting = asyncio.ensure_future(gateway.start(before_listening=_freeze_start_up_heap))

    def on_signal() -> None:
        stop.set()  # kept if the start has just finished: the drain below then runs at once
        starting.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    loop.add_signal_handler(signal.SIGHUP, lambda: loop.create_task(gateway.reload_tls()))
    try:
        try:
            await starting
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not starting.cancelled() or (current is not None and current.cancelling()):
                raise
            get_logger().warning("startup_interrupted")
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if callable(on_started):
            on_started(gateway)
        await stop.wait()
        # The handlers stay installed while draining: a second signal must not kill the drain.
        await gateway.shutdown()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
