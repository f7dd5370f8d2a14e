"""The upstream's cluster id is re-learned with each topic listing: a gateway whose upstream now reaches another
cluster sends clients that name the old one to re-bootstrap (ApiVersions v5, KIP-1242), and says so in its log."""

from __future__ import annotations

import asyncio
import struct
import uuid
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from gateway import server
from gateway.server import Gateway
from gateway.upstream.client import NoBootstrapAnswered
from protocol.api_keys import ApiKey
from protocol.header import decode_request_header
from protocol.kafka_errors import KafkaError
from protocol.messages import response_frame
from tests.gateway.session.session_driver import Driver, gateway_for
from tests.wire_client import request_frame


class _Upstream:
    """An upstream link that answers the listing's Metadata as a cluster with this id and one topic."""

    def __init__(self, cluster_id: str) -> None:
        self.cluster_id = cluster_id
        self.asked: list[int] = []

    async def request(self, api_key: int, version: int, body: dict[str, Any],
                      decode_off_loop: bool = False) -> dict[str, Any]:
        self.asked.append(api_key)
        return {"cluster_id": self.cluster_id, "brokers": [], "topics": [
            {"error_code": 0, "name": "t", "topic_id": uuid.uuid4(), "partitions": [{}]}]}


def _intends(gateway: Gateway, cluster_id: str) -> int:
    driver = Driver.connect(gateway)
    driver.send(request_frame(ApiKey.API_VERSIONS, 5, 4, {"client_software_name": "t", "client_software_version": "1",
                                                         "cluster_id": cluster_id, "node_id": 7}))
    ((_, body),) = driver.responses(ApiKey.API_VERSIONS, 5)
    return int(body["error_code"])


class _Log:
    """Stands in for the server's logger (structlog caches a logger once a gateway has run in this process)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.lines.append(("warning", event, fields))

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append(("info", event, fields))


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> _Log:
    log = _Log()
    monkeypatch.setattr(server, "log", log)
    return log


def test_a_listing_from_another_cluster_sends_clients_of_the_old_one_to_rebootstrap(tmp_path: Path,
                                                                                     logged: _Log) -> None:
    gateway = gateway_for(tmp_path)
    gateway.ctx.cluster.cluster_id, gateway.ctx.cluster.nodes = "old", {7: ("10.9.9.9", 9092)}
    assert _intends(gateway, "old") == KafkaError.NONE
    upstream = _Upstream("new")
    asyncio.run(gateway._learn_topics(upstream))  # type: ignore[arg-type]
    assert upstream.asked == [ApiKey.METADATA]  # the listing's own request, nothing added
    assert _intends(gateway, "old") == KafkaError.REBOOTSTRAP_REQUIRED
    assert _intends(gateway, "new") == KafkaError.NONE
    [(level, _, fields)] = [line for line in logged.lines if line[1] == "upstream_cluster_id_changed"]
    assert (level, fields["previous"], fields["current"]) == ("warning", "old", "new")


def test_the_same_cluster_listed_again_logs_nothing(tmp_path: Path, logged: _Log) -> None:
    gateway = gateway_for(tmp_path)
    gateway.ctx.cluster.cluster_id = "same"
    asyncio.run(gateway._learn_topics(_Upstream("same")))  # type: ignore[arg-type]
    assert gateway.ctx.cluster.cluster_id == "same" and not logged.lines


def test_an_upstream_answering_again_after_an_outage_is_listed_again(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-pointed upstream usually comes with an outage: its id (and topics) are read as soon as it answers."""
    gateway = gateway_for(tmp_path, **{"ksgate.readiness.upstream.timeout.ms": 300})  # probed every 100 ms
    answers = iter([NoBootstrapAnswered(["refused"]), None])
    events: list[str] = []
    asked = asyncio.Event()

    async def probe(_gateway: Gateway) -> NoBootstrapAnswered | None:
        return next(answers, None)

    def listing(_gateway: Gateway) -> None:
        events.append("listing")
        asked.set()

    monkeypatch.setattr(Gateway, "_bootstrap_answers", probe)
    monkeypatch.setattr(Gateway, "_request_topic_refresh", listing)

    async def watch() -> list[str]:
        gateway.ctx.upstream_health.answered(asyncio.get_running_loop().time() - 60)  # silent: probe at once
        watcher = asyncio.get_running_loop().create_task(gateway._watch_upstream())
        await asyncio.wait_for(asked.wait(), timeout=10)
        watcher.cancel()
        return events

    assert asyncio.run(watch()) == ["listing"]


# What the loopback upstream answers: ApiVersions up to v4 (so a feature re-read would be a second ApiVersions).
_ANSWERS: dict[int, dict[str, Any]] = {
    ApiKey.API_VERSIONS: {"error_code": 0, "throttle_time_ms": 0, "api_keys": [
        {"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": 4},
        {"api_key": ApiKey.METADATA, "min_version": 0, "max_version": 12}]},
    ApiKey.METADATA: {"throttle_time_ms": 0, "cluster_id": "c1", "controller_id": 1, "brokers": [],
                      "topics": [{"error_code": 0, "name": "t", "topic_id": uuid.uuid4(), "is_internal": False,
                                  "partitions": [], "topic_authorized_operations": 0}]},
}


class _LoopbackUpstream:
    """A loopback broker answering ApiVersions and Metadata; records each request's API and version."""

    def __init__(self) -> None:
        self.received: list[tuple[int, int]] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                header, _ = decode_request_header(memoryview(await reader.readexactly(size)))
                self.received.append((header.api_key, header.api_version))
                writer.write(response_frame(header.api_key, header.api_version, header.correlation_id,
                                            _ANSWERS[header.api_key]))
                await writer.drain()
        writer.close()


def test_a_topic_listing_sends_the_upstream_api_versions_and_metadata_only(tmp_path: Path) -> None:
    """The listing re-reads the cluster id from its Metadata; the feature levels are the readiness probe's to
    re-read, so no second ApiVersions (v4+) goes out with each listing."""
    upstream = _LoopbackUpstream()

    async def list_once() -> Gateway:
        listener = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        gateway = gateway_for(tmp_path, **{"upstream.bootstrap.servers": f"127.0.0.1:{port}"})
        async with listener:
            await gateway._refresh_topics()
        return gateway

    gateway = asyncio.run(list_once())
    assert upstream.received == [(ApiKey.API_VERSIONS, 3), (ApiKey.METADATA, 12)]
    assert gateway.ctx.cluster.cluster_id == "c1" and list(gateway.ctx.cluster.topic_names.values()) == ["t"]
