"""Opening a session's upstream link: the first reachable broker, then the gateway's own SASL login.

The session asks for this with an OpenUpstream action; the adapter runs it and reports
the link (or why there is none) back to the session.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence
from typing import Any

from gateway.context import GatewayContext
from gateway.transport.upstream_link import UpstreamLink
from gateway.upstream.client import tls_failure
from gateway.upstream.login import LinkRequester, UpstreamAuthError, sasl_exchange
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError


class UpstreamUnavailable(Exception):
    """No target answered, or the gateway's login to it failed; the client's connection is closed."""


async def open_upstream(ctx: GatewayContext, targets: Sequence[tuple[str, int]],
                        new_link: Callable[[], UpstreamLink], log: Any) -> tuple[UpstreamLink, str, int]:
    """The connected (and, for a SASL upstream, logged-in) link, its address, and the session lifetime
    its broker granted the login (KIP-368; 0: no limit, or no login)."""
    loop = asyncio.get_running_loop()
    config = ctx.config.upstream
    for host, port in targets:
        try:
            _, link = await asyncio.wait_for(loop.create_connection(
                new_link, host, port, ssl=ctx.upstream_ssl, server_hostname=host if ctx.upstream_ssl else None,
            ), config.connect_timeout_ms / 1000)
        except (TimeoutError, OSError) as exc:
            ctx.metrics.upstream_error("connect")
            log.warning("upstream_connect_failed", upstream=f"{host}:{port}",
                        error=_connect_failure(exc, ctx.upstream_ssl is not None, config.connect_timeout_ms))
            continue
        assert link.transport is not None
        link.transport.set_write_buffer_limits(high=ctx.config.connection_buffer_max_bytes)
        lifetime_ms = await log_in(ctx, link) if config.uses_sasl else 0
        # A round trip (the login) or a plain TCP connection proves the upstream serves the gateway;
        # a TLS 1.3 handshake alone does not (a broker refuses our certificate only after it), so
        # on an SSL upstream the readiness probe keeps proving it.
        if config.uses_sasl or not config.uses_tls:
            ctx.upstream_health.answered(loop.time())
        return link, f"{host}:{port}", lifetime_ms
    ctx.metrics.upstream_error("unreachable")
    raise UpstreamUnavailable("no upstream broker reachable")


def _connect_failure(exc: BaseException, tls: bool, timeout_ms: int) -> str:
    """Why a link could not be opened, never empty (a TimeoutError has no message of its own)."""
    if isinstance(exc, ssl.SSLError):
        return tls_failure(exc, timeout_ms / 1000)
    if isinstance(exc, TimeoutError):
        step = "a TCP connection and TLS handshake" if tls else "a TCP connection"
        return f"no {step} within {timeout_ms} ms (upstream.connect.timeout.ms)"
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else repr(exc)


async def log_in(ctx: GatewayContext, link: UpstreamLink, again: bool = False) -> int:
    """SASL as the gateway's service principal: before any client request is relayed, and ``again``
    on the live link before the broker's session lifetime ends (KIP-368). Returns the new lifetime.

    Only the answers to the gateway's own requests (negative correlation ids) reach the exchange:
    on a live link, answers to requests relayed earlier still go to the session, streamed or not.
    A refusal, a malformed answer or none within upstream.connect.timeout.ms closes the link."""
    assert link.transport is not None
    transport = link.transport
    timeout_ms = ctx.config.upstream.connect_timeout_ms
    requester = LinkRequester(transport.write, timeout_ms / 1000)
    link.auth_inbox = requester.deliver
    version = min(2, ctx.cluster.api_ranges.get(ApiKey.SASL_AUTHENTICATE, (0, 2))[1])  # v1+: the lifetime
    step = "re-authentication" if again else "authentication"
    try:
        return await sasl_exchange(requester, ctx.config.upstream, version)
    except (TimeoutError, ConnectionError, DecodeError) as exc:  # ConnectionError: UpstreamAuthError, or a loss
        kind, why = _login_failure(exc, timeout_ms)
        ctx.metrics.upstream_error(kind)
        transport.close()
        raise UpstreamUnavailable(f"upstream {step} failed: {why}") from None
    finally:
        link.auth_inbox = None


def _login_failure(exc: Exception, timeout_ms: int) -> tuple[str, str]:
    """The metric's error kind and the logged reason of a failed login (never the password: not in any)."""
    if isinstance(exc, TimeoutError):
        return "authentication", f"no answer within {timeout_ms} ms (upstream.connect.timeout.ms)"
    if isinstance(exc, DecodeError):
        return "protocol", repr(exc)
    if isinstance(exc, UpstreamAuthError):
        return "authentication", repr(exc)
    return "disconnected", str(exc)  # the link was lost (LinkRequester)
