"""A bounded memory of PLAIN passwords already found wrong, so a client retrying a stale password
costs no PBKDF2 after its first attempt (librdkafka retries every 100 ms by default).

Keyed like the verified-password cache (user and a keyed HMAC of the password, never the password);
an entry counts only while the user's credential (or its absence) is still the one it failed against.
"""

from __future__ import annotations

from auth.credentials import PlainCredential
from auth.sasl.verified_passwords import PasswordMemory


class RefutedPasswordCache(PasswordMemory[PlainCredential | None]):
    """The passwords found wrong, each against the credential it failed against (None: no such user)."""

    __slots__ = ()

    def refuted(self, user: str, mac: bytes, current: PlainCredential | None) -> bool:
        return self.holds(user, mac, current)
