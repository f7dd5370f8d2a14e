"""The operator's HTTP endpoint: GET /metrics (Prometheus text), /healthz and /readyz.

A deliberately tiny HTTP/1.1 server on asyncio streams: one request per connection, the
request head bounded in size and time, no request bodies, ``Connection: close`` always.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from gateway.config import ConfigError
from gateway.ops.logs import get_logger
from gateway.ops.metrics import CONTENT_TYPE

log = get_logger(component="http")

# A probe answers True when healthy; False, or a string giving the reason, when not.
Probe = Callable[[], bool | str]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}
_TEXT = "text/plain; charset=utf-8"


class Exposition(Protocol):
    def render(self) -> str: ...


class MetricsServer:
    """Serves the endpoints until ``close()``; each request is answered then the connection closed."""

    def __init__(self, host: str, port: int, metrics: Exposition, ready: Probe, live: Probe, *,
                 request_timeout_s: float = 5.0, max_request_bytes: int = 8192, max_connections: int = 64) -> None:
        self.host = host
        self.requested_port = port
        self.metrics = metrics
        self.ready = ready
        self.live = live
        self.request_timeout_s = request_timeout_s
        self.max_request_bytes = max_request_bytes
        self.max_connections = max_connections
        self._server: asyncio.base_events.Server | None = None
        self._handlers: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        assert self._server is not None, "start() first"
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.requested_port,
                                                      limit=self.max_request_bytes, reuse_address=True)
        except OSError as exc:
            raise ConfigError(f"ksgate.metrics.listener: cannot bind {self.host}:{self.requested_port}: "
                              f"{exc.strerror}") from None
        log.info("http_listening", address=f"{self.host}:{self.port}")

    async def close(self) -> None:
        """Stop accepting, close connections in progress, release the port."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in self._handlers.values():
            writer.close()  # the handler's read ends (IncompleteReadError) and it returns
        if self._handlers:
            await asyncio.wait(list(self._handlers), timeout=self.request_timeout_s)
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers[task] = writer
        try:
            if len(self._handlers) > self.max_connections:
                return  # shed load: close without reading
            await self._answer(reader, writer)
        except (ConnectionError, TimeoutError):
            pass  # the client went away, or would not read the response
        finally:
            del self._handlers[task]
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.request_timeout_s):
                head = await reader.readuntil(b"\r\n\r\n")
            status, headers, body = self._route(head)
        except TimeoutError:
            status, headers, body = 408, {}, "request head not received in time\n"
        except asyncio.LimitOverrunError:
            status, headers, body = 431, {}, f"request head larger than {self.max_request_bytes} bytes\n"
        except asyncio.IncompleteReadError:
            return  # closed before a complete request head
        payload = body.encode()
        lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Length: {len(payload)}",
                 "Connection: close", "Cache-Control: no-store"]
        lines += [f"{name}: {value}" for name, value in {"Content-Type": _TEXT, **headers}.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload)
        async with asyncio.timeout(self.request_timeout_s):
            await writer.drain()
            if status in (400, 405, 431):
                # The client may still be sending (a body, the rest of a huge head): read and
                # drop it, so closing with unread data does not reset the connection first.
                writer.write_eof()
                discarded = 0
                while discarded < 16 * self.max_request_bytes and (chunk := await reader.read(65536)):
                    discarded += len(chunk)

    def _route(self, head: bytes) -> tuple[int, dict[str, str], str]:
        request_line = head.split(b"\r\n", 1)[0]
        parts = request_line.split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            return 400, {}, "expected an HTTP/1.x request line\n"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return 405, {"Allow": "GET"}, "only GET is supported\n"
        if target == b"/metrics":
            try:
                return 200, {"Content-Type": CONTENT_TYPE}, self.metrics.render()
            except Exception as exc:  # a bug in a collector must not take the endpoint down
                log.exception("metrics_render_failed")
                return 500, {}, f"rendering metrics failed: {exc!r}\n"
        if target == b"/healthz":
            return _probe(self.live, "live")
        if target == b"/readyz":
            return _probe(self.ready, "ready")
        return 404, {}, "not found: try /metrics, /healthz or /readyz\n"


def _probe(probe: Probe, what: str) -> tuple[int, dict[str, str], str]:
    try:
        answer = probe()
    except Exception as exc:  # a failing check means "not healthy", with the reason
        return 503, {}, f"not {what}: check failed: {exc!r}\n"
    if answer is True:
        return 200, {}, f"{what}\n"
    reason = answer if isinstance(answer, str) and answer else f"not {what}"
    return 503, {}, f"{reason}\n"
