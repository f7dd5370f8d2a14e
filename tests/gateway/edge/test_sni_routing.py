"""SNI routing for one-port listeners, sans-IO: bootstrap, nodes, case, trailing dot, certificates."""

from __future__ import annotations

import pytest

from gateway.edge.sni_routing import Bootstrap, Node, SniConfigError, SniRoutes, covers

ROUTES = SniRoutes("bootstrap.kafka.example.com", "broker-{nodeId}.kafka.example.com")


@pytest.mark.parametrize(("name", "route"), [
    ("bootstrap.kafka.example.com", Bootstrap()),
    ("BOOTSTRAP.Kafka.Example.COM.", Bootstrap()),
    ("broker-0.kafka.example.com", Node(0)),
    ("broker-111.kafka.example.com", Node(111)),
    ("Broker-7.KAFKA.example.com.", Node(7)),
    ("broker-01.kafka.example.com", None),  # not a canonical id: another name
    ("broker-.kafka.example.com", None),
    ("broker-1x.kafka.example.com", None),
    ("broker-1.kafka.example.com.evil.com", None),
    ("x.broker-1.kafka.example.com", None),
    ("broker-99999999999.kafka.example.com", None),
    ("kafka.example.com", None),
    ("", None),
    (None, None),
])
def test_a_server_name_routes_to_the_bootstrap_a_node_or_nowhere(name: str | None, route: object) -> None:
    assert ROUTES.route(name) == route


def test_the_gateway_advertises_the_pattern_host_for_a_node() -> None:
    assert ROUTES.host_of(3) == "broker-3.kafka.example.com"


@pytest.mark.parametrize("pattern", ["broker.kafka.example.com", "b-{nodeId}-{nodeId}.x.com", "b{nodeId}.{nodeId}.x",
                                     "b.{nodeId}x.y_z.com", "{nodeId}.x.{nodeId}"])
def test_a_pattern_needs_one_node_id_inside_one_label(pattern: str) -> None:
    with pytest.raises(SniConfigError):
        SniRoutes("bootstrap.x.com", pattern)


def test_the_bootstrap_host_may_not_look_like_a_broker() -> None:
    with pytest.raises(SniConfigError):
        SniRoutes("broker-1.x.com", "broker-{nodeId}.x.com")


@pytest.mark.parametrize(("names", "host", "covered"), [
    (["*.kafka.example.com"], "broker-1.kafka.example.com", True),
    (["*.KAFKA.example.com."], "Broker-1.kafka.example.com", True),
    (["*.example.com"], "broker-1.kafka.example.com", False),  # a wildcard stands for one label only
    (["*.com"], "example.com", False),
    (["broker-1.kafka.example.com"], "broker-1.kafka.example.com", True),
    (["broker-1.kafka.example.com"], "broker-2.kafka.example.com", False),
    (["b*.kafka.example.com"], "broker-1.kafka.example.com", False),  # partial wildcards are not honoured
])
def test_certificate_names_cover_hosts_as_rfc_6125_says(names: list[str], host: str, covered: bool) -> None:
    assert covers(names, host) is covered


def test_a_wildcard_certificate_covers_the_bootstrap_and_every_broker() -> None:
    assert ROUTES.uncovered(["kafka.example.com", "*.kafka.example.com"]) == []


def test_a_certificate_missing_a_name_says_which() -> None:
    assert ROUTES.uncovered(["bootstrap.kafka.example.com"]) == ["broker-{nodeId}.kafka.example.com"]
    assert ROUTES.uncovered(["*.other.com"], [1]) == ["bootstrap.kafka.example.com", "broker-1.kafka.example.com"]
    assert ROUTES.uncovered(["bootstrap.kafka.example.com", "broker-1.kafka.example.com"], [1]) == []
