"""The client's address in one canonical spelling, made once where a connection enters the gateway.

Host ACLs, the audit log, logs, connection limits and the login throttle compare addresses as
strings, so every one of them must see the same string for the same client. Kafka's JVM shows
an IPv4 client that reached a dual-stack socket (``::ffff:10.1.2.3``) as the IPv4 address; so
does this module. An IPv6 address is spelled compressed, lower case (``2001:db8::42``); its
scope id (``%eth0``, which names the gateway's interface, not the client) is dropped.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass


@functools.lru_cache(maxsize=4096)  # ACL matching asks for the same few hosts again and again (~10 µs each)
def canonical_host(text: str) -> str:
    """The one spelling of an IP address; anything that is not an IP address (``*``, a host name,
    ``?``) unchanged, as ACL hosts and the configuration may hold those."""
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return text
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


@dataclass(slots=True, frozen=True)
class ClientAddress:
    """Where a client connects from (its canonical host and its port), as the acceptor or a
    trusted balancer's PROXY header states it; build it with ``ClientAddress.of``."""

    host: str
    port: int

    @classmethod
    def of(cls, host: str, port: int) -> ClientAddress:
        return cls(canonical_host(host), port)

    @classmethod
    def of_socket(cls, address: tuple[object, ...]) -> ClientAddress:
        """From what ``socket.accept`` returns: (host, port) or, for AF_INET6, (host, port, flow, scope)."""
        return cls.of(str(address[0]), int(address[1]))  # type: ignore[call-overload]

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
