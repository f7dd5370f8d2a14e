"""The README's first command: `ksgate quickstart` as a user runs it (a real process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.embedded_broker import free_port


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


@pytest.mark.parametrize("protocol", ["SASL_SSL", "PLAINTEXT"])
def test_quickstart_serves_clients_with_the_files_it_writes(tmp_path: Path, protocol: str) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "quickstart", "--port", str(port), "--dir", str(tmp_path),
         "--listener-protocol", protocol],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:  # wait for the announcement, the quickstart's readiness signal
            if "ksgate is up" in line or time.monotonic() > deadline:
                break
        else:
            pytest.fail("quickstart exited before announcing itself")
        alice = _properties(tmp_path / "alice.properties")
        assert alice["bootstrap.servers"] == f"localhost:{port}"
        assert alice["security.protocol"] == protocol
        if protocol == "SASL_SSL":
            assert (tmp_path / "ca.pem").exists() and alice["ssl.ca.location"].endswith("ca.pem")
            assert alice["sasl.mechanism"] == "SCRAM-SHA-512" and alice["sasl.password"] == "alice-secret"
        topic = f"demo-{uuid.uuid4().hex[:6]}"
        admin = AdminClient(alice)
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(timeout=15)
        producer = Producer(alice)
        producer.produce(topic, b"hello through ksgate")
        assert producer.flush(15) == 0
        consumer = Consumer({**_properties(tmp_path / "bob.properties"), "group.id": "demo-qs",
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, 0)])
        message = None
        deadline = time.monotonic() + 20
        while message is None and time.monotonic() < deadline:
            polled = consumer.poll(0.5)
            if polled is not None:
                assert polled.error() is None, polled.error()
                message = polled
        consumer.close()
        assert message is not None and message.value() == b"hello through ksgate"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
