"""The authenticate stage's reaction to the SASL machine's steps, with a stand-in connection (no sockets)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from auth.principal import KafkaPrincipal
from auth.sasl.server import Authenticated
from gateway.ops.metrics import Metrics
from gateway.session.sasl_stage import apply_step


@dataclass
class RecordingLog:
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def info(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


@dataclass
class Responses:
    frames: list[bytes] = field(default_factory=list)

    def add_local(self, api_key: int, version: int, correlation_id: int, frame: bytes) -> None:
        self.frames.append(frame)


@dataclass
class Context:
    metrics: Metrics = field(default_factory=Metrics)


@dataclass
class StandInConnection:
    ctx: Context = field(default_factory=Context)
    log: RecordingLog = field(default_factory=RecordingLog)
    responses: Responses = field(default_factory=Responses)
    authenticated: list[Authenticated] = field(default_factory=list)

    def on_authenticated(self, step: Authenticated) -> None:
        self.authenticated.append(step)


def _step(reauthenticated: bool, legacy_nonce: bool) -> Authenticated:
    return Authenticated(b"frame", KafkaPrincipal("User", "alice"), "SCRAM-SHA-256", None,
                         reauthenticated=reauthenticated, legacy_nonce=legacy_nonce)


def test_legacy_nonce_is_counted_every_time_and_logged_once_per_connection() -> None:
    conn = StandInConnection()
    for reauthenticated in (False, True, True):
        apply_step(conn, _step(reauthenticated, legacy_nonce=True))  # type: ignore[arg-type]
    assert len(conn.authenticated) == 3
    logged = [fields for event, fields in conn.log.events if event == "scram_legacy_nonce_accepted"]
    assert len(logged) == 1 and logged[0]["mechanism"] == "SCRAM-SHA-256"
    assert "librdkafka before 2.6.1" in logged[0]["detail"]
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="SCRAM-SHA-256"} 3\n' in conn.ctx.metrics.render()


def test_an_rfc_nonce_login_is_neither_logged_nor_counted_as_legacy() -> None:
    conn = StandInConnection()
    apply_step(conn, _step(False, legacy_nonce=False))  # type: ignore[arg-type]
    assert conn.log.events == []
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="SCRAM-SHA-256"} 0\n' in conn.ctx.metrics.render()
