"""Operator signals of a running gateway (`ksgate run` as a subprocess), read over real HTTP:
upstream error kinds, /readyz following the upstream, bytes by listener and API, build and
process metrics, and start-up waiting for an upstream that is not there yet."""

from __future__ import annotations

import importlib.metadata
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker, free_port
from protocol.api_keys import ApiKey
from tests.wire_client import WireClient, request_frame

DEADLINE_S = 30.0


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _until(check: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    """Poll ``check`` (a condition on the gateway's HTTP answers) until true or the deadline."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {deadline_s}s: {what}")


class Running:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, metrics_port: int) -> None:
        self.proc = proc
        self.bootstrap = f"127.0.0.1:{port}"
        self.base = f"http://127.0.0.1:{metrics_port}"

    def status(self, path: str) -> tuple[int, str]:
        try:
            return _get(self.base + path)
        except OSError:
            return 0, ""

    def metrics(self) -> str:
        status, text = _get(self.base + "/metrics")
        assert status == 200
        return text

    def sample(self, name: str, labels: str = "") -> float:
        """One series' value (0 when it is not exported)."""
        match = re.search(rf"^{re.escape(name + labels)} (\S+)$", self.metrics(), re.MULTILINE)
        return float(match.group(1)) if match else 0.0

    def wait_ready(self) -> None:
        _until(lambda: self.status("/readyz")[0] == 200, "/readyz 200")


def _config(tmp_path: Path, upstream: str, extra: str = "") -> tuple[Path, int, int]:
    port, metrics_port = free_port(), free_port()
    config = tmp_path / "ksgate.yaml"
    config.write_text(f"listeners: PLAINTEXT://127.0.0.1:{port}\nupstream.bootstrap.servers: {upstream}\n"
                      f"listener.name.plaintext.node.port.base: {free_port() - 111}\n"
                      f"ksgate.metrics.listener: 127.0.0.1:{metrics_port}\nlog.level: INFO\n"
                      f"upstream.connect.timeout.ms: 2000\n{extra}")
    return config, port, metrics_port


@contextmanager
def gateway(tmp_path: Path, upstream: str, extra: str = "") -> Iterator[Running]:
    config, port, metrics_port = _config(tmp_path, upstream, extra)
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield Running(proc, port, metrics_port)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A Tansu this test may stop and restart (the session broker is shared)."""
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as running:
        yield running


def _closed_port() -> int:
    return free_port()  # bound and released: nothing listens there


def _metadata_request(correlation_id: int) -> bytes:
    return request_frame(ApiKey.METADATA, 4, correlation_id, {"topics": None, "allow_auto_topic_creation": False})


# --- item 3: every upstream error kind is counted ----------------------------------------


@pytest.mark.broker
def test_connect_and_unreachable_upstream_errors_are_counted(own_broker: EmbeddedBroker, tmp_path: Path) -> None:
    upstream = f"127.0.0.1:{_closed_port()},{own_broker.bootstrap}"
    with gateway(tmp_path, upstream, "ksgate.readiness.upstream.timeout.ms: 600000\n") as gw:
        gw.wait_ready()
        connect = 'ksgate_upstream_errors_total{kind="connect"}'
        unreachable = 'ksgate_upstream_errors_total{kind="unreachable"}'
        assert gw.sample(connect) >= 1  # the start-up probe met the closed port first
        assert gw.sample(unreachable) == 0
        before = gw.sample(connect)
        client = WireClient(gw.bootstrap)  # PLAINTEXT: authenticated at connect, the upstream link opens
        client.send(_metadata_request(1))
        client.read_response(ApiKey.METADATA, 4)
        client.close()
        assert gw.sample(connect) >= before + 1  # the client's link tried the closed port too
        own_broker.stop()
        client = WireClient(gw.bootstrap)
        assert client.is_closed_by_peer(timeout_s=DEADLINE_S)  # no upstream: the gateway closes it
        client.close()
        assert gw.sample(unreachable) >= 1


class GarbageBroker:
    """Accepts connections and answers whatever it receives with bytes that are not Kafka."""

    GARBAGE = b"\xff\xff\xff\xfeHTTP/1.1 400 Bad Request\r\n\r\n"

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.answered = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                while conn.recv(65536):
                    conn.sendall(self.GARBAGE)
                    self.answered += 1
            except OSError:
                return

    def close(self) -> None:
        self.server.close()


def test_an_upstream_answering_garbage_counts_protocol_errors(broker: EmbeddedBroker, tmp_path: Path) -> None:
    garbage = GarbageBroker()
    try:
        # The garbage "broker" is the first bootstrap server: the start-up probe and every
        # bootstrap-port client link reach it first (the probe then falls through to Tansu).
        with gateway(tmp_path, f"127.0.0.1:{garbage.port},{broker.bootstrap}") as gw:
            gw.wait_ready()
            protocol = 'ksgate_upstream_errors_total{kind="protocol"}'
            assert gw.sample(protocol) >= 1  # the probe's ApiVersions got garbage
            before = gw.sample(protocol)
            client = WireClient(gw.bootstrap)
            client.send(_metadata_request(1))  # relayed to the garbage broker
            assert client.is_closed_by_peer(timeout_s=DEADLINE_S)
            client.close()
            assert gw.sample(protocol) >= before + 1  # (the periodic probe may meet the garbage too)
    finally:
        garbage.close()


def test_an_upstream_refusing_the_gateways_credentials_counts_authentication_errors(
        broker: EmbeddedBroker, tmp_path: Path) -> None:
    # A secured upstream: a second ksgate (SASL_SSL, SCRAM) in front of Tansu, as in
    # test_upstream_security.py (Tansu itself cannot run SCRAM here).
    from auth.cert_tools import write_tls_material
    from gateway.stores.file_users import FileCredentialStore
    from tests.harness import GatewayThread

    tls = write_tls_material(tmp_path / "tls")
    users = FileCredentialStore(tmp_path / "users.json")
    users.upsert_user("ksgate-svc", "svc-secret")
    upstream = GatewayThread(broker.bootstrap, {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ksgate.credentials.file": str(tmp_path / "users.json"),
    }, protocol="SASL_SSL", advertised_host="localhost").start()
    try:
        secured = (f"upstream.security.protocol: SASL_SSL\nupstream.sasl.mechanism: SCRAM-SHA-512\n"
                   f"upstream.sasl.username: ksgate-svc\nupstream.sasl.password: svc-secret\n"
                   f"upstream.ssl.truststore.location: {tls.ca}\n")
        with gateway(tmp_path, upstream.bootstrap.replace("127.0.0.1", "localhost"), secured) as gw:
            gw.wait_ready()
            kind = 'ksgate_upstream_errors_total{kind="authentication"}'
            assert gw.sample(kind) == 0
            users.delete_user("ksgate-svc")  # the upstream now refuses the gateway's service principal

            def refused() -> bool:  # the upstream re-reads its users file within its poll interval
                client = WireClient(gw.bootstrap)
                try:
                    client.send(_metadata_request(1))
                    return client.is_closed_by_peer(timeout_s=DEADLINE_S)
                finally:
                    client.close()

            _until(refused, "a client connection refused because the upstream refused the gateway")
            assert gw.sample(kind) == 1
    finally:
        upstream.stop()


# --- item 4: /readyz follows the upstream --------------------------------------------------


@pytest.mark.broker
def test_readyz_turns_503_while_the_upstream_is_gone_and_200_when_it_is_back(
        own_broker: EmbeddedBroker, tmp_path: Path) -> None:
    with gateway(tmp_path, own_broker.bootstrap, "ksgate.readiness.upstream.timeout.ms: 1500\n") as gw:
        gw.wait_ready()
        own_broker.stop()
        _until(lambda: gw.status("/readyz")[0] == 503, "/readyz 503 after the broker stopped")
        body = gw.status("/readyz")[1]
        assert "no upstream broker has answered" in body and "ksgate.readiness.upstream.timeout.ms" in body
        assert gw.status("/healthz")[0] == 200  # alive, just not able to serve
        restarted = EmbeddedBroker(port=own_broker.port, log_path=tmp_path / "tansu2.log").start()
        try:
            _until(lambda: gw.status("/readyz")[0] == 200, "/readyz 200 after the broker restarted")
            client = WireClient(gw.bootstrap)  # and it serves again
            client.send(_metadata_request(7))
            assert client.read_response(ApiKey.METADATA, 4)[0] == 7
            client.close()
        finally:
            restarted.stop()


# --- item 5: bytes by listener and API, build info, process metrics ------------------------


def test_bytes_in_and_out_are_counted_per_listener_and_api(broker: EmbeddedBroker, tmp_path: Path) -> None:
    with gateway(tmp_path, broker.bootstrap) as gw:
        gw.wait_ready()
        request = request_frame(ApiKey.API_VERSIONS, 3, 5, {"client_software_name": "t",
                                                            "client_software_version": "1"})
        metadata = _metadata_request(6)
        client = WireClient(gw.bootstrap)
        client.send(request)
        versions_response = client.read_frame()
        client.send(metadata)
        metadata_response = client.read_frame()
        client.close()

        def counted(name: str, api: str) -> float:
            return gw.sample(name, f'{{listener="PLAINTEXT",api="{api}"}}')

        assert counted("ksgate_request_bytes_total", "ApiVersions") == len(request)
        assert counted("ksgate_request_bytes_total", "Metadata") == len(metadata)
        assert counted("ksgate_response_bytes_total", "ApiVersions") == 4 + len(versions_response)
        assert counted("ksgate_response_bytes_total", "Metadata") == 4 + len(metadata_response)


def test_large_produce_and_streamed_fetch_bytes_are_counted(broker: EmbeddedBroker, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    record = os.urandom(300_000)  # Fetch responses over 64 KiB are streamed to the client as they arrive
    topic = f"signals-bytes-{os.getpid()}-{time.monotonic_ns()}"
    with gateway(tmp_path, broker.bootstrap) as gw:
        gw.wait_ready()
        producer = Producer({"bootstrap.servers": gw.bootstrap, "message.max.bytes": 2_000_000})
        producer.produce(topic, record)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": gw.bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        message = None
        while message is None and time.monotonic() < deadline:
            candidate = consumer.poll(1.0)
            if candidate is not None and candidate.error() is None:
                message = candidate
        consumer.close()
        assert message is not None and message.value() == record
        labels = '{listener="PLAINTEXT",api="%s"}'
        assert gw.sample("ksgate_request_bytes_total", labels % "Produce") > len(record)
        assert gw.sample("ksgate_response_bytes_total", labels % "Fetch") > len(record)


def test_build_info_and_process_metrics_are_exported(broker: EmbeddedBroker, tmp_path: Path) -> None:
    with gateway(tmp_path, broker.bootstrap) as gw:
        gw.wait_ready()
        text = gw.metrics()
        version = importlib.metadata.version("ksgate")
        assert re.search(rf'^ksgate_build_info{{version="{re.escape(version)}",python_version="[0-9.]+"}} 1$',
                         text, re.MULTILINE)
        assert "# TYPE process_cpu_seconds_total counter" in text
        assert gw.sample("process_cpu_seconds_total") > 0
        assert gw.sample("process_resident_memory_bytes") > 1_000_000
        fds = len(os.listdir(f"/proc/{gw.proc.pid}/fd"))
        assert 3 <= gw.sample("process_open_fds") <= fds + 10
        assert abs(gw.sample("process_start_time_seconds") - time.time()) < 600


# --- item 13: start-up waits for the upstream ---------------------------------------------


@pytest.mark.broker
def test_the_gateway_waits_for_an_upstream_that_starts_after_it(tmp_path: Path) -> None:
    port = free_port()
    config, _, metrics_port = _config(tmp_path, f"127.0.0.1:{port}", "ksgate.upstream.startup.timeout.ms: 60000\n")
    proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    broker: EmbeddedBroker | None = None
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # the first retry's log line is the event to start the broker on
            if b"upstream_not_answering" in line:
                assert b'"attempt": 1' in line
                break
        else:
            raise AssertionError(f"the gateway exited ({proc.wait()}) without retrying")
        broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep the pipe drained
        running = Running(proc, 0, metrics_port)
        running.wait_ready()
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        if broker is not None:
            broker.stop()


def test_without_an_upstream_the_gateway_exits_non_zero_after_the_startup_timeout(tmp_path: Path) -> None:
    config, _, _ = _config(tmp_path, f"127.0.0.1:{_closed_port()}", "ksgate.upstream.startup.timeout.ms: 1500\n")
    result = subprocess.run([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                            capture_output=True, timeout=60)
    assert result.returncode != 0
    stderr = result.stderr.decode()
    attempts = [line for line in stderr.splitlines() if "upstream_not_answering" in line]
    assert len(attempts) >= 2, stderr  # a log line per failed attempt
    assert re.search(r"the upstream did not answer within 1500 ms \(ksgate\.upstream\.startup\.timeout\.ms, "
                     r"\d+ attempts\); is a broker running at upstream\.bootstrap\.servers\? "
                     r"no upstream bootstrap server answered: cannot connect", stderr), stderr


@pytest.mark.broker
def test_the_readme_command_runs_the_example_config_against_the_embedded_broker(tmp_path: Path) -> None:
    """README: `python -m gateway.commands.embedded_broker --port 19092` then `ksgate run --config
    configs/example.yaml` (here on free ports: the variables override the file's addresses)."""
    upstream_port, port = free_port(), free_port()
    broker = subprocess.Popen([sys.executable, "-m", "gateway.commands.embedded_broker", "--port", str(upstream_port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    env = {**os.environ, "KSGATE_UPSTREAM_BOOTSTRAP_SERVERS": f"localhost:{upstream_port}",
           "KSGATE_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
           "KSGATE_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}"}
    gateway_proc = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", "configs/example.yaml"],
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert broker.stdout is not None and b"listening on" in broker.stdout.readline()
        assert gateway_proc.stderr is not None
        for line in gateway_proc.stderr:
            if b"gateway_started" in line:
                break
        else:
            raise AssertionError(f"the gateway exited with {gateway_proc.wait()}")
        threading.Thread(target=gateway_proc.stderr.read, daemon=True).start()
        client = WireClient(f"127.0.0.1:{port}")
        client.send(_metadata_request(3))
        correlation_id, metadata = client.read_response(ApiKey.METADATA, 4)
        client.close()
        assert correlation_id == 3 and metadata["brokers"]
    finally:
        gateway_proc.send_signal(signal.SIGTERM)
        assert gateway_proc.wait(timeout=30) == 0
        broker.send_signal(signal.SIGTERM)
        assert broker.wait(timeout=30) == 0
    with pytest.raises(OSError):  # the broker's Tansu went with it
        socket.create_connection(("127.0.0.1", upstream_port), timeout=2).close()
