"""Routing TLS connections by SNI: one port serves the bootstrap host and every broker.

``SniRoutes`` maps a ClientHello's server name to the bootstrap or to one node, by a
pattern such as ``broker-{nodeId}.kafka.example.com``; ``covers`` tells whether a
certificate's names (RFC 6125 wildcards) cover a host, so a mismatch is caught at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

NODE_ID = "{nodeId}"


class SniConfigError(ValueError):
    """The SNI settings (pattern, bootstrap host, certificate) do not fit together."""


@dataclass(slots=True, frozen=True)
class Bootstrap:
    """The server name is the listener's advertised (bootstrap) host."""


@dataclass(slots=True, frozen=True)
class Node:
    node_id: int


Route = Bootstrap | Node


def normalise(host: str) -> str:
    """DNS names compare without case and without the root's trailing dot."""
    return host.rstrip(".").lower() if host not in (".", "") else host


@dataclass(slots=True)
class SniRoutes:
    bootstrap_host: str
    pattern: str  # a host name with exactly one {nodeId}, inside one label
    _regex: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.bootstrap_host = normalise(self.bootstrap_host)
        pattern = normalise(self.pattern.replace(NODE_ID, "\0")).replace("\0", NODE_ID)
        if pattern.count(NODE_ID) != 1:
            raise SniConfigError(f"the broker host pattern {self.pattern!r} must contain {NODE_ID} exactly once")
        for label in pattern.split("."):
            if not re.fullmatch(r"[a-z0-9-]*(\{nodeId\})?[a-z0-9-]*", label) or label == "":
                raise SniConfigError(f"the broker host pattern {self.pattern!r}: {NODE_ID} must sit inside one "
                                     f"DNS label of letters, digits and '-'")
        self.pattern = pattern
        before, after = pattern.split(NODE_ID)
        self._regex = re.compile(re.escape(before) + r"(0|[1-9][0-9]{0,9})" + re.escape(after))
        if self._regex.fullmatch(self.bootstrap_host):
            raise SniConfigError(f"the bootstrap host {self.bootstrap_host!r} matches the broker pattern")

    def route(self, server_name: str | None) -> Route | None:
        """Where a connection with this SNI goes; None (refuse the handshake) for no SNI or another name."""
        if not server_name:
            return None
        name = normalise(server_name)
        if name == self.bootstrap_host:
            return Bootstrap()
        match = self._regex.fullmatch(name)
        if match is None:
            return None
        node_id = int(match.group(1))
        return Node(node_id) if node_id <= 0x7FFFFFFF else None

    def host_of(self, node_id: int) -> str:
        """The name the gateway advertises for a node (in Metadata, FindCoordinator, …)."""
        return self.pattern.replace(NODE_ID, str(node_id))

    def uncovered(self, certificate_names: Iterable[str], node_ids: Iterable[int] = ()) -> list[str]:
        """The names this listener serves that the certificate does not cover (empty when all are covered).

        The pattern counts as covered by a wildcard over its node label (``*.kafka.example.com``); with
        explicit names instead, each known node's host must be among them.
        """
        names = [normalise(n) for n in certificate_names]
        missing = [] if covers(names, self.bootstrap_host) else [self.bootstrap_host]
        sample = self.host_of(0)
        wildcard_covers_pattern = any(n.startswith("*.") and covers([n], sample) for n in names) \
            and self.pattern.split(".")[0].count(NODE_ID) == 1
        if wildcard_covers_pattern:
            return missing
        nodes = list(node_ids)
        if not nodes:
            return [*missing, self.pattern]
        return missing + [host for host in map(self.host_of, nodes) if not covers(names, host)]


def covers(certificate_names: Iterable[str], host: str) -> bool:
    """RFC 6125 matching: exact, or a ``*`` that is the whole leftmost label and stands for exactly one label."""
    host = normalise(host)
    for name in certificate_names:
        name = normalise(name)
        if name == host:
            return True
        if name.startswith("*.") and "." in host:
            first, rest = host.split(".", 1)
            if first and rest == name[2:] and rest.count(".") >= 1:
                return True
    return False
