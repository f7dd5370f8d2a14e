"""When a starting gateway's ports accept clients: only once start-up is done (brokers learnt
by the start-up probe included), and never after start-up failed."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from gateway.commands.embedded_broker import free_port
from gateway.config import ConfigError, build_config
from gateway.server import Gateway

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
        assert not await accepts(port)
        assert all(task.cancelling() or task.done() for task in gateway._tasks)  # no watcher outlives it
    finally:
        taken.close()
        for server in gateway._servers.values():
            server.close()
