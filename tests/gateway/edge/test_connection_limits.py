"""The connection-limit accounting (sans-IO, with a fake clock) and its configuration keys."""

from __future__ import annotations

import pytest

from auth.client_address import ClientAddress
from gateway.config import ConfigError, build_config
from gateway.edge.connection_limits import (
    UNLIMITED,
    Admission,
    ConnectionLimits,
    LimitSettings,
    Refusal,
    RefusalSampler,
    limit_settings,
    resolve_overrides,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _limits(clock: FakeClock | None = None, **settings: object) -> ConnectionLimits:
    return ConnectionLimits(LimitSettings(**settings), clock or FakeClock())  # type: ignore[arg-type]


def _admitted(decision: Admission | Refusal) -> Admission:
    assert isinstance(decision, Admission), decision
    return decision


def _refused(decision: Admission | Refusal) -> Refusal:
    assert isinstance(decision, Refusal), decision
    return decision


def test_per_ip_limit_refuses_the_connection_over_it_and_other_addresses_are_unaffected() -> None:
    limits = _limits(max_connections_per_ip=2)
    _admitted(limits.admit("PLAINTEXT", "10.0.0.1"))
    _admitted(limits.admit("SSL", "10.0.0.1"))  # per-ip counts span listeners, as Kafka's
    refusal = _refused(limits.admit("PLAINTEXT", "10.0.0.1"))
    assert (refusal.key, refusal.limit, refusal.metric_reason) == ("max.connections.per.ip", 2,
                                                                   "max_connections_per_ip")
    _admitted(limits.admit("PLAINTEXT", "10.0.0.2"))
    assert limits.total == 3


def test_release_frees_the_slot_once_even_if_called_twice() -> None:
    limits = _limits(max_connections_per_ip=1)
    first = _admitted(limits.admit("PLAINTEXT", "10.0.0.1"))
    _refused(limits.admit("PLAINTEXT", "10.0.0.1"))
    limits.release(first)
    limits.release(first)  # the handshake-failure path and the close hook may both run
    assert limits.total == 0 and limits.open_from("10.0.0.1") == 0
    second = _admitted(limits.admit("PLAINTEXT", "10.0.0.1"))
    _refused(limits.admit("PLAINTEXT", "10.0.0.1"))
    limits.release(second)
    assert limits.total == 0


def test_an_override_raises_or_lowers_one_address_and_zero_default_admits_only_overrides() -> None:
    limits = _limits(max_connections_per_ip=0, per_ip_overrides={"10.0.0.1": 3})
    for _ in range(3):
        _admitted(limits.admit("PLAINTEXT", "10.0.0.1"))
    refusal = _refused(limits.admit("PLAINTEXT", "10.0.0.1"))
    assert (refusal.key, refusal.limit) == ("max.connections.per.ip.overrides", 3)
    assert _refused(limits.admit("PLAINTEXT", "10.0.0.2")).key == "max.connections.per.ip"


def test_ipv4_mapped_ipv6_is_the_same_address() -> None:
    limits = _limits(max_connections_per_ip=1)
    _admitted(limits.admit("PLAINTEXT", ClientAddress.of("::ffff:10.0.0.1", 1).host))
    _refused(limits.admit("PLAINTEXT", ClientAddress.of("10.0.0.1", 2).host))


def test_max_connections_is_process_wide_and_listener_limits_apply_per_listener() -> None:
    limits = _limits(max_connections=3, listener_max_connections={"SSL": 1})
    _admitted(limits.admit("SSL", "10.0.0.1"))
    refusal = _refused(limits.admit("SSL", "10.0.0.2"))
    assert (refusal.key, refusal.metric_reason) == ("listener.name.ssl.max.connections", "listener_max_connections")
    _admitted(limits.admit("PLAINTEXT", "10.0.0.2"))
    _admitted(limits.admit("PLAINTEXT", "10.0.0.3"))
    refusal = _refused(limits.admit("PLAINTEXT", "10.0.0.4"))
    assert (refusal.key, refusal.limit) == ("max.connections", 3)


def test_creation_rate_admits_a_burst_of_rate_then_refills_with_time() -> None:
    clock = FakeClock()
    limits = _limits(clock, max_connection_creation_rate=5)
    admitted = [limits.admit("PLAINTEXT", f"10.0.0.{n}") for n in range(8)]
    assert [isinstance(d, Admission) for d in admitted] == [True] * 5 + [False] * 3
    assert _refused(admitted[-1]).key == "max.connection.creation.rate"
    clock.now += 0.2  # one connection's worth of tokens (5/s)
    _admitted(limits.admit("PLAINTEXT", "10.0.0.9"))
    _refused(limits.admit("PLAINTEXT", "10.0.0.9"))
    clock.now += 60  # refills to the burst size, no more
    assert sum(isinstance(limits.admit("PLAINTEXT", f"10.1.0.{n}"), Admission) for n in range(10)) == 5


def test_refused_connections_do_not_use_up_the_creation_rate() -> None:
    clock = FakeClock()
    limits = _limits(clock, max_connection_creation_rate=2, max_connections_per_ip=1)
    _admitted(limits.admit("PLAINTEXT", "10.0.0.1"))
    for _ in range(10):  # a flood from one address, refused by its per-ip limit
        _refused(limits.admit("PLAINTEXT", "10.0.0.1"))
    _admitted(limits.admit("PLAINTEXT", "10.0.0.2"))


def test_listener_creation_rate_is_separate_from_other_listeners() -> None:
    limits = _limits(listener_max_connection_creation_rate={"SSL": 1})
    _admitted(limits.admit("SSL", "10.0.0.1"))
    refusal = _refused(limits.admit("SSL", "10.0.0.2"))
    assert (refusal.key, refusal.metric_reason) == ("listener.name.ssl.max.connection.creation.rate",
                                                    "listener_max_connection_creation_rate")
    for n in range(100):
        _admitted(limits.admit("PLAINTEXT", f"10.0.1.{n}"))


def test_defaults_are_unlimited() -> None:
    limits = _limits()
    for n in range(1000):
        _admitted(limits.admit("PLAINTEXT", "10.0.0.1" if n % 2 else f"10.0.{n // 256}.{n % 256}"))
    assert LimitSettings().max_connections == UNLIMITED


def test_host_names_in_overrides_are_resolved_and_addresses_are_not() -> None:
    asked: list[str] = []

    def resolve(host: str) -> list[str]:
        asked.append(host)
        return ["192.0.2.7", "::ffff:192.0.2.8"]

    assert resolve_overrides({"broker-a": 5, "10.0.0.1": 2, "::1": 3}, resolve) == {
        "192.0.2.7": 5, "192.0.2.8": 5, "10.0.0.1": 2, "::1": 3}
    assert asked == ["broker-a"]


def test_refusal_audit_is_sampled_per_second_and_the_unwritten_are_counted() -> None:
    clock = FakeClock()
    sampler = RefusalSampler(clock, per_second=2)
    assert [sampler.sample() for _ in range(5)] == [0, 0, None, None, None]
    clock.now += 1.0
    assert sampler.sample() == 3  # the next event written carries the three left out
    assert sampler.sample() == 0


# --- configuration ---------------------------------------------------------------------------------

BASE = {"upstream.bootstrap.servers": "127.0.0.1:9092", "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"}


def test_kafka_keys_and_listener_forms_become_limit_settings() -> None:
    config = build_config({**BASE, "max.connections": 100, "max.connections.per.ip": 10,
                           "max.connections.per.ip.overrides": "127.0.0.1:50, [::1]:7,localhost:3",
                           "max.connection.creation.rate": 20,
                           "listener.name.ssl.max.connections": 30,
                           "listener.name.ssl.max.connection.creation.rate": 4})
    settings = limit_settings(config, lambda host: ["127.0.0.9"] if host == "localhost" else [])
    assert settings == LimitSettings(
        max_connections=100, max_connections_per_ip=10,
        per_ip_overrides={"127.0.0.1": 50, "::1": 7, "127.0.0.9": 3}, max_connection_creation_rate=20,
        listener_max_connections={"SSL": 30}, listener_max_connection_creation_rate={"SSL": 4})
    # The broker-wide values are not copied into the listener's own limits.
    plaintext = next(lst for lst in config.listeners if lst.name == "PLAINTEXT")
    assert plaintext.connection_limits == {}


@pytest.mark.parametrize(("extra", "message"), [
    ({"max.connections.per.ip": 0}, "max.connections.per.ip: can be 0 only if"),
    ({"max.connections": -1}, "max.connections: must not be negative"),
    ({"max.connections.per.ip.overrides": "host-without-count"}, "is not host:count"),
    ({"max.connections.per.ip.overrides": "h:many"}, "is not host:count"),
    ({"listener.name.ssl.max.connections": -2}, "listener.name.ssl.max.connections: must not be negative"),
    ({"listener.name.ssl.max.connections.per.ip": 2}, "unknown per-listener setting"),
])
def test_invalid_limits_are_refused_with_the_key(extra: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config({**BASE, **extra})
