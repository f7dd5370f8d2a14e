"""Differences from Apache Kafka that ksgate makes on purpose: each one is written down, with its reason,
in docs/kafka-differences.md under its id (a test checks that every id here has its heading there). Those the
suite cannot show, its upstream being a single Kafka 4.4 broker (e.g. ``streamed-fetch-endpoints-dropped``,
``features-behind-a-v3-upstream``), are in the doc alone.

A difference is matched by its case, the path of the field (list indices left out) and optionally the
versions or principals it is limited to.  Anything not matched here is an undocumented difference: a
bug to fix, or a decision to write down.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from protocol.api_keys import ApiKey
from tests.conformance.compare import FieldDifference

_INDEX = re.compile(r"\[\d+\]")


@dataclass(slots=True, frozen=True)
class Deliberate:
    id: str  # the heading in docs/kafka-differences.md
    case: str  # a case name, or a prefix ending in "*"
    path: str  # a field path without indices ("topics.error_code"), or "*" for any
    versions: range | None = None
    principals: tuple[str, ...] | None = None

    def matches(self, case: str, version: int, principal: str, difference: FieldDifference) -> bool:
        if not (case == self.case or (self.case.endswith("*") and case.startswith(self.case[:-1]))):
            return False
        if self.versions is not None and version not in self.versions:
            return False
        if self.principals is not None and principal not in self.principals:
            return False
        return self.path == "*" or _INDEX.sub("", difference.path) == self.path


DELIBERATE: tuple[Deliberate, ...] = (
    # Kafka never answers; ksgate answers CLUSTER_AUTHORIZATION_FAILED.
    Deliberate("describe-scram-unanswered", "describe_user_scram_credentials.all", "<outcome>",
               principals=("cf-none", "cf-part")),
    # cf-full holds CREATE on the cluster and the request mixes "bad name!" with legal names.
    Deliberate("illegal-name-guard", "create_topics.validate", "*", principals=("cf-full",)),
    Deliberate("illegal-name-guard", "metadata.mixed", "topics.topic_authorized_operations",
               versions=range(8, 10), principals=("cf-super",)),
    # cf-describe may describe cf-missing but not delete it; ksgate cannot tell that it does not exist.
    Deliberate("delete-topics-existence", "delete_topics.unknown", "*", principals=("cf-describe",)),
    # Kafka names a denied topic's real id (its existence); ksgate the zero id.
    Deliberate("share-offsets-denied-topic-id", "alter_share_group_offsets.*", "responses.topic_id",
               principals=("cf-full",)),
    # Kafka resolves a host name given as an ip quota entity (DNS, at request time); ksgate takes addresses only.
    Deliberate("quota-ip-addresses-only", "alter_client_quotas.ip_host_name", "entries.error_code",
               principals=("cf-super", "cf-full")),
)

# API version ranges ksgate offers differently from Kafka, by API key, each with the doc's id.
VERSION_GAPS: dict[int, str] = {
    **{key: "inter-broker-apis" for key in (
        ApiKey.WRITE_TXN_MARKERS, ApiKey.DESCRIBE_QUORUM, ApiKey.UNREGISTER_BROKER, ApiKey.ADD_RAFT_VOTER,
        ApiKey.REMOVE_RAFT_VOTER, ApiKey.INITIALIZE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE,
        ApiKey.WRITE_SHARE_GROUP_STATE, ApiKey.DELETE_SHARE_GROUP_STATE, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
        94)},  # UnregisterController (Kafka 4.4)
}


def deliberate(case: str, version: int, principal: str, difference: FieldDifference) -> Deliberate | None:
    for entry in DELIBERATE:
        if entry.matches(case, version, principal, difference):
            return entry
    return None
