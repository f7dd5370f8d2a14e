"""The one merge rule of partial answers: the gateway's per-item errors and the upstream's answers, fail closed.

See the ``Rewrite`` paragraph of authz/request_policy.py for the rule; every policy that merges calls ``merge_items``.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence

from authz.request_policy import Body

log = logging.getLogger("ksgate.authz")

# One item the client asked for, in the order the response lists it: the gateway's error entry, or
# (None, key) = relayed, answered by the upstream's item(s) of that key.
Slot = tuple[Body | None, Hashable]
Keys = Callable[[Body], Iterable[Hashable]]


def by_name(item: Body) -> tuple[Hashable, ...]:
    return (item["name"],)


def merge_items(slots: Sequence[Slot], upstream: Iterable[Body], keys: Keys = by_name, *,
                unanswered: Callable[[Hashable], Body | None] | None = None,
                unclaimed: Callable[[Body], Body | None] | None = None) -> list[Body]:
    """The response items: each slot in turn, an error entry as it is, a relayed key with the upstream's item.

    A relayed slot takes the next upstream item of its key (repeated keys in turn, in the upstream's order); a
    key's last slot also takes that key's remaining items (an upstream may split one topic into entries).
    An asked-for item the upstream did not answer is left out, unless ``unanswered`` gives an entry for it.
    An upstream item no slot claimed is dropped (fail closed), unless ``unclaimed`` (the fetch sessions, whose
    earlier requests asked for it) gives what to send instead; ``keys`` may give an item several keys.
    """
    items = list(upstream)
    pending: dict[Hashable, deque[int]] = {}
    for position, item in enumerate(items):
        for key in keys(item):
            pending.setdefault(key, deque()).append(position)
    slots_left: dict[Hashable, int] = {}
    for error, key in slots:
        if error is None:
            slots_left[key] = slots_left.get(key, 0) + 1
    used: set[int] = set()
    out: list[Body] = []
    for error, key in slots:
        if error is not None:
            out.append(error)
            continue
        slots_left[key] -= 1
        taken = _take(pending.get(key), used, everything=slots_left[key] == 0)
        out.extend(items[position] for position in taken)
        if not taken and unanswered is not None and (entry := unanswered(key)) is not None:
            out.append(entry)
    dropped = 0
    for position, item in enumerate(items):
        if position in used:
            continue
        kept = unclaimed(item) if unclaimed is not None else None
        if kept is None:
            dropped += 1
        else:
            out.append(kept)
    if dropped:
        # The count only: the items name topics or groups the principal may not be allowed to see.
        log.debug("merge dropped %d upstream item(s) nobody asked for", dropped)
    return out


def _take(queue: deque[int] | None, used: set[int], *, everything: bool) -> list[int]:
    taken: list[int] = []
    while queue:
        position = queue.popleft()
        if position in used:  # claimed already through another of its keys
            continue
        used.add(position)
        taken.append(position)
        if not everything:
            break
    return taken


def once_per_partition(slots: Sequence[Slot], partitions: str, index: str) -> list[Slot]:
    """``slots`` as Kafka answers a request it reads into a map keyed by topic-partition (Produce, Fetch,
    DeleteRecords): each key once, at its first place, and an error entry holding each of the key's partitions
    once (those of every copy).  A relayed key needs no more: the upstream reads its copies into the same map."""
    first: dict[Hashable, Slot] = {}
    listed: dict[Hashable, set[int]] = {}
    for error, key in slots:
        if key not in first:
            first[key] = (None if error is None else {**error, partitions: []}, key)
            listed[key] = set()
        entry = first[key][0]
        if error is None or entry is None:
            continue
        for partition in error[partitions]:
            if partition[index] not in listed[key]:
                listed[key].add(partition[index])
                entry[partitions].append(partition)
    return list(first.values())
