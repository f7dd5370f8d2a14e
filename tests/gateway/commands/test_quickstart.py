"""The README's first command: `ksgate quickstart` as a user runs it (a real process)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import IO

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.commands.embedded_broker import free_port
from gateway.commands.quickstart import QuickstartPlan, usage_text
from tests.harness import free_port_block
from tests.hosts_file import can_edit_hosts, hosts_entries

ROOT = Path(__file__).resolve().parents[3]


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


class Quickstart:
    """A `ksgate quickstart` process and the banner it printed (its readiness signal)."""

    def __init__(self, directory: Path, protocol: str = "SASL_SSL", *extra: str) -> None:
        self.port = free_port()
        self.directory = directory
        self.stderr_path = directory.parent / f"{directory.name}.stderr"
        self._stderr = self.stderr_path.open("w")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "quickstart", "--port", str(self.port), "--dir", str(directory),
             "--listener-protocol", protocol, *extra],
            stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True)
        self.banner = self._read_banner(timeout_s=60)

    def _read_banner(self, timeout_s: float) -> str:
        """The lines up to "Press Ctrl-C", read in a thread: a quickstart that hangs without printing
        fails this test after ``timeout_s`` (a hang bound) instead of blocking it on a read."""
        assert self.proc.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_lines_to, args=(self.proc.stdout, lines), daemon=True).start()
        banner = []
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.stop()
                pytest.fail(f"quickstart did not announce itself within {timeout_s:.0f} s: {self.stderr()}")
            if line is None:
                self.stop()
                pytest.fail(f"quickstart exited before announcing itself: {self.stderr()}")
            banner.append(line)
            if line.startswith("Press Ctrl-C"):
                return "".join(banner)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # never leave a quickstart (and its broker) behind
            raise
        finally:
            self._stderr.close()


def _lines_to(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    """Every line of ``stream`` onto ``lines``, then None at its end (the rest of the output too: a pipe that
    nobody reads would block the process once full)."""
    for line in stream:
        lines.put(line)
    lines.put(None)


def _banner_value(banner: str, prefix: str) -> str:
    [line] = [line for line in banner.splitlines() if line.startswith(prefix)]
    return line.removeprefix(prefix).split()[0]


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as response:
        status: int = response.status
        return status


@pytest.mark.broker
@pytest.mark.parametrize("protocol", ["SASL_SSL", "PLAINTEXT"])
def test_quickstart_serves_clients_with_the_files_it_writes(tmp_path: Path, protocol: str) -> None:
    quickstart = Quickstart(tmp_path / "qs", protocol)
    port, tmp_path = quickstart.port, quickstart.directory
    try:
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
        assert quickstart.stop() == 0


@pytest.mark.broker
@pytest.mark.parametrize("protocol", ["SASL_SSL", "PLAINTEXT"])
def test_the_banner_describes_the_mode_running_and_its_python_snippet_works(tmp_path: Path, protocol: str) -> None:
    quickstart = Quickstart(tmp_path / "qs", protocol)
    try:
        banner = quickstart.banner
        if protocol == "PLAINTEXT":
            assert "No authentication and no authorization" in banner
            assert "secret" not in banner and "ACLs:" not in banner and "users:" not in banner
        else:
            assert "users: admin, alice, bob (password: <name>-secret)" in banner
            assert "ACLs: admin is a super user" in banner and "TLS: a throwaway CA" in banner
        # The snippet as printed, run by a shell: the interpreter it names has confluent-kafka.
        snippet = banner[banner.index(" - <<'PY'") - len(sys.executable) - 2:banner.index("  PY") + 4]
        assert snippet.strip().startswith(f"{sys.executable} - <<'PY'")
        done = subprocess.run(["bash", "-c", textwrap.dedent(snippet)], capture_output=True, text=True, timeout=60,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert done.returncode == 0, done.stderr
        assert re.fullmatch(r"delivered to demo-topic partition \d+ at offset \d+\n", done.stdout), done.stdout
        # /metrics, /healthz and /readyz are on by default, where the banner says
        metrics = _banner_value(banner, "metrics: ")
        assert metrics.startswith("http://127.0.0.1:") and metrics.endswith("/metrics")
        base = metrics.removesuffix("/metrics")
        assert _get(metrics) == _get(f"{base}/healthz") == _get(f"{base}/readyz") == 200
        with urllib.request.urlopen(metrics, timeout=10) as response:
            assert b"ksgate_connections" in response.read()
    finally:
        assert quickstart.stop() == 0


@pytest.mark.broker
def test_the_effective_configuration_starts_the_same_gateway(tmp_path: Path) -> None:
    quickstart = Quickstart(tmp_path / "qs")
    try:
        written = tmp_path / "qs" / "gateway.yaml"
        assert _banner_value(quickstart.banner, "configuration: ") == str(written)
        assert written.stat().st_mode & 0o077 == 0
        settings = yaml.safe_load(written.read_text())
        for key in ("ksgate.credentials.file", "ksgate.acl.file", "ssl.keystore.location", "ssl.key.location",
                    "ksgate.audit.log.file"):
            assert Path(settings[key]).is_absolute() and Path(settings[key]).exists(), key
        # a second gateway from that file, on another port, in front of the quickstart's broker
        port = free_port()
        settings.update({"listeners": f"SASL_SSL://127.0.0.1:{port}",
                         "advertised.listeners": f"SASL_SSL://localhost:{port}",
                         "listener.name.sasl_ssl.node.port.base": free_port_block(),
                         "ksgate.metrics.listener": f"127.0.0.1:{free_port()}",
                         "ksgate.audit.log.file": str(tmp_path / "second-audit.log")})
        second_config = tmp_path / "second.yaml"
        second_config.write_text(yaml.safe_dump(settings))
        second = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(second_config)],
                                  stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            assert second.stderr is not None
            for line in second.stderr:
                if "gateway_started" in line:
                    break
            else:
                pytest.fail("the second gateway did not start")
            alice = {**_properties(tmp_path / "qs" / "alice.properties"), "bootstrap.servers": f"localhost:{port}"}
            topic = f"demo-{uuid.uuid4().hex[:6]}"
            admin = AdminClient(alice)  # kept: a discarded client cancels its requests
            for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
                future.result(timeout=15)
            producer = Producer(alice)
            producer.produce(topic, b"through the second gateway")
            assert producer.flush(15) == 0
            # bob's ACLs came along too: he may read demo-* but not write it
            bob = {**_properties(tmp_path / "qs" / "bob.properties"), "bootstrap.servers": f"localhost:{port}"}
            bob_admin = AdminClient(bob)
            refused = bob_admin.create_topics([NewTopic(f"demo-{uuid.uuid4().hex[:6]}", 1, 1)])
            with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED"):
                for future in refused.values():
                    future.result(timeout=15)
        finally:
            second.send_signal(signal.SIGTERM)
            try:
                second.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                second.kill()
                raise
    finally:
        assert quickstart.stop() == 0


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


@pytest.mark.broker
def test_the_quickstart_stops_with_an_error_when_its_broker_dies(tmp_path: Path) -> None:
    quickstart = Quickstart(tmp_path / "qs", "PLAINTEXT")
    try:
        [broker_pid] = _children(quickstart.proc.pid)
        os.kill(broker_pid, signal.SIGKILL)
        code = quickstart.proc.wait(timeout=60)
    finally:
        if quickstart.proc.poll() is None:
            quickstart.stop()
    assert code == 1
    events = [json.loads(line) for line in quickstart.stderr().splitlines() if line.strip()]
    died = [e for e in events if e["event"] == "embedded_broker_exited"]
    assert len(died) == 1 and died[0]["exit_code"] == -signal.SIGKILL and died[0]["level"] == "error"
    assert "gateway_stopped" in [e["event"] for e in events]


SNI_DOMAIN = "qs.ksgate.test"


@pytest.mark.broker
@pytest.mark.skipif(not can_edit_hosts(), reason="the test domain resolves through /etc/hosts: needs root")
def test_the_quickstart_serves_everything_on_one_port_by_sni(tmp_path: Path) -> None:
    quickstart = Quickstart(tmp_path / "qs", "SASL_SSL", "--sni-domain", SNI_DOMAIN)
    try:
        banner = quickstart.banner
        hosts_line = next(line.strip() for line in banner.splitlines() if line.strip().startswith("127.0.0.1 "))
        assert hosts_line == f"127.0.0.1 bootstrap.{SNI_DOMAIN} broker-111.{SNI_DOMAIN}"
        alice = _properties(quickstart.directory / "alice.properties")
        assert alice["bootstrap.servers"] == f"bootstrap.{SNI_DOMAIN}:{quickstart.port}"
        written = yaml.safe_load((quickstart.directory / "gateway.yaml").read_text())
        assert written["listener.name.sasl_ssl.ksgate.sni.broker.host.pattern"] == f"broker-{{nodeId}}.{SNI_DOMAIN}"
        with hosts_entries("127.0.0.1", hosts_line.split()[1:]):
            metadata = AdminClient(alice).list_topics(timeout=15)
            assert {(b.host, b.port) for b in metadata.brokers.values()} == \
                {(f"broker-111.{SNI_DOMAIN}", quickstart.port)}
            producer = Producer(alice)
            producer.produce(f"demo-sni-{uuid.uuid4().hex[:6]}", b"one port")
            assert producer.flush(20) == 0
    finally:
        assert quickstart.stop() == 0


def test_sni_needs_the_tls_listener(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gateway", "quickstart", "--dir", str(tmp_path),
                           "--port", str(free_port()), "--listener-protocol", "SASL_PLAINTEXT",
                           "--sni-domain", SNI_DOMAIN], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "--sni-domain" in done.stderr and "SASL_SSL" in done.stderr


def test_the_banner_never_promises_a_config_that_cannot_run_while_or_after_the_quickstart_runs() -> None:
    """With the embedded broker, `ksgate run --config` finds the port taken (now) or no upstream (after)."""
    plan = QuickstartPlan(Path("/tmp/qs"), 9092, "SASL_SSL")
    config = Path("/tmp/qs/gateway.yaml")
    embedded = usage_text(plan, None, config, embedded_broker=True)
    assert "runs this gateway again" not in embedded
    assert "stops with the quickstart" in embedded and "upstream.bootstrap.servers" in embedded
    external = usage_text(plan, None, config, embedded_broker=False)
    assert f"after Ctrl-C, `ksgate run --config {config}` serves it again" in external
    assert f"ksgate users add NAME --config {config}" in embedded
    assert "users add" not in usage_text(QuickstartPlan(Path("/tmp/qs"), 9092, "PLAINTEXT"), None, config)
