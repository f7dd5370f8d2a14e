"""Descriptor exhaustion: a gateway under a low open-files limit (`ksgate run` as a subprocess)
derives max.connections from it, so one address opening connections until refused cannot
take /healthz and /metrics down, and a new client gets in once one leaves."""

from __future__ import annotations

import json
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker, free_port
from protocol.api_keys import ApiKey
from tests.wire_client import read_frame, request_frame

SOFT, HARD = 128, 256  # the gateway raises its soft limit to the hard one at start-up
DEADLINE_S = 30.0  # upper bounds on start-up and on how soon a close is seen, not timings
API_VERSIONS = request_frame(ApiKey.API_VERSIONS, 3, 1, {"client_software_name": "t", "client_software_version": "1"})


def _low_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT, HARD))


class LowLimitGateway:
    def __init__(self, tmp_path: Path, upstream: str) -> None:
        self.port, metrics_port = free_port(), free_port()
        self.base = f"http://127.0.0.1:{metrics_port}"
        config = tmp_path / "ksgate.yaml"
        config.write_text(f"listeners: PLAINTEXT://127.0.0.1:{self.port}\nupstream.bootstrap.servers: {upstream}\n"
                          f"listener.name.plaintext.node.port.base: {free_port() - 111}\n"
                          f"ksgate.metrics.listener: 127.0.0.1:{metrics_port}\nlog.level: INFO\n")
        self.log_path = tmp_path / "gateway.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                                     stdout=subprocess.DEVNULL, stderr=self._log, preexec_fn=_low_nofile)

    def events(self, name: str) -> list[dict[str, object]]:
        lines = self.log_path.read_text("utf-8", errors="replace").splitlines()
        found = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == name:
                found.append(event)
        return found

    def wait_started(self) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not self.events("gateway_started"):
            assert self.proc.poll() is None, self.log_path.read_text()
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.05)

    def get(self, path: str) -> tuple[int, str]:
        with urllib.request.urlopen(self.base + path, timeout=10) as response:
            return response.status, response.read().decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self._log.close()


@pytest.fixture
def low_limit(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[LowLimitGateway]:
    gateway = LowLimitGateway(tmp_path, broker.bootstrap)
    try:
        gateway.wait_started()
        yield gateway
    finally:
        gateway.stop()


def _admitted(port: int) -> socket.socket | None:
    """A connection the gateway serves (ApiVersions answered), or None if it was closed at once."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall(API_VERSIONS)
        read_frame(sock)
        return sock
    except ConnectionError:
        sock.close()
        return None


def test_connections_stop_at_the_derived_limit_and_the_http_endpoints_still_answer(
        low_limit: LowLimitGateway) -> None:
    gateway = low_limit
    [raised] = gateway.events("open_files_limit_raised")
    assert (raised["was"], raised["soft"]) == (SOFT, HARD)
    [derived] = gateway.events("max_connections_derived")
    limit = derived["max_connections"]
    assert isinstance(limit, int) and 0 < limit < HARD // 2 and derived["open_files_limit"] == HARD
    clients: list[socket.socket] = []
    try:
        while (sock := _admitted(gateway.port)) is not None:  # one address, until refused
            clients.append(sock)
            assert len(clients) <= limit
        assert len(clients) == limit
        assert gateway.get("/healthz")[0] == 200
        status, metrics = gateway.get("/metrics")
        assert status == 200
        assert 'ksgate_connections_refused_total{listener="PLAINTEXT",reason="max_connections"} 1' in metrics
        clients.pop().close()  # one leaves: a new client gets in (once the gateway has seen the close)
        deadline = time.monotonic() + DEADLINE_S
        while (sock := _admitted(gateway.port)) is None:
            assert time.monotonic() < deadline, "no connection admitted after one closed"
        clients.append(sock)
        assert gateway.get("/healthz")[0] == 200
    finally:
        for sock in clients:
            sock.close()
