"""What an allowed producer and consumer cost the gateway per request with SASL_SSL and the authorizer, in front of
Apache Kafka 4.4 (issue #23, goal 1: the fixed-rate latency bench's ``ksgate`` path): every Produce walked and
relayed undecoded, every Fetch relayed with no answer to rewrite, and no request or answer handed to a thread (an
off-loop job waits for the GIL, up to the switch interval at each wake-up of the loop), however large the answer.
The gateway runs in this process: its session is watched, not mocked."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from auth.cert_tools import write_tls_material
from gateway.session import actions as act
from gateway.session import session as session_module
from gateway.session.request_stage import Decision, RelayRequest, decide
from gateway.session.session import LARGE_BYTES, ProxySession
from gateway.stores.file_users import FileCredentialStore
from protocol.api_keys import ApiKey
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.clients import TIMEOUT_S
from tests.gateway.upstream.walked_produce.kit import (
    WalkWatch,
    assert_every_produce_walked,
    new_topic,
    relayed_produces,
)
from tests.harness import GatewayThread

USER, MECHANISM = "bench", "SCRAM-SHA-512"
RECORDS, VALUE_BYTES = 300, 1024  # 300 KiB: the first Fetch answer alone is well past LARGE_BYTES
# The fixed-rate bench's grants (bench/kafka_upstream.py BENCH_ACLS, haproxy_tls.py FIXED_RATE_ACLS): no ACL means deny.
GRANTS = (("TOPIC", "walked-", "WRITE"), ("TOPIC", "walked-", "READ"), ("TOPIC", "walked-", "DESCRIBE"),
          ("GROUP", "walked-", "READ"))


@dataclass(slots=True)
class SessionWatch:
    """The request decisions (api key, relayed, response hook present, outcome) and the off-loop jobs started."""

    decisions: list[tuple[int, bool, bool, str | None]] = field(default_factory=list)
    jobs: list[act.JobKind] = field(default_factory=list)

    def of(self, key: int) -> list[tuple[int, bool, bool, str | None]]:
        return [d for d in self.decisions if d[0] == key]


@pytest.fixture
def session_watch(monkeypatch: pytest.MonkeyPatch) -> SessionWatch:
    """Wraps the session's request stage and its job starter (list.append is atomic: the loop records, the test
    thread reads after the clients are done)."""
    seen = SessionWatch()
    job = ProxySession._job

    def watched_decide(*args: Any) -> Decision:
        decision = decide(*args)
        hooked = isinstance(decision, RelayRequest) and decision.hook is not None
        seen.decisions.append((decision.key, isinstance(decision, RelayRequest), hooked, decision.outcome))
        return decision

    def watched_job(self: ProxySession, kind: act.JobKind, *args: Any, **kwargs: Any) -> None:
        seen.jobs.append(kind)
        job(self, kind, *args, **kwargs)

    monkeypatch.setattr(session_module, "decide", watched_decide)
    monkeypatch.setattr(ProxySession, "_job", watched_job)
    return seen


@dataclass(slots=True, frozen=True)
class SaslSslGateway:
    gateway: GatewayThread
    client: dict[str, Any]


@pytest.fixture(scope="module")
def sasl_ssl_gateway(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSslGateway]:
    """The bench's ``ksgate`` path: SASL_SSL (SCRAM-SHA-512), StandardAuthorizer with the bench's grants, and
    an audit log with Kafka's default (allowed decisions not recorded)."""
    directory = tmp_path_factory.mktemp("allowed-on-loop")
    tls = write_tls_material(directory / "tls")
    FileCredentialStore(directory / "users.json").upsert_user(USER, f"{USER}-secret", [MECHANISM])
    (directory / "acls.json").write_text(json.dumps({"version": 1, "acls": [
        {"resourceType": kind, "resourceName": name, "patternType": "PREFIXED", "principal": f"User:{USER}",
         "host": "*", "operation": operation, "permissionType": "ALLOW"} for kind, name, operation in GRANTS]}))
    gateway = GatewayThread(kafka.bootstrap("PLAINTEXT"), {
        "ssl.keystore.location": str(tls.server_cert), "ssl.key.location": str(tls.server_key),
        "sasl.enabled.mechanisms": MECHANISM, "ksgate.credentials.file": str(directory / "users.json"),
        "ksgate.acl.file": str(directory / "acls.json"), "allow.everyone.if.no.acl.found": False,
        "ksgate.audit.log.file": str(directory / "audit.log")}, protocol="SASL_SSL").start()
    client = {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
              "sasl.username": USER, "sasl.password": f"{USER}-secret", "ssl.ca.location": str(tls.ca),
              "ssl.endpoint.identification.algorithm": "none"}
    yield SaslSslGateway(gateway, client)
    gateway.stop()


def _produce(client: dict[str, Any], topic: str) -> None:
    """The bench producer's settings (acks=all, linger 5 ms, no idempotence); every record acknowledged."""
    producer = Producer({**client, "acks": "all", "linger.ms": 5, "enable.idempotence": False})
    failed: list[object] = []
    for i in range(RECORDS):
        producer.produce(topic, i.to_bytes(4, "big") * (VALUE_BYTES // 4), partition=0,
                         on_delivery=lambda error, _message: failed.append(error) if error is not None else None)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0 and not failed, failed[:3]


def _consume(client: dict[str, Any], topic: str) -> list[bytes]:
    """Every record, read through the gateway by the bench consumer's settings (assigned, fetch.wait.max.ms 5)."""
    consumer = Consumer({**client, "group.id": f"{topic}-reader", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < RECORDS and time.monotonic() < deadline:
            for message in consumer.consume(RECORDS - len(got), 1.0):
                assert message.error() is None, message.error()
                got.append(message.value() or b"")
    finally:
        consumer.close()
    return got


def test_allowed_produce_and_fetch_under_sasl_ssl_and_the_authorizer_stay_on_the_loop_undecoded(
        kafka: KafkaBroker, sasl_ssl_gateway: SaslSslGateway, watch: WalkWatch, session_watch: SessionWatch) -> None:
    topic = new_topic(kafka, "on-loop", 1)
    before = relayed_produces(sasl_ssl_gateway.gateway)
    _produce(sasl_ssl_gateway.client, topic)
    got = _consume(sasl_ssl_gateway.client, topic)

    assert got == [i.to_bytes(4, "big") * (VALUE_BYTES // 4) for i in range(RECORDS)]
    assert RECORDS * VALUE_BYTES > 4 * LARGE_BYTES  # answers large enough for the worker, were they decoded
    # a login's password check may go to its pool (once per connection); no request or answer went to a thread
    assert [kind for kind in session_watch.jobs if kind is not act.JobKind.VERIFY] == []
    assert_every_produce_walked(sasl_ssl_gateway.gateway, watch, before, "allowed")
    fetches = session_watch.of(ApiKey.FETCH)
    assert fetches and all(fetch == (ApiKey.FETCH, True, False, "allowed") for fetch in fetches), fetches
    assert all(hook is False for _, _, hook, _ in session_watch.of(ApiKey.PRODUCE))
