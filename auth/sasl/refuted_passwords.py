"""A bounded memory of PLAIN passwords already found wrong, so a client retrying a stale password
costs no PBKDF2 after its first attempt (librdkafka retries every 100 ms by default).

Keyed like the verified-password cache (user and a keyed HMAC of the password, never the password);
an entry counts only while the user's credential (or its absence) is still the one it failed against.
"""

from __future__ import annotations

from collections import OrderedDict

from auth.credentials import PlainCredential

DEFAULT_MAX_ENTRIES = 10_000


class RefutedPasswordCache:
    """LRU of (user, HMAC(password)) → the credential the password failed against (None: no such user).
    Not thread-safe: used on the event loop, as the verified-password cache."""

    __slots__ = ("_entries", "max_entries")

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, bytes], PlainCredential | None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:  # never the entries
        return f"RefutedPasswordCache(entries={len(self._entries)}, max_entries={self.max_entries})"

    def refuted(self, user: str, mac: bytes, current: PlainCredential | None) -> bool:
        """Whether this password already failed against ``current``, the user's credential now.

        An entry made against anything else (the user was created, or its password changed)
        is dropped: the password deserves a fresh check.
        """
        key = (user, mac)
        if key not in self._entries:
            return False
        entry = self._entries[key]
        if entry is not current and entry != current:
            del self._entries[key]
            return False
        self._entries.move_to_end(key)
        return True

    def remember(self, user: str, mac: bytes, credential: PlainCredential | None) -> None:
        if self.max_entries <= 0:
            return
        key = (user, mac)
        self._entries[key] = credential
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def forget(self, user: str, mac: bytes) -> None:
        self._entries.pop((user, mac), None)
