"""The text of a single-node KRaft broker's server.properties and of its quiet log4j2 configuration.

Four listeners, all bound to 127.0.0.1: CONTROLLER and PLAINTEXT (unauthenticated, hence ANONYMOUS),
SASL_SSL (SCRAM-SHA-256, SCRAM-SHA-512, PLAIN) and SSL with client certificates required.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

NODE_ID = 1
LISTENERS = ("CONTROLLER", "PLAINTEXT", "SASL_SSL", "SSL")
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


@dataclass(slots=True, frozen=True)
class BrokerLayout:
    """Where one broker listens and keeps its files; kept across restarts (same ports, same data)."""

    directory: Path
    ports: Mapping[str, int]  # listener name -> port on 127.0.0.1

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_dir(self) -> Path:
        return self.directory / "logs"

    @property
    def server_properties(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log4j2(self) -> Path:
        return self.directory / "log4j2.properties"

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def _jaas_plain(users: Mapping[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


def server_properties(layout: BrokerLayout, *, super_users: list[str], plain_users: Mapping[str, str],
                      keystore: Path, truststore: Path) -> str:
    """server.properties for ``layout``.

    ``super.users`` must include User:ANONYMOUS: in a single node the controller listener and the
    inter-broker (PLAINTEXT) listener are unauthenticated, so the broker's own requests to itself
    (broker registration, heartbeats, partition state) arrive as ANONYMOUS, and with
    allow.everyone.if.no.acl.found=false the StandardAuthorizer would deny them.  Anything that
    connects to PLAINTEXT is therefore a super user: it is bound to 127.0.0.1 only, for the tests'
    own setup and the gateway's unauthenticated-upstream tests; secured paths use SASL_SSL or SSL.
    """
    listeners = ",".join(f"{name}://{layout.address(name)}" for name in LISTENERS)
    advertised = ",".join(f"{name}://{layout.address(name)}" for name in LISTENERS if name != "CONTROLLER")
    protocols = ",".join(f"{name}:{'PLAINTEXT' if name == 'CONTROLLER' else name}" for name in LISTENERS)
    scram_login = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    values: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": NODE_ID,
        "controller.quorum.voters": f"{NODE_ID}@{layout.address('CONTROLLER')}",
        "controller.listener.names": "CONTROLLER",
        "listeners": listeners,
        "advertised.listeners": advertised,
        "listener.security.protocol.map": protocols,
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": layout.data_dir,
        "num.partitions": 1,
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 3,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(super_users),
        # PEM files: the keystore holds the unencrypted PKCS#8 key followed by the chain.
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": truststore,
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.sasl_ssl.ssl.client.auth": "none",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas_plain(plain_users),
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram_login,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_login,
    }
    return "".join(f"{key}={value}\n" for key, value in values.items())


def log4j2_properties(log_file: Path) -> str:
    """WARN and above to ``log_file``, nothing on the console (the tests' output stays clean)."""
    return (
        "status = warn\n"
        "appender.file.type = File\n"
        "appender.file.name = FILE\n"
        f"appender.file.fileName = {log_file}\n"
        "appender.file.layout.type = PatternLayout\n"
        "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
        "rootLogger.level = WARN\n"
        "rootLogger.appenderRef.file.ref = FILE\n"
    )
