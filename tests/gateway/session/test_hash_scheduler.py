"""The hash scheduler: hashes within an address's budget run at once, over it they wait for a token
(or are answered unhashed), and a waiting hash whose connection closed is never run."""

from __future__ import annotations

import asyncio

from auth.hash_budget import HashBudget
from auth.sasl.mechanism import HashClaim
from gateway.session.actions import HashSkipped
from gateway.transport.hash_scheduler import HashScheduler
from gateway.transport.verification_pool import VerificationPool

Result = bytes | BaseException


def _run(rate: float, claims: list[tuple[HashClaim, bool]], queue_per_user: int = 8
         ) -> tuple[list[Result], list[str]]:
    """Submit one hash per claim (bool: its connection still wants it); the results in claim order
    and the order in which the jobs ran."""
    async def main() -> tuple[list[Result], list[str]]:
        scheduler = HashScheduler(VerificationPool(threads=1, queue_size=16),
                                  HashBudget(rate, burst=1, queue_per_user=queue_per_user))
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Result]] = []
        ran: list[str] = []
        for claim, wanted in claims:
            future: asyncio.Future[Result] = loop.create_future()
            futures.append(future)

            def job(name: str = claim.user) -> bytes:
                ran.append(name)
                return name.encode()

            scheduler.submit(claim, job, future.set_result, lambda wanted=wanted: wanted)
        wanted_ones = [f for f, (_, wanted) in zip(futures, claims, strict=True) if wanted]
        await asyncio.wait_for(asyncio.gather(*wanted_ones), 30)
        scheduler.close()
        return [f.result() if f.done() else RuntimeError("never answered") for f in futures], ran

    return asyncio.run(main())


def test_over_budget_a_known_user_is_hashed_later_and_an_unknown_user_is_answered_unhashed() -> None:
    results, ran = _run(50, [(HashClaim("10.0.0.1", "bob", True), True),
                             (HashClaim("10.0.0.1", "mallory", False), True),
                             (HashClaim("10.0.0.1", "alice", True), True)])
    assert results[0] == b"bob" and results[2] == b"alice"
    skipped = results[1]
    assert isinstance(skipped, HashSkipped) and skipped.failure_class == "bad_credentials"
    assert "mallory" in skipped.reason and "hash.rate.per.ip" in skipped.reason
    assert ran == ["bob", "alice"]


def test_a_waiting_hash_whose_connection_closed_is_never_run() -> None:
    results, ran = _run(50, [(HashClaim("10.0.0.1", "bob", True), True),
                             (HashClaim("10.0.0.1", "carol", True), False),
                             (HashClaim("10.0.0.1", "alice", True), True)])
    assert ran == ["bob", "alice"]
    assert isinstance(results[1], RuntimeError)  # nobody waits for it: it is simply dropped


def test_a_hash_without_a_claim_is_not_budgeted() -> None:
    async def main() -> list[Result]:
        scheduler = HashScheduler(VerificationPool(threads=1, queue_size=16), HashBudget(0.001, burst=1))
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in range(3)]
        for future in futures:
            scheduler.submit(None, lambda: b"x", future.set_result)
        done = await asyncio.wait_for(asyncio.gather(*futures), 30)
        scheduler.close()
        return list(done)

    assert asyncio.run(main()) == [b"x"] * 3


def test_the_same_hash_wanted_by_many_connections_is_computed_once_and_none_is_turned_away() -> None:
    """Pods behind one NAT restarting together, as one user with one password: far more than the
    per-user queue, yet one hash, and every one of them gets its answer."""
    same = HashClaim("10.0.0.1", "app", True, key=b"app-password-mac")
    results, ran = _run(50, [(same, True)] * 30, queue_per_user=2)
    assert ran == ["app"]
    assert results == [b"app"] * 30


def test_different_passwords_of_one_user_are_not_shared() -> None:
    results, ran = _run(1000, [(HashClaim("10.0.0.1", "app", True, key=b"one"), True),
                               (HashClaim("10.0.0.1", "app", True, key=b"two"), True)])
    assert ran == ["app", "app"] and results == [b"app", b"app"]
