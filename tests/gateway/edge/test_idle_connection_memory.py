"""What an idle connection keeps: after a TLS client logs in and goes quiet, no receive buffer.

uvloop's TLS transport asks the protocol for a buffer whenever it resumes reading (here, after
the password check paused it) even with nothing to read; that used to allocate the connection's
64 KiB receive scratch and keep it for as long as the client stayed idle.
"""

from __future__ import annotations

import asyncio
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


