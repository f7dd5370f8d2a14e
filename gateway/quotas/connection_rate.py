"""connection_creation_rate for IP entities (KIP-612): new connections from an address over its rate wait.

Each accepted connection adds 1 to its address's rate (Kafka's quota rate, quota.window.*). Over
the address's quota, the new connection is served only after the throttle time Kafka's formula
gives: the flood from that address slows down, no connection of any other address waits, and no
connection is refused for it (the connection limits, max.connections.per.ip, still refuse).
"""

from __future__ import annotations

from gateway.quotas.lookup import QuotaLookup
from gateway.quotas.sensors import QuotaSensors

CONNECTION_CREATION_RATE = "connection_creation_rate"
# One metrics series for every address: a default IP quota would otherwise make one per address.
IP_SERIES = "ip"


def connection_delay_s(quotas: QuotaLookup, sensors: QuotaSensors, host: str) -> float:
    """Seconds a new connection from ``host`` waits before it is served (0 when within its quota)."""
    bound = quotas.connection_creation_rate(host)
    if bound is None:
        return 0.0
    throttle_ms = sensors.record(CONNECTION_CREATION_RATE, f"ip={host}", IP_SERIES, bound, 1.0)
    # at most the whole window (by then the rate has forgotten the flood): a waiting connection
    # holds a descriptor, counted in max.connections.per.ip like any other of its address
    return min(throttle_ms, sensors.window.num * sensors.window.size_ms) / 1000.0
