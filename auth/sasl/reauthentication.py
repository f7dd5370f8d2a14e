"""KIP-368 timing, the same rules on both sides of the gateway: how long a SASL session may last (what the
gateway grants its clients) and when a client logs in again (what the gateway does on its upstream links)."""

from __future__ import annotations

import random
from collections.abc import Callable


def session_lifetime_ms(max_reauth_ms: int, credential_expiry_ms: int | None, now_ms: int) -> int:
    """The lifetime a broker grants a login: min(credential expiry, connections.max.reauth.ms); 0 = no limit.

    As Kafka does, a credential's expiry shortens the session only when connections.max.reauth.ms is set."""
    if max_reauth_ms <= 0:
        return 0
    if credential_expiry_ms is None:
        return max_reauth_ms
    return min(max_reauth_ms, max(credential_expiry_ms - now_ms, 1))


def reauthentication_delay_s(lifetime_ms: int, draw: Callable[[], float] = random.random) -> float:
    """When to log in again on a link granted ``lifetime_ms``, in seconds from the login.

    As Kafka's Java client does: at a random point between 85 % and 95 % of the lifetime, leaving
    room for the network and clock drift, and spreading many links' logins apart (no storm)."""
    return lifetime_ms * (0.85 + 0.10 * draw()) / 1000
