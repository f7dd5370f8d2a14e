"""The quota book: Kafka's precedence of quota entities, per quota kind, and KIP-612's ip entities."""

from __future__ import annotations

import pytest

from gateway.quotas.book import QuotaBook
from gateway.quotas.model import QuotaEntity

U, C = "user", "client-id"
PBR = "producer_byte_rate"

# Every entity kind that can hold a client quota, most specific first (Kafka's order), each with its own bound.
LADDER: list[tuple[list[tuple[str, str | None]], float, str]] = [
    ([(U, "alice"), (C, "app")], 1.0, "user=alice,client-id=app"),
    ([(U, "alice"), (C, None)], 2.0, "user=alice,client-id=<default>"),
    ([(U, "alice")], 3.0, "user=alice"),
    ([(U, None), (C, "app")], 4.0, "user=<default>,client-id=app"),
    ([(U, None), (C, None)], 5.0, "user=<default>,client-id=<default>"),
    ([(U, None)], 6.0, "user=<default>"),
    ([(C, "app")], 7.0, "client-id=app"),
    ([(C, None)], 8.0, "client-id=<default>"),
]


def _book(rows: list[tuple[list[tuple[str, str | None]], float, str]], key: str = PBR) -> QuotaBook:
    return QuotaBook({QuotaEntity.of(parts): {key: bound} for parts, bound, _ in rows})


@pytest.mark.parametrize("level", range(len(LADDER)))
def test_the_most_specific_configured_entity_wins(level: int) -> None:
    """With every entity from ``level`` down configured, alice's "app" client gets ``level``'s bound."""
    _, bound, label = LADDER[level]
    assert _book(LADDER[level:]).lookup("alice", "app", PBR) == (bound, label)


@pytest.mark.parametrize(("user", "client_id", "expected"), [
    ("alice", "app", 1.0),
    ("alice", "other", 2.0),  # alice's default client beats alice alone
    ("bob", "app", 4.0),  # another user: the default user with this client id
    ("bob", "other", 5.0),
])
def test_precedence_for_other_users_and_clients(user: str, client_id: str, expected: float) -> None:
    found = _book(LADDER).lookup(user, client_id, PBR)
    assert found is not None and found[0] == expected


def test_client_id_entities_apply_when_no_user_entity_does() -> None:
    book = _book(LADDER[6:])
    assert book.lookup("bob", "app", PBR) == (7.0, "client-id=app")
    assert book.lookup("bob", "other", PBR) == (8.0, "client-id=<default>")
    assert book.lookup("bob", "", PBR) == (8.0, "client-id=<default>")  # a null client id is ""


def test_precedence_is_per_quota_kind() -> None:
    """alice+app sets only producer_byte_rate: her consumer quota comes from a less specific entity."""
    book = QuotaBook({QuotaEntity.of([(U, "alice"), (C, "app")]): {PBR: 1.0},
                      QuotaEntity.of([(U, None)]): {"consumer_byte_rate": 9.0, "request_percentage": 50.0}})
    assert book.lookup("alice", "app", PBR) == (1.0, "user=alice,client-id=app")
    assert book.lookup("alice", "app", "consumer_byte_rate") == (9.0, "user=<default>")
    assert book.lookup("alice", "app", "controller_mutation_rate") is None


def test_no_quota_without_a_matching_entity() -> None:
    book = QuotaBook({QuotaEntity.of([(U, "alice")]): {PBR: 1.0}})
    assert book.lookup("bob", "app", PBR) is None
    assert QuotaBook().lookup("alice", "", PBR) is None


def test_a_user_named_like_the_default_is_not_the_default() -> None:
    book = QuotaBook({QuotaEntity.of([(U, None)]): {PBR: 6.0}, QuotaEntity.of([(U, "<default>")]): {PBR: 1.0}})
    assert book.lookup("carol", "", PBR) == (6.0, "user=<default>")


def test_connection_creation_rate_by_ip_then_default_ip() -> None:
    book = QuotaBook({QuotaEntity.of([("ip", "0:0:0:0:0:0:0:1")]): {"connection_creation_rate": 7.0},
                      QuotaEntity.of([("ip", "10.0.0.1")]): {"connection_creation_rate": 3.0}})
    assert book.connection_creation_rate("::1") == 7.0  # the same address, spelt differently
    assert book.connection_creation_rate("10.0.0.1") == 3.0
    assert book.connection_creation_rate("10.0.0.2") is None
    book.replace({QuotaEntity.of([("ip", "::ffff:10.0.0.3")]): {"connection_creation_rate": 2.0}})
    assert book.connection_creation_rate("10.0.0.3") == 2.0  # an IPv4 client as a dual-stack socket sees it
    book.replace({QuotaEntity.of([("ip", None)]): {"connection_creation_rate": 5.0}})
    assert book.connection_creation_rate("10.0.0.1") == 5.0


def test_version_counts_every_replacement() -> None:
    book = QuotaBook()
    before = book.version
    book.replace({QuotaEntity.of([(U, "alice")]): {PBR: 1.0}})
    book.replace({})
    assert book.version == before + 2
    assert book.lookup("alice", "", PBR) is None


def test_ten_thousand_entities() -> None:
    state = {QuotaEntity.of([(U, f"user-{i}"), (C, f"client-{i % 7}")]): {PBR: float(i + 1)} for i in range(10_000)}
    book = QuotaBook(state)
    assert book.lookup("user-9999", "client-3", PBR) == (10_000.0, "user=user-9999,client-id=client-3")  # 9999 % 7 == 3
    assert book.lookup("user-9999", "client-4", PBR) is None
