"""AclIndex: an immutable snapshot of ACL bindings, indexed for the authorizer's lookups.

Finds every stored pattern that applies to a resource name without scanning all ACLs (design below).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from sortedcontainers import SortedList

from auth.client_address import canonical_host
from authz.model import (
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclValidationError,
    PatternType,
    ResourceType,
    operation_matches,
)

# --- design -----------------------------------------------------------------------------------
#
# Layout (per resource type, in a ``_Table``):
#
# * ``literal``  — dict: name → Bucket of the LITERAL bindings on exactly that name.  The
#   wildcard ``*`` is an ordinary key here, so "exact name" and "wildcard" are two O(1) gets.
# * ``prefixed`` — dict: prefix → Bucket of the PREFIXED bindings with that prefix.
# * ``prefix_names`` — a ``SortedList`` of the distinct prefixes in plain ascending order, and,
#   derived from it when the table is sealed, ``parent``: each prefix's longest proper prefix
#   that is also stored (the prefixes form a forest; one pass over the sorted names with a stack).
#
# The walk (``_prefixes_of``).  Kafka sorts names in reverse and re-seeks at every point where
# the scan diverges from the resource name; this is the mirror image, with the re-seeks
# replaced by parent links.  Every prefix of a name N sorts at or before N, so take K = the
# greatest stored prefix <= N (one bisect).  Then:
#
# * every stored prefix P of N is an ancestor-or-self of K: P <= K, and P, K and N agree on
#   the first len(P) characters — were K to differ from N before position len(P), K would not
#   lie between P and N;
# * conversely an ancestor of K is a prefix of N iff N starts with it.
#
# So the matches are exactly the ancestors-or-self of K that N starts with, and as ancestors
# get shorter, once one matches all further ones do.  Cost: one O(log n) bisect plus a climb
# of at most the nesting depth of K, independent of the number of ACLs — sibling prefixes
# ("foo-a" while looking up "foo-b1") are never visited.
#
# Why the sealed tuple: sortedcontainers' ``bisect_right``/``__getitem__`` are pure Python
# (~5 µs per lookup here), the stdlib ``bisect`` on a tuple is C (~0.3 µs).  A sealed table
# never changes, so the tuple is built once (O(p)) next to the ``SortedList`` that the delta
# layer updates in place while a change is being built.
#
# Updates (``with_changes``): a snapshot is two layers, ``base`` and a small ``delta`` whose
# buckets shadow base's (an empty bucket is a tombstone).  A change copies only the delta
# (O(size of delta)) and shares the base.  When the delta outgrows ``compact_threshold``
# (default 8·sqrt(n), at least 1024 patterns) it is folded into a new base: the touched
# resource types' dicts are copied (C speed, O(n)) and, if prefixes changed, their names are
# re-sorted (O(p log p)).  A single add thus costs O(sqrt n) amortized instead of O(n).  The
# price: while the delta is non-empty, lookups consult both layers (slower; the authorizer's
# per-snapshot memo hides most of it).  A batch larger than the threshold just compacts.

PrincipalKey = tuple[str, str]
WILDCARD_PRINCIPAL_KEY: PrincipalKey = ("User", "*")
MIN_COMPACT_THRESHOLD = 1024


def principal_key(principal: str) -> PrincipalKey:
    """``Type:name`` split at the first colon, as Kafka's StandardAcl.kafkaPrincipal()."""
    principal_type, sep, name = principal.partition(":")
    if not sep:
        raise AclValidationError(f"Could not parse principal from `{principal}` (no colon)")
    return principal_type, name


def _mask(operation: AclOperation, permission: AclPermissionType) -> int:
    """Bit r set ⇔ an ACE (operation, permission) applies to a request for operation r."""
    return sum(1 << r for r in AclOperation if operation_matches(operation, permission, r))


_MASKS = {(op, perm): _mask(op, perm) for op in AclOperation for perm in AclPermissionType}


class Grants:
    """The ACEs of one bucket for one (principal, host): operation bit masks plus the bindings."""

    __slots__ = ("allow", "bindings", "deny")

    def __init__(self) -> None:
        self.deny = 0
        self.allow = 0
        self.bindings: list[AclBinding] = []

    def first(self, permission: AclPermissionType, operation: AclOperation) -> AclBinding:
        """The binding behind a mask hit (only called after the mask said there is one)."""
        for binding in self.bindings:
            entry = binding.entry
            if entry.permission_type == permission and operation_matches(entry.operation, permission, operation):
                return binding
        raise AssertionError("mask and bindings disagree")


GrantTable = dict[PrincipalKey, dict[str, Grants]]


class Bucket:
    """All bindings on one (resource type, pattern type, name), compiled lazily for lookups."""

    __slots__ = ("bindings", "compiled")

    def __init__(self, bindings: tuple[AclBinding, ...]) -> None:
        self.bindings = bindings
        self.compiled: GrantTable | None = None  # see ``table``

    def __len__(self) -> int:
        return len(self.bindings)

    @property
    def table(self) -> GrantTable:
        """principal → host → Grants, built on first use (a benign race may build it twice)."""
        table = self.compiled
        return table if table is not None else self.compile()

    def compile(self) -> GrantTable:
        table: GrantTable = {}
        for binding in self.bindings:
            entry = binding.entry
            hosts = table.setdefault(principal_key(entry.principal), {})
            # Keyed by the canonical host, as clients' addresses are: ``::ffff:10.1.2.3`` is 10.1.2.3.
            host = canonical_host(entry.host)
            grants = hosts.get(host)
            if grants is None:
                grants = hosts[host] = Grants()
            if entry.permission_type == AclPermissionType.DENY:
                grants.deny |= _MASKS[entry.operation, entry.permission_type]
            else:
                grants.allow |= _MASKS[entry.operation, entry.permission_type]
            grants.bindings.append(binding)
        self.compiled = table
        return table


_EMPTY = Bucket(())


class _Table:
    """One resource type's buckets within one layer; immutable once ``seal()`` has run."""

    __slots__ = ("floor", "literal", "parent", "prefix_names", "prefixed")

    def __init__(self, literal: dict[str, Bucket], prefixed: dict[str, Bucket], prefix_names: Any) -> None:
        self.literal = literal
        self.prefixed = prefixed
        self.prefix_names = prefix_names  # SortedList[str] (sortedcontainers ships no type hints)
        self.floor: tuple[str, ...] = ()
        self.parent: dict[str, str | None] = {}

    def copy(self) -> _Table:
        return _Table(dict(self.literal), dict(self.prefixed), SortedList(self.prefix_names))

    def seal(self) -> _Table:
        """Derive the lookup structures from ``prefix_names``; no changes after this."""
        self.floor = tuple(self.prefix_names)
        parent: dict[str, str | None] = {}
        ancestors: list[str] = []  # the chain of stored prefixes of the current name
        for name in self.floor:
            while ancestors and not name.startswith(ancestors[-1]):
                ancestors.pop()
            parent[name] = ancestors[-1] if ancestors else None
            ancestors.append(name)
        self.parent = parent
        return self


_Layer = dict[ResourceType, _Table]
_Key = tuple[ResourceType, PatternType, str]


def _prefixes_of(floor: Sequence[str], parent: Mapping[str, str | None], name: str) -> Iterator[str]:
    """Stored prefixes of ``name``, longest first (see the module docstring)."""
    i = bisect_right(floor, name)
    if i == 0:
        return
    key: str | None = floor[i - 1]
    while key is not None and not name.startswith(key):
        key = parent[key]
    while key is not None:
        yield key
        key = parent[key]


def _bucket_map(table: _Table, pattern_type: PatternType) -> dict[str, Bucket]:
    return table.literal if pattern_type == PatternType.LITERAL else table.prefixed


def _build_layer(groups: dict[_Key, Bucket]) -> _Layer:
    layer: _Layer = {}
    for (resource_type, pattern_type, name), bucket in groups.items():
        table = layer.get(resource_type)
        if table is None:
            table = layer[resource_type] = _Table({}, {}, None)
        _bucket_map(table, pattern_type)[name] = bucket
    for table in layer.values():
        table.prefix_names = SortedList(table.prefixed)
        table.seal()
    return layer


class AclIndex:
    """An immutable set of ACL bindings.  Safe to share between threads without locks."""

    __slots__ = ("_base", "_by_principal", "_count", "_delta", "_delta_keys", "compact_threshold")

    def __init__(self, bindings: Iterable[AclBinding] = (), *, compact_threshold: int | None = None) -> None:
        groups: dict[_Key, dict[AclBinding, None]] = {}
        for binding in bindings:
            pattern = binding.pattern
            if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
                raise AclValidationError(f"Invalid patternType {pattern.pattern_type.name}")
            principal_key(binding.entry.principal)
            key = (pattern.resource_type, pattern.pattern_type, pattern.name)
            group = groups.get(key)
            if group is None:
                group = groups[key] = {}
            group[binding] = None
        self._base = _build_layer({key: Bucket(tuple(group)) for key, group in groups.items()})
        self._delta: _Layer = {}
        self._delta_keys = 0
        self._count = sum(len(group) for group in groups.values())
        self._by_principal: dict[ResourceType, dict[PrincipalKey, list[AclBinding]]] = {}
        self.compact_threshold = compact_threshold

    # --- reading -------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[AclBinding]:
        for resource_type in sorted(self._base.keys() | self._delta.keys()):
            yield from self.bindings_of_type(resource_type)

    def __contains__(self, binding: object) -> bool:
        if not isinstance(binding, AclBinding):
            return False
        pattern = binding.pattern
        bucket = self._bucket(pattern.resource_type, pattern.pattern_type, pattern.name)
        return bucket is not None and binding in bucket.bindings

    def _bucket(self, resource_type: ResourceType, pattern_type: PatternType, name: str) -> Bucket | None:
        """The effective (delta over base) non-empty bucket for one pattern, or None."""
        table = self._delta.get(resource_type)
        if table is not None:
            bucket = _bucket_map(table, pattern_type).get(name)
            if bucket is not None:
                return bucket if bucket.bindings else None
        table = self._base.get(resource_type)
        if table is None:
            return None
        return _bucket_map(table, pattern_type).get(name)

    def matching_buckets(self, resource_type: ResourceType, name: str) -> tuple[Bucket, ...]:
        """Every non-empty bucket whose pattern applies to the resource ``name``.

        That is: LITERAL ``name``, LITERAL ``*``, and each PREFIXED pattern that ``name``
        starts with.  Empty ⇔ no ACL at all references the resource.
        """
        if self._delta:
            return self._matching_buckets_layered(resource_type, name)
        table = self._base.get(resource_type)  # the common case: one layer, inlined
        if table is None:
            return ()
        found: list[Bucket] = []
        literal = table.literal
        bucket = literal.get(name)
        if bucket is not None:
            found.append(bucket)
        if name != WILDCARD_RESOURCE:
            bucket = literal.get(WILDCARD_RESOURCE)
            if bucket is not None:
                found.append(bucket)
        floor = table.floor
        if floor:
            i = bisect_right(floor, name)
            if i:
                parent = table.parent
                key: str | None = floor[i - 1]
                while key is not None and not name.startswith(key):
                    key = parent[key]
                prefixed = table.prefixed
                while key is not None:
                    found.append(prefixed[key])
                    key = parent[key]
        return tuple(found)

    def _matching_buckets_layered(self, resource_type: ResourceType, name: str) -> tuple[Bucket, ...]:
        found: list[Bucket] = []
        literal = self._bucket(resource_type, PatternType.LITERAL, name)
        if literal is not None:
            found.append(literal)
        if name != WILDCARD_RESOURCE:
            wildcard = self._bucket(resource_type, PatternType.LITERAL, WILDCARD_RESOURCE)
            if wildcard is not None:
                found.append(wildcard)
        prefixes: list[str] = []
        for layer in (self._delta, self._base):
            table = layer.get(resource_type)
            if table is not None and table.floor:
                prefixes.extend(p for p in _prefixes_of(table.floor, table.parent, name) if p not in prefixes)
        for prefix in prefixes:
            bucket = self._bucket(resource_type, PatternType.PREFIXED, prefix)
            if bucket is not None:
                found.append(bucket)
        return tuple(found)

    def _buckets_of_type(self, resource_type: ResourceType) -> Iterator[Bucket]:
        delta = self._delta.get(resource_type)
        base = self._base.get(resource_type)
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            shadow = _bucket_map(delta, pattern_type) if delta is not None else {}
            if base is not None:
                for name, bucket in _bucket_map(base, pattern_type).items():
                    if name not in shadow:
                        yield bucket
            yield from shadow.values()

    def bindings_of_type(self, resource_type: ResourceType) -> Iterator[AclBinding]:
        for bucket in self._buckets_of_type(resource_type):
            yield from bucket.bindings

    def bindings_of_principals(self, resource_type: ResourceType,
                               principals: Sequence[PrincipalKey]) -> list[AclBinding]:
        """Bindings on ``resource_type`` whose principal is one of ``principals``.

        The per-principal grouping is built on the first call for a resource type (O(ACLs of
        that type)) and kept for the life of this snapshot.
        """
        groups = self._by_principal.get(resource_type)
        if groups is None:
            groups = {}
            for binding in self.bindings_of_type(resource_type):
                groups.setdefault(principal_key(binding.entry.principal), []).append(binding)
            self._by_principal[resource_type] = groups
        out: list[AclBinding] = []
        for key in dict.fromkeys(principals):
            out.extend(groups.get(key, ()))
        return out

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Every binding the filter matches (Kafka's ``Authorizer.acls``)."""
        pattern_filter = binding_filter.pattern_filter
        if pattern_filter.resource_type == ResourceType.ANY:
            types: Iterable[ResourceType] = sorted(self._base.keys() | self._delta.keys())
        else:
            types = (pattern_filter.resource_type,)
        name = pattern_filter.name
        out: list[AclBinding] = []
        for resource_type in types:
            buckets: Iterable[Bucket]
            if name is None:
                buckets = self._buckets_of_type(resource_type)
            elif pattern_filter.pattern_type == PatternType.MATCH:
                buckets = self.matching_buckets(resource_type, name)
            else:
                pattern_types = ((PatternType.LITERAL, PatternType.PREFIXED)
                                 if pattern_filter.pattern_type == PatternType.ANY
                                 else (pattern_filter.pattern_type,))
                buckets = [b for pt in pattern_types if (b := self._bucket(resource_type, pt, name)) is not None]
            out.extend(b for bucket in buckets for b in bucket.bindings if binding_filter.matches(b))
        return out

    # --- changing --------------------------------------------------------------------------

    def _threshold(self) -> int:
        if self.compact_threshold is not None:
            return self.compact_threshold
        return max(MIN_COMPACT_THRESHOLD, 8 * math.isqrt(self._count))

    def with_changes(self, added: Iterable[AclBinding] = (),
                     removed: Iterable[AclBinding] = ()) -> AclIndex:
        """A new snapshot with ``removed`` taken out, then ``added`` put in; ``self`` is unchanged.

        Adding a binding already present, or removing one that is absent, is a no-op (as in
        Kafka, where identical ACLs are deduplicated).
        """
        changes: dict[_Key, tuple[list[AclBinding], list[AclBinding]]] = {}
        for i, batch in enumerate((removed, added)):
            for binding in batch:
                pattern = binding.pattern
                if i == 1:
                    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
                        raise AclValidationError(f"Invalid patternType {pattern.pattern_type.name}")
                    principal_key(binding.entry.principal)
                key = (pattern.resource_type, pattern.pattern_type, pattern.name)
                changes.setdefault(key, ([], []))[i].append(binding)
        if not changes:
            return self

        new_buckets: dict[_Key, Bucket] = {}
        count = self._count
        for key, (gone, new) in changes.items():
            old = self._bucket(*key)
            current = dict.fromkeys(old.bindings) if old is not None else {}
            before = len(current)
            for binding in gone:
                current.pop(binding, None)
            current.update(dict.fromkeys(new))
            if len(current) == before and (old is None or all(b in current for b in old.bindings)):
                continue  # net no-op for this pattern
            count += len(current) - before
            new_buckets[key] = Bucket(tuple(current)) if current else _EMPTY
        if not new_buckets:
            return self

        if self._delta_keys + len(new_buckets) > self._threshold():
            return self._compacted(new_buckets, count)
        return self._with_delta(new_buckets, count)

    def _new(self, base: _Layer, delta: _Layer, delta_keys: int, count: int) -> AclIndex:
        index = AclIndex.__new__(AclIndex)
        index._base = base
        index._delta = delta
        index._delta_keys = delta_keys
        index._count = count
        index._by_principal = {}
        index.compact_threshold = self.compact_threshold
        return index

    def _with_delta(self, new_buckets: dict[_Key, Bucket], count: int) -> AclIndex:
        delta: _Layer = dict(self._delta)
        copied: set[ResourceType] = set()
        delta_keys = self._delta_keys
        for (resource_type, pattern_type, name), bucket in new_buckets.items():
            if resource_type not in copied:
                table = delta.get(resource_type)
                delta[resource_type] = table.copy() if table is not None else _Table({}, {}, SortedList())
                copied.add(resource_type)
            table = delta[resource_type]
            buckets = _bucket_map(table, pattern_type)
            base_table = self._base.get(resource_type)
            in_base = base_table is not None and name in _bucket_map(base_table, pattern_type)
            had = name in buckets
            if bucket.bindings or in_base:
                buckets[name] = bucket  # a change, or a tombstone over base
                if not had:
                    delta_keys += 1
                    if pattern_type == PatternType.PREFIXED:
                        table.prefix_names.add(name)
            elif had:
                del buckets[name]  # emptied a delta-only pattern: nothing left to shadow
                delta_keys -= 1
                if pattern_type == PatternType.PREFIXED:
                    table.prefix_names.remove(name)
        for resource_type in copied:
            delta[resource_type].seal()
        return self._new(self._base, delta, delta_keys, count)

    def _compacted(self, new_buckets: dict[_Key, Bucket], count: int) -> AclIndex:
        """Merge delta and ``new_buckets`` into a fresh base: C-speed dict copies plus O(p log p) resort."""
        overlay: dict[ResourceType, list[tuple[PatternType, str, Bucket]]] = {}
        for resource_type, table in self._delta.items():
            for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
                for name, bucket in _bucket_map(table, pattern_type).items():
                    overlay.setdefault(resource_type, []).append((pattern_type, name, bucket))
        for (resource_type, pattern_type, name), bucket in new_buckets.items():
            overlay.setdefault(resource_type, []).append((pattern_type, name, bucket))
        base: _Layer = dict(self._base)
        for resource_type, changes in overlay.items():
            old = base.get(resource_type) or _Table({}, {}, SortedList()).seal()
            touched = {pattern_type for pattern_type, _, _ in changes}
            # A side without changes is shared with the old base (it is never mutated).
            table = _Table(dict(old.literal) if PatternType.LITERAL in touched else old.literal,
                           dict(old.prefixed) if PatternType.PREFIXED in touched else old.prefixed, None)
            for pattern_type, name, bucket in changes:  # in order: later entries win
                buckets = _bucket_map(table, pattern_type)
                if bucket.bindings:
                    buckets[name] = bucket
                else:
                    buckets.pop(name, None)
            if not table.literal and not table.prefixed:
                base.pop(resource_type, None)
            elif PatternType.PREFIXED in touched:
                table.prefix_names = SortedList(table.prefixed)
                base[resource_type] = table.seal()
            else:
                table.prefix_names, table.floor, table.parent = old.prefix_names, old.floor, old.parent
                base[resource_type] = table
        return self._new(base, {}, 0, count)

    def compacted(self) -> AclIndex:
        """The same bindings with the delta merged into the base (mainly for tests)."""
        return self._compacted({}, self._count)

    @property
    def delta_size(self) -> int:
        """Patterns currently held in the delta layer (0 right after a build or compaction)."""
        return self._delta_keys


