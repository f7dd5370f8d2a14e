"""Runs one Apache Kafka broker (KRaft, broker and controller in one JVM) on loopback for tests.

Formatted once with a fresh cluster id and its SCRAM users (kafka-storage format --add-scram); start,
stop (SIGTERM) and start again keep the ports and the data.  Ready when Metadata over PLAINTEXT
lists the broker itself.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auth.cert_tools import issue_cert, make_ca
from gateway.commands.embedded_broker import free_port
from protocol.api_keys import ApiKey
from tests.apache_kafka.properties import (
    LISTENERS,
    NODE_ID,
    SASL_MECHANISMS,
    BrokerLayout,
    log4j2_properties,
    server_properties,
)
from tests.wire_client import WireClient, request_frame

HEAP = "-Xmx768m"
# Quick start-up for tests: a small heap, the serial collector, the first JIT tier only.
TEST_JVM_OPTIONS = (HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
TOOL_HEAP = "-Xmx256m"
STARTUP_TIMEOUT_S = 90.0
GATEWAY_USER = "ksgate"  # the gateway's service principal on SASL_SSL (a super user)
GATEWAY_CERT_SUBJECT = "CN=ksgate-gateway"  # its mTLS principal on SSL: User:CN=ksgate-gateway
CLIENT_USER = "alice"  # an ordinary user, for tests of the broker's own ACLs


class KafkaStartError(RuntimeError):
    """The broker (or a tool run in its JVM) failed; the message carries its log's tail."""


def kafka_lib() -> Path | None:
    """The jar folder: $REFERENCE_KAFKA_LIB, else what scripts/kafka/fetch.sh prints (cached), else None."""
    return jar_folder("REFERENCE_KAFKA_LIB", (), "kafka_*.jar")


def jar_folder(variable: str, fetch_args: Sequence[str], marker: str) -> Path | None:
    """$``variable``, else the folder ``scripts/kafka/fetch.sh fetch_args`` prints (it caches), else None;
    the fetched folder counts only if it holds a jar matching ``marker``."""
    configured = os.environ.get(variable)
    if configured:
        return Path(configured)
    script = Path(__file__).resolve().parents[2] / "scripts" / "kafka" / "fetch.sh"
    if shutil.which("java") is None or shutil.which("bash") is None:
        return None
    try:
        done = subprocess.run(["bash", str(script), *fetch_args], capture_output=True, text=True, timeout=600,
                              check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    lib = Path(lines[-1]) if lines else None
    return lib if lib is not None and any(lib.glob(marker)) else None


def _cluster_id() -> str:
    # Kafka's cluster ids are 16 random bytes in URL-safe base64 without padding (kafka-storage
    # random-uuid); like Kafka's Uuid.randomUuid, never one starting with "-" (it reads as an option).
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"({path} not written)"


@dataclass(slots=True)
class KafkaBroker:
    """A single-node Apache Kafka under ``directory``; ``start()``/``stop()``, or use as a context manager."""

    lib: Path
    directory: Path
    users: dict[str, str] = field(default_factory=lambda: {
        GATEWAY_USER: secrets.token_hex(12), CLIENT_USER: secrets.token_hex(12)})
    # More super users (e.g. the conformance suite's own) and server.properties lines on top of the kit's.
    extra_super_users: tuple[str, ...] = ()
    extra_properties: Mapping[str, object] = field(default_factory=dict)
    # The broker JVM's heap/GC/JIT options; benchmarks pass Kafka's production ones (bench/kafka_upstream.py).
    jvm_options: tuple[str, ...] = TEST_JVM_OPTIONS
    layout: BrokerLayout = field(init=False)
    started_in_s: float = field(default=0.0, init=False)  # the latest start's wall time, for reports
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _begun: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.layout = BrokerLayout(self.directory, {name: free_port() for name in LISTENERS})
        self._write_tls()
        self._write_config()

    # -- what tests connect to ----------------------------------------------------------------

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        """host:port of ``listener`` (PLAINTEXT, SASL_SSL or SSL)."""
        return self.layout.address(listener)

    @property
    def tls(self) -> Path:
        return self.directory / "tls"

    @property
    def ca(self) -> Path:
        """The CA (PEM) that signed the broker's certificate and the gateway's client certificate."""
        return self.tls / "ca.pem"

    @property
    def gateway_cert(self) -> Path:
        return self.tls / "gateway.pem"

    @property
    def gateway_key(self) -> Path:
        return self.tls / "gateway.key"

    @property
    def gateway_principal(self) -> str:
        return f"User:{GATEWAY_CERT_SUBJECT}"

    @property
    def gateway_password(self) -> str:
        return self.users[GATEWAY_USER]

    def client_config(self, listener: str = "PLAINTEXT", user: str = GATEWAY_USER,
                      mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
        """librdkafka (confluent-kafka) settings to reach ``listener`` directly, as ``user`` on SASL_SSL."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener}
        if listener in ("SASL_SSL", "SSL"):
            config["ssl.ca.location"] = str(self.ca)
        if listener == "SASL_SSL":
            config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": self.users[user]})
        if listener == "SSL":
            config.update({"ssl.certificate.location": str(self.gateway_cert),
                           "ssl.key.location": str(self.gateway_key)})
        return config

    def admin(self, listener: str = "SASL_SSL") -> Any:
        """A confluent-kafka AdminClient as a super user (ACLs, SCRAM users, topics): ``ksgate`` over
        SASL_SSL, the gateway's certificate over SSL, or ANONYMOUS over PLAINTEXT (for a test that
        has just reconfigured the secured listeners)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(self.client_config(listener))

    def set_scram_password(self, user: str, password: str, mechanisms: Sequence[str] = SASL_MECHANISMS[:2]) -> None:
        """Create ``user`` or change its SCRAM password (as the super user); PLAIN users are fixed at start."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = self.admin()
        upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(
            ScramMechanism[mechanism.replace("-", "_")], 4096), password.encode()) for mechanism in mechanisms]
        for upsert in upserts:  # one request each: Kafka refuses two alterations of a user in one
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(timeout=20)
        self.users[user] = password

    def create_acls(self, bindings: Sequence[Any]) -> None:
        """Create confluent_kafka.admin.AclBinding s as the super user, and return once the broker's
        authorizer has them: it takes up the controller's ACLs a moment after CreateAcls answers."""
        from confluent_kafka.admin import AclBindingFilter  # type: ignore[attr-defined]

        admin = self.admin()
        for future in admin.create_acls(list(bindings)).values():
            future.result(timeout=20)
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                    b.permission_type) for b in bindings]
        deadline = time.monotonic() + 20
        while not all(admin.describe_acls(f).result(timeout=20) for f in filters):
            if time.monotonic() > deadline:
                raise KafkaStartError(f"the broker's authorizer never listed {len(filters)} new ACLs")
            time.sleep(0.05)  # polling the broker's state: there is no event to wait for

    def alter_broker_config(self, settings: Mapping[str, str], listener: str = "SASL_SSL") -> None:
        """Set dynamic broker configs of this node (e.g. a listener's ssl.keystore.location) as a super
        user over ``listener``.  Kafka applies them asynchronously, shortly after this returns."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
        )

        entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
                   for key, value in settings.items()]
        admin = self.admin(listener)
        futures = admin.incremental_alter_configs([ConfigResource("broker", str(NODE_ID), incremental_configs=entries)])
        for future in futures.values():
            future.result(timeout=20)

    def set_properties(self, properties: Mapping[str, object]) -> None:
        """server.properties lines on top of the kit's, for keys that need the layout's ports (not yet started).

        Later lines win, so a key of the kit's (e.g. ``listeners``) may be given again in full."""
        if self.running:
            raise RuntimeError("set_properties() before start(): a running broker keeps the file it read")
        self.extra_properties = dict(properties)
        self._write_config()

    # -- the process ----------------------------------------------------------------------------

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The broker's JVM, started (benches read its CPU time)."""
        if self._process is None:
            raise RuntimeError("the broker is not started")
        return self._process

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self, timeout_s: float = STARTUP_TIMEOUT_S) -> KafkaBroker:
        """Launch the JVM and wait until the broker answers."""
        return self.launch().wait_ready(timeout_s)

    def launch(self) -> KafkaBroker:
        """Format (first time only) and start the JVM without waiting: brokers launched together start together."""
        self._begun = time.monotonic()
        if not (self.layout.data_dir / "meta.properties").exists():
            self._format()
        self.layout.log_dir.mkdir(exist_ok=True)
        with open(self.layout.log_dir / "stdout.log", "ab") as out:
            self._process = subprocess.Popen(
                ["java", *self.jvm_options, "-Djava.awt.headless=true",
                 f"-Dlog4j2.configurationFile={self.layout.log4j2}", f"-Dkafka.logs.dir={self.layout.log_dir}",
                 "-cp", f"{self.lib}/*", "kafka.Kafka", str(self.layout.server_properties)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=self.directory)
        return self

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> KafkaBroker:
        """Until the launched broker answers Metadata; stopped again if it does not in time."""
        try:
            self._wait_ready(time.monotonic() + timeout_s)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - self._begun
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown that flushes the logs), then SIGKILL if it hangs."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_ready(self, deadline: float) -> None:
        # Ready is the broker answering a real Metadata request with itself in it: before that the
        # listener may accept connections while the broker is still fenced or replaying metadata.
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise KafkaStartError(f"kafka exited with {self._process.returncode}\n{self.log_tail()}")
            try:
                if self._answers_metadata():
                    return
                last_error = "Metadata lists no broker yet"
            except OSError as exc:
                last_error = repr(exc)
            with contextlib.suppress(subprocess.TimeoutExpired):  # the next attempt, or the process's death
                self._process.wait(0.25)
        raise KafkaStartError(f"kafka did not answer Metadata in time ({last_error})\n{self.log_tail()}")

    def _answers_metadata(self) -> bool:
        client = WireClient(self.bootstrap("PLAINTEXT"), timeout_s=5.0)
        try:
            client.send(request_frame(ApiKey.METADATA, 12, 1, {
                "topics": [], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False,
            }, "ksgate-tests"))
            _, metadata = client.read_response(ApiKey.METADATA, 12)
        finally:
            client.sock.close()
        return any(b["node_id"] == NODE_ID for b in metadata["brokers"])

    def log_tail(self, lines: int = 60) -> str:
        return (f"--- {self.layout.log_dir / 'server.log'} ---\n{_tail(self.layout.log_dir / 'server.log', lines)}\n"
                f"--- {self.layout.log_dir / 'stdout.log'} ---\n{_tail(self.layout.log_dir / 'stdout.log', lines)}")

    # -- set-up and tools -------------------------------------------------------------------------

    def _format(self) -> None:
        scram = [f"{mechanism}=[name={user},password={password}]"
                 for user, password in self.users.items() for mechanism in SASL_MECHANISMS[:2]]
        args = ["format", "--config", str(self.layout.server_properties), "--cluster-id", _cluster_id()]
        for credential in scram:
            args += ["--add-scram", credential]
        self.run_tool("kafka.tools.StorageTool", args)

    def run_tool(self, main_class: str, args: Sequence[str],
                 properties: Mapping[str, object] | None = None) -> subprocess.CompletedProcess[str]:
        """Run a Kafka command-line tool class in a JVM (e.g. org.apache.kafka.tools.TopicCommand).

        ``properties``, when given, are written to a file whose path is appended as
        ``--command-config <file>`` (the admin tools' client settings).
        """
        argv = list(args)
        if properties is not None:
            path = self.directory / f"tool-{secrets.token_hex(4)}.properties"
            path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
            argv += ["--command-config", str(path)]
        done = subprocess.run(
            ["java", TOOL_HEAP, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             f"-Dlog4j2.configurationFile={self.layout.log4j2}", "-cp", f"{self.lib}/*", main_class, *argv],
            capture_output=True, text=True, timeout=120, cwd=self.directory, check=False)
        if done.returncode != 0:
            raise KafkaStartError(f"{main_class} {' '.join(args)} failed ({done.returncode}):\n"
                                  f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        return done

    def tool_properties(self, listener: str = "SASL_SSL", user: str = GATEWAY_USER,
                        mechanism: str = "SCRAM-SHA-512") -> dict[str, object]:
        """Java client settings (for ``run_tool(..., properties=...)``) as ``user`` on ``listener``."""
        settings: dict[str, object] = {"security.protocol": listener}
        if listener in ("SASL_SSL", "SSL"):
            settings.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca})
        if listener == "SASL_SSL":
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            settings.update({"sasl.mechanism": mechanism, "sasl.jaas.config":
                             f'{module} required username="{user}" password="{self.users[user]}";'})
        if listener == "SSL":
            settings.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": self.tls / "gateway-keystore.pem"})
        return settings

    def _write_tls(self) -> None:
        ca = make_ca("CN=ksgate test Kafka CA")
        ca.write(self.ca)
        server = issue_cert(ca, "CN=localhost", dns_names=("localhost",), ip_addresses=("127.0.0.1",))
        (self.tls / "broker-keystore.pem").write_bytes(server.key_pem() + server.chain_pem())
        gateway = issue_cert(ca, GATEWAY_CERT_SUBJECT, dns_names=(), ip_addresses=())
        gateway.write_pem(self.gateway_cert, self.gateway_key)
        (self.tls / "gateway-keystore.pem").write_bytes(gateway.key_pem() + gateway.chain_pem())

    def _write_config(self) -> None:
        super_users = ["User:ANONYMOUS", f"User:{GATEWAY_USER}", self.gateway_principal, *self.extra_super_users]
        text = server_properties(self.layout, super_users=super_users, plain_users=self.users,
                                 keystore=self.tls / "broker-keystore.pem", truststore=self.ca)
        text += "".join(f"{key}={value}\n" for key, value in self.extra_properties.items())
        self.layout.server_properties.write_text(text)
        self.layout.log4j2.write_text(log4j2_properties(self.layout.log_dir / "server.log"))
