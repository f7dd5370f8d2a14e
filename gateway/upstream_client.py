"""A minimal request/response Kafka client for the gateway's own control traffic.

The gateway asks the upstream cluster what it supports (ApiVersions) and where its
brokers are (Metadata) at start-up and when it meets an unknown node.  This is not the
hot path, so it uses asyncio streams and one request at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from typing import Any

from gateway.config import UpstreamConfig
from gateway.upstream_auth import CLIENT_ID, sasl_exchange
from protocol.api_keys import ApiKey
from protocol.messages import decode_response, request_frame


class UpstreamError(ConnectionError):
    """The upstream broker could not be reached or answered something unusable."""


class UpstreamClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout_s: float) -> None:
        self._reader = reader
        self._writer = writer
        self._timeout = timeout_s
        self._next_correlation = 1

    @classmethod
    async def connect(cls, host: str, port: int, ssl_context: ssl.SSLContext | None,
                      timeout_s: float) -> UpstreamClient:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, ssl=ssl_context,
                                        server_hostname=host if ssl_context else None),
                timeout_s)
        except (TimeoutError, OSError) as exc:
            raise UpstreamError(f"cannot connect to upstream {host}:{port}: {exc}") from None
        return cls(reader, writer, timeout_s)

    async def request(self, api_key: ApiKey, version: int, body: dict[str, Any]) -> dict[str, Any]:
        correlation_id = self._next_correlation
        self._next_correlation += 1
        self._writer.write(request_frame(api_key, version, correlation_id, body, CLIENT_ID))
        try:
            size = struct.unpack(">i", await asyncio.wait_for(self._reader.readexactly(4), self._timeout))[0]
            data = memoryview(await asyncio.wait_for(self._reader.readexactly(size), self._timeout))
        except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
            raise UpstreamError(f"upstream did not answer {api_key.name}: {exc!r}") from None
        got, response = decode_response(data, api_key, version)
        if got != correlation_id:
            raise UpstreamError(f"upstream answered correlation id {got}, expected {correlation_id}")
        return response

    async def authenticate(self, config: UpstreamConfig) -> None:
        """SASL as the gateway's service principal (after ApiVersions, like any client)."""
        await sasl_exchange(self.request, config)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()
