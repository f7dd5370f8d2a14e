"""Atomic batches: a reader never observes half of an ``apply`` — checked without sleeps.

Two ACL sets, A and B, grant exactly the same decisions through different bindings, and each
swap removes one and adds the other (ALLOWs listed before the DENY).  Any intermediate state
is visible as a wrong decision: without the removed ALLOWs alice is denied; with the new
User:* ALLOW but not yet the new DENY, mallory is allowed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable, Iterator

import pytest

from auth.principal import KafkaPrincipal
from authz.authorizer import StandardAuthorizer
from authz.index import AclIndex
from authz.model import AclBinding
from tests.authz.helpers import DENY, HOST, PREFIXED, TOPIC, Op, acl

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
MALLORY = KafkaPrincipal("User", "mallory")

STATE_A = [acl("orders"), acl("o", principal="User:*", pattern=PREFIXED),
           acl("ord", Op.READ, DENY, principal="User:mallory", pattern=PREFIXED)]
STATE_B = [acl("ord", pattern=PREFIXED), acl("*", principal="User:*"),
           acl("orders", Op.READ, DENY, principal="User:mallory")]


def violations(authorizer: StandardAuthorizer) -> Iterator[str]:
    alice = authorizer.authorize(ALICE, HOST, Op.READ, TOPIC, "orders")
    if not alice.allowed:
        yield f"alice denied: {alice}"
    bob = authorizer.authorize(BOB, HOST, Op.READ, TOPIC, "orders")
    if not bob.allowed:
        yield f"bob denied: {bob}"
    mallory = authorizer.authorize(MALLORY, HOST, Op.READ, TOPIC, "orders")
    if mallory.allowed or not isinstance(mallory.rule, AclBinding):
        yield f"mallory not denied by her DENY: {mallory}"


def swap(authorizer: StandardAuthorizer, to_b: bool) -> None:
    old, new = (STATE_A, STATE_B) if to_b else (STATE_B, STATE_A)
    authorizer.apply(added=new, removed=old)


def test_the_invariants_catch_a_torn_update() -> None:
    authorizer = StandardAuthorizer(set(), False)
    authorizer.load(STATE_A)
    assert list(violations(authorizer)) == []
    authorizer.apply(removed=STATE_A)  # a writer publishing the removal on its own...
    assert any("alice" in v for v in violations(authorizer))
    authorizer.apply(added=STATE_B[:2])  # ...then the ALLOWs before the DENY
    assert any("mallory" in v for v in violations(authorizer))


def test_a_reader_during_apply_sees_the_old_state_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    authorizer = StandardAuthorizer(set(), False)
    authorizer.load(STATE_A)
    original = AclIndex.with_changes
    seen: list[list[str]] = []

    def with_changes_then_read(self: AclIndex, added: Iterable[AclBinding] = (),
                               removed: Iterable[AclBinding] = ()) -> AclIndex:
        new = original(self, added, removed)
        # The new snapshot is complete but not yet published: the worst moment for a reader.
        seen.append(list(violations(authorizer)))
        seen.append([str(authorizer.authorize(MALLORY, HOST, Op.READ, TOPIC, "orders").rule)])
        return new

    monkeypatch.setattr(AclIndex, "with_changes", with_changes_then_read)
    swap(authorizer, to_b=True)
    assert seen[0] == []
    assert "name=ord, patternType=PREFIXED" in seen[1][0]  # still A's DENY
    assert "name=orders, patternType=LITERAL" in str(authorizer.authorize(MALLORY, HOST, Op.READ, TOPIC, "orders"))


def test_readers_hammering_authorize_never_observe_a_half_applied_batch() -> None:
    authorizer = StandardAuthorizer(set(), False)
    authorizer.load(STATE_A)
    swaps = 3000
    readers = 2
    start = threading.Barrier(readers + 1)
    done = threading.Event()
    problems: list[str] = []
    rules_seen: list[set[str]] = [set() for _ in range(readers)]
    reads = [0] * readers

    def reader(i: int) -> None:
        start.wait()
        while not done.is_set():
            problems.extend(violations(authorizer))
            rules_seen[i].add(str(authorizer.authorize(MALLORY, HOST, Op.READ, TOPIC, "orders").rule))
            reads[i] += 1

    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    threads = [threading.Thread(target=reader, args=(i,)) for i in range(readers)]
    try:
        for thread in threads:
            thread.start()
        start.wait()
        for n in range(swaps):
            swap(authorizer, to_b=n % 2 == 0)
    finally:
        done.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(old_interval)

    assert problems == []
    assert all(r > 0 for r in reads)
    assert all(len(seen) == 2 for seen in rules_seen), rules_seen  # each reader saw both A's and B's DENY
