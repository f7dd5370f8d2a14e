"""The gateway's own log bounds and escapes what a client says: a 100 KB SASL/PLAIN user name over the raw wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.ops.audit import NAME_CHARS, REASON_CHARS
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.wire_client import WireClient, request_frame

pytestmark = pytest.mark.broker
# The rest of an authentication_failed line: timestamp, level, connection, listener, client, flags.
LINE_OVERHEAD = 1024


@pytest.fixture(scope="module")
def plain_gateway(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayThread]:
    credentials = tmp_path_factory.mktemp("creds") / "users.json"
    FileCredentialStore(credentials).upsert_user("alice", "alice-secret", mechanisms=("PLAIN",))
    running = GatewayThread(broker.bootstrap, {
        "sasl.enabled.mechanisms": "PLAIN", "ksgate.credentials.file": str(credentials),
        "ksgate.sasl.plain.allow.insecure": True, "connection.failed.authentication.delay.ms": 0,
        "ksgate.audit.log.file": None}, protocol="SASL_PLAINTEXT").start()
    yield running
    running.stop()


def _plain_login(gateway: GatewayThread, user: str) -> int:
    client = WireClient(gateway.bootstrap)
    try:
        client.send(request_frame(ApiKey.SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
        assert client.read_response(ApiKey.SASL_HANDSHAKE, 1)[1]["error_code"] == 0
        client.send(request_frame(ApiKey.SASL_AUTHENTICATE, 2, 2, {"auth_bytes": f"\0{user}\0wrong".encode()}))
        error: int = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)[1]["error_code"]
        return error
    finally:
        client.close()


def test_a_100_kb_user_name_leaves_one_bounded_escaped_log_line(plain_gateway: GatewayThread,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    user = "\x1b[2J\u2028forged\nUser:admin " + "u" * 100_000
    capsys.readouterr()
    assert _plain_login(plain_gateway, user) == 58  # SASL_AUTHENTICATION_FAILED
    # The failure is logged when it is known, before the answer is written: it is in stderr by now.
    lines = [line for line in capsys.readouterr().err.splitlines() if "authentication_failed" in line]
    [line] = lines
    assert len(line.encode()) <= REASON_CHARS + LINE_OVERHEAD
    reason = json.loads(line)["reason"]
    assert len(reason) <= REASON_CHARS and "uuuu" in reason
    assert all(c.isprintable() for c in reason)  # no escape sequence, line or paragraph separator survives


def test_the_audit_log_and_the_gateway_log_share_one_bound(tmp_path: Path) -> None:
    from gateway.ops.audit import AuditLog, bounded_name

    audit = AuditLog(str(tmp_path / "audit.log"))
    user = "\x1b[2Jevil\n" + "u" * 100_000
    audit.authentication(principal=None, attempted_user=user, client_host="10.0.0.1", client_port=1,
                         listener="SASL_PLAINTEXT", mechanism="PLAIN", succeeded=False, failure="bad_credentials")
    audit.close()
    event = json.loads((tmp_path / "audit.log").read_text("utf-8"))
    assert event["attempted_user"] == bounded_name(user) and len(event["attempted_user"]) == NAME_CHARS
    assert event["attempted_user"].startswith("\\x1b[2Jevil\\n")
