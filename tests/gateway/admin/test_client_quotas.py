"""DescribeClientQuotas and AlterClientQuotas as the gateway answers them (Kafka 4.4's answers, measured)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.admin.change_audit import quotas_altered
from gateway.admin.client_quotas import alter_client_quotas, describe_client_quotas
from gateway.stores.file_quotas import FileQuotaStore

Body = dict[str, Any]
U, C, IP = "user", "client-id", "ip"
EXACT, DEFAULT, ANY = 0, 1, 2


def _entity(*parts: tuple[str, str | None]) -> list[Body]:
    return [{"entity_type": t, "entity_name": n} for t, n in parts]


def _op(key: str, value: float = 0.0, remove: bool = False) -> Body:
    return {"key": key, "value": value, "remove": remove}


def _alter(store: FileQuotaStore, *entries: tuple[list[Body], list[Body]], validate_only: bool = False) -> Body:
    request = {"entries": [{"entity": e, "ops": o} for e, o in entries], "validate_only": validate_only}
    return alter_client_quotas(store, request, 1)


def _errors(response: Body) -> list[tuple[int, str | None]]:
    return [(e["error_code"], e["error_message"]) for e in response["entries"]]


def _describe(store: FileQuotaStore, *components: tuple[str, int, str | None], strict: bool = False) -> Body:
    request = {"components": [{"entity_type": t, "match_type": m, "match": n} for t, m, n in components],
               "strict": strict}
    return describe_client_quotas(store.quotas(), request, 1)


def _found(response: Body) -> set[tuple[tuple[tuple[str, str | None], ...], tuple[tuple[str, float], ...]]]:
    return {(tuple((p["entity_type"], p["entity_name"]) for p in e["entity"]),
             tuple((v["key"], v["value"]) for v in e["values"])) for e in response["entries"]}


@pytest.fixture
def store(tmp_path: Path) -> FileQuotaStore:
    return FileQuotaStore(tmp_path / "quotas.json")


def test_alter_sets_and_removes_and_answers_the_entity_in_kafkas_order(store: FileQuotaStore) -> None:
    answer = _alter(store, (_entity((U, "alice"), (C, "c1")), [_op("producer_byte_rate", 4000.0)]))
    assert answer["entries"] == [{"error_code": 0, "error_message": None,
                                  "entity": _entity((C, "c1"), (U, "alice"))}]
    assert _found(_describe(store)) == {(((C, "c1"), (U, "alice")), (("producer_byte_rate", 4000.0),))}
    _alter(store, (_entity((U, "alice"), (C, "c1")), [_op("producer_byte_rate", remove=True)]))
    assert store.quotas() == {}


def test_validate_only_checks_but_changes_nothing(store: FileQuotaStore) -> None:
    answer = _alter(store, (_entity((U, "alice")), [_op("producer_byte_rate", 1048576.0)]),
                    (_entity((U, "bob")), [_op("producer_byte_rate", 1.5)]), validate_only=True)
    assert _errors(answer) == [(0, None), (42, "producer_byte_rate cannot be a fractional value.")]
    assert store.quotas() == {}


def test_each_entry_stands_alone(store: FileQuotaStore) -> None:
    answer = _alter(store, (_entity((U, "erin")), [_op("producer_byte_rate", 10.0)]),
                    (_entity((U, "erin2")), [_op("foo", 20.0)]))
    assert _errors(answer) == [(0, None), (42, "Invalid configuration key foo")]
    assert _found(_describe(store)) == {(((U, "erin"),), (("producer_byte_rate", 10.0),))}


def test_a_key_named_twice_refuses_the_entry_as_a_duplicate_entity(store: FileQuotaStore) -> None:
    answer = _alter(store, (_entity((U, "bob")), [_op("producer_byte_rate", 10.0), _op("producer_byte_rate", 20.0)]))
    assert _errors(answer) == [(42, "Ignoring duplicate entity ClientQuotaEntity(entries={user=bob})")]
    assert store.quotas() == {}


def test_an_entity_named_twice_gets_one_answer_and_its_first_entry_applies(store: FileQuotaStore) -> None:
    """Kafka's controller: the first entry's records are written, then the second overwrites the answer."""
    answer = _alter(store, (_entity((U, "dave")), [_op("producer_byte_rate", 10.0)]),
                    (_entity((U, "dave")), [_op("consumer_byte_rate", 20.0)]))
    assert _errors(answer) == [(42, "Ignoring duplicate entity ClientQuotaEntity(entries={user=dave})")]
    assert _found(_describe(store)) == {(((U, "dave"),), (("producer_byte_rate", 10.0),))}


def test_a_removal_is_never_checked(store: FileQuotaStore) -> None:
    answer = _alter(store, (_entity((U, "bob")), [_op("foo", remove=True)]),
                    (_entity((U, "carol")), [_op("connection_creation_rate", remove=True)]))
    assert _errors(answer) == [(0, None), (0, None)]


def test_an_invalid_entity_is_refused_before_its_values(store: FileQuotaStore) -> None:
    answer = _alter(store, (_entity((U, "a"), ("topic", "t")), [_op("producer_byte_rate", 1.5)]),
                    ([], [_op("producer_byte_rate", 1.0)]))
    assert _errors(answer) == [(42, "Unhandled client quota entity type: topic"),
                               (42, "Invalid empty client quota entity")]
    assert answer["entries"][0]["entity"] == _entity((U, "a"), ("topic", "t"))


@pytest.fixture
def populated(store: FileQuotaStore) -> FileQuotaStore:
    for parts, key, value in [
        (((U, "alice"),), "producer_byte_rate", 1.0), (((U, None),), "producer_byte_rate", 2.0),
        (((U, "alice"), (C, "c1")), "producer_byte_rate", 3.0), (((U, "alice"), (C, None)), "producer_byte_rate", 4.0),
        (((U, None), (C, "c1")), "producer_byte_rate", 5.0), (((C, "c1"),), "consumer_byte_rate", 6.0),
        (((C, None),), "consumer_byte_rate", 7.0), (((IP, "127.0.0.1"),), "connection_creation_rate", 8.0),
        (((IP, None),), "connection_creation_rate", 9.0),
    ]:
        assert _errors(_alter(store, (_entity(*parts), [_op(key, value)]))) == [(0, None)]
    return store


def _bounds(response: Body) -> set[float]:
    return {v["value"] for e in response["entries"] for v in e["values"]}


@pytest.mark.parametrize(("components", "strict", "bounds"), [
    ((), False, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}),
    ((), True, set()),
    (((U, EXACT, "alice"),), False, {1.0, 3.0, 4.0}),
    (((U, EXACT, "alice"),), True, {1.0}),
    (((U, DEFAULT, None),), False, {2.0, 5.0}),
    (((U, DEFAULT, None),), True, {2.0}),
    (((U, ANY, None),), False, {1.0, 2.0, 3.0, 4.0, 5.0}),  # "any" includes the default
    (((U, ANY, None),), True, {1.0, 2.0}),
    (((C, EXACT, "c1"),), False, {3.0, 5.0, 6.0}),
    (((U, EXACT, "alice"), (C, ANY, None)), True, {3.0, 4.0}),
    (((C, ANY, None),), True, {6.0, 7.0}),
    (((IP, ANY, None),), False, {8.0, 9.0}),
    (((IP, DEFAULT, None),), False, {9.0}),
    (((IP, EXACT, "not-an-ip"),), False, set()),  # a filter's names are not validated
])
def test_describe_matches_as_kafka(populated: FileQuotaStore, components: tuple[tuple[str, int, str | None], ...],
                                   strict: bool, bounds: set[float]) -> None:
    answer = _describe(populated, *components, strict=strict)
    assert (answer["error_code"], answer["error_message"]) == (0, "")
    assert _bounds(answer) == bounds


@pytest.mark.parametrize(("components", "code", "message"), [
    (((U, 3, None),), 42, "Unknown match type 3"),
    (((U, EXACT, None),), 42, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    (((U, DEFAULT, "x"),), 42, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    (((U, ANY, "x"),), 42, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    (((U, EXACT, "a"), (U, EXACT, "b")), 42, "Entity type user cannot appear more than once in the filter."),
    ((("topic", ANY, None),), 35, "Unsupported entity type topic"),
    ((("", ANY, None),), 42, "Invalid empty entity type."),
    (((IP, ANY, None), (U, ANY, None)), 42, "Invalid entity filter component combination. IP filter component "
                                            "should not be used with user or clientId filter component."),
])
def test_describe_refuses_bad_filters_as_kafka(populated: FileQuotaStore,
                                               components: tuple[tuple[str, int, str | None], ...],
                                               code: int, message: str) -> None:
    answer = _describe(populated, *components)
    assert (answer["error_code"], answer["error_message"], answer["entries"]) == (code, message, None)


def test_the_audit_names_what_took_effect_and_counts_refusals(store: FileQuotaStore) -> None:
    request = {"validate_only": False, "entries": [
        {"entity": _entity((U, "alice")), "ops": [_op("producer_byte_rate", 1048576.0), _op("consumer_byte_rate",
                                                                                          remove=True)]},
        {"entity": _entity((U, "bob")), "ops": [_op("producer_byte_rate", 1.5)]}]}
    change = quotas_altered(request, alter_client_quotas(store, request, 1))
    assert (change.changed, change.failed, change.decision) == (1, 1, "PARTIAL")
    assert change.sample == ("user=alice set producer_byte_rate=1048576 remove consumer_byte_rate",)
    dry = quotas_altered({**request, "validate_only": True}, alter_client_quotas(store, request, 1))
    assert dry.changed == 0


def test_a_describe_over_many_entities_runs_off_the_event_loop(store: FileQuotaStore) -> None:
    from types import SimpleNamespace
    from typing import cast

    from gateway.admin.client_quotas import INLINE_DESCRIBE_ENTITIES
    from gateway.admin.handlers import LOCAL_HANDLERS, OffLoop
    from gateway.quotas.model import QuotaEntity
    from protocol.api_keys import ApiKey

    handler = LOCAL_HANDLERS[ApiKey.DESCRIBE_CLIENT_QUOTAS]
    authorization = cast(Any, SimpleNamespace(quota_store=store))
    request = {"components": [{"entity_type": U, "match_type": EXACT, "match": "u7"}], "strict": False}
    store.alter([(QuotaEntity.of([(U, "u7")]), {"producer_byte_rate": 7.0})])
    assert isinstance(handler(authorization, cast(Any, None), request, 1), dict)  # small: answered at once
    store.alter([(QuotaEntity.of([(U, f"u{i}")]), {"producer_byte_rate": float(i + 1)})
                 for i in range(INLINE_DESCRIBE_ENTITIES + 1)])
    deferred = handler(authorization, cast(Any, None), request, 1)
    assert isinstance(deferred, OffLoop)
    assert _bounds(deferred.work()) == {8.0}
