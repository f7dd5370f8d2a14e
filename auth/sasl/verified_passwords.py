"""A bounded memory of PLAIN passwords already verified, so a reconnecting client pays PBKDF2 once.

Keys are the user and an HMAC of the password under a random per-process key (no password is kept);
an entry counts only while the store still holds the very credential it was verified against.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from typing import Generic, TypeVar

from auth.credentials import PlainCredential

DEFAULT_MAX_ENTRIES = 10_000
Bound = TypeVar("Bound", PlainCredential, PlainCredential | None)


class PasswordMemory(Generic[Bound]):
    """LRU of (user, HMAC(password)) → the credential the password was checked against (None: no such user).

    An entry counts only while that credential is still the user's: one made against anything else (the
    password changed, the user was deleted or created) is dropped when asked about.  Not thread-safe: the
    SASL state machine uses it on the event loop; only the hash itself runs elsewhere.
    """

    __slots__ = ("_entries", "max_entries")

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, bytes], Bound] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:  # never the entries
        return f"{type(self).__name__}(entries={len(self._entries)}, max_entries={self.max_entries})"

    def holds(self, user: str, mac: bytes, current: Bound) -> bool:
        """Whether this password was checked against ``current``, the user's credential now."""
        key = (user, mac)
        if key not in self._entries:
            return False
        entry = self._entries[key]
        if entry is not current and entry != current:
            del self._entries[key]
            return False
        self._entries.move_to_end(key)
        return True

    def remember(self, user: str, mac: bytes, credential: Bound) -> None:
        if self.max_entries <= 0:
            return
        key = (user, mac)
        self._entries[key] = credential
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def forget(self, user: str, mac: bytes) -> None:
        self._entries.pop((user, mac), None)


class VerifiedPasswordCache(PasswordMemory[PlainCredential]):
    """The passwords that matched, and the key of the HMAC both caches keep instead of a password."""

    __slots__ = ("_key",)

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, key: bytes | None = None) -> None:
        super().__init__(max_entries)
        self._key = key if key is not None else secrets.token_bytes(32)

    def password_mac(self, password: str) -> bytes:
        """What the cache keeps instead of the password: useless without this process's key."""
        return hmac.new(self._key, password.encode("utf-8"), hashlib.sha256).digest()

    def verified(self, user: str, mac: bytes, current: PlainCredential) -> bool:
        return self.holds(user, mac, current)
