"""A learned topic map (topic id → name, name → partition count): the upstream's latest full listing and
what responses taught since, each immutable, so a request keeps a snapshot by holding a reference.

Learning copies only what was learned since the listing (bounded, and folded into the next listing), never the
listing itself: with topic churn a copy of the whole map per new topic would make learning quadratic.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


@dataclass(slots=True, frozen=True, eq=False)
class TopicMap(Mapping[K, V], Generic[K, V]):
    """Read as one mapping; ``learned`` wins over ``listed`` (a response newer than the listing)."""

    listed: Mapping[K, V] = field(default_factory=dict)  # the latest listing of every topic
    learned: Mapping[K, V] = field(default_factory=dict)  # learned from responses since that listing

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        value = self.learned.get(key)
        return value if value is not None else self.listed.get(key, default)

    def __getitem__(self, key: K) -> V:
        value = self.learned.get(key)
        return value if value is not None else self.listed[key]

    def __contains__(self, key: object) -> bool:
        return key in self.learned or key in self.listed

    def __iter__(self) -> Iterator[K]:
        yield from self.learned
        yield from (key for key in self.listed if key not in self.learned)

    def __len__(self) -> int:
        return len(self.listed) + sum(1 for key in self.learned if key not in self.listed)

    def with_learned(self, pairs: Iterable[tuple[K, V]], max_entries: int) -> TopicMap[K, V]:
        """This map with ``pairs`` learned: self when nothing changes. A key not known yet is added only while
        the map holds fewer than ``max_entries`` (a changed value always replaces the old one)."""
        room = max_entries - len(self.listed) - len(self.learned)
        new: dict[K, V] = {}
        for key, value in pairs:
            if self.get(key) == value:
                continue
            if key not in self and key not in new:
                if room <= 0:
                    continue
                room -= 1
            new[key] = value
        return TopicMap(self.listed, {**self.learned, **new}) if new else self

    def relisted(self, listing: Iterable[tuple[K, V]], since: Mapping[K, V], max_entries: int) -> TopicMap[K, V]:
        """A new listing of every topic replaces the old one (a topic it lacks is forgotten), keeping what was
        learned after it was asked for (not in ``since``, the ``learned`` of then). At most ``max_entries``."""
        listed: dict[K, V] = {}
        for key, value in listing:
            if len(listed) >= max_entries:
                break
            listed[key] = value
        kept = {key: value for key, value in self.learned.items() if since.get(key) != value}
        return TopicMap(listed, kept)
