"""A bounded memory of PLAIN passwords already verified, so a reconnecting client pays PBKDF2 once.

Keys are the user and an HMAC of the password under a random per-process key (no password is kept);
an entry counts only while the store still holds the very credential it was verified against.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict

from auth.credentials import PlainCredential

DEFAULT_MAX_ENTRIES = 10_000


class VerifiedPasswordCache:
    """LRU of (user, HMAC(password)) → the PlainCredential the password matched. Not thread-safe:
    the SASL state machine uses it on the event loop; only the hash itself runs elsewhere."""

    __slots__ = ("_entries", "_key", "max_entries")

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, key: bytes | None = None) -> None:
        self.max_entries = max_entries
        self._key = key if key is not None else secrets.token_bytes(32)
        self._entries: OrderedDict[tuple[str, bytes], PlainCredential] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:  # never the key, never the entries
        return f"VerifiedPasswordCache(entries={len(self._entries)}, max_entries={self.max_entries})"

    def password_mac(self, password: str) -> bytes:
        """What the cache keeps instead of the password: useless without this process's key."""
        return hmac.new(self._key, password.encode("utf-8"), hashlib.sha256).digest()

    def verified(self, user: str, mac: bytes, current: PlainCredential) -> bool:
        """Whether this password was verified against ``current``, the user's credential now.

        An entry made against any other credential (the password was changed, the user
        deleted and re-created) is dropped: a credential change invalidates it at once.
        """
        key = (user, mac)
        entry = self._entries.get(key)
        if entry is None:
            return False
        if entry is not current and entry != current:
            del self._entries[key]
            return False
        self._entries.move_to_end(key)
        return True

    def remember(self, user: str, mac: bytes, credential: PlainCredential) -> None:
        if self.max_entries <= 0:
            return
        key = (user, mac)
        self._entries[key] = credential
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
