"""The client's canonical address: one spelling per address, for ACLs, audit, limits and throttling alike."""

from __future__ import annotations

import pytest

from auth.client_address import ClientAddress, canonical_host


@pytest.mark.parametrize(("written", "canonical"), [
    ("10.1.2.3", "10.1.2.3"),
    ("::ffff:10.1.2.3", "10.1.2.3"),  # an IPv4 client on a dual-stack socket, as Kafka's JVM sees it
    ("::FFFF:a01:203", "10.1.2.3"),
    ("0:0:0:0:0:ffff:a01:203", "10.1.2.3"),
    ("2001:DB8:0:0:0:0:0:42", "2001:db8::42"),  # Java's getHostAddress spelling, compressed
    ("fe80::1%eth0", "fe80::1"),  # the scope names the gateway's interface, not the client
    ("::1", "::1"),
    ("*", "*"),
    ("broker-a.example.com", "broker-a.example.com"),
    ("?", "?"),
])
def test_canonical_host_spells_each_address_one_way(written: str, canonical: str) -> None:
    assert canonical_host(written) == canonical


def test_a_client_address_from_an_ipv6_socket_tuple_is_canonical() -> None:
    assert ClientAddress.of_socket(("::ffff:127.0.0.1", 40000, 0, 0)) == ClientAddress("127.0.0.1", 40000)
    assert ClientAddress.of_socket(("2001:db8::1", 1)) == ClientAddress("2001:db8::1", 1)


def test_a_client_address_prints_ipv6_in_brackets() -> None:
    assert str(ClientAddress.of("::FFFF:10.1.2.3", 9)) == "10.1.2.3:9"
    assert str(ClientAddress.of("2001:db8::1", 9)) == "[2001:db8::1]:9"
