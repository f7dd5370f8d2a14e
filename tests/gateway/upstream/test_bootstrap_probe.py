"""first_answering_bootstrap against local fake upstreams: which server answers, what each failure
adds, and when the upstream counts as unreachable (no broker needed)."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from gateway.commands.embedded_broker import free_port
from gateway.upstream.client import NoBootstrapAnswered, UpstreamClient, first_answering_bootstrap
from gateway.upstream.login import UpstreamAuthError
from protocol.api_keys import ApiKey
from protocol.messages import response_frame

VERSIONS = {"error_code": 0, "api_keys": [{"api_key": int(ApiKey.METADATA), "min_version": 0, "max_version": 12}],
            "throttle_time_ms": 0}
Answer = Callable[[int], bytes]  # correlation id -> the bytes the fake upstream sends back


def api_versions(correlation_id: int) -> bytes:
    return response_frame(ApiKey.API_VERSIONS, 3, correlation_id, VERSIONS)


def garbage(correlation_id: int) -> bytes:
    return struct.pack(">i", -7)  # a negative frame size: not Kafka


@asynccontextmanager
async def fake_upstream(answer: Answer) -> AsyncIterator[tuple[str, int]]:
    """Reads one request frame per connection and writes ``answer(correlation id)``."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        request = await reader.readexactly(size)
        writer.write(answer(struct.unpack(">i", request[4:8])[0]))
        await writer.drain()
        await reader.read()  # until the client closes
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield "127.0.0.1", server.sockets[0].getsockname()[1]


def closed() -> tuple[str, int]:
    return "127.0.0.1", free_port()  # bound and released: nothing listens there


async def probe(servers: list[tuple[str, int]], then: Callable[[UpstreamClient, dict[str, Any]], Awaitable[Any]],
                errors: list[str]) -> Any:
    return await first_answering_bootstrap(servers, None, 2.0, errors.append, then)


async def learned(client: UpstreamClient, versions: dict[str, Any]) -> list[int]:
    return [k["api_key"] for k in versions["api_keys"]]


async def test_the_first_server_that_answers_api_versions_is_used_and_its_result_returned() -> None:
    errors: list[str] = []
    async with fake_upstream(api_versions) as good:
        assert await probe([closed(), good], learned, errors) == [int(ApiKey.METADATA)]
    assert errors == ["connect"]  # the closed one; the upstream was reached, so not "unreachable"


async def test_no_server_listening_is_retriable_and_counted_unreachable_once() -> None:
    errors: list[str] = []
    outcome = await probe([closed(), closed()], learned, errors)
    assert isinstance(outcome, NoBootstrapAnswered)
    assert len(outcome.errors) == 2 and all("cannot connect" in e for e in outcome.errors)
    assert outcome.retriable and outcome.reason == "; ".join(outcome.errors)
    assert errors == ["connect", "connect", "unreachable"]


async def test_an_upstream_answering_garbage_is_reached_but_does_not_answer() -> None:
    errors: list[str] = []
    async with fake_upstream(garbage) as bad:
        outcome = await probe([bad], learned, errors)
    assert isinstance(outcome, NoBootstrapAnswered) and "not Kafka" in outcome.reason
    assert errors == ["protocol"]


async def test_a_refused_login_in_the_follow_up_is_not_retriable_and_the_next_server_is_tried() -> None:
    calls: list[str] = []

    async def refused(client: UpstreamClient, versions: dict[str, Any]) -> None:
        calls.append("login")
        raise UpstreamAuthError("bad credentials")

    errors: list[str] = []
    async with fake_upstream(api_versions) as first, fake_upstream(api_versions) as second:
        outcome = await probe([first, second], refused, errors)
    assert calls == ["login", "login"]
    assert isinstance(outcome, NoBootstrapAnswered) and outcome.errors == ["bad credentials", "bad credentials"]
    assert not outcome.retriable


async def test_the_cause_is_the_refusal_of_the_gateway_rather_than_a_server_that_was_not_there() -> None:
    async def refused(client: UpstreamClient, versions: dict[str, Any]) -> None:
        raise UpstreamAuthError("bad credentials")

    async with fake_upstream(api_versions) as answering, fake_upstream(garbage) as bad:
        logged_out = await probe([closed(), answering], refused, [])
        nobody = await probe([closed(), closed()], learned, [])
        not_kafka = await probe([bad], learned, [])
    assert isinstance(logged_out, NoBootstrapAnswered) and logged_out.cause == "authentication"
    assert isinstance(nobody, NoBootstrapAnswered) and nobody.cause == "unreachable"
    assert isinstance(not_kafka, NoBootstrapAnswered) and not_kafka.cause == "protocol"


# --- ApiVersions at the highest version both sides speak (Kafka lists level-0 features from v4) ----------------

def _features_answer(offered_max: int, asked: list[int], later_error: int = 0) -> Callable[[bytes], bytes]:
    """A broker offering ApiVersions up to ``offered_max``, answering each request at its version; like Kafka,
    a supported feature whose lowest level is 0 (group.version) only from v4 (KAFKA-17011)."""
    def answer(request: bytes) -> bytes:
        version, correlation_id = struct.unpack(">hi", request[2:8])
        asked.append(version)
        supported = [{"name": "metadata.version", "min_version": 7, "max_version": 29}]
        if version >= 4:
            supported.append({"name": "group.version", "min_version": 0, "max_version": 1})
        body = {"error_code": later_error if version > 3 else 0, "throttle_time_ms": 0, "supported_features": supported,
                "api_keys": [{"api_key": int(ApiKey.API_VERSIONS), "min_version": 0, "max_version": offered_max}]}
        return response_frame(ApiKey.API_VERSIONS, version, correlation_id, body)
    return answer


@asynccontextmanager
async def answering_each_request(answer: Callable[[bytes], bytes]) -> AsyncIterator[tuple[str, int]]:
    """A fake upstream that answers every request frame of a connection, in order."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                writer.write(answer(await reader.readexactly(size)))
                await writer.drain()
        except asyncio.IncompleteReadError:  # the client closed
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield "127.0.0.1", server.sockets[0].getsockname()[1]


async def supported_names(client: UpstreamClient, versions: dict[str, Any]) -> list[str]:
    """What the gateway learns after its login: the answer at the highest version both sides speak."""
    return [f["name"] for f in (await client.latest_api_versions(versions))["supported_features"]]


async def test_api_versions_is_asked_again_at_the_highest_common_version_for_level_0_features() -> None:
    asked: list[int] = []
    async with answering_each_request(_features_answer(5, asked)) as server:
        names = await probe([server], supported_names, [])
    assert asked == [3, 5]
    assert names == ["metadata.version", "group.version"]


async def test_an_upstream_offering_api_versions_v3_alone_is_asked_once() -> None:
    asked: list[int] = []
    async with answering_each_request(_features_answer(3, asked)) as server:
        names = await probe([server], supported_names, [])
    assert asked == [3]
    assert names == ["metadata.version"]


async def test_a_refused_second_api_versions_keeps_what_v3_listed() -> None:
    asked: list[int] = []
    async with answering_each_request(_features_answer(5, asked, later_error=35)) as server:
        names = await probe([server], supported_names, [])
    assert asked == [3, 5]
    assert names == ["metadata.version"]
