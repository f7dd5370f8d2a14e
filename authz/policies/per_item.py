"""The engine of the declarative per-item rules (authz/policies/rules.py): one ACL on each item a request names.

Where a request names its items and where the response answers them is read from the schemas' ``entity=``
annotations (a topic name, group id or transactional id), once per version: the rule says only which operation
Kafka checks and how Kafka words a refusal.  The engine relays, answers or splits the request by the one merge rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from authz.model import AclOperation, ResourceType
from authz.policies._kit import OncePerName, cluster_allowed, item
from authz.policies.merge import Slot, merge_items, once_per_partition
from authz.request_policy import Answer, AuthzView, Body, Relay, Rewrite, Verdict
from authz.response_defaults import default_response
from authz.topic_guard import topic_name_problem
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError
from protocol.registry import api
from protocol.schema import FieldSpec

# The entities an item may name: the ACL resource it is checked on, and Kafka's error when that check fails.
RESOURCES: Mapping[str, tuple[ResourceType, KafkaError]] = {
    "topicName": (ResourceType.TOPIC, KafkaError.TOPIC_AUTHORIZATION_FAILED),
    "groupId": (ResourceType.GROUP, KafkaError.GROUP_AUTHORIZATION_FAILED),
    "transactionalId": (ResourceType.TRANSACTIONAL_ID, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
}
# Kafka's names of a partition's index within a topic's partition list.
_INDEX_NAMES = ("partition_index", "partition")

Failure = tuple[int, str | None]  # an item's error code and error message
# A check Kafka makes before authorizing an item (a refusal here asks no ACL): the item's name and how many
# times the request names it.
Precheck = Callable[[str, Counter[str]], Failure | None]


class RuleError(ValueError):
    """A rule whose API's schema does not have the per-item shape (a bug in ksgate, found at import)."""


@dataclass(slots=True, frozen=True)
class Layout:
    """Where one version of an API names its items (request) and answers them (response), from the schema."""

    resource_type: ResourceType
    denied: KafkaError
    items: str  # the request's array of items
    name: str | None  # the item's name field; None when the array holds the names themselves
    partitions: str | None  # the item's partitions: struct array or []int32 (with per-partition answers)
    partition_index: str | None  # the index field of a partition struct; None for []int32
    answers: str  # the response's array of answers
    answer_name: str
    answer_partitions: str | None  # None: the error is the answer's own, else each partition's
    answer_partition_index: str | None

    def name_of(self, entry: Any) -> str:
        name: str = entry if self.name is None else entry[self.name]
        return name

    def indexes(self, entry: Body) -> list[int]:
        assert self.partitions is not None
        listed = entry[self.partitions]
        return list(listed) if self.partition_index is None else [p[self.partition_index] for p in listed]


def _present(fields: list[FieldSpec], version: int) -> list[FieldSpec]:
    return [f for f in fields if version in f.versions]


def _only(found: list[Any], what: str) -> Any:
    if len(found) != 1:
        raise RuleError(f"{what}: {len(found)} candidates, expected exactly one")
    return found[0]


def _named_child(spec: FieldSpec, version: int) -> FieldSpec | None:
    """The one scalar child of a struct array naming a resource (topic name, group id, transactional id)."""
    named = [f for f in _present(spec.fields, version) if f.type == "string" and f.entity in RESOURCES]
    return named[0] if len(named) == 1 else None


def _index_field(spec: FieldSpec, version: int) -> str | None:
    return next((f.name for f in _present(spec.fields, version) if f.name in _INDEX_NAMES), None)


@lru_cache(maxsize=256)
def layout(api_key: int, version: int) -> Layout:
    """The per-item shape of ``api_key`` at ``version``; RuleError when the schema does not have one."""
    schema = api(api_key)
    if schema is None:
        raise RuleError(f"api key {api_key} has no schema")
    where = f"{schema.name} v{version}"
    requested: list[tuple[FieldSpec, FieldSpec | None]] = []
    for spec in _present(schema.request.fields, version):
        if spec.is_struct_array and (child := _named_child(spec, version)) is not None:
            requested.append((spec, child))
        elif spec.type == "[]string" and spec.entity in RESOURCES:
            requested.append((spec, None))
    items, name = _only(requested, f"{where} request items")
    if version in items.nullable:
        raise RuleError(f"{where}: a null {items.name} would name no item (a rule cannot say what Kafka does)")
    entity = (name or items).entity
    answered = [(spec, child) for spec in _present(schema.response.fields, version)
                if spec.is_struct_array and (child := _named_child(spec, version)) is not None
                and child.entity == entity]
    answers, answer_name = _only(answered, f"{where} response items")
    resource_type, denied = RESOURCES[entity]
    shape = dict(resource_type=resource_type, denied=denied, items=items.name, name=name and name.name,
                 answers=answers.name, answer_name=answer_name.name)
    if any(f.name == "error_code" for f in _present(answers.fields, version)):
        return Layout(**shape, partitions=None, partition_index=None, answer_partitions=None,
                      answer_partition_index=None)
    answer_partitions = _only([f for f in _present(answers.fields, version) if f.is_struct_array
                               and any(c.name == "error_code" for c in _present(f.fields, version))],
                              f"{where} response partitions")
    if name is None:
        raise RuleError(f"{where}: per-partition answers to a request without partitions")
    partitions = _only([f for f in _present(items.fields, version)
                        if f.type == "[]int32" or (f.is_struct_array and _index_field(f, version))],
                       f"{where} request partitions")
    return Layout(**shape, partitions=partitions.name,
                  partition_index=None if partitions.type == "[]int32" else _index_field(partitions, version),
                  answer_partitions=answer_partitions.name,
                  answer_partition_index=_index_field(answer_partitions, version))


# --- prechecks: what Kafka refuses before (and without) authorizing the item --------------------------------------

def illegal_topic_name(name: str, counts: Counter[str]) -> Failure | None:
    problem = topic_name_problem(name)
    return None if problem is None else (KafkaError.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {problem}")


def repeated_topic_name(name: str, counts: Counter[str]) -> Failure | None:
    return (KafkaError.INVALID_REQUEST, "Duplicate topic name.") if counts[name] > 1 else None


# --- the rule ---------------------------------------------------------------------------------------------------

@dataclass(slots=True, frozen=True)
class PerItemRule:
    """One row of Kafka's "Operations and Resources on Protocols": ``operation`` on each item the request names.

    An item is refused with Kafka's authorization error for its resource type, at the answer's level or on each
    of its partitions (as the response schema places ``error_code``); allowed items are relayed, refused ones
    merged back in the client's order (``refused_last``: Kafka lists them after the relayed ones). The rule is
    itself the API's policy (ApiPolicy).
    """

    api_key: ApiKey
    operation: AclOperation
    note: str  # the table row's "when / which": e.g. "each topic"
    cluster_shortcut: AclOperation | None = None  # this operation on the cluster authorizes every item
    prechecks: tuple[Precheck, ...] = ()
    once_per_name: bool = False  # Kafka answers a repeated name once
    keyed_by_partition: bool = False  # Kafka reads the items into a map: a repeated topic-partition is answered once
    refused_last: bool = False
    with_message: bool = False  # a refusal carries Kafka's default message (else null)
    error_fields: tuple[tuple[str, Any], ...] = ()  # other fields of a refusal (e.g. low_watermark -1)

    def __post_init__(self) -> None:
        schema = api(self.api_key)
        assert schema is not None, self.api_key
        for version in range(schema.min_version, schema.max_version + 1):
            layout(self.api_key, version)  # every version has the shape, or the import fails

    def rows(self) -> list[tuple[int, str, str, str]]:
        schema = api(self.api_key)
        assert schema is not None
        resource = layout(self.api_key, schema.max_version).resource_type.name
        rows = [] if self.cluster_shortcut is None else [
            (self.api_key, self.cluster_shortcut.name, ResourceType.CLUSTER.name,
             f"authorizes every {resource.lower()} (not logged when denied)")]
        return [*rows, (self.api_key, self.operation.name, resource, self.note)]

    def __call__(self, request: Body, version: int, view: AuthzView) -> Verdict:
        if self.cluster_shortcut is not None and cluster_allowed(view, self.cluster_shortcut, log_if_denied=False):
            return Relay()
        shape = layout(self.api_key, version)
        entries: list[Any] = request[shape.items]
        if self.once_per_name:
            first: dict[str, Any] = {}
            for entry in entries:
                first.setdefault(shape.name_of(entry), entry)
            entries = list(first.values())
        counts: Counter[str] = Counter(shape.name_of(e) for e in request[shape.items]) if self.prechecks else Counter()
        allowed = OncePerName(view, self.operation, shape.resource_type)
        denial: Failure = (shape.denied, shape.denied.message if self.with_message else None)
        slots: list[Slot] = []
        kept: list[Any] = []
        for entry in entries:  # the hot loop of a relayed request: no call it does not need
            name = entry if shape.name is None else entry[shape.name]
            failure = self._precheck(name, counts) if self.prechecks else None
            if failure is None and allowed(name):
                kept.append(entry)
                slots.append((None, name))
            else:
                slots.append((self._refusal(shape, version, entry, failure or denial), name))
        if len(kept) == len(entries):
            return Relay()
        if self.keyed_by_partition:
            assert shape.answer_partitions is not None and shape.answer_partition_index is not None
            slots = once_per_partition(slots, shape.answer_partitions, shape.answer_partition_index)
        if not kept:
            response = default_response(self.api_key, version)
            response[shape.answers] = [refusal for refusal, _ in slots]
            return Answer(response)
        if self.refused_last:
            slots = [slot for slot in slots if slot[0] is None] + [slot for slot in slots if slot[0] is not None]

        def merge(response: Body) -> Body:
            response[shape.answers] = merge_items(slots, response[shape.answers], lambda a: (a[shape.answer_name],))
            return response

        return Rewrite({**request, shape.items: kept}, merge)

    def _precheck(self, name: str, counts: Counter[str]) -> Failure | None:
        for check in self.prechecks:
            failure = check(name, counts)
            if failure is not None:
                return failure
        return None

    def _refusal(self, shape: Layout, version: int, entry: Any, failure: Failure) -> Body:
        """The answer Kafka gives a refused item: its error on the answer, or on each partition it asked for."""
        fields = {"error_code": failure[0], "error_message": failure[1], **dict(self.error_fields)}
        named = {shape.answer_name: shape.name_of(entry)}
        if shape.answer_partitions is None:
            return item(self.api_key, version, (shape.answers,), **named, **fields)
        path = (shape.answers, shape.answer_partitions)
        assert shape.answer_partition_index is not None
        partitions = [item(self.api_key, version, path, **{shape.answer_partition_index: index}, **fields)
                      for index in shape.indexes(entry)]
        return item(self.api_key, version, (shape.answers,), **named, **{shape.answer_partitions: partitions})
