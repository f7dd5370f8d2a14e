"""What the gateway knows about the upstream cluster: its brokers and the API versions it speaks.

Fed at start-up by a probe and afterwards by every Metadata/DescribeCluster response that
passes through, before addresses are rewritten.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class ClusterView:
    nodes: dict[int, tuple[str, int]] = field(default_factory=dict)
    api_ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Feature fields of the upstream's ApiVersions response, passed on to clients.
    features: dict[str, Any] = field(default_factory=dict)
    on_new_node: list[Callable[[int], None]] = field(default_factory=list)
    # Topic ids seen in Metadata/DescribeTopicPartitions responses: how requests naming
    # topics by id are authorized by name.
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)

    def learn_topics(self, topics: list[dict[str, Any]]) -> None:
        for topic in topics:
            topic_id, name = topic.get("topic_id"), topic.get("name")
            if topic_id is not None and name and topic_id.int:
                self.topic_names[topic_id] = name

    def learn_node(self, node_id: int, host: str, port: int) -> None:
        known = self.nodes.get(node_id)
        if known == (host, port):
            return
        self.nodes[node_id] = (host, port)
        if known is None:
            for callback in self.on_new_node:
                callback(node_id)

    def learn_api_versions(self, response: dict[str, Any]) -> None:
        self.api_ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in response["api_keys"]}
        self.features = {key: response[key] for key in
                         ("supported_features", "finalized_features_epoch", "finalized_features")
                         if key in response}
