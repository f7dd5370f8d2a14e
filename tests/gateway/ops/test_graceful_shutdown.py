"""SIGTERM-style shutdown: stop accepting, finish in-flight requests, then close."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from gateway.commands.embedded_broker import EmbeddedBroker
from protocol.api_keys import ApiKey
from tests.harness import GatewayThread
from tests.wire_client import WireClient, request_frame

FETCH_V = 11


def _long_poll(topic: str, wait_ms: int) -> dict[str, object]:
    return {"replica_id": -1, "max_wait_ms": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def test_in_flight_request_is_answered_before_the_connection_closes(broker: EmbeddedBroker) -> None:
    gateway = GatewayThread(broker.bootstrap).start()
    topic = f"shutdown-{time.monotonic_ns()}"
    admin = AdminClient({"bootstrap.servers": gateway.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(timeout=15)
    client = WireClient(gateway.bootstrap)
    client.send(request_frame(ApiKey.FETCH, FETCH_V, 77, _long_poll(topic, 1500)))
    # The gateway must have this client's request in flight before shutdown begins (another
    # connection's, e.g. the admin client's, would not do: this one might not be accepted yet).
    port = client.sock.getsockname()[1]
    # Polled: the session offers no event for "a request is in flight"; the bound catches a hang only.
    deadline = time.monotonic() + 30
    while not any(c.session.client.port == port and c.session.in_flight for c in list(gateway.gateway._connections)):
        assert time.monotonic() < deadline, "the gateway never had this client's Fetch in flight"
        time.sleep(0.01)
    stopper = threading.Thread(target=gateway.stop)
    stopper.start()
    correlation_id, body = client.read_response(ApiKey.FETCH, FETCH_V)
    assert correlation_id == 77 and body["error_code"] == 0
    assert client.is_closed_by_peer()
    stopper.join(timeout=20)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", gateway.port), timeout=2).close()
