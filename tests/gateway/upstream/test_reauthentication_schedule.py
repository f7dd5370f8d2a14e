"""When the gateway logs its upstream link in again (KIP-368), and what the session does meanwhile: as
Kafka's Java client, at a random point between 85 % and 95 % of the lifetime the broker granted; none
when it granted none; new requests wait for the login, and a client whose socket is full delays it."""

from __future__ import annotations

from pathlib import Path

import pytest

from auth.sasl.reauthentication import reauthentication_delay_s
from gateway.server import Gateway
from gateway.session import actions as act
from protocol.api_keys import ApiKey
from protocol.messages import request_frame
from tests.gateway.session.session_driver import Driver, gateway_for
from tests.gateway.session.test_session import METADATA_V, metadata, metadata_answer

TIMER = "upstream-login"
ADDRESS = "10.9.9.9:9092"


@pytest.fixture
def plaintext(tmp_path: Path) -> Gateway:
    return gateway_for(tmp_path)


def _logged_in(gateway: Gateway, lifetime_ms: int) -> Driver:
    driver = Driver.connect(gateway, upstream_up=False)
    driver.record(driver.session.upstream_ready(ADDRESS, lifetime_ms))
    return driver


def test_the_login_is_due_between_85_and_95_percent_of_the_lifetime() -> None:
    assert reauthentication_delay_s(60_000, lambda: 0.0) == pytest.approx(51.0)
    assert reauthentication_delay_s(60_000, lambda: 0.5) == pytest.approx(54.0)
    assert reauthentication_delay_s(60_000, lambda: 1.0) == pytest.approx(57.0)
    delays = [reauthentication_delay_s(1000) for _ in range(500)]
    assert all(0.85 <= d < 0.95 for d in delays)
    assert max(delays) - min(delays) > 0.05  # spread: many links do not log in at one moment


def test_the_session_schedules_the_login_from_the_granted_lifetime(plaintext: Gateway) -> None:
    driver = _logged_in(plaintext, 20_000)
    assert 17.0 <= driver.timers[TIMER] < 19.0


def test_no_lifetime_schedules_nothing(plaintext: Gateway) -> None:
    driver = _logged_in(plaintext, 0)
    assert TIMER not in driver.timers
    assert not any(isinstance(a, act.ReauthenticateUpstream) for a in driver.actions)


def test_requests_wait_for_the_login_and_go_out_after_it_in_order(plaintext: Gateway) -> None:
    driver = _logged_in(plaintext, 20_000)
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 1, metadata("a")))
    [earlier] = driver.upstream_requests()
    driver.fire(TIMER)
    assert isinstance(driver.actions[-1], act.ReauthenticateUpstream) and driver.reading_paused
    driver.send(request_frame(ApiKey.METADATA, METADATA_V, 2, metadata("b"))
                + request_frame(ApiKey.METADATA, METADATA_V, 3, metadata("c")))
    assert driver.upstream_bytes == b""  # a broker re-authenticating a connection takes only SASL requests
    driver.answer(earlier, metadata_answer("a"))  # the earlier request's answer is still served meanwhile
    assert [cid for cid, _ in driver.responses(ApiKey.METADATA, METADATA_V)] == [1]
    driver.record(driver.session.upstream_logged_in(10_000))
    assert [r.body["topics"][0]["name"] for r in driver.upstream_requests()] == ["b", "c"]
    assert not driver.reading_paused
    assert 8.5 <= driver.timers[TIMER] < 9.5  # the next login, from the new lifetime


def test_a_client_whose_socket_is_full_delays_the_login_until_it_reads(plaintext: Gateway) -> None:
    """Its answers block the upstream socket (not read meanwhile), so a login's answer would wait behind them."""
    driver = _logged_in(plaintext, 20_000)
    driver.record(driver.session.client_write_paused(True))
    driver.fire(TIMER)
    assert not any(isinstance(a, act.ReauthenticateUpstream) for a in driver.actions)
    assert TIMER in driver.timers  # tried again shortly
    driver.record(driver.session.client_write_paused(False))
    driver.fire(TIMER)
    assert isinstance(driver.actions[-1], act.ReauthenticateUpstream)


def test_a_login_due_after_the_connection_closed_is_ignored(plaintext: Gateway) -> None:
    driver = _logged_in(plaintext, 20_000)
    driver.record(driver.session.upstream_lost(None))
    assert driver.closed is not None
    driver.fire(TIMER)
    assert not any(isinstance(a, act.ReauthenticateUpstream) for a in driver.actions)
