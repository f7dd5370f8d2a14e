"""Runs a real gateway (its own uvloop event loop, on a thread) for tests and benchmarks."""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
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
    """A started gateway; ``bootstrap`` is its client address. Stop with ``stop()``.

    Its ACL file and audit log are in ``directory``: a temporary one removed by ``stop()`` (or by a failed
    ``start()``) unless the caller passes its own, as a test reading the audit log after ``stop()`` must."""

    def __init__(self, upstream: str, extra: Mapping[str, Any] | None = None, protocol: str = "PLAINTEXT",
                 advertised_host: str = "127.0.0.1", bind_host: str = "127.0.0.1",
                 directory: Path | None = None) -> None:
        self.port = free_port()
        self.host = advertised_host
        self._owns_directory = directory is None
        self.directory = Path(tempfile.mkdtemp(prefix="ksgate-test-")) if directory is None else directory
        try:
            self._configure(upstream, extra, protocol, advertised_host, bind_host)
        except BaseException:
            self._remove_directory()
            raise

    def _configure(self, upstream: str, extra: Mapping[str, Any] | None, protocol: str, advertised_host: str,
                   bind_host: str) -> None:
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
        try:
            self._started.result(timeout=30)
        except BaseException:
            self.stop()  # nobody holds a thread whose start failed: its directory goes with it
            raise
        return self

    def _run(self) -> None:
        import uvloop

        loop = uvloop.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        finally:
            _cancel_remaining_tasks(loop)
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
        # After a failed start the thread closes its loop on its own, at any instant (between
        # is_alive() and a call on its loop, too): only a loop still serving is told to stop.
        if self.loop is not None and self._stop is not None and not self._start_failed() and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=15)
        if not self._thread.is_alive():  # a gateway still stopping may yet write its audit log: left in place
            self._remove_directory()

    def _remove_directory(self) -> None:
        if self._owns_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _start_failed(self) -> bool:
        return self._started.done() and self._started.exception() is not None


def _cancel_remaining_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """As ``asyncio.run`` does for ``ksgate run``: a task still pending when the gateway has stopped (an
    upstream login a moment from failing, say) is cancelled and let finish, not destroyed with the loop
    ("Task was destroyed but it is pending", "Event loop is closed" from its coroutine). Bounded: a task
    that ignores its cancellation is left to the old end after 5 s rather than hanging the test run."""
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=5))


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


def scram_client(gateway: GatewayThread, user: str) -> dict[str, Any]:
    """librdkafka settings for ``user`` of a ``secured_gateway`` (SCRAM-SHA-512, password ``<user>-secret``):
    no idempotence and no retries, so that a refusal is the answer the test sees."""
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": f"{user}-secret",
            "enable.idempotence": False, "retries": 0}


def produce_one(gateway: GatewayThread, user: str, topic: str) -> int | None:
    """The delivery error code (None on success) of one record ``user`` produces to ``topic``."""
    from confluent_kafka import KafkaError, Producer

    outcome: list[KafkaError | None] = []
    producer = Producer(scram_client(gateway, user))
    try:
        producer.produce(topic, b"x", on_delivery=lambda err, _msg: outcome.append(err))
        producer.flush(15)
    except Exception as exc:  # librdkafka refuses topics Metadata called unauthorized
        return int(exc.args[0].code())
    assert outcome, f"no delivery report for {topic}"
    return None if outcome[0] is None else int(outcome[0].code())


class GatewayProcess:
    """``ksgate run`` as a subprocess with its metrics endpoint (/readyz) and its log in ``directory/ksgate.log``.

    For what only the real command does: the operator's HTTP endpoint and the process's own log lines.
    Use as a context manager (SIGTERM on exit).
    """

    def __init__(self, upstream: str, directory: Path, extra: Mapping[str, Any] | None = None) -> None:
        import yaml

        self.port, self.metrics_port = free_port(), free_port()
        self.directory = directory
        self.log_path = directory / "ksgate.log"
        settings = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "upstream.bootstrap.servers": upstream,
            "listener.name.plaintext.node.port.base": free_port_block(),
            "ksgate.metrics.listener": f"127.0.0.1:{self.metrics_port}",
            "log.level": "INFO",
            **(extra or {}),
        }
        self.config_path = directory / "ksgate.yaml"
        self.config_path.write_text(yaml.safe_dump(settings))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> GatewayProcess:
        import sys

        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "gateway", "run", "--config", str(self.config_path), "--log-format", "json"],
                stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def readyz(self) -> tuple[int, str]:
        """/readyz's status and body (0 while nothing answers on the metrics port)."""
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()
        except OSError:
            return 0, ""

    def wait_readyz(self, status: int, deadline_s: float = 30.0) -> str:
        """Poll /readyz until it answers ``status``; its body.  AssertionError (with the log) if it does not."""
        import time

        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            got, body = self.readyz()
            if got == status:
                return body
            assert self._process is not None
            if self._process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"/readyz never answered {status} within {deadline_s}s; log:\n{self.log_text()[-4000:]}")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def events(self, name: str) -> list[dict[str, Any]]:
        """The JSON log lines whose event is ``name``."""
        import json

        found = []
        for line in self.log_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == name:
                found.append(record)
        return found
