"""/metrics, /healthz and /readyz of a running gateway (`ksgate run`), over real sockets."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from confluent_kafka.admin import AdminClient

from gateway.commands.embedded_broker import EmbeddedBroker, free_port
from tests.harness import free_port_block


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_metrics_and_health_of_a_running_gateway(broker: EmbeddedBroker, tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    config = tmp_path / "ksgate.yaml"
    config.write_text(f"listeners: PLAINTEXT://127.0.0.1:{port}\nupstream.bootstrap.servers: {broker.bootstrap}\n"
                      f"listener.name.plaintext.node.port.base: {free_port() - 111}\n"
                      f"ksgate.metrics.listener: 127.0.0.1:{metrics_port}\nlog.level: WARNING\n")
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                            env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{metrics_port}"
        deadline = time.monotonic() + 30
        status = 0
        while status != 200 and time.monotonic() < deadline:  # readiness is what we wait on
            try:
                status, _ = _get(f"{base}/readyz")
            except OSError:
                status = 0
            time.sleep(0.1)
        assert status == 200
        assert _get(f"{base}/healthz")[0] == 200
        AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
        status, text = _get(f"{base}/metrics")
        assert status == 200
        assert 'ksgate_connections_total{listener="PLAINTEXT"}' in text
        assert 'ksgate_relayed_requests_total{api="Metadata"}' in text
        # Every answered request feeds the latency histogram: relayed (Metadata) and local (ApiVersions).
        for api_name in ("Metadata", "ApiVersions"):
            count = re.search(rf'ksgate_request_latency_seconds_count{{api="{api_name}"}} (\d+)', text)
            assert count is not None and int(count.group(1)) >= 1, api_name
        assert _get(f"{base}/nope")[0] == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_two_workers_share_the_listener_and_each_serves_its_metrics(broker: EmbeddedBroker, tmp_path: Path) -> None:
    port = free_port_block(3)  # the listener, then worker 0's and worker 1's metrics (metrics_base + i): all free
    metrics_base = port + 1
    config = tmp_path / "ksgate.yaml"
    config.write_text(f"listeners: PLAINTEXT://127.0.0.1:{port}\nupstream.bootstrap.servers: {broker.bootstrap}\n"
                      f"listener.name.plaintext.node.port.base: {free_port() - 111}\n"
                      f"ksgate.metrics.listener: 127.0.0.1:{metrics_base}\nlog.level: WARNING\n")
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config), "--workers", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for worker in range(2):
            deadline = time.monotonic() + 30
            status = 0
            while status != 200 and time.monotonic() < deadline:
                try:
                    status, _ = _get(f"http://127.0.0.1:{metrics_base + worker}/readyz")
                except OSError:
                    status = 0
                time.sleep(0.1)
            assert status == 200, f"worker {worker} never became ready"
        for _ in range(4):  # connections land on either worker; every one works
            assert AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10).brokers
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=40) == 0
