"""AclIndex: the bounded prefix walk, immutable snapshots and the delta/compaction trade-off."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, overload

from sortedcontainers import SortedList

from authz.index import AclIndex, _prefixes_of, _Table
from authz.model import AclBinding
from tests.authz.helpers import ALLOW, DENY, GROUP, LITERAL, PREFIXED, TOPIC, Op, acl


def names(buckets: tuple[Any, ...]) -> set[str]:
    return {b.bindings[0].pattern.name for b in buckets}


def sealed(prefixes: list[str]) -> _Table:
    return _Table({}, {}, SortedList(prefixes)).seal()


class Counting(Sequence[str]):
    """A sorted sequence that counts how many elements a lookup touches."""

    def __init__(self, items: tuple[str, ...]) -> None:
        self.items = items
        self.reads = 0

    def __len__(self) -> int:
        return len(self.items)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        self.reads += 1
        return self.items[i]


def walk(prefixes: list[str], name: str) -> list[str]:
    table = sealed(prefixes)
    return list(_prefixes_of(table.floor, table.parent, name))


def test_prefix_walk_is_one_bisect_plus_a_climb_however_many_acls() -> None:
    siblings = [f"team-{i:05d}." for i in range(100_000)]
    table = sealed([*siblings, "t", "te", "team-", "team-00042.orders", "team-00042.o", "team-00042.p", "u"])
    floor = Counting(table.floor)
    found = list(_prefixes_of(floor, table.parent, "team-00042.orders-eu"))
    assert found == ["team-00042.orders", "team-00042.o", "team-00042.", "team-", "te", "t"]
    assert floor.reads <= 18  # log2(100 007) ≈ 17 probes of the bisect, plus the floor itself


def test_prefix_walk_skips_siblings_and_longer_prefixes() -> None:
    stored = ["ab", "abc", "abd", "abcdx", "b", "a-", "abca"]
    assert walk(stored, "abcd") == ["abc", "ab"]
    assert walk(stored, "abcdy") == ["abc", "ab"]  # the floor "abcdx" is a sibling, not a prefix
    assert walk(stored, "abd-1") == ["abd", "ab"]
    assert walk(stored, "zzz") == []
    assert walk(stored, "a") == []
    assert walk(stored, "a-") == ["a-"]
    assert walk([], "a") == []


def test_matching_buckets_cover_literal_wildcard_and_prefixes_of_one_type() -> None:
    index = AclIndex([acl("orders"), acl("*"), acl("ord", pattern=PREFIXED), acl("orders", pattern=PREFIXED),
                      acl("orders-eu", pattern=PREFIXED), acl("ord"), acl("orders", resource_type=GROUP)])
    assert names(index.matching_buckets(TOPIC, "orders")) == {"orders", "*", "ord"}
    assert len(index.matching_buckets(TOPIC, "orders")) == 4  # LITERAL and PREFIXED "orders" are two buckets
    assert names(index.matching_buckets(TOPIC, "x")) == {"*"}
    assert names(index.matching_buckets(GROUP, "orders")) == {"orders"}
    assert index.matching_buckets(GROUP, "x") == ()


def test_duplicate_bindings_are_stored_once() -> None:
    index = AclIndex([acl("t"), acl("t"), acl("t", Op.WRITE)])
    assert len(index) == 2
    assert len(index.with_changes(added=[acl("t")])) == 2


def test_with_changes_leaves_the_old_snapshot_untouched() -> None:
    old = AclIndex([acl("t"), acl("p", pattern=PREFIXED)])
    new = old.with_changes(added=[acl("q", pattern=PREFIXED), acl("t", Op.WRITE)], removed=[acl("p", pattern=PREFIXED)])
    assert set(old) == {acl("t"), acl("p", pattern=PREFIXED)}
    assert set(new) == {acl("t"), acl("t", Op.WRITE), acl("q", pattern=PREFIXED)}
    assert names(old.matching_buckets(TOPIC, "pq")) == {"p"}
    assert names(new.matching_buckets(TOPIC, "pq")) == set()
    assert names(new.matching_buckets(TOPIC, "qp")) == {"q"}
    assert old.with_changes() is old
    assert old.with_changes(removed=[acl("absent")]) is old


def test_a_single_add_goes_to_the_delta_not_a_rebuild() -> None:
    base = AclIndex([acl(f"topic-{i}") for i in range(5000)])
    one = base.with_changes(added=[acl("topic-new", pattern=PREFIXED)])
    assert one.delta_size == 1 and len(one) == 5001
    assert one._base is base._base  # the big layer is shared, not copied
    two = one.with_changes(removed=[acl("topic-7")])  # a tombstone over the base
    assert two.delta_size == 2 and acl("topic-7") not in two and acl("topic-7") in one
    assert two.matching_buckets(TOPIC, "topic-7") == ()
    assert names(two.matching_buckets(TOPIC, "topic-new-1")) == {"topic-new"}


def test_the_delta_is_compacted_into_a_new_base_past_the_threshold() -> None:
    index = AclIndex([acl("a")], compact_threshold=3)
    for i in range(3):
        index = index.with_changes(added=[acl(f"p{i}", pattern=PREFIXED)])
    assert index.delta_size == 3
    index = index.with_changes(added=[acl("p3", pattern=PREFIXED)])
    assert index.delta_size == 0
    assert set(index) == {acl("a"), *(acl(f"p{i}", pattern=PREFIXED) for i in range(4))}


def test_emptying_a_delta_only_pattern_drops_it_from_the_delta() -> None:
    index = AclIndex([]).with_changes(added=[acl("p", pattern=PREFIXED)])
    index = index.with_changes(removed=[acl("p", pattern=PREFIXED)])
    assert index.delta_size == 0 and len(index) == 0 and index.matching_buckets(TOPIC, "pq") == ()


def test_incremental_changes_agree_with_a_rebuild() -> None:
    rng = random.Random(7)
    universe: list[AclBinding] = [
        acl(name, op, perm, pattern=pattern, principal=principal)
        for name in ("a", "ab", "abc", "b", "*", "ba")
        for pattern in (PREFIXED, LITERAL)
        for op in (Op.READ, Op.ALL)
        for perm in (ALLOW, DENY)
        for principal in ("User:alice", "User:*")
    ]
    index = AclIndex(compact_threshold=5)
    expected: set[AclBinding] = set()
    for _ in range(300):
        added = rng.sample(universe, rng.randint(0, 3))
        removed = rng.sample(universe, rng.randint(0, 3))
        index = index.with_changes(added, removed)
        expected = (expected - set(removed)) | set(added)
        assert set(index) == expected and len(index) == len(expected)
        rebuilt = AclIndex(expected)
        for name in ("a", "abcd", "b", "bab", "*", "zz"):
            got = {b for bucket in index.matching_buckets(TOPIC, name) for b in bucket.bindings}
            want = {b for bucket in rebuilt.matching_buckets(TOPIC, name) for b in bucket.bindings}
            assert got == want, name
