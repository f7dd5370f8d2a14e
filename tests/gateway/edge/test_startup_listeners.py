"""When a starting gateway's ports accept clients: only once start-up is done (brokers learnt
by the start-up probe included), and never after start-up failed, which leaves nothing running."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker, free_port
from gateway.config import ConfigError, build_config
from gateway.ops.audit import _PrivateRotatingFileHandler as audit_file_handler
from gateway.server import Gateway
from tests.gateway.stores.test_authorization_setup import _descriptors_on

NODE_ID = 0  # with node.id.min 0, node 0 is served on node.port.base itself


class HeldProbe(Gateway):
    """A gateway whose start-up probe learns broker 0 (as the upstream's Metadata would) and then
    waits for the test: the window in which a slow probe or store load keeps start-up busy."""

    def hold(self) -> None:
        self.learnt = asyncio.Event()
        self.release = asyncio.Event()

    async def probe_upstream(self) -> None:
        self._learn_node(NODE_ID, "127.0.0.1", 9092)
        self.learnt.set()
        await self.release.wait()


def settings(directory: Path, port: int, node_port: int) -> dict[str, Any]:
    return {"listeners": f"PLAINTEXT://127.0.0.1:{port}", "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "upstream.bootstrap.servers": "127.0.0.1:9", "listener.name.plaintext.node.port.base": node_port,
            "ksgate.audit.log.file": str(directory / "audit.log")}


async def accepts(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except ConnectionRefusedError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


async def test_a_node_learnt_by_the_start_up_probe_is_not_served_before_start_up_is_done(tmp_path: Path) -> None:
    node_port = free_port()
    gateway = HeldProbe(build_config(settings(tmp_path, free_port(), node_port)))
    gateway.hold()
    starting = asyncio.create_task(gateway.start())
    try:
        await gateway.learnt.wait()
        assert not await accepts(node_port)  # stores, limits and the probe are not done: nobody is served yet
        gateway.release.set()
        await starting
        assert gateway.started
        assert await accepts(node_port)  # start() opened the node it learnt
    finally:
        gateway.release.set()
        await asyncio.gather(starting, return_exceptions=True)
        await gateway.shutdown()


async def test_a_gateway_whose_start_up_fails_closes_the_listeners_it_had_opened(tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = free_port()
    gateway = HeldProbe(build_config(settings(tmp_path, port, taken.getsockname()[1])))
    gateway.hold()
    gateway.release.set()
    try:
        with pytest.raises(ConfigError, match="cannot bind"):  # the node's port is someone else's
            await gateway.start()
        # No watcher outlives it: ended when start() returns, not merely told to end (a loop closed
        # next, as a failed `ksgate run` does, would leave it pending).
        assert gateway._tasks and all(task.done() for task in gateway._tasks)
        assert not await accepts(port)
    finally:
        taken.close()
        for server in gateway._servers.values():
            server.close()


async def test_a_gateway_whose_start_up_fails_closes_its_audit_log_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its descriptor would otherwise stay open for as long as the process lives; a shutdown() after
    the failure (as the tests' finalisers do) leaves it closed, not closed twice."""
    closes: list[object] = []
    close = audit_file_handler.close
    monkeypatch.setattr(audit_file_handler, "close", lambda handler: (closes.append(handler), close(handler))[1])
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    gateway = HeldProbe(build_config({**settings(tmp_path, free_port(), taken.getsockname()[1]),
                                      "authorizer.class.name": "StandardAuthorizer",
                                      "ksgate.acl.file": str(tmp_path / "acls.json")}))
    gateway.hold()
    gateway.release.set()
    try:
        assert len(_descriptors_on(tmp_path / "audit.log")) == 1  # opened with the authorizer
        with pytest.raises(ConfigError, match="cannot bind"):
            await gateway.start()
        assert _descriptors_on(tmp_path / "audit.log") == []
        await gateway.shutdown()
    finally:
        taken.close()
    audit = gateway.ctx.authorization.audit if gateway.ctx.authorization is not None else None
    assert audit is not None and not audit.enabled and len(closes) == 1


def test_a_gateway_whose_start_up_fails_after_loading_the_security_store_stops_its_thread(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    """The replicated store's thread would otherwise go on tailing the topic, and report upstream
    errors onto the failed gateway's event loop after it has closed."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    tansu_node_id = 111
    config = build_config({
        **settings(tmp_path, free_port(), taken.getsockname()[1] - tansu_node_id),
        "upstream.bootstrap.servers": broker.bootstrap, "authorizer.class.name": "StandardAuthorizer",
        "ksgate.security.store": "KAFKA", "ksgate.security.store.topic": f"_ksgate_security_{uuid.uuid4().hex[:8]}"})
    before = set(threading.enumerate())

    async def fail_to_start() -> Gateway:
        gateway = Gateway(config)
        with pytest.raises(ConfigError, match="cannot bind"):  # the node's port is someone else's
            await gateway.start()
        return gateway

    try:
        gateway = asyncio.run(fail_to_start())
    finally:
        taken.close()
    assert gateway.security_topic is not None and gateway.security_topic.loaded  # it had started
    left = [thread.name for thread in set(threading.enumerate()) - before if thread.name == "ksgate-security-store"]
    assert left == []
