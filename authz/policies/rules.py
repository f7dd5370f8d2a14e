"""The APIs whose authorization is one ACL per item, as declarative rows (engine: authz/policies/per_item.py).

Each row reads as Kafka's "Operations and Resources on Protocols" page: the API, the operation, and (from the
schema's ``entity=`` annotations) the resource; the rest says how Kafka words a refusal.
"""

from __future__ import annotations

from authz.model import AclOperation as Op
from authz.policies.per_item import PerItemRule, illegal_topic_name, repeated_topic_name
from authz.request_policy import ApiPolicy
from protocol.api_keys import ApiKey

RULES: tuple[PerItemRule, ...] = (
    PerItemRule(ApiKey.LIST_OFFSETS, Op.DESCRIBE, "each topic"),
    # KIP-320: brokers (CLUSTER_ACTION) may ask about every topic, whatever the replica id.
    PerItemRule(ApiKey.OFFSET_FOR_LEADER_EPOCH, Op.DESCRIBE, "each topic, when CLUSTER_ACTION is not allowed",
                cluster_shortcut=Op.CLUSTER_ACTION),
    # handleDeleteRecordsRequest keys its answers by topic-partition: a repeated one is answered once.
    PerItemRule(ApiKey.DELETE_RECORDS, Op.DELETE, "each topic", error_fields=(("low_watermark", -1),),
                keyed_by_partition=True),
    # handleDescribeProducersRequest validates each name before (and without) authorizing it.
    PerItemRule(ApiKey.DESCRIBE_PRODUCERS, Op.READ, "each topic; an illegal name fails first (INVALID_TOPIC_EXCEPTION)",
                prechecks=(illegal_topic_name,), with_message=True),
    # The controller's createPartitions: a repeated name fails as a whole, before authorization.
    PerItemRule(ApiKey.CREATE_PARTITIONS, Op.ALTER, "each distinct topic; a repeated name fails first "
                "(INVALID_REQUEST)", prechecks=(repeated_topic_name,), once_per_name=True),
    # handleDeleteGroupsRequest works on the distinct names and lists the unauthorized after the coordinator's.
    PerItemRule(ApiKey.DELETE_GROUPS, Op.DELETE, "each distinct group", once_per_name=True, refused_last=True),
)

POLICIES: dict[int, ApiPolicy] = {rule.api_key: rule for rule in RULES}

TABLE: list[tuple[int, str, str, str]] = [row for rule in RULES for row in rule.rows()]
