"""A minimal request/response Kafka client for the gateway's own control traffic.

The gateway asks the upstream cluster what it supports (ApiVersions) and where its
brokers are (Metadata) at start-up and when it meets an unknown node, and the replicated
security store keeps two of these connections open for good.  This is not the hot path,
so it uses asyncio streams and one request at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from auth.sasl.reauthentication import reauthentication_delay_s
from gateway.config import UpstreamConfig
from gateway.upstream.login import CLIENT_ID, UpstreamAuthError, sasl_exchange
from protocol.api_keys import ApiKey
from protocol.errors import DecodeError
from protocol.messages import decode_response, request_frame
from protocol.registry import api

# Why the upstream did not serve the gateway, as logs and /readyz name it: "tls" (the handshake
# failed: a certificate not trusted, a host name it does not cover, our certificate refused),
# "authentication" (our SASL credentials refused), "unreachable" (no connection, no answer),
# "protocol" (an answer that is not Kafka).
UPSTREAM_CAUSES = ("tls", "authentication", "unreachable", "protocol")


class UpstreamError(ConnectionError):
    """The upstream broker could not be reached or answered something unusable.

    ``retriable``: trying again later may help (nothing listening yet, a dropped link); False
    when the upstream refused the gateway itself (its certificate, its credentials).
    ``cause``: one of UPSTREAM_CAUSES.
    """

    def __init__(self, message: str, *, retriable: bool = True, cause: str = "unreachable") -> None:
        super().__init__(message)
        self.retriable = retriable
        self.cause = cause


# The gateway's own requests get small answers (the security store's Fetch is the largest).
MAX_RESPONSE_BYTES = 100 * 1024 * 1024
# Told the kind of each failure (metrics.UPSTREAM_ERROR_KINDS), e.g. Metrics.upstream_error.
ErrorSink = Callable[[str], None]


# The first byte of a TLS record (alert, handshake): what a TLS listener sends a plaintext client.
TLS_RECORD_TYPES = frozenset({0x15, 0x16})


def highest_common_api_versions(answer: dict[str, Any]) -> int:
    """The highest ApiVersions version the upstream's answer offers and the gateway's schema knows."""
    schema = api(ApiKey.API_VERSIONS)
    assert schema is not None
    ours = schema.max_version
    offered = [k["max_version"] for k in answer["api_keys"] if k["api_key"] == ApiKey.API_VERSIONS]
    return max(API_VERSIONS_FIRST, min(ours, offered[0])) if offered else API_VERSIONS_FIRST


def tls_failure(exc: BaseException, timeout_s: float) -> str:
    """What a failed TLS handshake with the upstream means, and what to check (never an empty reason)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"its certificate is not trusted ({exc.verify_message}); check upstream.ssl.truststore.location "
                f"(the CA that signed the brokers' certificates) and that the certificate names this host "
                f"(upstream.ssl.endpoint.identification.algorithm)")
    if isinstance(exc, TimeoutError):
        return (f"the TLS handshake did not complete within {round(timeout_s * 1000)} ms "
                f"(upstream.connect.timeout.ms): the listener probably does not speak TLS (a PLAINTEXT listener "
                f"waits for a Kafka request); check upstream.security.protocol and the port")
    if isinstance(exc, ssl.SSLError):
        reason = exc.reason or str(exc)
        return (f"the TLS handshake failed ({reason}); check that the listener speaks TLS "
                f"(upstream.security.protocol) and upstream.ssl.* (a broker requiring client certificates "
                f"needs upstream.ssl.keystore.location)")
    return f"the connection dropped during the TLS handshake ({exc!r}); check upstream.security.protocol"


# Told to the upstream in every ApiVersions of the gateway's own (KIP-511 client software).
CLIENT_SOFTWARE = {"client_software_name": "ksgate", "client_software_version": "0.1.0"}
# ApiVersions v3 is what any broker of the last years answers (KIP-511), but from v4 Kafka also lists the
# features whose lowest supported level is 0 (KAFKA-17011): the gateway asks again (after its login) at the
# highest version both sides speak when the v3 answer offers one.
API_VERSIONS_FIRST = 3

T = TypeVar("T")


def _ignore(kind: str) -> None:
    pass


class UpstreamClient:
    """One connection, one request at a time; logged in again on the same connection (KIP-368)
    before the first request past the re-authentication point of the lifetime its login was granted."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout_s: float,
                 on_error: ErrorSink = _ignore, clock: Callable[[], float] = time.monotonic) -> None:
        self._reader = reader
        self._writer = writer
        self._timeout = timeout_s
        self._next_correlation = 1
        self._on_error = on_error
        self._clock = clock
        # The login to repeat, and when (``clock`` time): None while the broker set no lifetime.
        self._login: UpstreamConfig | None = None
        self._reauthenticate_at: float | None = None

    @classmethod
    async def connect(cls, host: str, port: int, ssl_context: ssl.SSLContext | None,
                      timeout_s: float, on_error: ErrorSink = _ignore) -> UpstreamClient:
        """TCP first, then TLS: each failure says which step failed and what to check."""
        where = f"upstream {host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        except TimeoutError:
            on_error("connect")
            raise UpstreamError(f"cannot connect to {where}: no TCP connection within {round(timeout_s * 1000)} ms "
                                f"(upstream.connect.timeout.ms); check the address and any firewall") from None
        except OSError as exc:
            on_error("connect")
            raise UpstreamError(f"cannot connect to {where}: {exc.strerror or exc!r}") from None
        if ssl_context is not None:
            try:
                await asyncio.wait_for(writer.start_tls(ssl_context, server_hostname=host), timeout_s)
            except (ssl.SSLError, TimeoutError, OSError) as exc:
                writer.transport.abort()
                on_error("connect")
                # The same answer on every try (a certificate, a protocol mismatch), but for a dropped link.
                retriable = not isinstance(exc, (ssl.SSLError, TimeoutError))  # TimeoutError is an OSError
                raise UpstreamError(f"cannot connect to {where}: {tls_failure(exc, timeout_s)}",
                                    retriable=retriable, cause="unreachable" if retriable else "tls") from None
        return cls(reader, writer, timeout_s, on_error)

    async def request(self, api_key: ApiKey, version: int, body: dict[str, Any],
                      decode_off_loop: bool = False) -> dict[str, Any]:
        """``body``'s answer; after a login that was granted a lifetime, the SASL exchange runs again
        first once its re-authentication point has passed (one request at a time: nothing else in flight).
        ``decode_off_loop``: the answer may be large (every topic's Metadata: ~0.5 s of decoding for 10,000
        topics of 10 partitions), so it is decoded in a worker thread, not on the event loop that serves clients."""
        if self._reauthenticate_at is not None and self._clock() >= self._reauthenticate_at:
            await self._reauthenticate()
        return await self._exchange(api_key, version, body, decode_off_loop)

    async def latest_api_versions(self, first: dict[str, Any]) -> dict[str, Any]:
        """The upstream's ApiVersions answer at the highest version both sides speak, given its answer at v3:
        that one when v3 is the highest, else a second answer. Called after the login on a SASL upstream, as
        Kafka's SASL authenticator takes a single ApiVersions before the handshake (KafkaApis answers any later)."""
        version = highest_common_api_versions(first)
        if version <= API_VERSIONS_FIRST:
            return first
        # v5 may name the cluster and node meant (KIP-1242): the gateway names neither, so no broker refuses it.
        named = {**CLIENT_SOFTWARE, "cluster_id": None, "node_id": -1}
        latest = await self.request(ApiKey.API_VERSIONS, version, named)
        return first if latest["error_code"] else latest  # a refusal lists no features: keep what v3 gave

    async def _exchange(self, api_key: ApiKey, version: int, body: dict[str, Any],
                        decode_off_loop: bool = False) -> dict[str, Any]:
        correlation_id = self._next_correlation
        self._next_correlation += 1
        self._writer.write(request_frame(api_key, version, correlation_id, body, CLIENT_ID))
        head = await self._read(4, api_key)
        size = struct.unpack(">i", head)[0]
        if not 0 <= size <= MAX_RESPONSE_BYTES:
            self._on_error("protocol")
            if head[0] in TLS_RECORD_TYPES and head[1] == 3:  # a TLS record: content type, then version 3.x
                raise UpstreamError(f"upstream answered {api_key.name} with TLS: its listener expects TLS; set "
                                    f"upstream.security.protocol to SSL or SASL_SSL (and upstream.ssl.*)",
                                    retriable=False, cause="tls")
            raise UpstreamError(f"upstream answered {api_key.name} with a frame of {size} bytes: not Kafka",
                                cause="protocol")
        data = memoryview(await self._read(size, api_key))
        try:
            if decode_off_loop:
                got, response = await asyncio.to_thread(decode_response, data, api_key, version)
            else:
                got, response = decode_response(data, api_key, version)
        except DecodeError:
            self._on_error("protocol")
            raise
        if got != correlation_id:
            self._on_error("protocol")
            raise UpstreamError(f"upstream answered correlation id {got}, expected {correlation_id}",
                                cause="protocol")
        return response

    async def _read(self, n: int, api_key: ApiKey) -> bytes:
        try:
            return await asyncio.wait_for(self._reader.readexactly(n), self._timeout)
        except TimeoutError:
            self._on_error("disconnected")  # stopped answering while in use
            raise UpstreamError(f"upstream did not answer {api_key.name} within {round(self._timeout * 1000)} ms "
                                f"(upstream.connect.timeout.ms)") from None
        except ssl.SSLError as exc:
            if not _is_tls_refusal(exc):
                self._on_error("disconnected")
                raise UpstreamError(f"upstream did not answer {api_key.name}: {exc!r}") from None
            # TLS 1.3: the broker checks our certificate after the handshake has completed on our
            # side, so its refusal arrives as an alert on the first read; the same on every try.
            self._on_error("connect")
            raise UpstreamError(f"upstream refused the TLS connection: {exc}", retriable=False,
                                cause="tls") from None
        except (OSError, asyncio.IncompleteReadError) as exc:
            self._on_error("disconnected")  # closed while in use
            if not isinstance(exc, asyncio.IncompleteReadError):
                raise UpstreamError(f"upstream did not answer {api_key.name}: {exc!r}") from None
            hint = ("; check upstream.security.protocol (a TLS listener drops a plaintext client)"
                    if api_key == ApiKey.API_VERSIONS else "")
            raise UpstreamError(f"upstream closed the connection instead of answering {api_key.name}{hint}") \
                from None

    async def authenticate(self, config: UpstreamConfig) -> None:
        """SASL as the gateway's service principal (after ApiVersions, like any client)."""
        try:
            lifetime_ms = await sasl_exchange(self._exchange, config)
        except UpstreamAuthError:
            self._on_error("authentication")
            raise
        self._schedule(config, lifetime_ms)

    def _schedule(self, config: UpstreamConfig, lifetime_ms: int) -> None:
        """KIP-368: a broker with a session lifetime (its listener's connections.max.reauth.ms, an
        expiring credential) closes the connection at the first request after it, other than a new
        login. Measured from the end of our login, a little after the broker's start of the lifetime,
        hence the 5-15 % margin of ``reauthentication_delay_s``. Lifetime 0: never again."""
        if lifetime_ms <= 0:
            self._login, self._reauthenticate_at = None, None
            return
        self._login = config
        self._reauthenticate_at = self._clock() + reauthentication_delay_s(lifetime_ms)

    async def _reauthenticate(self) -> None:
        """The login again, on this connection, before the request that found it due.

        A long-polling caller (the security store's tail) asks again at most its wait after the
        point, so while the wait is under 5 % of the lifetime (the default 500 ms: any lifetime
        above 10 s) the login starts before the lifetime ends.  Later, it still works on Apache
        Kafka, which begins a re-authentication at a SaslHandshake whether or not the session has
        expired (it closes the connection at any other request); a broker that closes it instead
        fails this request, and the caller reconnects as after any lost connection.  A failure is
        an UpstreamError naming the step and the broker's reason, never the password (in none)."""
        config, self._login, self._reauthenticate_at = self._login, None, None
        assert config is not None
        try:
            lifetime_ms = await sasl_exchange(self._exchange, config)
        except UpstreamAuthError as exc:
            self._on_error("authentication")
            raise self._unusable(str(exc), retriable=False, cause="authentication") from None
        except UpstreamError as exc:  # lost, silent or not Kafka meanwhile (counted by _exchange)
            raise self._unusable(str(exc), retriable=exc.retriable, cause=exc.cause) from None
        except DecodeError as exc:  # counted by _exchange
            raise self._unusable(str(exc), retriable=True, cause="protocol") from None
        except BaseException:  # cancelled mid-login
            self._writer.close()
            raise
        self._schedule(config, lifetime_ms)

    def _unusable(self, why: str, retriable: bool, cause: str) -> UpstreamError:
        """A failed re-authentication: the connection is closed (the broker's view of it is unknown,
        nothing more may go out on it) and the caller gets the reason, as for any failed request."""
        self._writer.close()
        return UpstreamError(f"upstream re-authentication failed: {why}", retriable=retriable, cause=cause)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


def _is_tls_refusal(exc: ssl.SSLError) -> bool:
    """An alert from the peer (e.g. SSLV3_ALERT_BAD_CERTIFICATE, TLSV13_ALERT_CERTIFICATE_REQUIRED),
    not a connection that merely ended (SSLEOFError, SSLZeroReturnError)."""
    return not isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError) and "ALERT" in (exc.reason or "")


@dataclass(slots=True)
class NoBootstrapAnswered:
    """Why no bootstrap server answered: each server's error, and whether trying again may help."""

    errors: list[str] = field(default_factory=list)
    retriable: bool = True  # False once an upstream refused the gateway itself (TLS, credentials)
    # The first refusal's cause (UPSTREAM_CAUSES) if a server refused the gateway, else the first error's.
    cause: str = "unreachable"

    @property
    def reason(self) -> str:
        return "; ".join(self.errors)

    def add(self, error: str, cause: str, retriable: bool) -> None:
        if not self.errors or (self.retriable and not retriable):
            self.cause = cause
        self.errors.append(error)
        self.retriable = self.retriable and retriable


async def first_answering_bootstrap(
        servers: Sequence[tuple[str, int]], ssl_context: ssl.SSLContext | None, timeout_s: float,
        on_error: ErrorSink, then: Callable[[UpstreamClient, dict[str, Any]], Awaitable[T]],
) -> T | NoBootstrapAnswered:
    """Connect to each bootstrap server in turn and ask ApiVersions; on the first that answers,
    return ``then(client, versions)`` (the client is closed afterwards in any case).

    A server that fails (connect, ApiVersions or ``then``: UpstreamError, UpstreamAuthError,
    DecodeError) adds its error and the next is tried; when none accepted even a connection,
    ``on_error`` is told "unreachable" once.
    """
    failed = NoBootstrapAnswered()
    reached = False  # a TCP (TLS) connection succeeded: the upstream is there, if unhappy
    for host, port in servers:
        try:
            client = await UpstreamClient.connect(host, port, ssl_context, timeout_s, on_error)
        except UpstreamError as exc:
            failed.add(str(exc), exc.cause, exc.retriable)
            continue
        reached = True
        try:
            versions = await client.request(ApiKey.API_VERSIONS, API_VERSIONS_FIRST, CLIENT_SOFTWARE)
            return await then(client, versions)
        except UpstreamError as exc:
            failed.add(str(exc), exc.cause, exc.retriable)
        except UpstreamAuthError as exc:
            failed.add(str(exc), "authentication", False)
        except DecodeError as exc:
            failed.add(str(exc), "protocol", False)
        finally:
            await client.close()
    if not reached:
        on_error("unreachable")
    return failed
