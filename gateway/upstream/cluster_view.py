"""What the gateway knows about the upstream cluster: its brokers and the API versions it speaks.

Fed at start-up by a probe and afterwards by every Metadata/DescribeCluster response that
passes through, before addresses are rewritten: the sessions report what responses taught as
actions (Discovered) and the server applies them here, on the event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ClusterView:
    nodes: dict[int, tuple[str, int]] = field(default_factory=dict)
    # The upstream cluster's id (Metadata v2+): what an ApiVersions v5 request naming a cluster is checked against.
    cluster_id: str | None = None
    api_ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Feature fields of the upstream's ApiVersions response at the highest version both speak (v4+ lists the
    # features whose lowest level is 0), passed on to clients as Kafka filters them for each client's version.
    features: dict[str, Any] = field(default_factory=dict)
    # Topic ids seen in Metadata/DescribeTopicPartitions responses: how requests naming
    # topics by id are authorized by name. Replaced whole when it changes, never edited, so a
    # request holds a snapshot (gateway/session/request_context.py) by keeping a reference.
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)
    # Partitions per topic name as Metadata responses last listed them: what CreatePartitions and
    # DeleteTopics count against controller_mutation_rate. Replaced whole, as topic_names.
    partition_counts: dict[str, int] = field(default_factory=dict)

    def learn_topics(self, topics: list[dict[str, Any]]) -> None:
        self.learn_topic_ids((topic.get("topic_id"), topic.get("name")) for topic in topics)
        self.learn_partition_counts((name, len(topic["partitions"])) for topic in topics
                                    if not topic.get("error_code") and (name := topic.get("name"))
                                    and topic.get("partitions"))

    def learn_topic_ids(self, pairs: Iterable[tuple[uuid.UUID | None, str | None]]) -> None:
        known = self.topic_names
        new = {topic_id: name for topic_id, name in pairs
               if topic_id is not None and name and topic_id.int and known.get(topic_id) != name}
        if new:
            self.topic_names = {**known, **new}

    def learn_partition_counts(self, counts: Iterable[tuple[str, int]]) -> None:
        known = self.partition_counts
        new = {name: n for name, n in counts if known.get(name) != n}
        if new:
            self.partition_counts = {**known, **new}

    def learn_node(self, node_id: int, host: str, port: int) -> bool:
        """Record a broker's address; True when the node was not known before (it may need a listener)."""
        known = self.nodes.get(node_id)
        self.nodes[node_id] = (host, port)
        return known is None

    def learn_api_versions(self, response: dict[str, Any]) -> None:
        """The API ranges of an ApiVersions answer (its features: ``learn_features``, given the answer at the
        highest version both sides speak)."""
        self.api_ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}

    def learn_features(self, response: dict[str, Any]) -> None:
        """The feature fields of an ApiVersions answer (a level changed with kafka-features shows in the next
        one). Replaced whole, never edited, as topic_names."""
        self.features = {key: response[key] for key in
                         ("supported_features", "finalized_features_epoch", "finalized_features")
                         if key in response}
