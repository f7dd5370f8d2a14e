"""A TLS gateway whose handshake budget is small enough to defer a test's second connection."""

from __future__ import annotations

from typing import Any

from auth.cert_tools import TlsFiles
from gateway.commands.embedded_broker import EmbeddedBroker
from tests.harness import GatewayThread


def budget_gateway(broker: EmbeddedBroker, tls: TlsFiles, *, rate_per_s: float = 0.01, queue: int = 4,
                   **where: Any) -> GatewayThread:
    """Started: one handshake at once per address, then ``rate_per_s`` (one per 100 s by default), ``queue``
    waiting; ``where`` goes to GatewayThread (bind_host, say)."""
    return GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "ksgate.tls.handshake.rate.per.ip": rate_per_s, "ksgate.tls.handshake.burst.per.ip": 1,
        "ksgate.tls.handshake.queue.per.ip": queue,
    }, protocol="SSL", advertised_host="localhost", **where).start()
