"""What an idle connection keeps: after a TLS client logs in and goes quiet, no receive buffer.

uvloop's TLS transport asks the protocol for a buffer whenever it resumes reading (here, after
the password check paused it) even with nothing to read; that used to allocate the connection's
64 KiB receive scratch and keep it for as long as the client stayed idle.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import tracemalloc
from pathlib import Path

from auth.cert_tools import write_tls_material
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.tls_material import client_context
from tests.wire_client import WireClient, request_frame


def test_a_tls_client_idle_after_its_login_holds_no_receive_buffer(broker: EmbeddedBroker, tmp_path: Path) -> None:
    tls = write_tls_material(tmp_path / "tls")
    FileCredentialStore(tmp_path / "users.json").upsert_user("alice", "alice-secret")
    gateway = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(tmp_path / "users.json"),
    }, protocol="SASL_SSL", advertised_host="localhost").start()
    try:
        client = WireClient(gateway.bootstrap)
        client.sock = client_context(tls.ca).wrap_socket(client.sock, server_hostname="localhost")
        client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
        client.read_response(ApiKey.SASL_HANDSHAKE, 1)
        client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": b"\0alice\0alice-secret"}))
        assert client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"] == 0

        async def held() -> list[int]:
            # Scheduled on the gateway's loop after whatever the login's answer scheduled (the
            # resumed read included): FIFO.
            await asyncio.sleep(0)
            return [conn.session.receiver.held() for conn in gateway.gateway._connections]

        assert gateway.loop is not None
        assert asyncio.run_coroutine_threadsafe(held(), gateway.loop).result(timeout=10) == [0]
        client.close()
    finally:
        gateway.stop()




# --- what an idle logged-in connection's Python objects weigh --------------------------------------

IDLE_CONNECTIONS = 150
WARM_CONNECTIONS = 10  # the first logins fill shared caches (metrics children, verified passwords)
# Bytes the gateway's Python heap grows by per idle, logged-in SASL_PLAINTEXT connection with its
# upstream link, as tracemalloc counts them (deterministic, unlike RSS): 10.2 KiB before the
# idle-memory work, 6.6 KiB after it (no deques, instance dicts, empty containers, bound logger or
# loop timer of its own), 5.0 KiB once the observers, the close hook and the SASL answerer were
# shared rather than bound per connection and the rarely used containers made when needed; the
# rest is mostly uvloop's transports and handles.
MAX_TRACED_BYTES_PER_CONNECTION = 5.8 * 1024  # 0.6-0.8 KiB over the measured: tracemalloc noise


def _log_in(address: str) -> socket.socket:
    """A logged-in connection whose upstream link is up: the gateway reads nothing more from a
    connection until its upstream is connected, so the ApiVersions answer proves the link."""
    client = WireClient(address)
    client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
    client.read_response(ApiKey.SASL_HANDSHAKE, 1)
    client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": b"\0alice\0alice-secret"}))
    assert client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"] == 0
    client.send(request_frame(ApiKey.API_VERSIONS, 3, 3, {"client_software_name": "t",
                                                          "client_software_version": "1"}))
    assert client.read_response(ApiKey.API_VERSIONS, 3)[1]["error_code"] == 0
    return client.sock


def _settled_heap(gateway: GatewayThread) -> tracemalloc.Snapshot:
    # A no-op run on the gateway's loop after the last answer: whatever the answers scheduled has run.
    gateway.call(lambda: None)
    gc.collect()
    return tracemalloc.take_snapshot()


def test_an_idle_logged_in_connection_holds_few_python_objects(broker: EmbeddedBroker, tmp_path: Path) -> None:
    FileCredentialStore(tmp_path / "users.json").upsert_user("alice", "alice-secret")
    gateway = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.sasl.plain.allow.insecure": True,
        "ksgate.credentials.file": str(tmp_path / "users.json"),
    }, protocol="SASL_PLAINTEXT").start()
    held: list[socket.socket] = []
    # Deep enough tracebacks that every client-side allocation has a frame in this file (and is left out).
    tracemalloc.start(32)
    try:
        held += [_log_in(gateway.bootstrap) for _ in range(WARM_CONNECTIONS)]
        before = _settled_heap(gateway)
        held += [_log_in(gateway.bootstrap) for _ in range(IDLE_CONNECTIONS)]
        after = _settled_heap(gateway)
        assert gateway.call(lambda: len(gateway.gateway._connections)) == len(held)
        gateway_only = [tracemalloc.Filter(False, __file__, all_frames=True),
                        tracemalloc.Filter(False, tracemalloc.__file__)]
        grown = sum(stat.size_diff for stat in
                    after.filter_traces(gateway_only).compare_to(before.filter_traces(gateway_only), "filename"))
        per_connection = grown / IDLE_CONNECTIONS
        assert 0 < per_connection < MAX_TRACED_BYTES_PER_CONNECTION, f"{per_connection:.0f} bytes per idle connection"
    finally:
        tracemalloc.stop()
        for sock in held:
            sock.close()
        gateway.stop()
