"""Apache Kafka as the benchmarks' upstream: the broker, the bench user's rights, and each path's client settings.

Used by bench/throughput.py (--upstream kafka) and bench/kafka_perf.py.  Two security modes, the same on both
paths: ``plaintext`` (client -> Kafka PLAINTEXT; client -> ksgate PLAINTEXT -> Kafka PLAINTEXT) and ``sasl_ssl``
(client -> Kafka SASL_SSL as alice under Kafka's StandardAuthorizer; client -> ksgate SASL_SSL as alice under
ksgate's authorizer with the same ACLs -> Kafka SASL_SSL as the gateway's principal).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from auth.cert_tools import write_tls_material
from gateway.stores.file_users import FileCredentialStore
from tests.apache_kafka import KafkaBroker, kafka_lib
from tests.apache_kafka.broker import CLIENT_USER, GATEWAY_USER
from tests.apache_kafka.properties import NODE_ID

SECURITY_MODES = ("plaintext", "sasl_ssl")
# The heap and JVM options kafka-server-start.sh gives a broker (kafka-run-class.sh's defaults), not the test
# kit's quick-start ones (C1 only, serial GC), which would understate Kafka's own throughput, TLS above all.
SERVER_JVM_OPTIONS = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                      "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                      "-XX:MaxInlineLevel=15")
MECHANISM = "SCRAM-SHA-512"
# What the bench user may do, on Kafka and on the gateway alike: everything on the bench's topics
# (bench-*) and consumer groups (ksgate-bench*, perf-*), and idempotent produce (the Java producer's
# default).  Resource type, name, pattern type, operation.
BENCH_ACLS = (
    ("TOPIC", "bench-", "PREFIXED", "ALL"),
    ("GROUP", "ksgate-bench", "PREFIXED", "ALL"),
    ("GROUP", "perf-", "PREFIXED", "ALL"),
    ("CLUSTER", "kafka-cluster", "LITERAL", "IDEMPOTENT_WRITE"),
)


def write_bench_acls(acl_file: Path, user: str, extra: tuple[tuple[str, str, str, str], ...] = ()) -> Path:
    """BENCH_ACLS for ``user`` as a ksgate ACL file (ksgate.acl.file), and ``extra`` rows of the same form."""
    acl_file.write_text(json.dumps({"version": 1, "acls": [
        {"resourceType": kind, "resourceName": name, "patternType": pattern, "principal": f"User:{user}",
         "host": "*", "operation": operation, "permissionType": "ALLOW"}
        for kind, name, pattern, operation in (*BENCH_ACLS, *extra)]}))
    return acl_file


@dataclass(slots=True, frozen=True)
class Endpoint:
    """How a client reaches one path: librdkafka settings and the Java tools' settings (no bootstrap in those)."""

    bootstrap: str
    librdkafka: dict[str, Any]
    java: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class KafkaUpstream:
    """A started single-node Kafka prepared for one security mode; the gateway settings that front it."""

    broker: KafkaBroker
    security: str
    workdir: Path
    gateway_ca: Path | None = None

    @property
    def pid(self) -> int:
        return self.broker.process.pid

    @property
    def admin_settings(self) -> dict[str, Any]:
        """Set-up (topics) straight to Kafka's PLAINTEXT listener, whose ANONYMOUS is a super user."""
        return {"bootstrap.servers": self.broker.bootstrap("PLAINTEXT")}

    def direct(self) -> Endpoint:
        if self.security == "plaintext":
            address = self.broker.bootstrap("PLAINTEXT")
            return Endpoint(address, {"bootstrap.servers": address}, {"security.protocol": "PLAINTEXT"})
        return Endpoint(self.broker.bootstrap("SASL_SSL"),
                        self.broker.client_config("SASL_SSL", user=CLIENT_USER, mechanism=MECHANISM),
                        self.broker.tool_properties("SASL_SSL", user=CLIENT_USER, mechanism=MECHANISM))

    def through(self, bootstrap: str) -> Endpoint:
        """The gateway path, the gateway listening on ``bootstrap``."""
        if self.security == "plaintext":
            return Endpoint(bootstrap, {"bootstrap.servers": bootstrap}, {"security.protocol": "PLAINTEXT"})
        assert self.gateway_ca is not None
        password = self.broker.users[CLIENT_USER]
        java = self.broker.tool_properties("SASL_SSL", user=CLIENT_USER, mechanism=MECHANISM)
        java["ssl.truststore.location"] = self.gateway_ca
        return Endpoint(bootstrap, {
            "bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(self.gateway_ca),
            "sasl.mechanism": MECHANISM, "sasl.username": CLIENT_USER, "sasl.password": password}, java)

    @property
    def gateway_protocol(self) -> str:
        return "PLAINTEXT" if self.security == "plaintext" else "SASL_SSL"

    def gateway_settings(self) -> dict[str, Any]:
        """The gateway's keys besides listener and node ports: upstream link, and its TLS, SASL and ACLs."""
        # The one node's port is then the node port base itself, a port found free; with the default
        # node.id.min of 0 it would be base + 1, which an outgoing connection may hold meanwhile.
        nodes = {"node.id.min": NODE_ID, "node.id.max": NODE_ID}
        if self.security == "plaintext":
            return {"upstream.bootstrap.servers": self.broker.bootstrap("PLAINTEXT"), **nodes}
        tls = write_tls_material(self.workdir / "gateway-tls")
        self.gateway_ca = tls.ca
        credentials = self.workdir / "gateway-users.json"
        FileCredentialStore(credentials).upsert_user(CLIENT_USER, self.broker.users[CLIENT_USER], [MECHANISM])
        acl_file = write_bench_acls(self.workdir / "gateway-acls.json", CLIENT_USER)
        return {
            **nodes,
            "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
            "sasl.enabled.mechanisms": MECHANISM, "ksgate.credentials.file": str(credentials),
            "authorizer.class.name": "StandardAuthorizer", "ksgate.acl.file": str(acl_file),
            "allow.everyone.if.no.acl.found": False,
            "upstream.bootstrap.servers": self.broker.bootstrap("SASL_SSL"),
            "upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": MECHANISM,
            "upstream.sasl.username": GATEWAY_USER, "upstream.sasl.password": self.broker.gateway_password,
            "upstream.ssl.truststore.location": str(self.broker.ca),
        }

    def grant_bench_user(self) -> None:
        """BENCH_ACLS for alice on Kafka (created by the super user), for the direct SASL_SSL path."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        # confluent-kafka calls Kafka's CLUSTER resource type BROKER.
        bindings = [AclBinding(ResourceType["BROKER" if kind == "CLUSTER" else kind], name,
                               ResourcePatternType[pattern], f"User:{CLIENT_USER}", "*", AclOperation[operation],
                               AclPermissionType.ALLOW)
                    for kind, name, pattern, operation in BENCH_ACLS]
        admin = self.broker.admin()
        for future in admin.create_acls(bindings).values():
            future.result(timeout=30)


def start_kafka(workdir: Path, security: str) -> KafkaUpstream:
    """A fresh Kafka under workdir/kafka, prepared for ``security``; stop it with ``.broker.stop()``."""
    lib = kafka_lib()
    if lib is None:
        raise SystemExit("--upstream kafka needs Apache Kafka's jars: run `bash scripts/kafka/fetch.sh` (needs java "
                         "and mvn) and export REFERENCE_KAFKA_LIB=<the folder it prints>")
    broker = KafkaBroker(lib, workdir / "kafka", jvm_options=SERVER_JVM_OPTIONS)
    broker.start()
    upstream = KafkaUpstream(broker, security, workdir)
    try:
        if security == "sasl_ssl":
            upstream.grant_bench_user()
    except BaseException:
        broker.stop()
        raise
    return upstream
