"""The kit of the end-to-end quota tests: change a quota through a gateway's quota API, wait (on an
event) until a gateway's quota book has it, and run a librdkafka producer that records what it is told.

A ``Flood`` is a confluent-kafka producer sending as fast as its small queue lets it, in a thread,
recording every throttle callback in order and the statistics' ``throttle`` window; that is what a
client sees of a quota: throttle_time_ms in its Produce responses.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Producer, ThrottleEvent
from confluent_kafka.admin import AdminClient, NewTopic

from protocol.api_keys import ApiKey
from tests.apache_kafka import KafkaBroker
from tests.apache_kafka.broker import GATEWAY_USER
from tests.conformance.wire import Connection, Endpoint
from tests.harness import GatewayThread, secured_gateway

VALUE = b"q" * 10_000
PBR = "producer_byte_rate"


def gateway_on_kafka(kafka: KafkaBroker, directory: Path) -> GatewayThread:
    """A started ksgate (users admin, alice, bob; quotas in ``directory``/quotas.json) in front of Apache
    Kafka over SASL_SSL, logged in as the kit's gateway principal (a super user on that broker)."""
    return secured_gateway(kafka.bootstrap("SASL_SSL"), directory, users=("admin", "alice", "bob"), extra={
        **kafka_upstream(kafka), "ksgate.quota.file": str(directory / "quotas.json"),
        "allow.everyone.if.no.acl.found": True})


def kafka_upstream(kafka: KafkaBroker) -> dict[str, Any]:
    """The upstream.* keys of a gateway logged in to ``kafka``'s SASL_SSL listener with SCRAM-SHA-512."""
    return {"upstream.security.protocol": "SASL_SSL", "upstream.sasl.mechanism": "SCRAM-SHA-512",
            "upstream.ssl.truststore.location": str(kafka.ca), "upstream.sasl.username": GATEWAY_USER,
            "upstream.sasl.password": kafka.users[GATEWAY_USER]}


def sasl(gateway: GatewayThread, user: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, Any]:
    return {"bootstrap.servers": gateway.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": f"{user}-secret"}


def create_topic(gateway: GatewayThread, topic: str, user: str = "admin") -> None:
    admin = AdminClient(sasl(gateway, user))  # referenced until answered (its handle answers the futures)
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=30)


def alter_quota(gateway: GatewayThread, entity: Mapping[str, str | None], key: str, value: float | None) -> None:
    """AlterClientQuotas v1 through ``gateway`` as admin: ``entity`` maps user / client-id to a name
    (None: ``<default>``); ``value`` None removes ``key``."""
    admin = Connection(Endpoint(gateway.bootstrap, None), "admin", "admin-secret")
    try:
        outcome = admin.exchange(ApiKey.ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [{
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
            "ops": [{"key": key, "value": value or 0.0, "remove": value is None}]}]})
    finally:
        admin.close()
    assert outcome.body is not None and [e["error_code"] for e in outcome.body["entries"]] == [0], outcome


@contextmanager
def book_changed(gateway: GatewayThread) -> Iterator[threading.Event]:
    """An event set when ``gateway``'s quota store hands its book a new state (subscribed before the change)."""
    changed = threading.Event()
    store = gateway.gateway.quota_store
    assert store is not None
    unsubscribe = store.subscribe(lambda _state: changed.set())
    try:
        yield changed
    finally:
        unsubscribe()


def metric(gateway: GatewayThread, name: str, **labels: str) -> float:
    """One series of the gateway's /metrics text (0 when absent)."""
    found = _series(gateway, name, labels)
    return float(found.group(1)) if found else 0.0


def has_series(gateway: GatewayThread, name: str, **labels: str) -> bool:
    return _series(gateway, name, labels) is not None


def _series(gateway: GatewayThread, name: str, labels: dict[str, str]) -> re.Match[str] | None:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return re.search(rf"^{name}\{{{re.escape(wanted)}\}} (\S+)$", gateway.gateway.ctx.metrics.render(), re.M)


class Flood:
    """A producer of ``user`` (client id ``client_id``) sending ``VALUE`` to ``topic`` as fast as it can."""

    def __init__(self, config: dict[str, Any], topic: str, client_id: str = "rdkafka") -> None:
        self.topic = topic
        self.lock = threading.Lock()
        self.throttles: list[float] = []  # every throttle callback's time (s), in order (0: back to no throttle)
        self.throttled = threading.Event()  # a callback above 0
        self.back_to_zero = threading.Event()  # a callback of 0 after one above 0 (librdkafka sends it once)
        self.in_stats = threading.Event()  # the statistics' throttle window above 0
        self.delivered = 0
        self._target = 0
        self.reached = threading.Event()
        self._stop = threading.Event()
        self.producer = Producer({**config, "client.id": client_id, "linger.ms": 5, "batch.size": 100_000,
                                  "queue.buffering.max.kbytes": 512, "statistics.interval.ms": 200,
                                  "throttle_cb": self._on_throttle, "stats_cb": self._on_stats})
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Flood:
        self._thread.start()
        return self

    def deliver(self, records: int) -> threading.Event:
        """An event set once ``records`` more records have been delivered from now."""
        with self.lock:
            self._target = self.delivered + records
            self.reached.clear()
        return self.reached

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.purge()
        self.producer.flush(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, VALUE, on_delivery=self._on_delivery)
            except BufferError:  # its queue is full: the gateway is holding it back
                self.producer.poll(0.05)
            self.producer.poll(0)

    def _on_delivery(self, error: Any, _message: Any) -> None:
        if error is None:
            with self.lock:
                self.delivered += 1
                if self._target and self.delivered >= self._target:
                    self.reached.set()

    def _on_throttle(self, event: ThrottleEvent) -> None:
        with self.lock:
            self.throttles.append(event.throttle_time)
        if event.throttle_time > 0:
            self.throttled.set()
        elif self.throttled.is_set():
            self.back_to_zero.set()

    def _on_stats(self, text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            if broker.get("throttle", {}).get("max", 0) > 0:
                self.in_stats.set()


SetQuota = Callable[[float | None], None]  # sets alice's producer_byte_rate (None removes it), somewhere


def throttles_alice_not_bob_until_removed(set_quota: SetQuota, clients: GatewayThread, quota: float) -> None:
    """The whole chain on ``clients``: the quota ``set_quota`` stores reaches this gateway's book, alice's
    flood is throttled (callback, statistics, the gateway's series for user=alice) while bob's beside it
    is not; once it is removed, alice's new Produce requests carry throttle_time_ms 0."""
    topic = f"chain-{uuid.uuid4().hex[:8]}"
    create_topic(clients, topic)
    with book_changed(clients) as changed:
        set_quota(quota)
        assert changed.wait(10), "the quota never reached the gateway's book"
    alice, bob = Flood(sasl(clients, "alice"), topic).start(), Flood(sasl(clients, "bob"), topic).start()
    try:
        assert alice.throttled.wait(60), "no throttle_time_ms reached alice's producer"
        assert alice.in_stats.wait(30), "librdkafka's statistics show no throttle"
        assert bob.deliver(100).wait(60), "bob, beside alice, was held back"
        series = {"quota": PBR, "entity": "user=alice"}
        assert metric(clients, "ksgate_quota_throttled_total", **series) > 0
        assert metric(clients, "ksgate_quota_throttle_time_seconds_total", **series) > 0
        assert metric(clients, "ksgate_quota_bound", **series) == quota
        with bob.lock:
            assert bob.throttles == [], "bob has no quota but was throttled"
        with book_changed(clients) as changed:
            set_quota(None)
            assert changed.wait(10), "the removal never reached the gateway's book"
        assert alice.deliver(100).wait(60)  # whatever was in flight before the removal is answered
        with alice.lock:
            mark = len(alice.throttles)
        throttled = metric(clients, "ksgate_quota_throttled_total", **series)
        assert alice.deliver(300).wait(60)  # 3 MB: 30 s' worth of the removed quota
        with alice.lock:
            assert [t for t in alice.throttles[mark:] if t > 0] == [], alice.throttles[mark:]
        assert metric(clients, "ksgate_quota_throttled_total", **series) == throttled
        assert not has_series(clients, "ksgate_quota_bound", **series), "the removed quota is still shown as a bound"
    finally:
        alice.stop()
        bob.stop()
