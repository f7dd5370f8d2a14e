"""The verified-password cache: keyed by user and a keyed hash, bound to the credential, bounded (LRU)."""

from __future__ import annotations

from auth.credentials import PlainCredential
from auth.sasl.verified_passwords import VerifiedPasswordCache


def _credential(tag: bytes) -> PlainCredential:
    return PlainCredential(salt=tag * 4, hash=tag * 8, iterations=1000)


def test_a_remembered_password_is_verified_against_the_same_credential() -> None:
    cache = VerifiedPasswordCache()
    alice = _credential(b"a")
    cache.remember("alice", cache.password_mac("pw"), alice)
    assert cache.verified("alice", cache.password_mac("pw"), alice)
    # an equal credential re-read from the store (a new object) still counts
    assert cache.verified("alice", cache.password_mac("pw"), _credential(b"a"))


def test_other_passwords_and_other_users_miss() -> None:
    cache = VerifiedPasswordCache()
    alice = _credential(b"a")
    cache.remember("alice", cache.password_mac("pw"), alice)
    assert not cache.verified("alice", cache.password_mac("other"), alice)
    assert not cache.verified("bob", cache.password_mac("pw"), alice)


def test_a_changed_credential_drops_the_entry() -> None:
    cache = VerifiedPasswordCache()
    cache.remember("alice", cache.password_mac("pw"), _credential(b"a"))
    assert not cache.verified("alice", cache.password_mac("pw"), _credential(b"b"))
    assert len(cache) == 0
    assert not cache.verified("alice", cache.password_mac("pw"), _credential(b"a"))  # gone for good


def test_the_cache_keeps_no_password_and_its_mac_depends_on_a_per_instance_key() -> None:
    first, second = VerifiedPasswordCache(), VerifiedPasswordCache()
    assert first.password_mac("pw") != second.password_mac("pw")
    assert first.password_mac("pw") == first.password_mac("pw")
    first.remember("alice", first.password_mac("pw"), _credential(b"a"))
    assert "pw" not in repr(first) and b"pw" not in first.password_mac("pw")


def test_the_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    cache = VerifiedPasswordCache(max_entries=3)
    creds = {name: _credential(name.encode()[:1]) for name in ("u0", "u1", "u2", "u3")}
    for name in ("u0", "u1", "u2"):
        cache.remember(name, cache.password_mac("pw"), creds[name])
    assert cache.verified("u0", cache.password_mac("pw"), creds["u0"])  # u0 is now the most recent
    cache.remember("u3", cache.password_mac("pw"), creds["u3"])
    assert len(cache) == 3
    assert not cache.verified("u1", cache.password_mac("pw"), creds["u1"])  # the least recent went
    assert all(cache.verified(n, cache.password_mac("pw"), creds[n]) for n in ("u0", "u2", "u3"))


def test_size_zero_disables_the_cache() -> None:
    cache = VerifiedPasswordCache(max_entries=0)
    cache.remember("alice", cache.password_mac("pw"), _credential(b"a"))
    assert len(cache) == 0
