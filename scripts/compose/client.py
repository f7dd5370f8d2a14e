"""End-to-end client of scripts/compose-test.sh: drives the compose stack's ksgate with a real Kafka client.

It runs in ksgate's network namespace (localhost:9092 as on the host).  As the super user ``admin`` (the password
``ksgate init`` generated, read from the users volume) it creates the users alice and bob with random passwords
(AlterUserScramCredentials) and their ACLs (CreateAcls: alice owns topics demo-*, bob may read them), then checks:
SASL_SSL produce and consume as alice, a denied produce as bob, both decisions in the audit log, /readyz answering
200, and the upstream leg: the cluster behind ksgate is the compose file's Kafka, whose listener answers neither
plaintext nor TLS without SASL.  Exit 0 only if all pass.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import ssl
import struct
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

BOOTSTRAP = "localhost:9092"
CA = "/var/lib/ksgate/certs/ca.pem"
ADMIN_PASSWORD = Path("/var/lib/ksgate/users/admin.password")  # written by `ksgate init` (the users volume)
AUDIT = Path("/var/log/ksgate/audit.log")
READYZ = "http://127.0.0.1:9404/readyz"
TOPIC = "demo-compose"  # alice owns demo-*; bob may only read it (ksgate init's ACLs)
DEADLINE_S = 60.0
UPSTREAM = ("kafka", 9092)  # the broker's SASL_SSL listener, reachable from ksgate's network namespace


# user -> password: admin's from init's file, alice's and bob's made up by provision() for this run.
PASSWORDS: dict[str, str] = {}


def settings(user: str) -> dict[str, Any]:
    return {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_SSL", "ssl.ca.location": CA,
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": PASSWORDS[user],
            "log_level": 4}  # warnings and worse


def demo_acls() -> list[AclBinding]:
    """The quickstart's: alice ALL on topics demo-*, READ on groups demo-*, IDEMPOTENT_WRITE on the cluster;
    bob READ and DESCRIBE on topics demo-*, READ on groups demo-*."""
    prefixed, literal, allow = ResourcePatternType.PREFIXED, ResourcePatternType.LITERAL, AclPermissionType.ALLOW
    rows = [("alice", ResourceType.TOPIC, "demo-", prefixed, AclOperation.ALL),
            ("alice", ResourceType.GROUP, "demo-", prefixed, AclOperation.READ),
            ("alice", ResourceType.BROKER, "kafka-cluster", literal, AclOperation.IDEMPOTENT_WRITE),
            ("bob", ResourceType.TOPIC, "demo-", prefixed, AclOperation.READ),
            ("bob", ResourceType.TOPIC, "demo-", prefixed, AclOperation.DESCRIBE),
            ("bob", ResourceType.GROUP, "demo-", prefixed, AclOperation.READ)]
    return [AclBinding(resource, name, pattern, f"User:{user}", "*", operation, allow)
            for user, resource, name, pattern, operation in rows]


def provision() -> None:
    """As admin (the super user): alice and bob with fresh random passwords, and their ACLs (kept if present)."""
    PASSWORDS["admin"] = ADMIN_PASSWORD.read_text("utf-8").strip()
    admin = AdminClient(settings("admin"))  # kept referenced: a collected client fails its futures (_DESTROY)
    for user in ("alice", "bob"):
        PASSWORDS[user] = secrets.token_urlsafe(18)
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                            PASSWORDS[user].encode()) for user in ("alice", "bob")]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(timeout=DEADLINE_S)
    for future in admin.create_acls(demo_acls(), request_timeout=30).values():
        future.result(timeout=DEADLINE_S)


def create_topic() -> None:
    admin = AdminClient(settings("alice"))  # kept referenced: a collected client fails its futures (_DESTROY)
    futures = admin.create_topics([NewTopic(TOPIC, 1, 1)], request_timeout=30)
    try:
        futures[TOPIC].result(timeout=DEADLINE_S)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def produce(user: str, value: bytes) -> KafkaError | None:
    """Produce one record and return its delivery error (None: delivered)."""
    outcome: list[KafkaError | None] = []
    producer = Producer({**settings(user), "message.timeout.ms": 30000, "enable.idempotence": False})
    producer.produce(TOPIC, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(DEADLINE_S)
    if not outcome:
        raise RuntimeError("no delivery report")
    return outcome[0]


def consume_until(user: str, value: bytes) -> bool:
    consumer = Consumer({**settings(user), "group.id": f"demo-compose-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None and message.value() == value:
                return True
        return False
    finally:
        consumer.close()


def audit_has(principal: str, decision: str) -> bool:
    """A WRITE on the test topic by ``principal`` with ``decision`` in the audit log (polled: it is written async)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lines = AUDIT.read_text("utf-8").splitlines() if AUDIT.exists() else []
        for line in lines:
            event = json.loads(line)
            if (event.get("event"), event.get("principal"), event.get("operation"), event.get("resource_name"),
                    event.get("decision")) == ("authorization", principal, "WRITE", TOPIC, decision):
                return True
        time.sleep(0.5)
    return False


def readyz_status() -> int:
    with urllib.request.urlopen(READYZ, timeout=5) as response:
        status: int = response.status
        return status


def cluster_id() -> str | None:
    """The cluster id ksgate's Metadata reports (the upstream's)."""
    admin = AdminClient(settings("alice"))
    return admin.list_topics(timeout=DEADLINE_S).cluster_id


def _request(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A Kafka request frame with a v1 header and a null client id."""
    message = struct.pack(">hhih", api_key, version, correlation_id, -1) + body
    return struct.pack(">i", len(message)) + message


def _answer(sock: socket.socket) -> int | None:
    """The correlation id of the response on ``sock``, or None if the broker closed, reset or stayed silent."""
    received = b""
    try:
        while len(received) < 8:
            chunk = sock.recv(8 - len(received))
            if not chunk:
                return None
            received += chunk
    except (OSError, ssl.SSLError):  # reset, TLS alert, timeout
        return None
    correlation_id: int = struct.unpack(">i", received[4:8])[0]
    return correlation_id


def upstream_requires_sasl_ssl(address: tuple[str, int] = UPSTREAM) -> bool:
    """kafka:9092 answers no plaintext request, completes a TLS handshake, and then refuses Metadata before SASL."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(_request(18, 0, 1))  # ApiVersions v0 in plaintext
        if _answer(sock) is not None:
            return False
    # Not verified: the client has no business with the upstream's CA; the handshake alone shows TLS.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(address, timeout=10) as raw, context.wrap_socket(raw) as tls:
        tls.sendall(_request(3, 0, 2, struct.pack(">i", 0)))  # Metadata v0 (all topics) without authenticating
        return _answer(tls) is None


def check(name: str, test: Callable[[], bool]) -> bool:
    try:
        ok = test()
    except Exception as exc:  # a failed check is reported, never a traceback
        print(f"client: FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
        return False
    print(f"client: {'ok  ' if ok else 'FAIL'} {name}", flush=True)
    return ok


def main() -> int:
    value = f"hello through ksgate {uuid.uuid4()}".encode()
    if not check("admin (init's generated password) creates alice, bob and their ACLs", lambda: provision() is None):
        print("compose-client: 0 passed, 1 failed", flush=True)
        return 1
    results = [
        check("alice creates topic demo-compose (SASL_SSL, SCRAM-SHA-512)", lambda: create_topic() is None),
        check("alice produces (allowed)", lambda: produce("alice", value) is None),
        check("alice consumes what she produced", lambda: consume_until("alice", value)),
        check("bob's produce is denied (TOPIC_AUTHORIZATION_FAILED)",
              lambda: _code(produce("bob", b"denied")) == KafkaError.TOPIC_AUTHORIZATION_FAILED),
        check("audit log: alice's WRITE ALLOWED", lambda: audit_has("User:alice", "ALLOWED")),
        check("audit log: bob's WRITE DENIED", lambda: audit_has("User:bob", "DENIED")),
        check("/readyz answers 200", lambda: readyz_status() == 200),
        check(f"the upstream is the compose file's Kafka (cluster id {os.environ['KAFKA_CLUSTER_ID']})",
              lambda: cluster_id() == os.environ["KAFKA_CLUSTER_ID"]),
        check("the upstream's listener is SASL_SSL (no plaintext, no request before SASL)", upstream_requires_sasl_ssl),
    ]
    passed = sum(results)
    # The plain closing-line form ("N passed, N failed") that CI's summary reader recognises.
    print(f"compose-client: {passed} passed, {len(results) - passed} failed", flush=True)
    return 0 if all(results) else 1


def _code(error: KafkaError | None) -> int | None:
    return None if error is None else int(error.code())


if __name__ == "__main__":
    sys.exit(main())
