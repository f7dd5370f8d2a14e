"""Kafka's validation of quota entities and values, case by case as Kafka 4.4's broker answered them
(measured with AlterClientQuotas against the real broker; the conformance suite re-checks it)."""

from __future__ import annotations

import math

import pytest

from gateway.quotas.model import QuotaEntity, QuotaError, validate_entity, validate_value

U, C, IP = "user", "client-id", "ip"

ENTITY_ERRORS = [
    ([], "Invalid empty client quota entity"),
    ([("topic", "t")], "Unhandled client quota entity type: topic"),
    ([("USER", "bob")], "Unhandled client quota entity type: USER"),
    ([(U, "a"), ("topic", "t")], "Unhandled client quota entity type: topic"),
    ([(U, "")], "Empty user not supported"),
    ([(C, "")], "Empty client-id not supported"),
    ([(IP, "")], "Empty ip not supported"),
    ([(IP, ""), (U, "a")], "Empty ip not supported"),
    ([(IP, "127.0.0.1"), (U, "bob")], "Invalid quota entity combination, IP entity shouldnot be combined with User "
                                      "or ClientId"),
    ([(IP, None), (U, None)], "Invalid quota entity combination, IP entity shouldnot be combined with User or "
                              "ClientId"),
    # the combination is checked before the address
    ([(IP, "not-an-ip"), (U, "a")], "Invalid quota entity combination, IP entity shouldnot be combined with User "
                                    "or ClientId"),
    ([(IP, "not-an-ip")], "not-an-ip is not a valid IP or resolvable host."),
    ([(IP, "10.0.0.0/8")], "10.0.0.0/8 is not a valid IP or resolvable host."),
]


@pytest.mark.parametrize(("parts", "message"), ENTITY_ERRORS)
def test_invalid_entities_get_kafkas_message(parts: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        validate_entity(parts)
    assert (caught.value.code, caught.value.message) == (42, message)


@pytest.mark.parametrize("parts", [
    [(U, "alice")], [(U, None)], [(C, "c1")], [(C, None)], [(U, "alice"), (C, "c1")], [(U, None), (C, None)],
    [(IP, "127.0.0.1")], [(IP, "0:0:0:0:0:0:0:1")], [(IP, "::ffff:127.0.0.1")], [(IP, None)],
    [(U, "CN=x,OU=y")],
])
def test_valid_entities(parts: list[tuple[str, str | None]]) -> None:
    assert dict(validate_entity(parts).parts) == dict(parts)


def test_a_type_named_twice_keeps_the_last_name_as_kafkas_map_does() -> None:
    assert validate_entity([(U, "a"), (U, "b")]).parts == ((U, "b"),)


def test_parts_are_answered_in_kafkas_order() -> None:
    assert validate_entity([(U, "a"), (C, "c")]).parts == ((C, "c"), (U, "a"))
    assert QuotaEntity.of([(IP, "x"), (U, "a")]).parts == ((U, "a"), (IP, "x"))
    assert validate_entity([(C, None), (U, "alice")]).label() == "user=alice,client-id=<default>"


VALUE_ERRORS = [
    ([(U, "b")], "producer_byte_rate", 1.5, "producer_byte_rate cannot be a fractional value."),
    ([(U, "b")], "producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
    ([(U, "b")], "producer_byte_rate", -1.0, "Quota producer_byte_rate must be greater than 0"),
    ([(U, "b")], "producer_byte_rate", -1.5, "Quota producer_byte_rate must be greater than 0"),
    ([(U, "b")], "producer_byte_rate", -1e30, "Quota producer_byte_rate must be greater than 0"),
    ([(U, "b")], "consumer_byte_rate", 1e30, "Proposed value for consumer_byte_rate is too large for a LONG."),
    ([(U, "b")], "consumer_byte_rate", math.nan, "Quota consumer_byte_rate must be a finite number"),
    ([(U, "b")], "request_percentage", math.inf, "Quota request_percentage must be a finite number"),
    ([(U, "b")], "request_percentage", 0.0, "Quota request_percentage must be greater than 0"),
    ([(U, "b")], "controller_mutation_rate", 0.0, "Quota controller_mutation_rate must be greater than 0"),
    ([(U, "b")], "connection_creation_rate", 10.0, "Invalid configuration key connection_creation_rate"),
    ([(U, "b")], "foo", 10.0, "Invalid configuration key foo"),
    ([(IP, "127.0.0.1")], "producer_byte_rate", 10.0, "Invalid configuration key producer_byte_rate"),
    ([(IP, "127.0.0.2")], "connection_creation_rate", 1.5, "connection_creation_rate cannot be a fractional value."),
    ([(IP, "127.0.0.2")], "connection_creation_rate", 0.0, "Quota connection_creation_rate must be greater than 0"),
    ([(IP, "127.0.0.9")], "connection_creation_rate", 1e30,
     "Proposed value for connection_creation_rate is too large for an INT."),
    ([(IP, "127.0.0.9")], "connection_creation_rate", math.nan,
     "Quota connection_creation_rate must be a finite number"),
]


@pytest.mark.parametrize(("parts", "key", "value", "message"), VALUE_ERRORS)
def test_invalid_values_get_kafkas_message(parts: list[tuple[str, str | None]], key: str, value: float,
                                           message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        validate_value(validate_entity(parts), key, value)
    assert caught.value.message == message


@pytest.mark.parametrize(("parts", "key", "value"), [
    ([(U, "b")], "producer_byte_rate", 1048576.0),
    ([(U, "b")], "consumer_byte_rate", 9.223372036854776e18),  # 2**63: Java's Long.MAX_VALUE as a double
    ([(U, "b")], "request_percentage", 0.5),
    ([(U, "b")], "request_percentage", 1e308),
    ([(U, "b")], "controller_mutation_rate", 0.5),
    ([(U, "a"), (C, None)], "producer_byte_rate", 5000.0),
    ([(IP, None)], "connection_creation_rate", 5.0),
])
def test_valid_values(parts: list[tuple[str, str | None]], key: str, value: float) -> None:
    validate_value(validate_entity(parts), key, value)  # raises on a refusal


def test_java_text_is_what_kafkas_duplicate_message_quotes() -> None:
    assert validate_entity([(U, "bob")]).java_text() == "ClientQuotaEntity(entries={user=bob})"
    assert validate_entity([(U, None), (C, "c")]).java_text() == "ClientQuotaEntity(entries={client-id=c, user=null})"
