"""The cases of test_authorization_table.py: one concrete request per relayed API, and the ACLs it needs.

A ``Case`` builds fresh resources as the super user (``setup``), then the request a client would send
(``request``).  Its ``needs`` are the ACLs ``authz.policies.table()`` names for that request, each with
what Kafka answers when just that ACL is missing (``Effect``: a value at a place in the response).
"""

from __future__ import annotations

import itertools
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from auth.sasl.scram import ScramClient
from authz.model import AclOperation, ResourceType, display_name
from authz.request_policy import CLUSTER_NAME
from protocol.api_keys import ApiKey
from protocol.codec import default_value
from protocol.errors import DecodeError
from protocol.header import decode_response_header, response_header_version
from protocol.messages import decode_response, request_frame
from protocol.registry import api
from protocol.schema import FieldSpec
from tests.wire_client import WireClient

Body = dict[str, Any]
Res = dict[str, Any]  # the fresh resources of one request: role → name (or id, producer id, …)

TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED, TOKEN_DENIED = 29, 30, 31, 53, 65
AUTHZ_ERRORS = frozenset({TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED, TOKEN_DENIED})
MISSING = "<absent>"  # what an Effect observes when the place does not exist in the response
ZERO_UUID = uuid.UUID(int=0)

Op, Rt = AclOperation, ResourceType
CLUSTER = "cluster"  # the role of the cluster resource (always kafka-cluster)


# --- building requests -------------------------------------------------------------------------------

def _fields(specs: list[FieldSpec], version: int, given: dict[str, Any], where: str) -> Body:
    known = {f.name for f in specs if version in f.versions}
    unknown = set(given) - known
    assert not unknown, f"{where} v{version} has no field(s) {sorted(unknown)}: update the case"
    out = {f.name: default_value(f, version) for f in specs if version in f.versions and f.tag is None}
    out.update(given)
    return out


def body(api_key: ApiKey, version: int, **given: Any) -> Body:
    """A request body of ``version``: every (untagged) field at its default, then ``given``."""
    schema = api(api_key)
    assert schema is not None
    return _fields(schema.request.fields, version, given, schema.request.name)


def item(api_key: ApiKey, version: int, *path: str, **given: Any) -> Body:
    """An element of the request's struct array (or struct) at ``path``, defaults then ``given``."""
    schema = api(api_key)
    assert schema is not None
    specs = schema.request.fields
    for name in path:
        specs = next(f for f in specs if f.name == name).fields
    return _fields(specs, version, given, f"{schema.request.name}.{'.'.join(path)}")


def fresh(kind: str) -> str:
    return f"authz-{kind}-{uuid.uuid4().hex[:10]}"


# --- raw, authenticated connections -------------------------------------------------------------------

def _prefix(payload: bytes, api_key: int, version: int, wanted: tuple[str, ...]) -> Body:
    """The leading int16/int32 top-level fields of a response that does not decode as a whole."""
    schema = api(api_key)
    assert schema is not None
    view = memoryview(payload)
    _, offset = decode_response_header(view, response_header_version(api_key, schema.is_flexible(version)))
    out: Body = {}
    for spec in schema.response.fields:
        if set(wanted) <= set(out):
            return out
        if version not in spec.versions or spec.tag is not None:
            continue
        fmt = {"int16": ">h", "int32": ">i"}.get(spec.type)
        if fmt is None:
            break
        out[spec.name] = struct.unpack_from(fmt, view, offset)[0]
        offset += struct.calcsize(fmt)
    raise AssertionError(f"{schema.response.name} v{version}: {wanted} are not all among its leading int fields")


class Session:
    """One raw connection to the gateway, logged in with SCRAM-SHA-512 as ``user`` (password ``<user>-secret``)."""

    def __init__(self, address: str, user: str) -> None:
        self.client = WireClient(address)
        self._ids = itertools.count(1)
        self.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
        scram = ScramClient("SCRAM-SHA-512", user, f"{user}-secret")
        first = self.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.first_message()})
        final = self.call(ApiKey.SASL_AUTHENTICATE, 2,
                          {"auth_bytes": scram.final_message(bytes(first["auth_bytes"]))})
        assert final["error_code"] == 0, f"{user} could not log in: {final}"

    def call(self, api_key: int, version: int, request: Body, prefix: tuple[str, ...] = ()) -> Body:
        correlation_id = next(self._ids)
        self.client.send(request_frame(api_key, version, correlation_id, request))
        payload = self.client.read_frame()
        try:
            answered, response = decode_response(payload, api_key, version)
        except DecodeError:
            if not prefix:
                raise
            return _prefix(payload, api_key, version, prefix)
        assert answered == correlation_id
        return response

    def close(self) -> None:
        self.client.close()


@dataclass
class Admin:
    """The super user's connection, which creates the resources each request works on."""

    address: str
    session: Session | None = None
    broker_id: int = -1

    def call(self, api_key: ApiKey, version: int, **given: Any) -> Body:
        if self.session is None:
            self.session = Session(self.address, "admin")
        try:
            return self.session.call(api_key, version, body(api_key, version, **given))
        except OSError:
            self.session.close()
            self.session = None
            raise

    def close(self) -> None:
        if self.session is not None:
            self.session.close()

    def topic(self, res: Res, role: str = "topic") -> str:
        """A new one-partition topic; its id is learnt by the gateway (a Metadata response passes through)."""
        name = fresh(role)
        created = self.call(ApiKey.CREATE_TOPICS, 7, timeout_ms=15000, topics=[
            item(ApiKey.CREATE_TOPICS, 7, "topics", name=name, num_partitions=1, replication_factor=1)])
        assert created["topics"][0]["error_code"] == 0, created
        metadata = self.call(ApiKey.METADATA, 12, allow_auto_topic_creation=False,
                             topics=[item(ApiKey.METADATA, 12, "topics", name=name)])
        topic = metadata["topics"][0]
        assert topic["error_code"] == 0 and topic["topic_id"] != ZERO_UUID, metadata
        self.broker_id = metadata["brokers"][0]["node_id"]
        res[role], res[f"{role}_id"] = name, topic["topic_id"]
        return name

    def group(self, res: Res, role: str = "group") -> str:
        """A new group that exists upstream (it has a committed offset); needs res['topic']."""
        name = fresh(role)
        committed = self.call(ApiKey.OFFSET_COMMIT, 9, group_id=name, member_id="", topics=[
            item(ApiKey.OFFSET_COMMIT, 9, "topics", name=res["topic"], partitions=[
                item(ApiKey.OFFSET_COMMIT, 9, "topics", "partitions", partition_index=0, committed_offset=0,
                     committed_metadata=None)])])
        assert committed["topics"][0]["partitions"][0]["error_code"] == 0, committed
        res[role] = name
        return name

    def transaction(self, res: Res) -> str:
        """A new transactional id with an initialized producer: res['txn'], res['pid'], res['epoch']."""
        txn = fresh("txn")
        init = self.call(ApiKey.INIT_PRODUCER_ID, 5, transactional_id=txn, transaction_timeout_ms=30000)
        assert init["error_code"] == 0, init
        res.update(txn=txn, pid=init["producer_id"], epoch=init["producer_epoch"])
        return txn

    def add_partition(self, res: Res) -> None:
        """Adds partition 0 of res['topic'] to the transaction (as a transactional producer does)."""
        added = self.call(ApiKey.ADD_PARTITIONS_TO_TXN, 3, v3_and_below_transactional_id=res["txn"],
                          v3_and_below_producer_id=res["pid"], v3_and_below_producer_epoch=res["epoch"],
                          v3_and_below_topics=[{"name": res["topic"], "partitions": [0]}])
        error = added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"]
        assert error == 0, added


# --- what Kafka answers without an ACL ----------------------------------------------------------------

@dataclass(frozen=True)
class R:
    """A reference to one of the request's resources (a key of Res)."""

    role: str


@dataclass(frozen=True)
class Where:
    """Selects the one element of a list whose fields have these values."""

    fields: tuple[tuple[str, Any], ...]

    def __str__(self) -> str:
        return "[" + ",".join(f"{k}={v.role if isinstance(v, R) else v}" for k, v in self.fields) + "]"


def where(**fields: Any) -> Where:
    return Where(tuple(fields.items()))


Step = str | int | Where


@dataclass(frozen=True)
class Effect:
    """Kafka's answer without the ACL: ``denied`` at ``path`` (MISSING: the item is silently left out).

    ``changes=False``: a detail of the denied answer that may be the same with the ACL (checked only without it).
    """

    path: tuple[Step, ...]
    denied: Any
    changes: bool = True

    @property
    def place(self) -> str:
        out = ""
        for step in self.path:
            out += f"[{step}]" if isinstance(step, int) else str(step) if isinstance(step, Where) else f".{step}"
        return out.lstrip(".") or "<response>"

    def observe(self, response: Body, res: Res) -> Any:
        node: Any = response
        for step in self.path:
            if isinstance(step, Where):
                if not isinstance(node, list):
                    return MISSING
                wanted = {k: res[v.role] if isinstance(v, R) else v for k, v in step.fields}
                found = [e for e in node if all(e.get(k) == v for k, v in wanted.items())]
                if len(found) != 1:
                    return MISSING if not found else f"<{len(found)} entries match {wanted}>"
                node = found[0]
            elif isinstance(step, int):
                if not isinstance(node, list) or step >= len(node):
                    return MISSING
                node = node[step]
            else:
                if not isinstance(node, dict) or step not in node:
                    return MISSING
                node = node[step]
        return node


def error_at(*path: Step, code: int) -> Effect:
    return Effect(path, code)


def left_out(*path: Step) -> Effect:
    return Effect(path, MISSING)


@dataclass(frozen=True)
class Need:
    """One ACL the request needs (ALLOW for User:alice on the role's resource) and Kafka's answer without it."""

    operation: AclOperation
    resource_type: ResourceType
    role: str
    effects: tuple[Effect, ...]

    @property
    def label(self) -> str:
        return f"{display_name(self.operation)}-{display_name(self.resource_type)}"

    def resource_name(self, res: Res) -> str:
        return CLUSTER_NAME if self.resource_type == Rt.CLUSTER else str(res[self.role])


def need(operation: AclOperation, resource_type: ResourceType, role: str, *effects: Effect) -> Need:
    assert effects, "a need without an observable effect cannot be tested"
    return Need(operation, resource_type, role, effects)


@dataclass(frozen=True)
class Case:
    """One concrete request of one API, on resources ``setup`` creates afresh for every send."""

    name: str
    api_key: ApiKey
    setup: Callable[[Admin], Res]
    request: Callable[[Res, int], Body]
    needs: tuple[Need, ...]
    versions: tuple[int, int]  # the versions request and effects are written for
    version: int | None = None  # None: the highest negotiated version
    relayed_only: str | None = None  # why Tansu cannot answer: the granted request only has to be relayed
    prefix: tuple[str, ...] = ()  # Tansu's answer does not decode: read these leading fields only
    note: str = ""


# --- the requests -------------------------------------------------------------------------------------

def _with(*steps: Callable[[Admin, Res], Any]) -> Callable[[Admin], Res]:
    def setup(admin: Admin) -> Res:
        res: Res = {}
        for step in steps:
            step(admin, res)
        return res
    return setup


def _named(role: str) -> Callable[[Admin, Res], Any]:
    """A fresh name that exists nowhere yet."""
    def step(admin: Admin, res: Res) -> None:
        res[role] = fresh(role)
    return step


TOPIC = Admin.topic
GROUP = Admin.group
TXN = Admin.transaction
ADD_PARTITION = Admin.add_partition


def _broker(admin: Admin, res: Res) -> None:
    """The id of the broker (as a BROKER config resource name); Admin.topic learns it."""
    assert admin.broker_id >= 0, "create a topic first"
    res["broker"] = str(admin.broker_id)


def _transactional_batch(res: Res) -> bytes:
    """One record, in a transactional batch of the transaction's producer."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=res["pid"],
                                        producer_epoch=res["epoch"], base_sequence=0, batch_size=1 << 20)
    builder.append(0, timestamp=None, key=None, value=b"v", headers=[])
    return bytes(builder.build())


def produce(res: Res, v: int) -> Body:
    K = ApiKey.PRODUCE
    return body(K, v, transactional_id=res["txn"], acks=-1, timeout_ms=5000, topic_data=[
        item(K, v, "topic_data", name=res["topic"], partition_data=[
            item(K, v, "topic_data", "partition_data", index=0, records=_transactional_batch(res))])])


def fetch(res: Res, v: int) -> Body:
    K = ApiKey.FETCH
    by_id = {"topic_id": res["topic_id"]} if v >= 13 else {"topic": res["topic"]}
    return body(K, v, max_wait_ms=0, min_bytes=0, topics=[item(K, v, "topics", **by_id, partitions=[
        item(K, v, "topics", "partitions", partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])


def list_offsets(res: Res, v: int) -> Body:
    K = ApiKey.LIST_OFFSETS
    return body(K, v, replica_id=-1, topics=[item(K, v, "topics", name=res["topic"], partitions=[
        item(K, v, "topics", "partitions", partition_index=0, timestamp=-1)])])


def metadata(named: bool, auto_create: bool, cluster_operations: bool = False) -> Callable[[Res, int], Body]:
    def build(res: Res, v: int) -> Body:
        K = ApiKey.METADATA
        topics = [item(K, v, "topics", name=res["topic"])] if named else None
        extra = {"include_cluster_authorized_operations": True} if cluster_operations else {}
        return body(K, v, topics=topics, allow_auto_topic_creation=auto_create, **extra)
    return build


def offset_commit(res: Res, v: int) -> Body:
    K = ApiKey.OFFSET_COMMIT
    return body(K, v, group_id=res["group"], member_id="", topics=[item(K, v, "topics", name=res["topic"], partitions=[
        item(K, v, "topics", "partitions", partition_index=0, committed_offset=0, committed_metadata=None)])])


def offset_fetch(res: Res, v: int) -> Body:
    K = ApiKey.OFFSET_FETCH
    return body(K, v, groups=[item(K, v, "groups", group_id=res["group"], member_id=None, topics=[
        item(K, v, "groups", "topics", name=res["topic"], partition_indexes=[0])])])


def find_coordinator(key_type: int, key: Callable[[Res], str]) -> Callable[[Res, int], Body]:
    def build(res: Res, v: int) -> Body:
        return body(ApiKey.FIND_COORDINATOR, v, key_type=key_type, coordinator_keys=[key(res)])
    return build


def join_group(res: Res, v: int) -> Body:
    K = ApiKey.JOIN_GROUP
    return body(K, v, group_id=res["group"], session_timeout_ms=10000, rebalance_timeout_ms=1000, member_id="",
                protocol_type="consumer", protocols=[item(K, v, "protocols", name="range", metadata=b"")])


def heartbeat(res: Res, v: int) -> Body:
    return body(ApiKey.HEARTBEAT, v, group_id=res["group"], generation_id=1, member_id="made-up-member")


def leave_group(res: Res, v: int) -> Body:
    K = ApiKey.LEAVE_GROUP
    return body(K, v, group_id=res["group"], members=[item(K, v, "members", member_id="made-up-member")])


def sync_group(res: Res, v: int) -> Body:
    return body(ApiKey.SYNC_GROUP, v, group_id=res["group"], generation_id=1, member_id="made-up-member",
                protocol_type="consumer", protocol_name="range", assignments=[])


def describe_groups(res: Res, v: int) -> Body:
    return body(ApiKey.DESCRIBE_GROUPS, v, groups=[res["group"]], include_authorized_operations=True)


def list_groups(res: Res, v: int) -> Body:
    return body(ApiKey.LIST_GROUPS, v)


def delete_groups(res: Res, v: int) -> Body:
    return body(ApiKey.DELETE_GROUPS, v, groups_names=[res["group"]])


def create_topics(res: Res, v: int) -> Body:
    K = ApiKey.CREATE_TOPICS
    return body(K, v, timeout_ms=15000, topics=[
        item(K, v, "topics", name=res["topic"], num_partitions=1, replication_factor=1)])


def delete_topics(by_id: bool) -> Callable[[Res, int], Body]:
    def build(res: Res, v: int) -> Body:
        K = ApiKey.DELETE_TOPICS
        ref = {"name": None, "topic_id": res["topic_id"]} if by_id else {"name": res["topic"]}
        return body(K, v, timeout_ms=15000, topics=[item(K, v, "topics", **ref)])
    return build


def delete_records(res: Res, v: int) -> Body:
    K = ApiKey.DELETE_RECORDS
    return body(K, v, timeout_ms=5000, topics=[item(K, v, "topics", name=res["topic"], partitions=[
        item(K, v, "topics", "partitions", partition_index=0, offset=0)])])


def init_producer_id(transactional: bool) -> Callable[[Res, int], Body]:
    def build(res: Res, v: int) -> Body:
        return body(ApiKey.INIT_PRODUCER_ID, v, transactional_id=res["txn"] if transactional else None,
                    transaction_timeout_ms=30000)
    return build


def add_partitions_to_txn(res: Res, v: int) -> Body:
    K = ApiKey.ADD_PARTITIONS_TO_TXN
    topics = [{"name": res["topic"], "partitions": [0]}]
    if v >= 4:
        return body(K, v, transactions=[item(K, v, "transactions", transactional_id=res["txn"], producer_id=res["pid"],
                                             producer_epoch=res["epoch"], topics=topics)])
    return body(K, v, v3_and_below_transactional_id=res["txn"], v3_and_below_producer_id=res["pid"],
                v3_and_below_producer_epoch=res["epoch"], v3_and_below_topics=topics)


def add_offsets_to_txn(res: Res, v: int) -> Body:
    return body(ApiKey.ADD_OFFSETS_TO_TXN, v, transactional_id=res["txn"], producer_id=res["pid"],
                producer_epoch=res["epoch"], group_id=res["group"])


def end_txn(res: Res, v: int) -> Body:
    return body(ApiKey.END_TXN, v, transactional_id=res["txn"], producer_id=res["pid"], producer_epoch=res["epoch"],
                committed=False)


def txn_offset_commit(res: Res, v: int) -> Body:
    K = ApiKey.TXN_OFFSET_COMMIT
    return body(K, v, transactional_id=res["txn"], group_id=res["group"], producer_id=res["pid"],
                producer_epoch=res["epoch"], topics=[item(K, v, "topics", name=res["topic"], partitions=[
                    item(K, v, "topics", "partitions", partition_index=0, committed_offset=0,
                         committed_metadata=None)])])


# ACL admin requests work on User:carol's ACLs, so they never touch the ACLs under test (User:alice's).
CAROL = "User:carol"


def _carol_acl(res: Res) -> Body:
    return {"resource_type": int(Rt.TOPIC), "resource_name": res["acl_topic"], "resource_pattern_type": 3,
            "principal": CAROL, "host": "*", "operation": int(Op.READ), "permission_type": 3}


def _carol_acl_exists(admin: Admin, res: Res) -> None:
    created = admin.call(ApiKey.CREATE_ACLS, 3, creations=[item(ApiKey.CREATE_ACLS, 3, "creations", **_carol_acl(res))])
    assert created["results"][0]["error_code"] == 0, created


def describe_acls(res: Res, v: int) -> Body:
    return body(ApiKey.DESCRIBE_ACLS, v, resource_type_filter=int(Rt.ANY), resource_name_filter=None,
                pattern_type_filter=1, principal_filter=CAROL, host_filter=None, operation=int(Op.ANY),
                permission_type=1)


def create_acls(res: Res, v: int) -> Body:
    return body(ApiKey.CREATE_ACLS, v, creations=[item(ApiKey.CREATE_ACLS, v, "creations", **_carol_acl(res))])


def delete_acls(res: Res, v: int) -> Body:
    acl = _carol_acl(res)
    return body(ApiKey.DELETE_ACLS, v, filters=[item(
        ApiKey.DELETE_ACLS, v, "filters", resource_type_filter=acl["resource_type"],
        resource_name_filter=acl["resource_name"], pattern_type_filter=3, principal_filter=CAROL, host_filter="*",
        operation=acl["operation"], permission_type=acl["permission_type"])])


TOPIC_CONFIG, BROKER_CONFIG, GROUP_CONFIG = 2, 4, 32


def _config_resources(res: Res) -> list[tuple[int, str]]:
    return [(TOPIC_CONFIG, res["topic"]), (GROUP_CONFIG, res["group"]), (BROKER_CONFIG, res["broker"])]


def describe_configs(res: Res, v: int) -> Body:
    K = ApiKey.DESCRIBE_CONFIGS
    return body(K, v, resources=[item(K, v, "resources", resource_type=t, resource_name=n, configuration_keys=None)
                                 for t, n in _config_resources(res)])


_ALTERED = {TOPIC_CONFIG: "retention.ms", GROUP_CONFIG: "consumer.session.timeout.ms",
            BROKER_CONFIG: "log.retention.ms"}


def incremental_alter_configs(res: Res, v: int) -> Body:
    K = ApiKey.INCREMENTAL_ALTER_CONFIGS
    return body(K, v, validate_only=True, resources=[item(K, v, "resources", resource_type=t, resource_name=n, configs=[
        item(K, v, "resources", "configs", name=_ALTERED[t], config_operation=0, value="60000")])
        for t, n in _config_resources(res)])


def _configs_denied(field: str, resource_type: int, role: str, code: int) -> Effect:
    return error_at(field, where(resource_type=resource_type, resource_name=R(role)), "error_code", code=code)


def list_partition_reassignments(res: Res, v: int) -> Body:
    return body(ApiKey.LIST_PARTITION_REASSIGNMENTS, v, topics=None)


def describe_user_scram_credentials(res: Res, v: int) -> Body:
    return body(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, v, users=None)


def alter_user_scram_credentials(res: Res, v: int) -> Body:
    K = ApiKey.ALTER_USER_SCRAM_CREDENTIALS
    return body(K, v, deletions=[item(K, v, "deletions", name=res["user"], mechanism=2)])


def describe_cluster(res: Res, v: int) -> Body:
    return body(ApiKey.DESCRIBE_CLUSTER, v, include_cluster_authorized_operations=True)


def consumer_group_describe(res: Res, v: int) -> Body:
    return body(ApiKey.CONSUMER_GROUP_DESCRIBE, v, group_ids=[res["group"]], include_authorized_operations=True)


def get_telemetry_subscriptions(res: Res, v: int) -> Body:
    return body(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, v, client_instance_id=ZERO_UUID)


def describe_topic_partitions(res: Res, v: int) -> Body:
    K = ApiKey.DESCRIBE_TOPIC_PARTITIONS
    return body(K, v, topics=[item(K, v, "topics", name=res["topic"])], cursor=None)


# --- the table, as concrete requests --------------------------------------------------------------------

def _cases() -> Iterator[Case]:
    T, G = R("topic"), R("group")
    K = ApiKey

    def partition(code: int) -> Effect:  # the first partition of the first topic, in most *Response shapes
        return error_at("topics", 0, "partitions", 0, "error_code", code=code)

    yield Case("Produce-transactional", K.PRODUCE, _with(TOPIC, TXN, ADD_PARTITION), produce, (
        need(Op.WRITE, Rt.TRANSACTIONAL_ID, "txn",
             error_at("responses", 0, "partition_responses", 0, "error_code", code=TXN_DENIED)),
        need(Op.WRITE, Rt.TOPIC, "topic",
             error_at("responses", 0, "partition_responses", 0, "error_code", code=TOPIC_DENIED)),
    ), versions=(3, 12))
    fetched = error_at("responses", 0, "partitions", 0, "error_code", code=TOPIC_DENIED)
    yield Case("Fetch-consumer", K.FETCH, _with(TOPIC), fetch, (
        need(Op.READ, Rt.TOPIC, "topic", fetched),), versions=(4, 18))
    # A follower Fetch is refused whatever the ACLs: tests/gateway/clients/test_reserved_topic_e2e.py.
    yield Case("ListOffsets", K.LIST_OFFSETS, _with(TOPIC), list_offsets, (
        need(Op.DESCRIBE, Rt.TOPIC, "topic", partition(TOPIC_DENIED)),), versions=(1, 11))

    described = error_at("topics", where(name=T), "error_code", code=TOPIC_DENIED)
    yield Case("Metadata-named-topic", K.METADATA, _with(TOPIC), metadata(named=True, auto_create=False), (
        need(Op.DESCRIBE, Rt.TOPIC, "topic", described),), versions=(4, 13))
    yield Case("Metadata-all-topics", K.METADATA, _with(TOPIC), metadata(named=False, auto_create=False), (
        need(Op.DESCRIBE, Rt.TOPIC, "topic", left_out("topics", where(name=T), "name")),), versions=(1, 13))
    yield Case("Metadata-auto-create-by-topic-acl", K.METADATA, _with(_named("topic")),
               metadata(named=True, auto_create=True), (
                   need(Op.DESCRIBE, Rt.TOPIC, "topic", described),
                   need(Op.CREATE, Rt.TOPIC, "topic", described)), versions=(4, 13))
    yield Case("Metadata-auto-create-by-cluster-acl", K.METADATA, _with(_named("topic")),
               metadata(named=True, auto_create=True), (
                   need(Op.DESCRIBE, Rt.TOPIC, "topic", described),
                   need(Op.CREATE, Rt.CLUSTER, CLUSTER, described)), versions=(4, 13))
    yield Case("Metadata-v10-cluster-authorized-operations", K.METADATA, _with(), metadata(
        named=False, auto_create=False, cluster_operations=True), (
        need(Op.DESCRIBE, Rt.CLUSTER, CLUSTER, Effect(("cluster_authorized_operations",), 0)),),
        versions=(10, 10), version=10,
        note="the only versions with include_cluster_authorized_operations are v8-10")

    yield Case("OffsetCommit", K.OFFSET_COMMIT, _with(TOPIC, _named("group")), offset_commit, (
        need(Op.READ, Rt.GROUP, "group", partition(GROUP_DENIED)),
        need(Op.READ, Rt.TOPIC, "topic", partition(TOPIC_DENIED)),
    ), versions=(2, 9))
    yield Case("OffsetFetch", K.OFFSET_FETCH, _with(TOPIC, GROUP), offset_fetch, (
        need(Op.DESCRIBE, Rt.GROUP, "group", error_at("groups", where(group_id=G), "error_code", code=GROUP_DENIED)),
        need(Op.DESCRIBE, Rt.TOPIC, "topic", error_at("groups", where(group_id=G), "topics", where(name=T),
                                                      "partitions", 0, "error_code", code=TOPIC_DENIED)),
    ), versions=(8, 9))

    coordinator = ("coordinators", 0, "error_code")
    yield Case("FindCoordinator-group", K.FIND_COORDINATOR, _with(_named("group")),
               find_coordinator(0, lambda res: str(res["group"])), (
                   need(Op.DESCRIBE, Rt.GROUP, "group", error_at(*coordinator, code=GROUP_DENIED)),),
               versions=(4, 6))
    yield Case("FindCoordinator-transaction", K.FIND_COORDINATOR, _with(_named("txn")),
               find_coordinator(1, lambda res: str(res["txn"])), (
                   need(Op.DESCRIBE, Rt.TRANSACTIONAL_ID, "txn", error_at(*coordinator, code=TXN_DENIED)),),
               versions=(4, 6))
    yield Case("FindCoordinator-share", K.FIND_COORDINATOR, _with(TOPIC, _named("group")),
               find_coordinator(2, lambda res: f"{res['group']}:{res['topic_id']}:0"), (
                   need(Op.CLUSTER_ACTION, Rt.CLUSTER, CLUSTER, error_at(*coordinator, code=CLUSTER_DENIED)),),
               versions=(6, 6))

    top_group = error_at("error_code", code=GROUP_DENIED)
    for name, api_key, build, low, high in (("JoinGroup", K.JOIN_GROUP, join_group, 0, 9),
                                            ("Heartbeat", K.HEARTBEAT, heartbeat, 0, 4),
                                            ("LeaveGroup", K.LEAVE_GROUP, leave_group, 3, 5),
                                            ("SyncGroup", K.SYNC_GROUP, sync_group, 0, 5)):
        yield Case(name, api_key, _with(_named("group")), build, (need(Op.READ, Rt.GROUP, "group", top_group),),
                   versions=(low, high))
    yield Case("DescribeGroups", K.DESCRIBE_GROUPS, _with(TOPIC, GROUP), describe_groups, (
        need(Op.DESCRIBE, Rt.GROUP, "group", error_at("groups", where(group_id=G), "error_code", code=GROUP_DENIED)),
    ), versions=(3, 6))
    listed = left_out("groups", where(group_id=G), "group_id")
    yield Case("ListGroups-by-cluster-acl", K.LIST_GROUPS, _with(TOPIC, GROUP), list_groups, (
        need(Op.DESCRIBE, Rt.CLUSTER, CLUSTER, listed),), versions=(0, 5))
    yield Case("ListGroups-by-group-acl", K.LIST_GROUPS, _with(TOPIC, GROUP), list_groups, (
        need(Op.DESCRIBE, Rt.GROUP, "group", listed),), versions=(0, 5))
    yield Case("DeleteGroups", K.DELETE_GROUPS, _with(TOPIC, GROUP), delete_groups, (
        need(Op.DELETE, Rt.GROUP, "group", error_at("results", where(group_id=G), "error_code", code=GROUP_DENIED)),
    ), versions=(0, 2))

    created = error_at("topics", where(name=T), "error_code", code=TOPIC_DENIED)
    configs_hidden = error_at("topics", where(name=T), "topic_config_error_code", code=TOPIC_DENIED)
    yield Case("CreateTopics-by-topic-acl", K.CREATE_TOPICS, _with(_named("topic")), create_topics, (
        need(Op.CREATE, Rt.TOPIC, "topic", created),
        need(Op.DESCRIBE_CONFIGS, Rt.TOPIC, "topic", configs_hidden)), versions=(5, 7))
    yield Case("CreateTopics-by-cluster-acl", K.CREATE_TOPICS, _with(_named("topic")), create_topics, (
        need(Op.CREATE, Rt.CLUSTER, CLUSTER, created),
        need(Op.DESCRIBE_CONFIGS, Rt.TOPIC, "topic", configs_hidden)), versions=(5, 7))
    deleted = error_at("responses", where(name=T), "error_code", code=TOPIC_DENIED)
    yield Case("DeleteTopics-by-name", K.DELETE_TOPICS, _with(TOPIC), delete_topics(by_id=False), (
        need(Op.DELETE, Rt.TOPIC, "topic", deleted),
        need(Op.DESCRIBE, Rt.TOPIC, "topic", deleted)), versions=(6, 6),
        note="DELETE implies DESCRIBE, so DESCRIBE is revoked with a DENY")
    yield Case("DeleteTopics-by-id", K.DELETE_TOPICS, _with(TOPIC), delete_topics(by_id=True), (
        need(Op.DELETE, Rt.TOPIC, "topic",
             error_at("responses", where(topic_id=R("topic_id")), "error_code", code=TOPIC_DENIED),
             # without DESCRIBE (none is granted) Kafka does not reveal the name of a topic named by id
             Effect(("responses", where(topic_id=R("topic_id")), "name"), None, changes=False)),), versions=(6, 6))
    yield Case("DeleteTopics-by-cluster-acl", K.DELETE_TOPICS, _with(TOPIC), delete_topics(by_id=False), (
        need(Op.DELETE, Rt.CLUSTER, CLUSTER, deleted),), versions=(6, 6))
    yield Case("DeleteRecords", K.DELETE_RECORDS, _with(TOPIC), delete_records, (
        need(Op.DELETE, Rt.TOPIC, "topic", partition(TOPIC_DENIED)),), versions=(0, 2),
        relayed_only="Tansu's memory storage does not implement DeleteRecords (todo!() panics, the connection closes)")

    yield Case("InitProducerId-transactional", K.INIT_PRODUCER_ID, _with(_named("txn")), init_producer_id(True), (
        need(Op.WRITE, Rt.TRANSACTIONAL_ID, "txn", error_at("error_code", code=TXN_DENIED)),), versions=(0, 5))
    yield Case("InitProducerId-idempotent", K.INIT_PRODUCER_ID, _with(), init_producer_id(False), (
        need(Op.IDEMPOTENT_WRITE, Rt.CLUSTER, CLUSTER, error_at("error_code", code=CLUSTER_DENIED)),),
        versions=(0, 5))
    yield Case("InitProducerId-idempotent-by-topic-write", K.INIT_PRODUCER_ID, _with(TOPIC), init_producer_id(False), (
        need(Op.WRITE, Rt.TOPIC, "topic", error_at("error_code", code=CLUSTER_DENIED)),), versions=(0, 5),
        note="'Write on any topic suffices instead' (the IdempotentWrite row)")
    yield Case("AddPartitionsToTxn", K.ADD_PARTITIONS_TO_TXN, _with(TOPIC, TXN), add_partitions_to_txn, (
        need(Op.CLUSTER_ACTION, Rt.CLUSTER, CLUSTER, error_at("error_code", code=CLUSTER_DENIED)),), versions=(4, 5),
        relayed_only="Tansu closes the connection on AddPartitionsToTxn v4+ (broker batches)")
    txn_partition = ("results_by_topic_v3_and_below", 0, "results_by_partition", 0, "partition_error_code")
    yield Case("AddPartitionsToTxn-v3-client", K.ADD_PARTITIONS_TO_TXN, _with(TOPIC, TXN), add_partitions_to_txn, (
        need(Op.WRITE, Rt.TRANSACTIONAL_ID, "txn", error_at(*txn_partition, code=TXN_DENIED)),
        need(Op.WRITE, Rt.TOPIC, "topic", error_at(*txn_partition, code=TOPIC_DENIED)),
    ), versions=(3, 3), version=3, note="v0-3 is what clients send; v4+ is for brokers")
    yield Case("AddOffsetsToTxn", K.ADD_OFFSETS_TO_TXN, _with(TXN, _named("group")), add_offsets_to_txn, (
        need(Op.WRITE, Rt.TRANSACTIONAL_ID, "txn", error_at("error_code", code=TXN_DENIED)),
        need(Op.READ, Rt.GROUP, "group", error_at("error_code", code=GROUP_DENIED)),
    ), versions=(0, 4))
    yield Case("EndTxn", K.END_TXN, _with(TOPIC, TXN, ADD_PARTITION), end_txn, (
        need(Op.WRITE, Rt.TRANSACTIONAL_ID, "txn", error_at("error_code", code=TXN_DENIED)),), versions=(0, 4))
    yield Case("TxnOffsetCommit", K.TXN_OFFSET_COMMIT, _with(TOPIC, TXN, _named("group")), txn_offset_commit, (
        need(Op.WRITE, Rt.TRANSACTIONAL_ID, "txn", partition(TXN_DENIED)),
        need(Op.READ, Rt.GROUP, "group", partition(GROUP_DENIED)),
        need(Op.READ, Rt.TOPIC, "topic", partition(TOPIC_DENIED)),
    ), versions=(0, 5))

    yield Case("DescribeAcls", K.DESCRIBE_ACLS, _with(_named("acl_topic")), describe_acls, (
        need(Op.DESCRIBE, Rt.CLUSTER, CLUSTER, error_at("error_code", code=CLUSTER_DENIED)),), versions=(1, 3))
    yield Case("CreateAcls", K.CREATE_ACLS, _with(_named("acl_topic")), create_acls, (
        need(Op.ALTER, Rt.CLUSTER, CLUSTER, error_at("results", 0, "error_code", code=CLUSTER_DENIED)),),
        versions=(1, 3))
    yield Case("DeleteAcls", K.DELETE_ACLS, _with(_named("acl_topic"), _carol_acl_exists), delete_acls, (
        need(Op.ALTER, Rt.CLUSTER, CLUSTER, error_at("filter_results", 0, "error_code", code=CLUSTER_DENIED)),),
        versions=(1, 3))
    configs = _with(TOPIC, GROUP, _broker)
    yield Case("DescribeConfigs", K.DESCRIBE_CONFIGS, configs, describe_configs, (
        need(Op.DESCRIBE_CONFIGS, Rt.TOPIC, "topic", _configs_denied("results", TOPIC_CONFIG, "topic", TOPIC_DENIED)),
        need(Op.DESCRIBE_CONFIGS, Rt.GROUP, "group", _configs_denied("results", GROUP_CONFIG, "group", GROUP_DENIED)),
        need(Op.DESCRIBE_CONFIGS, Rt.CLUSTER, CLUSTER,
             _configs_denied("results", BROKER_CONFIG, "broker", CLUSTER_DENIED)),
    ), versions=(0, 4))
    yield Case("IncrementalAlterConfigs", K.INCREMENTAL_ALTER_CONFIGS, configs, incremental_alter_configs, (
        need(Op.ALTER_CONFIGS, Rt.TOPIC, "topic", _configs_denied("responses", TOPIC_CONFIG, "topic", TOPIC_DENIED)),
        need(Op.ALTER_CONFIGS, Rt.GROUP, "group", _configs_denied("responses", GROUP_CONFIG, "group", GROUP_DENIED)),
        need(Op.ALTER_CONFIGS, Rt.CLUSTER, CLUSTER,
             _configs_denied("responses", BROKER_CONFIG, "broker", CLUSTER_DENIED)),
    ), versions=(0, 1))
    yield Case("ListPartitionReassignments", K.LIST_PARTITION_REASSIGNMENTS, _with(), list_partition_reassignments, (
        need(Op.DESCRIBE, Rt.CLUSTER, CLUSTER, error_at("error_code", code=CLUSTER_DENIED)),), versions=(0, 0))
    yield Case("DescribeUserScramCredentials", K.DESCRIBE_USER_SCRAM_CREDENTIALS, _with(),
               describe_user_scram_credentials, (
                   need(Op.DESCRIBE, Rt.CLUSTER, CLUSTER, error_at("error_code", code=CLUSTER_DENIED)),),
               versions=(0, 0), prefix=("throttle_time_ms", "error_code"),
               note="Tansu answers with a null results array, which v0 does not allow: only the top of it is read")
    yield Case("AlterUserScramCredentials", K.ALTER_USER_SCRAM_CREDENTIALS, _with(_named("user")),
               alter_user_scram_credentials, (
                   need(Op.ALTER, Rt.CLUSTER, CLUSTER, error_at("results", 0, "error_code", code=CLUSTER_DENIED)),),
               versions=(0, 0))
    yield Case("DescribeCluster", K.DESCRIBE_CLUSTER, _with(), describe_cluster, (
        need(Op.DESCRIBE, Rt.CLUSTER, CLUSTER, Effect(("cluster_authorized_operations",), 0)),), versions=(0, 2))
    yield Case("ConsumerGroupDescribe", K.CONSUMER_GROUP_DESCRIBE, _with(TOPIC, GROUP), consumer_group_describe, (
        need(Op.DESCRIBE, Rt.GROUP, "group", error_at("groups", where(group_id=G), "error_code", code=GROUP_DENIED)),
    ), versions=(0, 1))
    yield Case("GetTelemetrySubscriptions", K.GET_TELEMETRY_SUBSCRIPTIONS, _with(), get_telemetry_subscriptions, (),
               versions=(0, 0), note="no ACL (KIP-714)")
    yield Case("DescribeTopicPartitions", K.DESCRIBE_TOPIC_PARTITIONS, _with(TOPIC), describe_topic_partitions, (
        need(Op.DESCRIBE, Rt.TOPIC, "topic", described),), versions=(0, 0))


CASES: tuple[Case, ...] = tuple(_cases())

# Rows of authz.policies.table() for covered APIs that no case exercises, and why.
NOT_EXERCISED: dict[tuple[int, AclOperation, ResourceType], str] = {
    (ApiKey.INIT_PRODUCER_ID, Op.TWO_PHASE_COMMIT, Rt.TRANSACTIONAL_ID):
        "InitProducerId v6 (KIP-939 enable2_pc) only; the gateway negotiates at most v5 with Tansu",
    (ApiKey.CONSUMER_GROUP_DESCRIBE, Op.DESCRIBE, Rt.TOPIC):
        "needs a KIP-848 group whose members have assignments; Tansu offers no ConsumerGroupHeartbeat",
}

# ACLs a case needs that the table names only in a row's description (an alternative to that row).
ALTERNATIVES: dict[tuple[int, AclOperation, ResourceType], tuple[AclOperation, ResourceType]] = {
    (ApiKey.INIT_PRODUCER_ID, Op.WRITE, Rt.TOPIC): (Op.IDEMPOTENT_WRITE, Rt.CLUSTER),
}

# Relayed APIs that Tansu offers but that are not tested here, and why (none so far).
_TOKENS = ("served by ksgate itself, not relayed; its ACL rules (CREATE_TOKENS, DESCRIBE_TOKENS, owners and "
           "renewers) are tested with the handlers in tests/gateway/admin/test_token_admin.py and on the wire in "
           "tests/gateway/admin/test_delegation_tokens_e2e.py")
_QUOTAS = ("served by ksgate itself, not relayed; its ACL rules (DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster) "
           "are tested on the wire in tests/gateway/admin/test_client_quotas_e2e.py and against Kafka 4.4 in the "
           "conformance suite (tests/conformance)")
SKIPPED: dict[int, str] = {
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _QUOTAS,
    ApiKey.ALTER_CLIENT_QUOTAS: _QUOTAS,
    ApiKey.CREATE_DELEGATION_TOKEN: _TOKENS,
    ApiKey.RENEW_DELEGATION_TOKEN: _TOKENS,
    ApiKey.EXPIRE_DELEGATION_TOKEN: _TOKENS,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: _TOKENS,
}

CORE = frozenset({
    ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.SYNC_GROUP,
    ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.DELETE_GROUPS, ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS,
    ApiKey.DELETE_RECORDS, ApiKey.INIT_PRODUCER_ID, ApiKey.DESCRIBE_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.DESCRIBE_CLUSTER, ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
})
