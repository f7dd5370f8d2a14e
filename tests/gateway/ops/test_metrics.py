"""Metrics: the registry's Prometheus text, the gateway's series, and the HTTP endpoints over loopback."""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
from collections.abc import AsyncIterator

import pytest
import uvloop

from gateway.config import ConfigError, parse_metrics_listener
from gateway.ops.http_endpoints import MetricsServer
from gateway.ops.metrics import CONTENT_TYPE, Metrics, MetricsError, Registry, format_value
from protocol.api_keys import ApiKey

# --- the registry's text format ----------------------------------------------------


def test_counter_and_gauge_render_exact_prometheus_text() -> None:
    registry = Registry()
    requests = registry.counter("app_requests_total", "Requests handled.", ("api", "outcome"))
    temperature = registry.gauge("app_temperature", "Current temperature.")
    requests.inc(requests.labels("Produce", "ok"))
    requests.inc(requests.labels("Produce", "ok"), 2)
    requests.inc(requests.labels("Fetch", "ok"))
    temperature.set((), 21.5)
    assert registry.render() == (
        "# HELP app_requests_total Requests handled.\n"
        "# TYPE app_requests_total counter\n"
        'app_requests_total{api="Fetch",outcome="ok"} 1\n'
        'app_requests_total{api="Produce",outcome="ok"} 3\n'
        "# HELP app_temperature Current temperature.\n"
        "# TYPE app_temperature gauge\n"
        "app_temperature 21.5\n"
    )


def test_label_values_and_help_text_are_escaped() -> None:
    registry = Registry()
    counter = registry.counter("app_events_total", 'Help with \\ and\nnewline and "quotes".', ("listener",))
    counter.inc(counter.labels('a"b\\c\nd'))
    assert registry.render().splitlines() == [
        '# HELP app_events_total Help with \\\\ and\\nnewline and "quotes".',
        "# TYPE app_events_total counter",
        'app_events_total{listener="a\\"b\\\\c\\nd"} 1',
    ]


def test_histogram_buckets_are_cumulative_and_a_value_on_a_bound_falls_in_it() -> None:
    registry = Registry()
    latency = registry.histogram("app_latency_seconds", "Latency.", ("api",), (0.1, 1.0))
    labels = latency.labels("Fetch")
    for value in (0.1, 0.5, 5.0, 0.25):
        latency.observe(labels, value)
    assert registry.render() == (
        "# HELP app_latency_seconds Latency.\n"
        "# TYPE app_latency_seconds histogram\n"
        'app_latency_seconds_bucket{api="Fetch",le="0.1"} 1\n'
        'app_latency_seconds_bucket{api="Fetch",le="1"} 3\n'
        'app_latency_seconds_bucket{api="Fetch",le="+Inf"} 4\n'
        'app_latency_seconds_sum{api="Fetch"} 5.85\n'
        'app_latency_seconds_count{api="Fetch"} 4\n'
    )
    assert latency.count(labels) == 4


def test_sample_values_are_written_as_prometheus_parses_them() -> None:
    assert [format_value(v) for v in (0, 3, 3.0, 0.25, 1e-05, math.inf, -math.inf, math.nan)] == \
        ["0", "3", "3", "0.25", "1e-05", "+Inf", "-Inf", "NaN"]


def test_invalid_declarations_are_refused() -> None:
    registry = Registry()
    registry.counter("app_total", "x")
    with pytest.raises(MetricsError):
        registry.counter("app_total", "again")
    with pytest.raises(MetricsError):
        registry.gauge("app-dash", "bad name")
    with pytest.raises(MetricsError):
        registry.gauge("app_gauge", "bad label", ("__reserved",))
    with pytest.raises(MetricsError):
        registry.histogram("app_h", "le is reserved", ("le",), (1.0,))
    with pytest.raises(MetricsError):
        registry.histogram("app_h2", "unsorted", (), (1.0, 0.5))
    counter = registry.counter("app_labelled_total", "x", ("a", "b"))
    with pytest.raises(MetricsError):
        counter.labels("only-one")


# --- the gateway's series ----------------------------------------------------------


def test_every_product_series_is_exposed_with_its_type() -> None:
    text = Metrics().render()
    types = {line.split()[2]: line.split()[3] for line in text.splitlines() if line.startswith("# TYPE")}
    assert types == {
        "ksgate_connections": "gauge", "ksgate_connections_total": "counter",
        "ksgate_authentications_total": "counter", "ksgate_authorization_decisions_total": "counter",
        "ksgate_request_latency_seconds": "histogram", "ksgate_upstream_errors_total": "counter",
        "ksgate_store_lag_seconds": "gauge", "ksgate_relayed_requests_total": "counter",
        "ksgate_streamed_endpoints_dropped_total": "counter",
        "ksgate_request_bytes_total": "counter", "ksgate_response_bytes_total": "counter",
        "ksgate_build_info": "gauge",
        "ksgate_sasl_scram_legacy_nonce_total": "counter",
        "ksgate_password_hashes_total": "counter",
        "ksgate_connections_refused_total": "counter", "ksgate_tls_handshake_failures_total": "counter",
        "ksgate_tls_handshakes_deferred_total": "counter", "ksgate_tls_handshakes_waiting": "gauge",
        "ksgate_gc_pause_seconds": "histogram",
    }
    assert "ksgate_store_lag_seconds 0\n" in text
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="SCRAM-SHA-256"} 0\n' in text
    assert 'ksgate_upstream_errors_total{kind="connect"} 0\n' in text


def test_configured_listeners_are_exported_at_zero_before_any_connection() -> None:
    text = Metrics(["SASL_SSL"]).render()
    assert 'ksgate_connections{listener="SASL_SSL"} 0\n' in text
    assert 'ksgate_connections_total{listener="SASL_SSL"} 0\n' in text
    assert 'ksgate_tls_handshakes_deferred_total{listener="SASL_SSL"} 0\n' in text


def test_refusals_and_handshake_failures_are_exported_per_listener_from_zero() -> None:
    metrics = Metrics(["SSL"])
    assert 'ksgate_connections_refused_total{listener="SSL",reason="max_connections_per_ip"} 0\n' in metrics.render()
    metrics.connection_refused("SSL", "max_connections_per_ip")
    metrics.connection_refused("SSL", "not-a-reason")
    metrics.tls_handshake_failed("SSL", "timeout")
    text = metrics.render()
    assert 'ksgate_connections_refused_total{listener="SSL",reason="max_connections_per_ip"} 1\n' in text
    assert 'ksgate_connections_refused_total{listener="SSL",reason="other"} 1\n' in text
    assert 'ksgate_tls_handshake_failures_total{listener="SSL",kind="timeout"} 1\n' in text


def test_connection_gauge_follows_open_connections_while_the_total_only_grows() -> None:
    metrics = Metrics()
    for _ in range(3):
        metrics.connection_opened("PLAINTEXT")
    metrics.connection_closed("PLAINTEXT")
    assert metrics.connections.value(("PLAINTEXT",)) == 2
    assert metrics.connections_total.value(("PLAINTEXT",)) == 3


def test_api_labels_are_kafka_names_and_unknown_keys_share_one_series() -> None:
    metrics = Metrics()
    metrics.relayed(ApiKey.PRODUCE)
    metrics.relayed(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)
    metrics.relayed(999)
    metrics.relayed(-1)
    metrics.observe_latency(ApiKey.FETCH, 0.003)
    metrics.authorization_decision(ApiKey.METADATA, "partial")
    text = metrics.render()
    assert 'ksgate_relayed_requests_total{api="Produce"} 1\n' in text
    assert 'ksgate_relayed_requests_total{api="DescribeUserScramCredentials"} 1\n' in text
    assert 'ksgate_relayed_requests_total{api="unknown"} 2\n' in text
    assert 'ksgate_request_latency_seconds_bucket{api="Fetch",le="0.0025"} 0\n' in text
    assert 'ksgate_request_latency_seconds_bucket{api="Fetch",le="0.005"} 1\n' in text
    assert 'ksgate_authorization_decisions_total{api="Metadata",outcome="partial"} 1\n' in text


def test_client_supplied_mechanisms_and_unknown_outcomes_cannot_grow_the_label_space() -> None:
    metrics = Metrics()
    metrics.authentication("SCRAM-SHA-512", "success")
    metrics.authentication("X-" + "A" * 100, "unsupported_mechanism")
    metrics.authentication(None, "malformed")
    metrics.authentication("PLAIN", "something new")
    metrics.authorization_decision(ApiKey.FETCH, "maybe")
    metrics.upstream_error("cosmic-ray")
    text = metrics.render()
    assert 'ksgate_authentications_total{mechanism="SCRAM-SHA-512",outcome="success"} 1\n' in text
    assert 'ksgate_authentications_total{mechanism="other",outcome="unsupported_mechanism"} 1\n' in text
    assert 'ksgate_authentications_total{mechanism="unknown",outcome="malformed"} 1\n' in text
    assert 'ksgate_authentications_total{mechanism="PLAIN",outcome="other"} 1\n' in text
    assert 'ksgate_authorization_decisions_total{api="Fetch",outcome="other"} 1\n' in text
    assert 'ksgate_upstream_errors_total{kind="other"} 1\n' in text


def test_hot_path_hooks_reuse_pre_bound_label_tuples() -> None:
    metrics = Metrics(["PLAINTEXT"])
    metrics.relayed(ApiKey.PRODUCE)
    metrics.relayed(ApiKey.PRODUCE)
    metrics.authorization_decision(ApiKey.PRODUCE, "allowed")
    metrics.connection_opened("PLAINTEXT")
    (relayed_key,) = metrics.relayed_requests._values
    (authz_key,) = metrics.authorization_decisions._values
    assert relayed_key is metrics._api[ApiKey.PRODUCE]
    assert authz_key is metrics._authz["allowed"][ApiKey.PRODUCE]
    assert next(iter(metrics.connections._values)) is metrics._listeners["PLAINTEXT"]


def test_bytes_are_counted_per_listener_and_api_with_unknown_keys_and_short_frames_as_unknown() -> None:
    metrics = Metrics(["PLAINTEXT"])
    traffic = metrics.traffic("PLAINTEXT")
    assert metrics.traffic("PLAINTEXT") is traffic  # one table per listener, shared by its connections
    traffic.request_frame(memoryview(b"\x00\x00\x00\x06\x00\x03\x00\x0c\x00\x00"))  # Metadata, 10 bytes
    traffic.request_frame(memoryview(b"\x00\x00\x00\x02\x7f\xff"))  # api key 32767
    traffic.request_frame(memoryview(b"\x00\x00\x00\x01\x00"))  # too short to name an API
    traffic.request_frame(memoryview(b"\x00\x00\x00\x03\xff\xff\x00"))  # api key -1 (int16), 7 bytes
    traffic.request_frame(memoryview(b"\x00\x00\x00\x03\x01\x00\x00"))  # api key 256, 7 bytes
    traffic.response(ApiKey.METADATA, 100)
    traffic.response(-1, 7)
    text = metrics.render()
    assert 'ksgate_request_bytes_total{listener="PLAINTEXT",api="Metadata"} 10\n' in text
    assert 'ksgate_request_bytes_total{listener="PLAINTEXT",api="unknown"} 25\n' in text
    assert 'ksgate_response_bytes_total{listener="PLAINTEXT",api="Metadata"} 100\n' in text
    assert 'ksgate_response_bytes_total{listener="PLAINTEXT",api="unknown"} 7\n' in text
    assert 'api="Produce"' not in text  # APIs never seen are not exported


def test_process_metrics_are_exported_only_when_asked() -> None:
    assert "process_cpu_seconds_total" not in Metrics().render()
    text = Metrics(process=True).render()
    assert "# TYPE process_cpu_seconds_total counter" in text
    assert "# TYPE process_open_fds gauge" in text


def test_store_lag_is_set_by_the_store() -> None:
    metrics = Metrics()
    metrics.set_store_lag(1.5)
    assert "ksgate_store_lag_seconds 1.5\n" in metrics.render()


# --- the HTTP endpoints over loopback ----------------------------------------------


class Probes:
    def __init__(self) -> None:
        self.ready: bool | str = "upstream not probed yet"
        self.live: bool | str = True


async def http(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)  # the server closes after one response
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, value in (line.split(":", 1) for line in header_lines)}
    assert int(headers["content-length"]) == len(body)
    return int(status_line.split()[1]), headers, body


async def get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    return await http(port, f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[MetricsServer, Metrics, Probes]]:
    metrics, probes = Metrics(["PLAINTEXT"]), Probes()
    server = MetricsServer("127.0.0.1", 0, metrics, ready=lambda: probes.ready, live=lambda: probes.live,
                           request_timeout_s=0.5, max_request_bytes=1024)
    await server.start()
    yield server, metrics, probes
    await server.close()


async def test_metrics_endpoint_serves_the_registry_as_prometheus_text(
        endpoint: tuple[MetricsServer, Metrics, Probes]) -> None:
    server, metrics, _ = endpoint
    metrics.connection_opened("PLAINTEXT")
    status, headers, body = await get(server.port, "/metrics")
    assert status == 200
    assert headers["content-type"] == CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"
    assert headers["connection"] == "close"
    assert body.decode() == metrics.render()
    assert 'ksgate_connections{listener="PLAINTEXT"} 1\n' in body.decode()


async def test_readyz_is_503_with_the_reason_until_ready(endpoint: tuple[MetricsServer, Metrics, Probes]) -> None:
    server, _, probes = endpoint
    status, _, body = await get(server.port, "/readyz")
    assert (status, body) == (503, b"upstream not probed yet\n")
    probes.ready = False
    assert (await get(server.port, "/readyz"))[::2] == (503, b"not ready\n")
    probes.ready = True
    status, _, body = await get(server.port, "/readyz?verbose=1")
    assert (status, body) == (200, b"ready\n")


async def test_healthz_is_200_when_live_and_503_when_not(endpoint: tuple[MetricsServer, Metrics, Probes]) -> None:
    server, _, probes = endpoint
    assert (await get(server.port, "/healthz"))[::2] == (200, b"live\n")
    probes.live = "event loop stalled"
    assert (await get(server.port, "/healthz"))[::2] == (503, b"event loop stalled\n")


async def test_a_failing_probe_is_reported_as_not_ready() -> None:
    def broken() -> bool:
        raise RuntimeError("store closed")

    server = MetricsServer("127.0.0.1", 0, Metrics(), ready=broken, live=lambda: True)
    await server.start()
    try:
        status, _, body = await get(server.port, "/readyz")
        assert status == 503 and b"store closed" in body
    finally:
        await server.close()


async def test_unknown_paths_are_404_and_other_methods_405(endpoint: tuple[MetricsServer, Metrics, Probes]) -> None:
    server, _, _ = endpoint
    assert (await get(server.port, "/"))[0] == 404
    assert (await get(server.port, "/metrics/extra"))[0] == 404
    status, headers, _ = await http(server.port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert (status, headers["allow"]) == (405, "GET")
    assert (await http(server.port, b"HEAD /healthz HTTP/1.1\r\n\r\n"))[0] == 405
    with_body = b"PUT /metrics HTTP/1.1\r\nContent-Length: 50000\r\n\r\n" + b"x" * 50_000
    assert (await http(server.port, with_body))[0] == 405  # answered, not reset, though the body is unread


async def test_malformed_request_line_is_400(endpoint: tuple[MetricsServer, Metrics, Probes]) -> None:
    server, _, _ = endpoint
    assert (await http(server.port, b"GET /metrics\r\n\r\n"))[0] == 400
    assert (await http(server.port, b"GET /metrics SPDY/3\r\n\r\n"))[0] == 400


async def test_oversized_request_head_is_refused_with_431(endpoint: tuple[MetricsServer, Metrics, Probes]) -> None:
    server, _, _ = endpoint
    raw = b"GET /metrics HTTP/1.1\r\nX-Padding: " + b"a" * 20_000  # never terminated
    status, _, body = await http(server.port, raw)
    assert status == 431 and b"1024" in body


async def test_a_request_head_that_never_completes_times_out_with_408(
        endpoint: tuple[MetricsServer, Metrics, Probes]) -> None:
    server, _, _ = endpoint
    assert (await http(server.port, b"GET /metr"))[0] == 408  # request_timeout_s=0.5


async def test_close_releases_the_port_and_drops_idle_connections() -> None:
    server = MetricsServer("127.0.0.1", 0, Metrics(), ready=lambda: True, live=lambda: True)
    await server.start()
    port = server.port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET ")  # an unfinished request is in progress when close() runs
    await writer.drain()
    async with asyncio.timeout(5):
        while not server._handlers:  # until the handler has started (the server's loop is ours)
            await asyncio.sleep(0)
    await server.close()
    with contextlib.suppress(ConnectionResetError):  # a reset if "GET " was still unread server-side
        assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_binding_a_taken_port_is_a_config_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = MetricsServer("127.0.0.1", taken.getsockname()[1], Metrics(), ready=lambda: True,
                               live=lambda: True)
        with pytest.raises(ConfigError, match=r"ksgate\.metrics\.listener: cannot bind"):
            await server.start()


def test_endpoints_work_on_uvloop() -> None:
    async def scenario() -> tuple[int, bytes]:
        server = MetricsServer("127.0.0.1", 0, Metrics(), ready=lambda: True, live=lambda: True)
        await server.start()
        try:
            status, _, body = await get(server.port, "/metrics")
            assert (await get(server.port, "/readyz"))[0] == 200
            return status, body
        finally:
            await server.close()

    loop = uvloop.new_event_loop()
    try:
        status, body = loop.run_until_complete(scenario())
    finally:
        loop.close()
    assert status == 200 and b"# TYPE ksgate_connections gauge" in body


@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1:9404", ("127.0.0.1", 9404)),
    ("0.0.0.0:9404", ("0.0.0.0", 9404)),
    (":9404", ("0.0.0.0", 9404)),
    ("[::1]:9404", ("::1", 9404)),
    ("metrics.internal:80", ("metrics.internal", 80)),
])
def test_metrics_listener_setting_is_host_colon_port(text: str, expected: tuple[str, int]) -> None:
    assert parse_metrics_listener(text) == expected


@pytest.mark.parametrize("text", ["9404", "host:", "host:port", "::1:9404", "host:70000", "http://h:1"])
def test_malformed_metrics_listener_setting_names_the_key(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^ksgate\.metrics\.listener: "):
        parse_metrics_listener(text)


def test_scram_legacy_nonce_logins_are_counted_by_mechanism() -> None:
    metrics = Metrics()
    metrics.scram_legacy_nonce("SCRAM-SHA-256")
    metrics.scram_legacy_nonce("SCRAM-SHA-256")
    metrics.scram_legacy_nonce("bogus")
    metrics.authentication("SCRAM-SHA-512", "nonce_mismatch")
    text = metrics.render()
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="SCRAM-SHA-256"} 2\n' in text
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="SCRAM-SHA-512"} 0\n' in text
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="other"} 1\n' in text
    assert 'ksgate_authentications_total{mechanism="SCRAM-SHA-512",outcome="nonce_mismatch"} 1\n' in text
