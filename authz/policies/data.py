"""Topic data and lifecycle: Fetch, Metadata, DescribeTopicPartitions, ShareFetch, ShareAcknowledge, CreateTopics and
DeleteTopics, as Kafka 4.x.  The simple per-topic APIs (ListOffsets, DeleteRecords, ...) are rows in rules.py."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from authz.field_presence import request_has, response_has
from authz.model import ResourceType
from authz.policies._kit import (
    CLUSTER_OPERATIONS,
    INTERNAL_TOPICS,
    NOT_REQUESTED,
    TOPIC_OPERATIONS,
    ZERO_UUID,
    OncePerName,
    Op,
    cluster_allowed,
    distinct,
    item,
)
from authz.policies.merge import Slot, merge_items, once_per_partition
from authz.policies.merge import by_name as _by_name
from authz.request_policy import (
    CLUSTER_NAME,
    Action,
    Answer,
    ApiPolicy,
    AuthzView,
    Body,
    Refuse,
    Relay,
    ResponseHook,
    Rewrite,
    Verdict,
)
from authz.response_defaults import default_item, default_response
from authz.topic_guard import topic_name_problem
from protocol.api_keys import ApiKey
from protocol.kafka_errors import KafkaError

TOPIC = ResourceType.TOPIC
CLUSTER_METADATA_TOPIC = "__cluster_metadata"

TopicsStep = Callable[[list[Body]], list[Body]]


# --- shared helpers -----------------------------------------------------------------------------------

def _partition_errors(api_key: ApiKey, version: int, path: tuple[str, ...], indexes: Iterable[int],
                      **fields: Any) -> list[Body]:
    out = []
    for index in indexes:
        partition = item(api_key, version, path, **fields)
        partition[_index_field(partition)] = index
        out.append(partition)
    return out


def _index_field(partition: Body) -> str:
    return "partition_index" if "partition_index" in partition else "partition"


def _java_order(name: str) -> bytes:
    """Java's String.compareTo order (UTF-16 code units), which Kafka uses to sort and page topics."""
    return name.encode("utf-16-be", "surrogatepass")


# --- Fetch (1) ----------------------------------------------------------------------------------------

def _fetch_by_id(version: int) -> bool:
    """Whether topics are named by id (requests and responses switch together)."""
    return request_has(ApiKey.FETCH, version, "topics", "topic_id")


def _fetch_key(topic: Body, version: int) -> Hashable:
    key: Hashable = topic["topic_id"] if _fetch_by_id(version) else topic["topic"]
    return key


def _fetch_read_error(topic: Body, version: int, view: AuthzView, read: OncePerName) -> int | None:
    """Request topics and response topics have the same key fields, so this serves both."""
    name = view.topic_name(topic["topic_id"]) if _fetch_by_id(version) else topic["topic"]
    if name is None:
        return KafkaError.UNKNOWN_TOPIC_ID
    return None if read(name) else KafkaError.TOPIC_AUTHORIZATION_FAILED


def _fetch_error_entry(topic: Body, version: int, error: int, indexes: Iterable[int]) -> Body:
    entry = default_item(ApiKey.FETCH, version, "responses")
    entry["topic_id" if _fetch_by_id(version) else "topic"] = _fetch_key(topic, version)
    # FetchResponse.partitionResponse: high watermark -1; the down-conversion step then sets empty records.
    entry["partitions"] = _partition_errors(ApiKey.FETCH, version, ("responses", "partitions"), indexes,
                                            error_code=error, high_watermark=-1, records=b"")
    return entry


def is_follower_fetch(request: Body, version: int) -> bool:
    """A Fetch sent by a replica (replica_id >= 0, or a ReplicaState from v15), not by a consumer."""
    tagged = request_has(ApiKey.FETCH, version, "replica_state")
    replica_id: int = request["replica_state"]["replica_id"] if tagged else request["replica_id"]
    return replica_id >= 0


def authorize_fetch(request: Body, version: int, view: AuthzView) -> Verdict:
    if is_follower_fetch(request, version):
        # Brokers never replicate through the gateway; CLUSTER_ACTION would let a client read any topic.
        return Refuse("a follower (replica) Fetch: brokers never replicate through the gateway")
    read = OncePerName(view, Op.READ)

    def error_of(topic: Body) -> int | None:
        return _fetch_read_error(topic, version, view, read)

    topics = request["topics"]
    denied = {i: _fetch_error_entry(t, version, e, (p["partition"] for p in t["partitions"]))
              for i, t in enumerate(topics) if (e := error_of(t)) is not None}
    # Kafka authorizes every partition of the fetch session, not only those this request names: an
    # incremental response may carry session partitions, which are checked again here.
    sessions = request_has(ApiKey.FETCH, version, "session_id")
    incremental = sessions and request["session_epoch"] > 0
    if not denied and not incremental:  # the common case: relayed as it came, no answer to merge into
        return Relay()
    session = incremental or (sessions and request["session_id"] != 0)
    # FetchRequest.fetchData reads the topics into a map keyed by topic-partition: a repeated one is answered once.
    slots = once_per_partition([(denied.get(i), _fetch_key(t, version)) for i, t in enumerate(topics)],
                               "partitions", "partition_index")

    def session_partitions(entry: Body) -> Body:
        # Asked for by an earlier request of the session: sent on, or in its error entry if no longer readable.
        error = error_of(entry)
        return entry if error is None else _fetch_error_entry(
            entry, version, error, (p["partition_index"] for p in entry["partitions"]))

    def finish(response: Body) -> Body:
        if response.get("error_code", 0) != 0:  # a session error carries no partitions (SessionErrorContext)
            return response
        response["responses"] = merge_items(slots, response["responses"], lambda e: (_fetch_key(e, version),),
                                            unclaimed=session_partitions if incremental else None)
        return response

    if not denied:
        return Relay(finish)  # incremental: the session's partitions the answer may carry are checked in finish
    if len(denied) == len(topics) and not session:
        response = default_response(ApiKey.FETCH, version)
        response["responses"] = [entry for entry, _ in slots]
        return Answer(response)
    # Within a fetch session the upstream must still see the request (epoch, forgotten topics), even when
    # no topic of it is authorized.
    return Rewrite({**request, "topics": [t for i, t in enumerate(topics) if i not in denied]}, finish)


# --- Metadata (3) -------------------------------------------------------------------------------------

def _metadata_topic(version: int, error: int, name: str | None, topic_id: uuid.UUID, internal: bool) -> Body:
    return item(ApiKey.METADATA, version, ("topics",), error_code=error, name=name,
                 topic_id=topic_id, is_internal=internal, partitions=[])


def _metadata_operations(request: Body, version: int, view: AuthzView, response: Body, upstream: list[Body]) -> None:
    """Kafka computes the bit fields for this principal; the upstream's (the gateway's own) never pass."""
    if not request_has(ApiKey.METADATA, version, "include_topic_authorized_operations"):
        return
    if request_has(ApiKey.METADATA, version, "include_cluster_authorized_operations"):
        cluster = NOT_REQUESTED
        if request["include_cluster_authorized_operations"]:
            cluster = view.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS) \
                if cluster_allowed(view, Op.DESCRIBE) else 0
        response["cluster_authorized_operations"] = cluster
    include = request["include_topic_authorized_operations"]
    for topic in upstream:
        topic["topic_authorized_operations"] = NOT_REQUESTED if not include or topic["name"] is None \
            else view.authorized_operations(TOPIC, topic["name"], TOPIC_OPERATIONS)


def authorize_metadata(request: Body, version: int, view: AuthzView, *,
                       auto_create_topics_enable: bool = True) -> Verdict:
    """``auto_create_topics_enable`` is the upstream's auto.create.topics.enable (Kafka's default: true)."""
    topics = request["topics"]
    if topics is None or (version == 0 and not topics):
        return _metadata_all_topics(request, version, view)
    if 10 <= version <= 11 and any(t["name"] is None or t["topic_id"] != ZERO_UUID for t in topics):
        return _metadata_error_answer(topics, version, KafkaError.INVALID_REQUEST)
    if version >= 12 and any(t["topic_id"] != ZERO_UUID for t in topics):
        return _metadata_by_id(request, version, view)
    if any(t["name"] is None for t in topics):
        # Kafka authorizes the null name, which fails (NPE) into getErrorResponse(UNKNOWN_SERVER_ERROR).
        return _metadata_error_answer(topics, version, KafkaError.UNKNOWN_SERVER_ERROR)
    return _metadata_by_name(request, version, view, auto_create_topics_enable)


def _metadata_error_answer(topics: list[Body], version: int, error: int) -> Verdict:
    # MetadataRequest.getErrorResponse: every topic, a null name as "".
    response = default_response(ApiKey.METADATA, version)
    response["topics"] = [_metadata_topic(version, error, t["name"] or "", t["topic_id"], False) for t in topics]
    return Answer(response)


def _metadata_all_topics(request: Body, version: int, view: AuthzView) -> Verdict:
    describe = OncePerName(view, Op.DESCRIBE, log_if_denied=False)  # a filter: logIfDenied = !isAllTopics

    def hook(response: Body) -> Body:
        # For all-topics requests Kafka silently leaves out topics the principal may not describe.
        response["topics"] = [t for t in response["topics"] if t["name"] is not None and describe(t["name"])]
        _metadata_operations(request, version, view, response, response["topics"])
        return response

    return Relay(hook)


def _metadata_by_id(request: Body, version: int, view: AuthzView) -> Verdict:
    # With any topic id present Kafka serves the ids only: entries naming a topic without an id are ignored.
    describe = OncePerName(view, Op.DESCRIBE)
    entries = {t["topic_id"]: t for t in reversed(request["topics"]) if t["topic_id"] != ZERO_UUID}
    slots: list[Slot] = []
    kept: list[Body] = []
    for topic_id in distinct(t["topic_id"] for t in request["topics"] if t["topic_id"] != ZERO_UUID):
        name = view.topic_name(topic_id)
        if name is None:
            slots.append((_metadata_topic(version, KafkaError.UNKNOWN_TOPIC_ID, None, topic_id, False), topic_id))
        elif not describe(name):
            # Topic ids are not secret: Kafka answers with the id, but without the name.
            denied = _metadata_topic(version, KafkaError.TOPIC_AUTHORIZATION_FAILED, None, topic_id, False)
            slots.append((denied, topic_id))
        else:
            slots.append((None, topic_id))
            kept.append(entries[topic_id])
    return _metadata_verdict(_MetadataPlan(request, version, view, slots, keys=lambda t: (t["topic_id"],)),
                             {**request, "topics": kept}, relay=len(kept) == len(request["topics"]))


def _metadata_by_name(request: Body, version: int, view: AuthzView, auto_create: bool) -> Verdict:
    describe = OncePerName(view, Op.DESCRIBE)
    names = distinct(t["name"] for t in request["topics"])
    allowed = [n for n in names if describe(n)]
    # A missing topic is auto-created only with CREATE on the cluster or on the topic. The gateway cannot tell
    # whether a topic exists, so it asks for every describable name and keeps the upstream from creating
    # those it may not create. These are probes: Kafka does not log the cluster check and asks (and logs) the
    # topic check for missing topics only, so a denial is audited once the upstream says the topic is missing.
    uncreatable: set[str] = set()
    if allowed and request["allow_auto_topic_creation"] and not cluster_allowed(view, Op.CREATE, log_if_denied=False):
        create = OncePerName(view, Op.CREATE, log_if_denied=False)
        uncreatable = {n for n in allowed if not create(n)}
    slots: list[Slot] = [(None, n) if describe(n) else (
        _metadata_topic(version, KafkaError.TOPIC_AUTHORIZATION_FAILED, n, ZERO_UUID, False), n) for n in names]
    plan = _MetadataPlan(request, version, view, slots, keys=_by_name)
    rewritten = {**request, "topics": [t for t in request["topics"] if describe(t["name"])]}
    if uncreatable and request_has(ApiKey.METADATA, version, "allow_auto_topic_creation"):
        rewritten["allow_auto_topic_creation"] = False
    elif uncreatable:  # v0-3 cannot switch creation off: ask for all topics (never auto-created), pick ours
        rewritten["topics"] = [] if version == 0 else None
        plan.pick = lambda topics: _metadata_pick(topics, allowed, version)
    if uncreatable and auto_create:
        plan.convert = lambda topics: [_metadata_uncreated(t, version, view) if t["name"] in uncreatable else t
                                       for t in topics]
    return _metadata_verdict(plan, rewritten, relay=not uncreatable and len(allowed) == len(names))


def _metadata_uncreated(topic: Body, version: int, view: AuthzView) -> Body:
    # Kafka: a missing topic the principal may not create is TOPIC_AUTHORIZATION_FAILED (with auto-creation on).
    if topic["error_code"] not in (KafkaError.UNKNOWN_TOPIC_OR_PARTITION, KafkaError.INVALID_TOPIC_EXCEPTION):
        return topic
    name = topic["name"]
    # Now the topic is known to be missing: Kafka's (logged) CREATE check on it. Granted meanwhile, the
    # upstream's answer stands (the client retries and creates it).
    if view.allowed(Action(Op.CREATE, TOPIC, name)):
        return topic
    return _metadata_topic(version, KafkaError.TOPIC_AUTHORIZATION_FAILED, name, ZERO_UUID, name in INTERNAL_TOPICS)


def _metadata_pick(upstream: list[Body], names: list[str], version: int) -> list[Body]:
    """From an all-topics response, the entries of ``names``; a missing one as Kafka reports it uncreated."""
    by_name = {t["name"]: t for t in upstream}
    picked = []
    for name in names:
        error = (KafkaError.INVALID_TOPIC_EXCEPTION if topic_name_problem(name)
                 else KafkaError.UNKNOWN_TOPIC_OR_PARTITION)
        picked.append(by_name.get(name) or _metadata_topic(version, error, name, ZERO_UUID, name in INTERNAL_TOPICS))
    return picked


@dataclass(slots=True)
class _MetadataPlan:
    """How the upstream's topics become the client's: pick (v0-3 all-topics detour), bit fields for what the
    upstream described, convert (uncreatable topics), then merge with the gateway's errors in client order."""

    request: Body
    version: int
    view: AuthzView
    slots: list[Slot]
    keys: Callable[[Body], Iterable[Hashable]]
    pick: TopicsStep | None = None
    convert: TopicsStep | None = None

    def __call__(self, response: Body) -> Body:
        topics = response["topics"] if self.pick is None else self.pick(response["topics"])
        _metadata_operations(self.request, self.version, self.view, response, topics)
        if self.convert is not None:
            topics = self.convert(topics)
        response["topics"] = merge_items(self.slots, topics, self.keys)
        return response


def _metadata_verdict(plan: _MetadataPlan, rewritten: Body, *, relay: bool) -> Verdict:
    # The hook always runs (Metadata responses are decoded for address rewriting anyway): it drops any topic
    # the upstream returned that the client did not ask for.
    if relay:
        return Relay(plan)
    if all(error is not None for error, _ in plan.slots):
        # Kafka still returns the brokers, cluster id and controller: ask the upstream for no topics (the
        # hook discards whatever topics come back) and put the gateway's errors in their place.
        no_topics = {**plan.request, "topics": [], "allow_auto_topic_creation": False}
        return Rewrite(no_topics, plan)
    return Rewrite(rewritten, plan)


# --- DescribeTopicPartitions (75) ---------------------------------------------------------------------

def _dtp_topic(version: int, error: int, name: str) -> Body:
    return item(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version, ("topics",), error_code=error,
                 name=name, topic_id=ZERO_UUID, is_internal=False, partitions=[])


def _dtp_answer(version: int, topics: list[Body]) -> Answer:
    response = default_response(ApiKey.DESCRIBE_TOPIC_PARTITIONS, version)
    response.update(topics=topics, next_cursor=None)
    return Answer(response)


def _dtp_operations(topics: list[Body], view: AuthzView) -> None:
    for topic in topics:
        topic["topic_authorized_operations"] = view.authorized_operations(TOPIC, topic["name"], TOPIC_OPERATIONS)


def authorize_describe_topic_partitions(request: Body, version: int, view: AuthzView) -> Verdict:
    topics, cursor = request["topics"], request["cursor"]
    if not topics:
        if cursor is not None and cursor["partition_index"] < 0:
            return _dtp_answer(version, [])
        return _dtp_all_topics(view)
    start = cursor["topic_name"] if cursor is not None else ""
    names = sorted({t["name"] for t in topics if _java_order(t["name"]) >= _java_order(start)}, key=_java_order)
    if cursor is not None and (start not in names or cursor["partition_index"] < 0):
        # InvalidRequestException → DescribeTopicPartitionsRequest.getErrorResponse: every requested topic.
        return _dtp_answer(version, [_dtp_topic(version, KafkaError.INVALID_REQUEST, t["name"]) for t in topics])
    describe = OncePerName(view, Op.DESCRIBE)
    allowed = [n for n in names if describe(n)]
    denied = [n for n in names if not describe(n)]

    def finish(response: Body) -> Body:
        _dtp_operations(response["topics"], view)
        # Kafka authorizes lazily while paging: a denied topic sorting after the page's last topic (the next
        # cursor) is reported on the page that reaches it.
        limit = response["next_cursor"]
        slots: list[Slot] = [(None, n) for n in allowed]
        slots += [(_dtp_topic(version, KafkaError.TOPIC_AUTHORIZATION_FAILED, n), n) for n in denied
                  if limit is None or _java_order(n) < _java_order(limit["topic_name"])]
        response["topics"] = merge_items(slots, response["topics"])
        return response

    if not denied:
        return Relay(finish)
    if not allowed:
        return _dtp_answer(version, [_dtp_topic(version, KafkaError.TOPIC_AUTHORIZATION_FAILED, n) for n in denied])
    permitted = set(allowed)
    rewritten = {**request, "topics": [t for t in topics if t["name"] in permitted]}
    if cursor is not None and start in denied:
        rewritten["cursor"] = None  # its partition index only concerned the denied topic; the rest are > start
    return Rewrite(rewritten, finish)


def _dtp_all_topics(view: AuthzView) -> Verdict:
    describe = OncePerName(view, Op.DESCRIBE)

    def hook(response: Body) -> Body:
        kept = [t for t in response["topics"] if t["name"] is not None and describe(t["name"])]
        _dtp_operations(kept, view)
        response["topics"] = kept
        cursor = response["next_cursor"]
        if cursor is not None and not describe(cursor["topic_name"]):
            # Never name a topic the client may not describe. The smallest string after the last topic shown
            # resumes the listing there; with nothing shown, the listing ends (see the report on paging).
            response["next_cursor"] = {**cursor, "topic_name": kept[-1]["name"] + "\x00", "partition_index": 0} \
                if kept else None
        return response

    return Relay(hook)


# --- ShareFetch (78), ShareAcknowledge (79) -----------------------------------------------------------

def _share_group_refusal(api_key: ApiKey, request: Body, version: int, view: AuthzView) -> Answer | None:
    group = request["group_id"]
    if group is None:
        error = KafkaError.UNKNOWN_SERVER_ERROR  # Kafka authorizes the null group id, which fails (NPE)
    elif view.allowed(Action(Op.READ, ResourceType.GROUP, group)):
        return None
    else:
        error = KafkaError.GROUP_AUTHORIZATION_FAILED
    # ShareFetchRequest/ShareAcknowledgeRequest.getErrorResponse: only the top-level error code.
    response = default_response(api_key, version)
    response["error_code"] = error
    return Answer(response)


def _share_topic_error(topic: Body, view: AuthzView, read: OncePerName) -> int | None:
    name = view.topic_name(topic["topic_id"])
    if name is None:
        return KafkaError.UNKNOWN_TOPIC_ID
    return None if read(name) else KafkaError.TOPIC_AUTHORIZATION_FAILED


def _share_error_entry(api_key: ApiKey, version: int, topic_id: uuid.UUID, indexes: Iterable[int],
                       **fields: Any) -> Body:
    entry = {**default_item(api_key, version, "responses"), "topic_id": topic_id}
    entry["partitions"] = _partition_errors(api_key, version, ("responses", "partitions"), indexes, **fields)
    return entry


def _repeats_a_partition(topics: list[Body]) -> bool:
    seen: set[tuple[uuid.UUID, int]] = set()
    for topic in topics:
        for partition in topic["partitions"]:
            key = (topic["topic_id"], partition["partition_index"])
            if key in seen:
                return True
            seen.add(key)
    return False


def _share_session_refusal(request: Body, version: int) -> Answer | None:
    """Kafka 4.4 fails a ShareFetch opening a share session (epoch 0) that names a topic-partition twice, even a
    denied one, with UNKNOWN_SERVER_ERROR and no session (measured); later epochs read the copies into a map."""
    if request["share_session_epoch"] != 0 or not _repeats_a_partition(request["topics"]):
        return None
    response = default_response(ApiKey.SHARE_FETCH, version)
    response["error_code"] = KafkaError.UNKNOWN_SERVER_ERROR
    return Answer(response)


def _share_verdict(request: Body, errors: dict[int, Body], guard: Callable[[Body], Body] | None = None) -> Verdict:
    """Relay unless something is denied; never answer alone, since the share session epoch must advance."""
    topics = request["topics"]
    # Kafka reads the topics into a map keyed by topic-partition: a denied one repeated is answered once.
    slots = once_per_partition([(errors.get(i), t["topic_id"]) for i, t in enumerate(topics)],
                               "partitions", "partition_index")

    def finish(response: Body) -> Body:
        if response["error_code"] != 0:  # a request-level error carries no partitions
            return response
        response["responses"] = merge_items(slots, response["responses"], lambda e: (e["topic_id"],), unclaimed=guard)
        return response

    if not errors:
        return Relay(None if guard is None else finish)
    return Rewrite({**request, "topics": [t for i, t in enumerate(topics) if i not in errors]}, finish)


def authorize_share_fetch(request: Body, version: int, view: AuthzView) -> Verdict:
    refusal = _share_group_refusal(ApiKey.SHARE_FETCH, request, version, view) \
        or _share_session_refusal(request, version)
    if refusal is not None:
        return refusal
    read = OncePerName(view, Op.READ)
    topics = request["topics"]
    # With acknowledgements anywhere in the request, every denied partition also fails its acknowledgement.
    acks = any(p["acknowledgement_batches"] for t in topics for p in t["partitions"])

    def entry(topic_id: uuid.UUID, indexes: Iterable[int], error: int, ack_error: int) -> Body:
        return _share_error_entry(ApiKey.SHARE_FETCH, version, topic_id, indexes, error_code=error,
                                  acknowledge_error_code=ack_error, records=b"")

    errors = {i: entry(t["topic_id"], (p["partition_index"] for p in t["partitions"]), e, e if acks else 0)
              for i, t in enumerate(topics) if (e := _share_topic_error(t, view, read)) is not None}

    def guard(r: Body) -> Body:
        # Kafka authorizes the share session's partitions too; an incremental response may carry them.
        e = _share_topic_error(r, view, read)
        return r if e is None else entry(r["topic_id"], (p["partition_index"] for p in r["partitions"]), e, 0)

    return _share_verdict(request, errors, guard if request["share_session_epoch"] > 0 else None)


def authorize_share_acknowledge(request: Body, version: int, view: AuthzView) -> Verdict:
    refusal = _share_group_refusal(ApiKey.SHARE_ACKNOWLEDGE, request, version, view)
    if refusal is not None:
        return refusal
    read = OncePerName(view, Op.READ)
    errors = {i: _share_error_entry(ApiKey.SHARE_ACKNOWLEDGE, version, t["topic_id"],
                                    (p["partition_index"] for p in t["partitions"]), error_code=e)
              for i, t in enumerate(request["topics"]) if (e := _share_topic_error(t, view, read)) is not None}
    return _share_verdict(request, errors)


# --- CreateTopics (19), DeleteTopics (20) --------------------------------------

def _named_verdict(api_key: ApiKey, version: int, request: Body, field: str, response_field: str,
                   errors: dict[str, Body], hook: TopicsStep | None = None) -> Verdict:
    """For the controller APIs, which answer once per distinct name."""
    items = request[field]
    slots = [(errors.get(name), name) for name in distinct(t["name"] for t in items)]
    if not errors:
        return Relay(None if hook is None else _field_hook(response_field, hook))
    if all(error is not None for error, _ in slots):
        response = default_response(api_key, version)
        response[response_field] = [error for error, _ in slots]
        return Answer(response)

    def merge(response: Body) -> Body:
        relayed = response[response_field] if hook is None else hook(response[response_field])
        response[response_field] = merge_items(slots, relayed)
        return response

    return Rewrite({**request, field: [t for t in items if t["name"] not in errors]}, merge)


def _field_hook(field: str, hook: TopicsStep) -> ResponseHook:
    def apply(response: Body) -> Body:
        response[field] = hook(response[field])
        return response
    return apply


def _duplicates(names: Iterable[str]) -> set[str]:
    return {name for name, count in Counter(names).items() if count > 1}


def authorize_create_topics(request: Body, version: int, view: AuthzView) -> Verdict:
    # As the KRaft controller's createTopics (ControllerApis): duplicates and __cluster_metadata are refused
    # before authorization; CREATE on the cluster authorizes every topic, else CREATE per topic.
    names = [t["name"] for t in request["topics"]]
    duplicates = _duplicates(names)
    create = OncePerName(view, Op.CREATE)
    cluster = cluster_allowed(view, Op.CREATE, log_if_denied=False)  # a shortcut; the per-topic check is logged

    def error(name: str, code: int, message: str) -> Body:
        return item(ApiKey.CREATE_TOPICS, version, ("topics",), name=name, error_code=code,
                     error_message=message)

    errors: dict[str, Body] = {}
    for name in distinct(names):
        if name in duplicates:
            errors[name] = error(name, KafkaError.INVALID_REQUEST, "Duplicate topic name.")
        elif name == CLUSTER_METADATA_TOPIC:
            errors[name] = error(name, KafkaError.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
        elif not cluster and not create(name):
            errors[name] = error(name, KafkaError.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
    # Kafka asks DESCRIBE_CONFIGS for every name it considered (even those refused); it matters from v5.
    describe_configs = OncePerName(view, Op.DESCRIBE_CONFIGS, log_if_denied=False)
    considered = [n for n in distinct(names) if n not in duplicates and n != CLUSTER_METADATA_TOPIC]
    withheld = response_has(ApiKey.CREATE_TOPICS, version, "topics", "configs")
    hidden = {n for n in considered if not describe_configs(n) and n not in errors and withheld}

    def hide_configs(results: list[Body]) -> list[Body]:
        # Without DESCRIBE_CONFIGS a created topic's settings are withheld (ReplicationControlManager).
        for result in results:
            if result["name"] in hidden and result["error_code"] == 0:
                result.update(configs=[], num_partitions=-1, replication_factor=-1,
                              topic_config_error_code=KafkaError.TOPIC_AUTHORIZATION_FAILED)
        return results

    return _named_verdict(ApiKey.CREATE_TOPICS, version, request, "topics", "topics", errors,
                          hide_configs if hidden else None)


def authorize_delete_topics(request: Body, version: int, view: AuthzView) -> Verdict:
    by_ref = request_has(ApiKey.DELETE_TOPICS, version, "topics")  # names or ids; else a plain name list
    refs: list[tuple[str | None, uuid.UUID]] = [(t["name"], t["topic_id"]) for t in request["topics"]] \
        if by_ref else [(name, ZERO_UUID) for name in request["topic_names"]]
    decide = _DeleteTopicsDecider(version, view, refs)
    slots: list[Slot] = []
    kept: list[int] = []
    for i, (name, topic_id) in enumerate(refs):
        slot = decide(name, topic_id)
        if slot is not None:
            slots.append(slot)
            if slot[0] is None:
                kept.append(i)
    if len(kept) == len(refs):
        return Relay()
    if not kept:
        response = default_response(ApiKey.DELETE_TOPICS, version)
        response["responses"] = [error for error, _ in slots]
        return Answer(response)

    def merge(response: Body) -> Body:
        response["responses"] = merge_items(slots, response["responses"],
                                       lambda r: (("name", r["name"]), ("id", r.get("topic_id", ZERO_UUID))))
        return response

    field = "topics" if by_ref else "topic_names"
    return Rewrite({**request, field: [request[field][i] for i in kept]}, merge)


class _DeleteTopicsDecider:
    """The KRaft controller's deleteTopics checks, entry by entry: (error entry | None, merge key), or None for
    a repeated entry that Kafka answers only once."""

    def __init__(self, version: int, view: AuthzView, refs: list[tuple[str | None, uuid.UUID]]) -> None:
        self.version, self.view = version, view
        self.duplicate_names = _duplicates(n for n, i in refs if n is not None and i == ZERO_UUID)
        self.duplicate_ids = {i for i, c in Counter(i for n, i in refs if n is None and i != ZERO_UUID).items()
                              if c > 1}
        self.answered: set[Hashable] = set()
        # DELETE on the cluster makes every topic describable and deletable.
        self.cluster = cluster_allowed(view, Op.DELETE, log_if_denied=False)
        self.describe, self.delete = OncePerName(view, Op.DESCRIBE), OncePerName(view, Op.DELETE)

    def error(self, name: str | None, topic_id: uuid.UUID, code: int, message: str) -> Body:
        return item(ApiKey.DELETE_TOPICS, self.version, ("responses",), name=name, topic_id=topic_id,
                     error_code=code, error_message=message)

    def __call__(self, name: str | None, topic_id: uuid.UUID) -> Slot | None:
        if name is None and topic_id == ZERO_UUID:
            return self.error(None, ZERO_UUID, KafkaError.INVALID_REQUEST,
                              "Neither topic name nor id were specified."), None
        if name is not None and topic_id != ZERO_UUID:
            return self.error(name, topic_id, KafkaError.INVALID_REQUEST,
                              "You may not specify both topic name and topic id."), None
        key: Hashable = ("id", topic_id) if name is None else ("name", name)
        if key in self.answered:
            return None
        self.answered.add(key)
        if name is None:
            return self.by_id(topic_id)
        return self.by_name(name)

    def by_id(self, topic_id: uuid.UUID) -> Slot:
        if topic_id in self.duplicate_ids:
            return self.error(None, topic_id, KafkaError.INVALID_REQUEST, "Duplicate topic id."), None
        name = self.view.topic_name(topic_id)
        if name is None:
            return self.error(None, topic_id, KafkaError.UNKNOWN_TOPIC_ID, KafkaError.UNKNOWN_TOPIC_ID.message), None
        describable, deletable = self.cluster or self.describe(name), self.cluster or self.delete(name)
        if deletable:
            return None, ("id", topic_id)
        # The name is revealed only to a principal that may describe the topic.
        shown = name if describable else None
        denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
        return self.error(shown, topic_id, denied, denied.message), None

    def by_name(self, name: str) -> Slot:
        if name in self.duplicate_names:
            return self.error(name, ZERO_UUID, KafkaError.INVALID_REQUEST, "Duplicate topic name."), None
        describable, deletable = self.cluster or self.describe(name), self.cluster or self.delete(name)
        # Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a describable topic that does not exist; the gateway
        # cannot know, so a describable but undeletable name is always TOPIC_AUTHORIZATION_FAILED.
        if describable and deletable:
            return None, ("name", name)
        denied = KafkaError.TOPIC_AUTHORIZATION_FAILED
        return self.error(name, ZERO_UUID, denied, denied.message), None


POLICIES: dict[int, ApiPolicy] = {
    ApiKey.FETCH: authorize_fetch,
    ApiKey.METADATA: authorize_metadata,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: authorize_describe_topic_partitions,
    ApiKey.SHARE_FETCH: authorize_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: authorize_share_acknowledge,
    ApiKey.CREATE_TOPICS: authorize_create_topics,
    ApiKey.DELETE_TOPICS: authorize_delete_topics,
}

TABLE = [
    (ApiKey.FETCH, "READ", "TOPIC", "each fetched topic (consumer fetch); topic ids (v13+) are resolved to names; "
                                    "a follower fetch (replica id >= 0) is refused whatever the ACLs"),
    (ApiKey.METADATA, "DESCRIBE", "TOPIC", "each named topic; all-topics requests silently omit topics without it"),
    (ApiKey.METADATA, "CREATE", "CLUSTER", "auto-creation of a missing named topic (allow_auto_topic_creation)"),
    (ApiKey.METADATA, "CREATE", "TOPIC", "auto-creation of a missing named topic, when CREATE on the cluster "
                                         "is not allowed"),
    (ApiKey.METADATA, "DESCRIBE", "CLUSTER", "cluster_authorized_operations (v8-10) when requested; 0 without it"),
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, "DESCRIBE", "TOPIC", "each topic; the all-topics form silently omits "
                                                            "topics without it"),
    (ApiKey.SHARE_FETCH, "READ", "GROUP", "the share group, checked first"),
    (ApiKey.SHARE_FETCH, "READ", "TOPIC", "each topic fetched or acknowledged"),
    (ApiKey.SHARE_ACKNOWLEDGE, "READ", "GROUP", "the share group, checked first"),
    (ApiKey.SHARE_ACKNOWLEDGE, "READ", "TOPIC", "each topic acknowledged"),
    (ApiKey.CREATE_TOPICS, "CREATE", "CLUSTER", "authorizes every topic"),
    (ApiKey.CREATE_TOPICS, "CREATE", "TOPIC", "each topic, when CREATE on the cluster is not allowed"),
    (ApiKey.CREATE_TOPICS, "DESCRIBE_CONFIGS", "TOPIC", "to see a created topic's configs (v5+); without it "
                                                        "topic_config_error_code is TOPIC_AUTHORIZATION_FAILED"),
    (ApiKey.DELETE_TOPICS, "DELETE", "CLUSTER", "authorizes every topic"),
    (ApiKey.DELETE_TOPICS, "DELETE", "TOPIC", "each topic, by name or id"),
    (ApiKey.DELETE_TOPICS, "DESCRIBE", "TOPIC", "each topic; a topic named by id without it fails without its name"),
]
