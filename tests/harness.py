"""Runs a real gateway (its own uvloop event loop, on a thread) for tests and benchmarks."""

from __future__ import annotations

import asyncio
import tempfile
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from gateway.commands.embedded_broker import free_port
from gateway.config import GatewayConfig, build_config
from gateway.ops.logs import configure_logging
from gateway.server import Gateway
from gateway.stores.file_users import FileCredentialStore


def free_port_block(size: int = 128) -> int:
    """A base port below the ephemeral range with ``size`` free ports above it.

    Tansu's node id is 111, so a node port is base + 111; picking it among ephemeral
    ports would collide with clients' own outgoing connections.
    """
    import random
    import socket

    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000 - size)
        try:
            for port in range(base, base + size):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free block of ports")


class GatewayThread:
    """A started gateway; ``bootstrap`` is its client address. Stop with ``stop()``."""

    def __init__(self, upstream: str, extra: Mapping[str, Any] | None = None, protocol: str = "PLAINTEXT",
                 advertised_host: str = "127.0.0.1", bind_host: str = "127.0.0.1") -> None:
        self.port = free_port()
        self.host = advertised_host
        self.directory = Path(tempfile.mkdtemp(prefix="ksgate-test-"))
        settings = {
            # Authorization is on everywhere (every request runs its policy); tests that are
            # not about ACLs allow everything by default, as Kafka does with no ACLs.
            "authorizer.class.name": "StandardAuthorizer",
            "ksgate.acl.file": str(self.directory / "acls.json"),
            "allow.everyone.if.no.acl.found": True,
            "ksgate.audit.log.file": str(self.directory / "audit.log"),
            "listeners": f"{protocol}://{f'[{bind_host}]' if ':' in bind_host else bind_host}:{self.port}",
            "advertised.listeners": f"{protocol}://{advertised_host}:{self.port}",
            "upstream.bootstrap.servers": upstream,
            f"listener.name.{protocol.lower()}.node.port.base": free_port_block(),
            "shutdown.timeout.ms": 3000,
        }
        settings.update(extra or {})
        self.config: GatewayConfig = build_config(settings)
        self.gateway = Gateway(self.config)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._run, name="ksgate-test", daemon=True)
        self._started: Future[None] = Future()
        self._stop: asyncio.Event | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> GatewayThread:
        configure_logging("WARNING")
        self._thread.start()
        self._started.result(timeout=30)
        return self

    def _run(self) -> None:
        import uvloop

        loop = uvloop.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        try:
            await self.gateway.start()
        except BaseException as exc:
            self._started.set_exception(exc)
            return
        self._started.set_result(None)
        await self._stop.wait()
        await self.gateway.shutdown()

    def call(self, fn: Any, *args: Any) -> Any:
        """Run fn(*args) on the gateway's loop and return its result."""
        assert self.loop is not None
        result: Future[Any] = Future()

        def run() -> None:
            try:
                result.set_result(fn(*args))
            except BaseException as exc:
                result.set_exception(exc)

        self.loop.call_soon_threadsafe(run)
        return result.result(timeout=10)

    def stop(self) -> None:
        if self.loop is not None and self._stop is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=15)


def secured_gateway(upstream: str, directory: Path, users: Iterable[str] = ("admin", "alice"),
                    mechanisms: str = "SCRAM-SHA-512", extra: Mapping[str, Any] | None = None) -> GatewayThread:
    """A started SASL_PLAINTEXT gateway that enforces ACLs: ``users`` (password ``<user>-secret``)
    in ``directory/users.json``, ``User:admin`` its super user, and no matching ACL means deny."""
    credentials = directory / "users.json"
    store = FileCredentialStore(credentials)
    for user in users:
        store.upsert_user(user, f"{user}-secret")
    return GatewayThread(upstream, {
        "sasl.enabled.mechanisms": mechanisms, "ksgate.credentials.file": str(credentials),
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": False, **(extra or {}),
    }, protocol="SASL_PLAINTEXT").start()
