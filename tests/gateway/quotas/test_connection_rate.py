"""connection_creation_rate per IP (KIP-612): an address over its rate waits; other addresses do not."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.quotas.connection_rate import CONNECTION_CREATION_RATE, IP_SERIES, connection_delay_s
from gateway.quotas.lookup import DictQuotas, NoQuotas
from gateway.quotas.sensors import QuotaSensors
from protocol.api_keys import ApiKey
from protocol.messages import decode_response
from tests.harness import GatewayThread
from tests.wire_client import read_frame, request_frame


class Clock:
    now = 10.0

    def __call__(self) -> float:
        return self.now


def test_an_address_over_its_rate_waits_kafkas_throttle_time() -> None:
    sensors = QuotaSensors(clock=Clock())
    quotas = DictQuotas(ips={"10.0.0.1": 1.0})
    delays = [connection_delay_s(quotas, sensors, "10.0.0.1") for _ in range(12)]
    assert delays[:10] == [0.0] * 10  # 10 connections over the 10 s a new rate is measured on: 1/s, within
    assert delays[10] == pytest.approx(1.0)  # 11/10 s: (1.1 - 1) / 1 × 10 s
    assert delays[11] == pytest.approx(2.0)
    assert connection_delay_s(quotas, sensors, "10.0.0.2") == 0.0  # another address: no quota, no wait
    assert connection_delay_s(NoQuotas(), sensors, "10.0.0.1") == 0.0


def test_a_flood_waits_at_most_the_whole_window() -> None:
    sensors = QuotaSensors(clock=Clock())
    quotas = DictQuotas(ips={"<default>": 1.0})
    delays = [connection_delay_s(quotas, sensors, "10.0.0.9") for _ in range(1000)]
    assert max(delays) == pytest.approx(11.0)
    assert sensors.totals[(CONNECTION_CREATION_RATE, IP_SERIES)].throttled == 990


@pytest.fixture
def rate_gateway(broker: EmbeddedBroker) -> Iterator[GatewayThread]:
    running = GatewayThread(broker.bootstrap)
    running.gateway.ctx.quotas = DictQuotas(ips={"127.0.0.1": 0.5})
    running.start()
    yield running
    running.stop()


def _api_versions(gateway: GatewayThread, source: str) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30, source_address=(source, 0)) as sock:
        sock.sendall(request_frame(ApiKey.API_VERSIONS, 3, 1, {"client_software_name": "t",
                                                               "client_software_version": "1"}))
        _, body = decode_response(read_frame(sock), ApiKey.API_VERSIONS, 3)
        assert body["error_code"] == 0


def test_connections_over_the_rate_are_served_late_and_other_addresses_are_not_held(
        rate_gateway: GatewayThread) -> None:
    for _ in range(6):  # 6 in the first 10 s against 0.5/s: the 6th waits (then is served)
        _api_versions(rate_gateway, "127.0.0.1")
    totals = rate_gateway.gateway.ctx.quota_sensors.totals[(CONNECTION_CREATION_RATE, IP_SERIES)]
    assert totals.throttled == 1
    _api_versions(rate_gateway, "127.0.0.2")  # another address of the loopback: no quota
    assert totals.throttled == 1
    assert rate_gateway.gateway.ctx.quota_sensors.rate_of(CONNECTION_CREATION_RATE, "ip=127.0.0.2") == 0
