"""Group, offset and transaction APIs: the group / transactional-id / topic checks of Kafka 4's KafkaApis.

Errors go where Kafka puts them (top level, per group, per topic or per partition) and items come back in Kafka's order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from authz.field_presence import request_has, response_has, response_nullable
from authz.model import AclOperation, ResourceType
from authz.policies._kit import (
    GROUP_OPERATIONS,
    INTERNAL_TOPICS,
    NOT_REQUESTED,
    ZERO_UUID,
    Op,
    answer,
    cluster_allowed,
    distinct,
    item,
)
from authz.policies.merge import Slot, merge_items
from authz.request_policy import Action, Answer, ApiPolicy, AuthzView, Body, Relay, Rewrite, Verdict
from authz.response_defaults import default_response
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError

# Kafka 4.1's texts for a described group whose topics the caller may not describe (KAFKA-18813 and KIP-1071).
CONSUMER_GROUP_TOPICS_DENIED = "The group has described topic(s) that the client is not authorized to describe."
STREAMS_GROUP_TOPICS_DENIED = "The described group uses topics that the client is not authorized to describe."


# CoordinatorType ids of FindCoordinator's key_type.
GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2
NO_NODE = {"node_id": -1, "host": "", "port": -1}  # Node.noNode()


# --- small helpers ---------------------------------------------------------------------------------------------

def _allowed(view: AuthzView, operation: AclOperation, resource: ResourceType, name: str | None) -> bool:
    return name is not None and view.allowed(Action(operation, resource, name))


def _group(view: AuthzView, operation: AclOperation, group_id: str) -> bool:
    return _allowed(view, operation, ResourceType.GROUP, group_id)


def _topic(view: AuthzView, operation: AclOperation, name: str | None) -> bool:
    return _allowed(view, operation, ResourceType.TOPIC, name)


def _txn(view: AuthzView, operation: AclOperation, transactional_id: str | None) -> bool:
    return _allowed(view, operation, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _gate(allowed: bool, api: int, version: int, **error_fields: Any) -> Verdict:
    return Relay() if allowed else answer(api, version, **error_fields)


Entries = list[tuple[Any, Body | None]]  # per client item: its key, and our error entry (None: relayed)


def _slots(entries: Entries) -> list[Slot]:
    return [(error, key) for key, error in entries]


def _by_group_id(entry: Body) -> tuple[str]:
    return (entry["group_id"],)


class _TopicErrors:
    """Kafka's OffsetCommit/TxnOffsetCommit/OffsetDelete/AlterShareGroupOffsets response builders, and the
    READ check on each topic those requests name (``verdict``).

    Per-partition errors are collected per topic (keyed like the builder's map) ahead of the coordinator's
    answer for the asked topics, which follows.  ``grouped``: the builder's merge() then files the coordinator's
    topics by key too, so a topic the request names twice is answered in one entry (measured against Kafka 4.4
    for OffsetCommit, TxnOffsetCommit and OffsetDelete: tests/conformance, ``*.dup_topics``).
    """

    def __init__(self, api: int, version: int, topics: str, key: str, *, grouped: bool = False,
                 **partition_fields: Any) -> None:
        self._api, self._version, self._topics, self._key = api, version, topics, key
        self._grouped = grouped
        self._partition_fields = partition_fields
        self.by_key: dict[Any, Body] = {}

    def add(self, topic: Body, partitions: Iterable[int], error: int) -> None:
        entry = self.by_key.get(topic[self._key])
        if entry is None:
            entry = self.by_key[topic[self._key]] = item(self._api, self._version, (self._topics,),
                                                         **{self._key: topic[self._key]}, partitions=[])
        entry["partitions"].extend(
            item(self._api, self._version, (self._topics, "partitions"), partition_index=index, error_code=error,
                 **self._partition_fields) for index in partitions)

    def entries(self) -> list[Body]:
        return list(self.by_key.values())

    def verdict(self, request: Body, view: AuthzView, name_of: Callable[[Body], str | None] | None = None) -> Verdict:
        """READ on each topic of ``request``: relay them all, or the readable ones with our entries merged in.

        ``name_of`` resolves a topic named by id (None: no topic has that id, UNKNOWN_TOPIC_ID). A response with
        a group-level error code (OffsetDelete, AlterShareGroupOffsets) is the coordinator's to give even when no
        topic is left, and such an error is answered alone (OffsetDeleteResponse.Builder.merge); without one
        (OffsetCommit, TxnOffsetCommit) Kafka answers a request with no readable topic itself.
        """
        permitted = []
        for topic in request["topics"]:
            name = topic[self._key] if name_of is None else name_of(topic)
            if name is None:
                self.add(topic, _indexes(topic), KafkaError.UNKNOWN_TOPIC_ID)
            elif _topic(view, Op.READ, name):
                permitted.append(topic)
            else:
                self.add(topic, _indexes(topic), KafkaError.TOPIC_AUTHORIZATION_FAILED)
        if not self.by_key:
            return Relay()
        group_level = "error_code" in default_response(self._api, self._version)
        if not permitted and not group_level:
            return answer(self._api, self._version, **{self._topics: self.entries()})

        def merge(response: Body) -> Body:
            with_errors = not group_level or response["error_code"] == 0
            response[self._topics] = self.merged(response[self._topics], permitted, with_errors=with_errors)
            return response

        return Rewrite({**request, "topics": permitted}, merge)


    def merged(self, answered: list[Body], asked: list[Body], *, with_errors: bool = True) -> list[Body]:
        """Our entries (``with_errors``), then the coordinator's for the ``asked`` topics (merge_items' rule)."""
        slots: list[Slot] = [(entry, key) for key, entry in self.by_key.items()] if with_errors else []
        slots += [(None, key) for key in dict.fromkeys(topic[self._key] for topic in asked)]
        merged = merge_items(slots, answered, lambda topic: (topic[self._key],))
        return self._by_topic(merged) if self._grouped and with_errors and self.by_key else merged

    def _by_topic(self, topics: list[Body]) -> list[Body]:
        """As the response builders' merge(), once they hold error entries: the coordinator's topics are added by
        key, a repeated topic's partitions to its first entry (so a topic named twice is answered in one)."""
        first: dict[Any, Body] = {}
        for topic in topics:
            if topic[self._key] in first:
                first[topic[self._key]]["partitions"].extend(topic["partitions"])
            else:
                first[topic[self._key]] = {**topic, "partitions": list(topic["partitions"])}
        return list(first.values())


def _indexes(topic: Body) -> list[int]:
    return [p["partition_index"] for p in topic["partitions"]]


# --- FindCoordinator --------------------------------------------------------------------------------------------

def _batched_coordinators(version: int) -> bool:
    """Whether FindCoordinator looks up a list of keys (else one key, answered at the top level)."""
    return request_has(ApiKey.FIND_COORDINATOR, version, "coordinator_keys")


def _coordinator_failure(request: Body, version: int, error: int) -> Answer:
    """FindCoordinatorRequest.getErrorResponse: ``error`` with its message, for the one key or every key (v4+)."""
    key = ApiKey.FIND_COORDINATOR
    if not _batched_coordinators(version):
        return answer(key, version, error_code=error, error_message=KafkaError(error).message, **NO_NODE)
    coordinators = [item(key, version, ("coordinators",), key=k, error_code=error,
                          error_message=KafkaError(error).message, **NO_NODE) for k in request["coordinator_keys"]]
    return answer(key, version, coordinators=coordinators)


def _coordinator_error(key: str, version: int, error: int) -> Body:
    # handleFindCoordinatorRequestV4AndAbove fills key, code and node per key, but no error message.
    return item(ApiKey.FIND_COORDINATOR, version, ("coordinators",), key=key, error_code=error, **NO_NODE)


def _find_share_coordinator(request: Body, version: int, view: AuthzView) -> Verdict:
    # getCoordinator: SHARE keys (groupId:topicId:partition, asked by brokers) need CLUSTER_ACTION, not a group
    # ACL; before v6 Kafka answers INVALID_REQUEST without looking at ACLs.
    if not _batched_coordinators(version):
        return _coordinator_failure(request, version, KafkaError.INVALID_REQUEST)
    keys = request["coordinator_keys"]
    if version < 6:
        return answer(ApiKey.FIND_COORDINATOR, version,
                       coordinators=[_coordinator_error(k, version, KafkaError.INVALID_REQUEST) for k in keys])
    if not keys or cluster_allowed(view, Op.CLUSTER_ACTION):
        return Relay()
    # authorizeClusterOperation throws: handleError answers every key with the error and its message.
    return _coordinator_failure(request, version, KafkaError.CLUSTER_AUTHORIZATION_FAILED)


def authorize_find_coordinator(request: Body, version: int, view: AuthzView) -> Verdict:
    key_type = request.get("key_type", GROUP_KEY)  # v0 has no key type: always a group
    if key_type == SHARE_KEY:
        return _find_share_coordinator(request, version, view)
    if key_type == GROUP_KEY:
        resource, error = ResourceType.GROUP, KafkaError.GROUP_AUTHORIZATION_FAILED
    elif key_type == TRANSACTION_KEY:
        resource, error = ResourceType.TRANSACTIONAL_ID, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        # CoordinatorType.forId throws InvalidRequestException: the whole request fails.
        if _batched_coordinators(version) and not request["coordinator_keys"]:
            return Relay()
        return _coordinator_failure(request, version, KafkaError.INVALID_REQUEST)
    if not _batched_coordinators(version):
        ok = _allowed(view, Op.DESCRIBE, resource, request["key"])
        return Relay() if ok else _coordinator_failure(request, version, error)
    entries: Entries = [(k, None if _allowed(view, Op.DESCRIBE, resource, k) else _coordinator_error(k, version, error))
                        for k in request["coordinator_keys"]]
    permitted = [k for k, e in entries if e is None]
    if len(permitted) == len(entries):
        return Relay()
    if not permitted:
        return answer(ApiKey.FIND_COORDINATOR, version, coordinators=[e for _, e in entries])

    def merge(response: Body) -> Body:
        response["coordinators"] = merge_items(_slots(entries), response["coordinators"], lambda c: (c["key"],))
        return response

    return Rewrite({**request, "coordinator_keys": permitted}, merge)


# --- classic group membership -----------------------------------------------------------------------------------

def authorize_join_group(request: Body, version: int, view: AuthzView) -> Verdict:
    # JoinGroupRequest.getErrorResponse: unknown generation, member and leader; protocol name null where it may be.
    no_protocol = None if response_nullable(ApiKey.JOIN_GROUP, version, "protocol_name") else ""
    return _gate(_group(view, Op.READ, request["group_id"]), ApiKey.JOIN_GROUP, version,
                 error_code=KafkaError.GROUP_AUTHORIZATION_FAILED, generation_id=-1, leader="", member_id="",
                 members=[], protocol_name=no_protocol)


def authorize_sync_group(request: Body, version: int, view: AuthzView) -> Verdict:
    mandatory = request_has(ApiKey.SYNC_GROUP, version, "protocol_type")
    if mandatory and (request["protocol_type"] is None or request["protocol_name"] is None):
        # handleSyncGroupRequest checks the protocol fields (mandatory where they exist, v5+) before the ACL.
        return answer(ApiKey.SYNC_GROUP, version, error_code=KafkaError.INCONSISTENT_GROUP_PROTOCOL, assignment=b"")
    return _gate(_group(view, Op.READ, request["group_id"]), ApiKey.SYNC_GROUP, version,
                 error_code=KafkaError.GROUP_AUTHORIZATION_FAILED, assignment=b"")


def authorize_heartbeat(request: Body, version: int, view: AuthzView) -> Verdict:
    return _gate(_group(view, Op.READ, request["group_id"]), ApiKey.HEARTBEAT, version,
                 error_code=KafkaError.GROUP_AUTHORIZATION_FAILED)


def authorize_leave_group(request: Body, version: int, view: AuthzView) -> Verdict:
    # LeaveGroupRequest.getErrorResponse: the top-level error only, no member entries.
    return _gate(_group(view, Op.READ, request["group_id"]), ApiKey.LEAVE_GROUP, version,
                 error_code=KafkaError.GROUP_AUTHORIZATION_FAILED, members=[])


# --- offsets ----------------------------------------------------------------------------------------------------

def authorize_offset_commit(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.OFFSET_COMMIT
    by_id = request_has(key, version, "topics", "topic_id")
    errors = _TopicErrors(key, version, "topics", "topic_id" if by_id else "name", grouped=True)
    if not _group(view, Op.READ, request["group_id"]):
        # OffsetCommitRequest.getErrorResponse: every requested partition carries the group error.
        topics = [item(key, version, ("topics",), name=t.get("name"), topic_id=t.get("topic_id"),
                        partitions=[item(key, version, ("topics", "partitions"), partition_index=i,
                                          error_code=KafkaError.GROUP_AUTHORIZATION_FAILED) for i in _indexes(t)])
                  for t in request["topics"]]
        return answer(key, version, topics=topics)
    # v10 (Kafka 4.1) names topics by id: an id no topic has is UNKNOWN_TOPIC_ID.
    return errors.verdict(request, view, (lambda t: view.topic_name(t["topic_id"])) if by_id else None)


def _fetch_error_topic(version: int, topic: Body, error: int) -> Body:
    """An OffsetFetch topic whose partitions Kafka answers with ``error`` and no offset (nested in its group, v8+)."""
    key = ApiKey.OFFSET_FETCH
    path = ("groups", "topics") if response_has(key, version, "groups") else ("topics",)
    partitions = [item(key, version, (*path, "partitions"), partition_index=i, committed_offset=-1, error_code=error)
                  for i in topic["partition_indexes"]]
    return item(key, version, path, name=topic.get("name"), topic_id=topic.get("topic_id"), partitions=partitions)


def _offset_fetch_single(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.OFFSET_FETCH
    topics = request["topics"]
    if not _group(view, Op.DESCRIBE, request["group_id"]):
        if not response_has(key, version, "error_code"):
            # v0-1 have no top-level error: Kafka 4.x puts the group's error on every partition asked for
            # (measured against the broker: tests/conformance).
            return answer(key, version, topics=[_fetch_error_topic(version, t, KafkaError.GROUP_AUTHORIZATION_FAILED)
                                                 for t in topics or []])
        return answer(key, version, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED)
    if topics is None:  # all offsets of the group: topics the caller may not describe are left out
        def visible(response: Body) -> Body:
            response["topics"] = [t for t in response["topics"] if _topic(view, Op.DESCRIBE, t["name"])]
            return response
        return Relay(visible)
    permitted = [t for t in topics if _topic(view, Op.DESCRIBE, t["name"])]
    if len(permitted) == len(topics):
        return Relay()
    denied = [_fetch_error_topic(version, t, KafkaError.TOPIC_AUTHORIZATION_FAILED)
              for t in topics if t not in permitted]

    def merge(response: Body) -> Body:
        # fetchOffsetsForGroup appends the unauthorized topics after the coordinator's, unless the group failed.
        slots: list[Slot] = [(None, t["name"]) for t in permitted]
        if response.get("error_code", 0) == 0:
            slots += [(topic, topic["name"]) for topic in denied]
        response["topics"] = merge_items(slots, response["topics"])
        return response

    return Rewrite({**request, "topics": permitted}, merge)


class _BatchedGroups:
    """Batched per-group fetches (OffsetFetch v8+, DescribeShareGroupOffsets): the group ACL, then topic DESCRIBE.

    A denied group becomes our error entry; a topic list loses the topics the caller may not describe (they are
    appended to the group's answer when the group has no error); a null list gets the upstream answer filtered.
    """

    def __init__(self, view: AuthzView, topic_name: Callable[[Body], str | None],
                 response_name: Callable[[Body], str | None], group_error: Callable[[str], Body],
                 denied_topic: Callable[[Body, int], Body]) -> None:
        self.view, self.topic_name, self.response_name = view, topic_name, response_name
        self.group_error, self.denied_topic = group_error, denied_topic
        self.entries: Entries = []
        self.relayed: list[Body] = []
        self.appended: dict[int, list[Body]] = {}  # id(relayed group) → topics we answer for it
        self.filtered = False

    def add(self, group: Body) -> None:
        if not _group(self.view, Op.DESCRIBE, group["group_id"]):
            self.entries.append((group["group_id"], self.group_error(group["group_id"])))
            return
        self.entries.append((group["group_id"], None))
        if group["topics"] is None:
            self.filtered = True
            self.relayed.append(group)
            return
        permitted, denied = [], []
        for topic in group["topics"]:
            name = self.topic_name(topic)
            if name is None:
                denied.append(self.denied_topic(topic, KafkaError.UNKNOWN_TOPIC_ID))
            elif _topic(self.view, Op.DESCRIBE, name):
                permitted.append(topic)
            else:
                denied.append(self.denied_topic(topic, KafkaError.TOPIC_AUTHORIZATION_FAILED))
        self.relayed.append({**group, "topics": permitted} if denied else group)
        if denied:
            self.appended[len(self.relayed) - 1] = denied

    def verdict(self, request: Body, api: int, version: int) -> Verdict:
        if not self.relayed:
            return answer(api, version, groups=[e for _, e in self.entries])
        if len(self.relayed) == len(self.entries) and not self.appended and not self.filtered:
            return Relay()
        requested = list(self.relayed)

        def merge(response: Body) -> Body:
            for position, group in enumerate(_by_position(requested, response["groups"])):
                if group is not None and group["error_code"] == 0:
                    self._complete(requested[position], group, position)
            response["groups"] = merge_items(_slots(self.entries), response["groups"], _by_group_id)
            return response

        if len(self.relayed) == len(self.entries) and not self.appended:
            return Relay(merge)
        return Rewrite({**request, "groups": self.relayed}, merge)

    def _complete(self, asked: Body, group: Body, position: int) -> None:
        if asked["topics"] is None:
            group["topics"] = [t for t in group["topics"] if _topic(self.view, Op.DESCRIBE, self.response_name(t))]
        else:  # within a group too: the coordinator's answers for the asked topics, then ours
            slots: list[Slot] = [(None, self.topic_name(t)) for t in asked["topics"]]
            slots += [(topic, None) for topic in self.appended.get(position, [])]
            group["topics"] = merge_items(slots, group["topics"], lambda t: (self.response_name(t),))


def _by_position(asked: list[Body], answered: list[Body]) -> list[Body | None]:
    """The upstream's group answer for each relayed group (by group id, repeated ids in turn)."""
    pending: dict[str, deque[Body]] = {}
    for group in answered:
        pending.setdefault(group["group_id"], deque()).append(group)
    return [pending[g["group_id"]].popleft() if pending.get(g["group_id"]) else None for g in asked]


def authorize_offset_fetch(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.OFFSET_FETCH
    if not request_has(key, version, "groups"):  # one group (v0-7), not a batch
        return _offset_fetch_single(request, version, view)
    by_id = request_has(key, version, "groups", "topics", "topic_id")

    def name(topic: Body) -> str | None:  # v10 names topics by id (Kafka 4.1)
        return view.topic_name(topic["topic_id"]) if by_id else topic["name"]

    groups = _BatchedGroups(
        view, name, name,
        lambda gid: item(key, version, ("groups",), group_id=gid, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED),
        lambda topic, error: _fetch_error_topic(version, topic, error))
    for group in request["groups"]:
        groups.add(group)
    return groups.verdict(request, key, version)


def authorize_offset_delete(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.OFFSET_DELETE
    if not _group(view, Op.DELETE, request["group_id"]):
        return answer(key, version, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED)
    errors = _TopicErrors(key, version, "topics", "name", grouped=True)
    # OffsetDeleteResponse.Builder.merge: a group-level error from the coordinator replaces everything; Kafka
    # asks the coordinator even when no topic is left (it still reports the group's errors).
    return errors.verdict(request, view)


# --- describing and listing groups ------------------------------------------------------------------------------

def _operations(view: AuthzView, wanted: bool, group: Body) -> int:
    if wanted and group["error_code"] == 0:
        return view.authorized_operations(ResourceType.GROUP, group["group_id"], GROUP_OPERATIONS)
    return NOT_REQUESTED


def _split_groups(view: AuthzView, group_ids: list[str], error: Callable[[str], Body]) -> tuple[list[str], list[Body]]:
    permitted, denied = [], []
    for group_id in group_ids:
        if _group(view, Op.DESCRIBE, group_id):
            permitted.append(group_id)
        else:
            denied.append(error(group_id))
    return permitted, denied


def _describe(request: Body, ids_field: str, permitted: list[str], denied: list[Body], api: int, version: int,
              finish: Callable[[Body], Body]) -> Verdict:
    """Denied groups first, then the coordinator's answers (KafkaApis' describe handlers), each ``finish``ed."""
    if not permitted:
        return answer(api, version, groups=denied)

    refused = {id(entry) for entry in denied}
    slots = [*((entry, entry["group_id"]) for entry in denied), *((None, group_id) for group_id in permitted)]

    def merge(response: Body) -> Body:
        groups = merge_items(slots, response["groups"], _by_group_id)
        response["groups"] = [g if id(g) in refused else finish(g) for g in groups]
        return response

    return Relay(merge) if not denied else Rewrite({**request, ids_field: permitted}, merge)


def authorize_describe_groups(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.DESCRIBE_GROUPS
    # DescribeGroupsResponse.groupError (v6, KIP-1043, carries the error's message).
    permitted, denied = _split_groups(view, request["groups"], lambda gid: item(
        key, version, ("groups",), group_id=gid, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED,
        error_message=KafkaError.GROUP_AUTHORIZATION_FAILED.message))
    with_operations = response_has(key, version, "groups", "authorized_operations")
    if not with_operations and not denied:
        return Relay()
    wanted = with_operations and request["include_authorized_operations"]

    def finish(group: Body) -> Body:
        if with_operations:
            group["authorized_operations"] = _operations(view, wanted, group)
        return group

    return _describe(request, "groups", permitted, denied, key, version, finish)


def authorize_list_groups(request: Body, version: int, view: AuthzView) -> Verdict:
    # Both checks filter a listing: Kafka does not log their denials.
    if cluster_allowed(view, Op.DESCRIBE, log_if_denied=False):
        return Relay()

    def visible(response: Body) -> Body:
        # Without DESCRIBE on the cluster, only the groups the caller may describe (no error).
        response["groups"] = [g for g in response["groups"]
                              if view.allowed(Action(Op.DESCRIBE, ResourceType.GROUP, g["group_id"],
                                                     log_if_denied=False))]
        return response

    return Relay(visible)


def _assigned_topic_names(group: Body, *assignments: str) -> list[str]:
    return [tp["topic_name"] for member in group["members"] for a in assignments
            for tp in (member[a] or {}).get("topic_partitions", [])]


def _topology_topics(topology: Body | None) -> list[str]:
    """Every topic a Streams topology names: sources, repartition sinks and sources, changelogs."""
    names: list[str] = []
    for sub in (topology or {}).get("subtopologies") or []:
        names += sub["source_topics"] + sub["repartition_sink_topics"]
        names += [t["name"] for t in sub["repartition_source_topics"] + sub["state_changelog_topics"]]
    return distinct(names)


def _describe_new_groups(request: Body, version: int, view: AuthzView, api: int,
                         topics_of: Callable[[Body], list[str]], topics_denied: Body) -> Verdict:
    """ConsumerGroupDescribe / ShareGroupDescribe / StreamsGroupDescribe.

    A group naming a topic the caller may not describe is replaced by a fresh TOPIC_AUTHORIZATION_FAILED entry
    (Kafka 4.1's handlers), which has no members and no authorized operations.
    """
    wanted = bool(request["include_authorized_operations"])
    permitted, denied = _split_groups(view, request["group_ids"], lambda gid: item(
        api, version, ("groups",), group_id=gid, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED, topology=None))

    def finish(group: Body) -> Body:
        if group["error_code"] == 0 and not all(_topic(view, Op.DESCRIBE, t) for t in distinct(topics_of(group))):
            return item(api, version, ("groups",), group_id=group["group_id"], **topics_denied)
        group["authorized_operations"] = _operations(view, wanted, group)
        return group

    return _describe(request, "group_ids", permitted, denied, api, version, finish)


def authorize_consumer_group_describe(request: Body, version: int, view: AuthzView) -> Verdict:
    return _describe_new_groups(request, version, view, ApiKey.CONSUMER_GROUP_DESCRIBE,
                                lambda g: _assigned_topic_names(g, "assignment", "target_assignment"),
                                {"error_code": KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                 "error_message": CONSUMER_GROUP_TOPICS_DENIED})


def authorize_share_group_describe(request: Body, version: int, view: AuthzView) -> Verdict:
    return _describe_new_groups(request, version, view, ApiKey.SHARE_GROUP_DESCRIBE,
                                lambda g: _assigned_topic_names(g, "assignment"),
                                {"error_code": KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                 "error_message": CONSUMER_GROUP_TOPICS_DENIED})


def authorize_streams_group_describe(request: Body, version: int, view: AuthzView) -> Verdict:
    return _describe_new_groups(request, version, view, ApiKey.STREAMS_GROUP_DESCRIBE,
                                lambda g: _topology_topics(g["topology"]),
                                {"error_code": KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                 "error_message": STREAMS_GROUP_TOPICS_DENIED, "topology": None})


# --- KIP-848 / KIP-932 / KIP-1071 heartbeats --------------------------------------------------------------------

def _all_describable(view: AuthzView, names: Iterable[str]) -> bool:
    return all(_topic(view, Op.DESCRIBE, n) for n in distinct(names))


def _hidden_assignment(view: AuthzView) -> Callable[[Body], Body]:
    """Leave out of a consumer's assignment the topics it may not describe.

    Kafka's coordinator resolves a subscription regex only to topics the member may describe (Kafka 4.1); the
    upstream resolves it with the gateway's rights, so its assignment is trimmed here instead. Ids ksgate cannot
    name yet are kept: the client resolves them through Metadata, which is authorized.
    """
    def hide(response: Body) -> Body:
        assignment = response["assignment"]
        if assignment is not None:
            assignment["topic_partitions"] = [
                tp for tp in assignment["topic_partitions"]
                if (name := view.topic_name(tp["topic_id"])) is None or _topic(view, Op.DESCRIBE, name)]
        return response
    return hide


def authorize_consumer_group_heartbeat(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    if not _group(view, Op.READ, request["group_id"]):
        return answer(key, version, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED, assignment=None)
    # Subscribed names must all be describable, else the whole heartbeat fails (Kafka 4.1, KAFKA-18813).
    if not _all_describable(view, request["subscribed_topic_names"] or []):
        return answer(key, version, error_code=KafkaError.TOPIC_AUTHORIZATION_FAILED, assignment=None)
    return Relay(_hidden_assignment(view))


def authorize_share_group_heartbeat(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.SHARE_GROUP_HEARTBEAT
    if not _group(view, Op.READ, request["group_id"]):
        return answer(key, version, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED, assignment=None)
    if not _all_describable(view, request["subscribed_topic_names"] or []):
        return answer(key, version, error_code=KafkaError.TOPIC_AUTHORIZATION_FAILED, assignment=None)
    return Relay()


def authorize_streams_group_heartbeat(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.STREAMS_GROUP_HEARTBEAT
    # The task lists default to null ("no change"); the status list to empty, as in Kafka's getErrorResponse.
    unchanged = {"active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
                 "partitions_by_user_endpoint": None}
    if not _group(view, Op.READ, request["group_id"]):
        return answer(key, version, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED, **unchanged)
    if not _all_describable(view, _topology_topics(request["topology"])):
        return answer(key, version, error_code=KafkaError.TOPIC_AUTHORIZATION_FAILED, **unchanged)
    return Relay()


def authorize_streams_group_topology_description_update(request: Body, version: int, view: AuthzView) -> Verdict:
    """KafkaApis checks READ on the group alone: the topics the description names are not authorized here (the
    heartbeat's topology was, and StreamsGroupDescribe checks them when the description is read back). The
    topic guard still refuses a description naming the reserved topic or an illegal name. The refusal carries no
    message: ApiError.fromThrowable leaves out a message that is the error's default (measured on Kafka 4.4)."""
    return _gate(_group(view, Op.READ, request["group_id"]), ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE,
                 version, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED, error_message=None)


# --- share group offsets (KIP-932, Kafka 4.1) -------------------------------------------------------------------

def authorize_describe_share_group_offsets(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS

    def denied_topic(topic: Body, error: int) -> Body:
        # Only the authorization failure carries Kafka's message; an unknown topic id goes without one.
        denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
        message = denied.message if error == denied else None
        partitions = [item(key, version, ("groups", "topics", "partitions"), partition_index=i, start_offset=-1,
                            error_code=error, error_message=message) for i in topic["partitions"]]
        return item(key, version, ("groups", "topics"), topic_name=topic["topic_name"], topic_id=ZERO_UUID,
                     partitions=partitions)

    groups = _BatchedGroups(
        view, lambda t: t["topic_name"], lambda t: t["topic_name"],
        lambda gid: item(key, version, ("groups",), group_id=gid, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED,
                          error_message=KafkaError.GROUP_AUTHORIZATION_FAILED.message),
        denied_topic)
    for group in request["groups"]:
        groups.add(group)
    return groups.verdict(request, key, version)


def authorize_alter_share_group_offsets(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.ALTER_SHARE_GROUP_OFFSETS
    if not _group(view, Op.READ, request["group_id"]):
        return answer(key, version, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED,
                       error_message=KafkaError.GROUP_AUTHORIZATION_FAILED.message)
    errors = _TopicErrors(key, version, "responses", "topic_name",
                          error_message=KafkaError.TOPIC_AUTHORIZATION_FAILED.message)
    return errors.verdict(request, view)  # a group-level error is answered alone


def authorize_delete_share_group_offsets(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.DELETE_SHARE_GROUP_OFFSETS
    if not _group(view, Op.DELETE, request["group_id"]):
        return answer(key, version, error_code=KafkaError.GROUP_AUTHORIZATION_FAILED,
                       error_message=KafkaError.GROUP_AUTHORIZATION_FAILED.message)
    permitted = [t for t in request["topics"] if _topic(view, Op.READ, t["topic_name"])]
    if len(permitted) == len(request["topics"]):
        return Relay()
    denied = [item(key, version, ("responses",), topic_name=t["topic_name"],
                    error_code=KafkaError.TOPIC_AUTHORIZATION_FAILED,
                    error_message=KafkaError.TOPIC_AUTHORIZATION_FAILED.message)
              for t in request["topics"] if t not in permitted]
    if not permitted:
        return answer(key, version, responses=denied)

    def merge(response: Body) -> Body:
        slots: list[Slot] = [(entry, entry["topic_name"]) for entry in denied] if response["error_code"] == 0 else []
        slots += [(None, topic["topic_name"]) for topic in permitted]
        response["responses"] = merge_items(slots, response["responses"], lambda r: (r["topic_name"],))
        return response

    return Rewrite({**request, "topics": permitted}, merge)


# --- transactions -----------------------------------------------------------------------------------------------

def authorize_init_producer_id(request: Body, version: int, view: AuthzView) -> Verdict:
    txn_id = request["transactional_id"]
    if txn_id is not None:
        # KIP-939: a two-phase-commit producer also needs TWO_PHASE_COMMIT on its transactional id.
        ok = _txn(view, Op.WRITE, txn_id) and (not request.get("enable2_pc") or _txn(view, Op.TWO_PHASE_COMMIT, txn_id))
        error = KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        # An idempotent producer: IDEMPOTENT_WRITE on the cluster (a denial not logged), or WRITE on some topic.
        ok = (cluster_allowed(view, Op.IDEMPOTENT_WRITE, log_if_denied=False)
              or view.allowed_any(Op.WRITE, ResourceType.TOPIC))
        error = KafkaError.CLUSTER_AUTHORIZATION_FAILED
    return _gate(ok, ApiKey.INIT_PRODUCER_ID, version, error_code=error, producer_id=-1, producer_epoch=-1)


def _txn_topic_results(version: int, topics: list[Body], error_of: Callable[[str], int]) -> list[Body]:
    key = ApiKey.ADD_PARTITIONS_TO_TXN
    path = ("results_by_topic_v3_and_below",)
    return [item(key, version, path, name=t["name"], results_by_partition=[
        item(key, version, (*path, "results_by_partition"), partition_index=p,
              partition_error_code=error_of(t["name"])) for p in t["partitions"]]) for t in topics]


def authorize_add_partitions_to_txn(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.ADD_PARTITIONS_TO_TXN
    if version >= 4:
        # v4+ batches come only from brokers: KafkaApis requires CLUSTER_ACTION for the whole request.
        return _gate(cluster_allowed(view, Op.CLUSTER_ACTION), key, version,
                     error_code=KafkaError.CLUSTER_AUTHORIZATION_FAILED)
    topics = request["v3_and_below_topics"]
    if not _txn(view, Op.WRITE, request["v3_and_below_transactional_id"]):
        return answer(key, version, results_by_topic_v3_and_below=_txn_topic_results(
            version, topics, lambda _: KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    # Internal topics are never authorized here (filterNot(Topic.isInternal)).
    denied = {t["name"] for t in topics if t["name"] in INTERNAL_TOPICS or not _topic(view, Op.WRITE, t["name"])}
    if not denied:
        return Relay()
    # Any failed partition fails the whole transaction: the others are OPERATION_NOT_ATTEMPTED.
    return answer(key, version, results_by_topic_v3_and_below=_txn_topic_results(
        version, topics, lambda name: KafkaError.TOPIC_AUTHORIZATION_FAILED if name in denied
        else KafkaError.OPERATION_NOT_ATTEMPTED))


def authorize_add_offsets_to_txn(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.ADD_OFFSETS_TO_TXN
    if not _txn(view, Op.WRITE, request["transactional_id"]):
        return answer(key, version, error_code=KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return _gate(_group(view, Op.READ, request["group_id"]), key, version,
                 error_code=KafkaError.GROUP_AUTHORIZATION_FAILED)


def authorize_end_txn(request: Body, version: int, view: AuthzView) -> Verdict:
    return _gate(_txn(view, Op.WRITE, request["transactional_id"]), ApiKey.END_TXN, version,
                 error_code=KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)


def authorize_txn_offset_commit(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.TXN_OFFSET_COMMIT
    topics = request["topics"]
    first_error = (KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                   if not _txn(view, Op.WRITE, request["transactional_id"])
                   else KafkaError.GROUP_AUTHORIZATION_FAILED if not _group(view, Op.READ, request["group_id"])
                   else None)
    if first_error is not None:
        # TxnOffsetCommitRequest.getErrorResponse: the error on every requested partition.
        return answer(key, version, topics=[item(
            key, version, ("topics",), name=t.get("name"), topic_id=t.get("topic_id"), partitions=[
                item(key, version, ("topics", "partitions"), partition_index=i, error_code=first_error)
                for i in _indexes(t)]) for t in topics])
    # v6 (Kafka 4.4, KIP-1319) names topics by id, as OffsetCommit v10: an id no topic has is UNKNOWN_TOPIC_ID.
    by_id = request_has(key, version, "topics", "topic_id")
    errors = _TopicErrors(key, version, "topics", "topic_id" if by_id else "name", grouped=True)
    return errors.verdict(request, view, (lambda t: view.topic_name(t["topic_id"])) if by_id else None)


def authorize_describe_transactions(request: Body, version: int, view: AuthzView) -> Verdict:
    key = ApiKey.DESCRIBE_TRANSACTIONS
    entries: Entries = [(tid, None if _txn(view, Op.DESCRIBE, tid) else item(
        key, version, ("transaction_states",), transactional_id=tid,
        error_code=KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        for tid in request["transactional_ids"]]
    permitted = [tid for tid, e in entries if e is None]
    if not permitted:
        return answer(key, version, transaction_states=[e for _, e in entries])

    def merge(response: Body) -> Body:
        response["transaction_states"] = merge_items(_slots(entries), response["transaction_states"],
                                                     lambda s: (s["transactional_id"],))
        for state in response["transaction_states"]:
            # Only the partitions of topics the caller may describe.
            state["topics"] = [t for t in state["topics"] if _topic(view, Op.DESCRIBE, t["topic"])]
        return response

    if len(permitted) == len(entries):
        return Relay(merge)
    return Rewrite({**request, "transactional_ids": permitted}, merge)


def authorize_list_transactions(request: Body, version: int, view: AuthzView) -> Verdict:
    def visible(response: Body) -> Body:
        response["transaction_states"] = [s for s in response["transaction_states"]
                                          if _txn(view, Op.DESCRIBE, s["transactional_id"])]
        return response

    return Relay(visible)


POLICIES: dict[int, ApiPolicy] = {
    ApiKey.FIND_COORDINATOR: authorize_find_coordinator,
    ApiKey.JOIN_GROUP: authorize_join_group,
    ApiKey.SYNC_GROUP: authorize_sync_group,
    ApiKey.HEARTBEAT: authorize_heartbeat,
    ApiKey.LEAVE_GROUP: authorize_leave_group,
    ApiKey.OFFSET_COMMIT: authorize_offset_commit,
    ApiKey.OFFSET_FETCH: authorize_offset_fetch,
    ApiKey.OFFSET_DELETE: authorize_offset_delete,
    ApiKey.DESCRIBE_GROUPS: authorize_describe_groups,
    ApiKey.LIST_GROUPS: authorize_list_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: authorize_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: authorize_consumer_group_describe,
    ApiKey.SHARE_GROUP_HEARTBEAT: authorize_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: authorize_share_group_describe,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: authorize_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: authorize_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: authorize_delete_share_group_offsets,
    ApiKey.STREAMS_GROUP_HEARTBEAT: authorize_streams_group_heartbeat,
    ApiKey.STREAMS_GROUP_DESCRIBE: authorize_streams_group_describe,
    ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE: authorize_streams_group_topology_description_update,
    ApiKey.INIT_PRODUCER_ID: authorize_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: authorize_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: authorize_add_offsets_to_txn,
    ApiKey.END_TXN: authorize_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: authorize_txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: authorize_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: authorize_list_transactions,
}

TABLE: list[tuple[ApiKey, str, str, str]] = [
    (ApiKey.OFFSET_COMMIT, "Read", "Group", "the group; denied: every partition GROUP_AUTHORIZATION_FAILED"),
    (ApiKey.OFFSET_COMMIT, "Read", "Topic",
     "each topic (v10: by id, an unknown id is UNKNOWN_TOPIC_ID); checked after the group"),
    (ApiKey.OFFSET_FETCH, "Describe", "Group", "each group (v8+ batched); denied: the group's error"),
    (ApiKey.OFFSET_FETCH, "Describe", "Topic",
     "each requested topic (v10: by id); with null topics (all offsets) other topics are left out silently"),
    (ApiKey.FIND_COORDINATOR, "Describe", "Group", "each key when key_type is GROUP (and v0)"),
    (ApiKey.FIND_COORDINATOR, "Describe", "TransactionalId", "each key when key_type is TRANSACTION"),
    (ApiKey.FIND_COORDINATOR, "ClusterAction", "Cluster", "key_type SHARE (v6+, brokers' share-state lookups)"),
    (ApiKey.JOIN_GROUP, "Read", "Group", "the group"),
    (ApiKey.HEARTBEAT, "Read", "Group", "the group"),
    (ApiKey.LEAVE_GROUP, "Read", "Group", "the group"),
    (ApiKey.SYNC_GROUP, "Read", "Group", "the group (after the v5+ protocol type/name check)"),
    (ApiKey.DESCRIBE_GROUPS, "Describe", "Group", "each group; authorized_operations when requested (v3+)"),
    (ApiKey.LIST_GROUPS, "Describe", "Cluster", "lists every group; never CLUSTER_AUTHORIZATION_FAILED"),
    (ApiKey.LIST_GROUPS, "Describe", "Group", "without Describe on the cluster: only these groups are listed"),
    (ApiKey.INIT_PRODUCER_ID, "Write", "TransactionalId", "when a transactional id is given"),
    (ApiKey.INIT_PRODUCER_ID, "TwoPhaseCommit", "TransactionalId", "also, when enable2_pc is set (v6, KIP-939)"),
    (ApiKey.INIT_PRODUCER_ID, "IdempotentWrite", "Cluster",
     "without transactional id; Write on any topic suffices instead, else CLUSTER_AUTHORIZATION_FAILED"),
    (ApiKey.ADD_PARTITIONS_TO_TXN, "Write", "TransactionalId", "v0-3 (clients)"),
    (ApiKey.ADD_PARTITIONS_TO_TXN, "Write", "Topic",
     "v0-3, each topic (internal topics never); any denial fails the whole transaction"),
    (ApiKey.ADD_PARTITIONS_TO_TXN, "ClusterAction", "Cluster", "v4+ (broker batches, verify_only or not)"),
    (ApiKey.ADD_OFFSETS_TO_TXN, "Write", "TransactionalId", "the transactional id, checked first"),
    (ApiKey.ADD_OFFSETS_TO_TXN, "Read", "Group", "the group"),
    (ApiKey.END_TXN, "Write", "TransactionalId", "the transactional id"),
    (ApiKey.TXN_OFFSET_COMMIT, "Write", "TransactionalId", "the transactional id, checked first"),
    (ApiKey.TXN_OFFSET_COMMIT, "Read", "Group", "the group"),
    (ApiKey.TXN_OFFSET_COMMIT, "Read", "Topic", "each topic (v6: by id, an unknown id is UNKNOWN_TOPIC_ID)"),
    (ApiKey.OFFSET_DELETE, "Delete", "Group", "the group"),
    (ApiKey.OFFSET_DELETE, "Read", "Topic", "each topic"),
    (ApiKey.DESCRIBE_TRANSACTIONS, "Describe", "TransactionalId", "each transactional id"),
    (ApiKey.DESCRIBE_TRANSACTIONS, "Describe", "Topic", "partitions of other topics are left out silently"),
    (ApiKey.LIST_TRANSACTIONS, "Describe", "TransactionalId", "only these transactions are listed"),
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, "Read", "Group", "the group"),
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, "Describe", "Topic",
     "each subscribed topic name (any denial fails the heartbeat); assigned topics without it are hidden"),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, "Describe", "Group", "each group; authorized_operations when requested"),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, "Describe", "Topic",
     "every topic in the members' (target) assignments, else the group fails with TOPIC_AUTHORIZATION_FAILED"),
    (ApiKey.SHARE_GROUP_HEARTBEAT, "Read", "Group", "the group"),
    (ApiKey.SHARE_GROUP_HEARTBEAT, "Describe", "Topic", "each subscribed topic name (any denial fails the heartbeat)"),
    (ApiKey.SHARE_GROUP_DESCRIBE, "Describe", "Group", "each group; authorized_operations when requested"),
    (ApiKey.SHARE_GROUP_DESCRIBE, "Describe", "Topic",
     "every topic in the members' assignments, else the group fails with TOPIC_AUTHORIZATION_FAILED"),
    (ApiKey.STREAMS_GROUP_HEARTBEAT, "Read", "Group", "the group"),
    (ApiKey.STREAMS_GROUP_HEARTBEAT, "Describe", "Topic", "every topic the topology names, when it is sent"),
    (ApiKey.STREAMS_GROUP_DESCRIBE, "Describe", "Group", "each group; authorized_operations when requested"),
    (ApiKey.STREAMS_GROUP_DESCRIBE, "Describe", "Topic",
     "every topic of the group's topology, else the group fails with TOPIC_AUTHORIZATION_FAILED"),
    (ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, "Read", "Group",
     "the group alone: the topics the description names are not authorized (KIP-1331)"),
    (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "Describe", "Group", "each group"),
    (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "Describe", "Topic",
     "each requested topic; with null topics other topics are left out silently"),
    (ApiKey.ALTER_SHARE_GROUP_OFFSETS, "Read", "Group", "the group"),
    (ApiKey.ALTER_SHARE_GROUP_OFFSETS, "Read", "Topic", "each topic"),
    (ApiKey.DELETE_SHARE_GROUP_OFFSETS, "Delete", "Group", "the group"),
    (ApiKey.DELETE_SHARE_GROUP_OFFSETS, "Read", "Topic", "each topic"),
]
