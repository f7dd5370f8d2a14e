"""What the gateway knows about the upstream cluster: its brokers and the API versions it speaks.

Fed at start-up by a probe and afterwards by every Metadata/DescribeCluster response that
passes through, before addresses are rewritten: the sessions report what responses taught as
actions (Discovered) and the server applies them here, on the event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.upstream.topic_map import TopicMap

# More topics than any practical Kafka cluster holds (a topic known costs ~250 bytes: its id, name and count).
DEFAULT_MAX_TOPICS = 500_000
# Topics learned from responses since the latest listing beyond which a new listing is asked for.
RELIST_AFTER_LEARNING = 1024
TopicMaps = tuple[Mapping[uuid.UUID, str], Mapping[str, int]]


@dataclass(slots=True)
class ClusterView:
    nodes: dict[int, tuple[str, int]] = field(default_factory=dict)
    # The upstream cluster's id (Metadata v2+): what an ApiVersions v5 request naming a cluster is checked against.
    cluster_id: str | None = None
    api_ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Feature fields of the upstream's ApiVersions response at the highest version both speak (v4+ lists the
    # features whose lowest level is 0), passed on to clients as Kafka filters them for each client's version.
    features: dict[str, Any] = field(default_factory=dict)
    # Topic ids seen in Metadata/DescribeTopicPartitions responses: how requests naming topics by id are
    # authorized by name. Replaced whole when it changes, never edited, so a request holds a snapshot
    # (gateway/session/request_context.py) by keeping a reference. The topic listing (``relist``, at least every
    # ksgate.topic.cache.refresh.ms) replaces it, so deleted topics are forgotten; between listings at most
    # ``max_topics`` are known: an id beyond them is a miss (UNKNOWN_TOPIC_ID, which clients retry, and a listing).
    topic_names: TopicMap[uuid.UUID, str] = field(default_factory=TopicMap)
    # Partitions per topic name as Metadata responses last listed them: what CreatePartitions and
    # DeleteTopics count against controller_mutation_rate. Replaced whole, and bounded, as topic_names: a topic
    # recreated with fewer partitions has its new count after the next listing at the latest.
    partition_counts: TopicMap[str, int] = field(default_factory=TopicMap)
    max_topics: int = DEFAULT_MAX_TOPICS  # ksgate.topic.cache.max.topics

    def relist(self, topics: list[dict[str, Any]], since: TopicMaps) -> bool:
        """A Metadata answer listing every topic replaces both maps (keeping what responses taught after it was
        asked for: ``since``, ``learned_so_far()`` of then). True when it lists more than ``max_topics``."""
        self.topic_names = self.topic_names.relisted(_ids(topics), since[0], self.max_topics)
        self.partition_counts = self.partition_counts.relisted(_counts(topics), since[1], self.max_topics)
        return len(topics) > self.max_topics

    def learned_so_far(self) -> TopicMaps:
        return self.topic_names.learned, self.partition_counts.learned

    def learn_topic_ids(self, pairs: Iterable[tuple[uuid.UUID | None, str | None]]) -> bool:
        """Merge what a response taught; True when enough was learned since the listing that it is time for
        another (what is learned is copied at each change: kept small)."""
        self.topic_names = self.topic_names.with_learned(
            ((topic_id, name) for topic_id, name in pairs if topic_id is not None and name and topic_id.int),
            self.max_topics)
        return len(self.topic_names.learned) >= RELIST_AFTER_LEARNING

    def learn_partition_counts(self, counts: Iterable[tuple[str, int]]) -> bool:
        self.partition_counts = self.partition_counts.with_learned(counts, self.max_topics)
        return len(self.partition_counts.learned) >= RELIST_AFTER_LEARNING

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


def _ids(topics: list[dict[str, Any]]) -> Iterable[tuple[uuid.UUID, str]]:
    """The real ids with a name (a topic in error has the zero id)."""
    return ((topic_id, name) for topic in topics
            if (topic_id := topic.get("topic_id")) is not None and topic_id.int and (name := topic.get("name")))


def _counts(topics: list[dict[str, Any]]) -> Iterable[tuple[str, int]]:
    """Metadata lists every partition of a topic it answers without error."""
    return ((name, len(partitions)) for topic in topics
            if not topic.get("error_code") and (name := topic.get("name")) and (partitions := topic.get("partitions")))
