"""``ksgate quickstart``: an embedded broker, a gateway in front of it, client property files."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.cli import serve
from gateway.config import build_config
from gateway.embedded_broker import EmbeddedBroker
from gateway.server import Gateway

CLIENTS = ("admin", "alice", "bob")


def write_client_files(directory: Path, bootstrap: str) -> list[Path]:
    """librdkafka-style property files, one per demo identity."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in CLIENTS:
        path = directory / f"{name}.properties"
        path.write_text(
            f"# ksgate quickstart client '{name}' (identities arrive with authentication)\n"
            f"bootstrap.servers={bootstrap}\n"
            f"security.protocol=PLAINTEXT\n",
            "utf-8",
        )
        written.append(path)
    return written


def usage_text(directory: Path, bootstrap: str) -> str:
    return f"""
ksgate is up: clients connect to {bootstrap}

  kcat -F {directory}/admin.properties -L

  python3 - <<'PY'
  from confluent_kafka import Producer
  p = Producer({{"bootstrap.servers": "{bootstrap}"}})
  p.produce("demo", b"hello through ksgate"); p.flush()
  PY

Press Ctrl-C to stop (the embedded broker stops with it).
"""


def run_quickstart(directory: str, port: int, upstream: str | None) -> int:
    broker = None
    if upstream is None:
        broker = EmbeddedBroker().start()
        upstream = broker.bootstrap
    try:
        config = build_config({
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "upstream.bootstrap.servers": upstream,
        })
        bootstrap = f"127.0.0.1:{port}"
        out = Path(directory)

        def announce(_: Gateway) -> None:
            write_client_files(out, bootstrap)
            print(usage_text(out, bootstrap), flush=True)

        asyncio.run(serve(config, on_started=announce))
    finally:
        if broker is not None:
            broker.stop()
    return 0
