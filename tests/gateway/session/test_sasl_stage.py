"""What a login leaves behind (gateway/session/sasl_stage.py), with stand-ins for the log and context."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from auth.principal import KafkaPrincipal
from auth.sasl.server import Authenticated
from gateway.ops.metrics import Metrics
from gateway.session.sasl_stage import note_legacy_nonce


@dataclass
class RecordingLog:
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def info(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


@dataclass
class Context:
    metrics: Metrics = field(default_factory=Metrics)


def _step(reauthenticated: bool) -> Authenticated:
    return Authenticated(b"frame", KafkaPrincipal("User", "alice"), "SCRAM-SHA-256", None,
                         reauthenticated=reauthenticated, legacy_nonce=True)


def test_legacy_nonce_is_counted_every_time_and_logged_once_per_connection() -> None:
    ctx, log = Context(), RecordingLog()
    for reauthenticated in (False, True, True):
        note_legacy_nonce(ctx, log, _step(reauthenticated))  # type: ignore[arg-type]
    logged = [fields for event, fields in log.events if event == "scram_legacy_nonce_accepted"]
    assert len(logged) == 1 and logged[0]["mechanism"] == "SCRAM-SHA-256"
    assert "librdkafka before 2.6.1" in logged[0]["detail"]
    assert 'ksgate_sasl_scram_legacy_nonce_total{mechanism="SCRAM-SHA-256"} 3\n' in ctx.metrics.render()
