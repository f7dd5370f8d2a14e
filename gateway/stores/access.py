"""The stores a gateway configuration names, opened by the operator commands (``ksgate users/tokens --config``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from gateway.config import GatewayConfig
from gateway.stores.security_topic import SecurityTopic


class StoreUnavailable(OSError):
    """The configured security topic could not be replayed in time."""


@contextlib.contextmanager
def replayed_security_topic(config: GatewayConfig) -> Iterator[SecurityTopic]:
    """The KAFKA store's topic, replayed to its end (as a gateway does before serving), stopped afterwards."""
    from gateway.stores.setup import security_topic
    from gateway.upstream.tls import upstream_ssl_context

    topic = security_topic(config, upstream_ssl_context(config.upstream))
    if topic is None:
        raise ValueError("ksgate.security.store is not KAFKA")
    topic.start()
    try:
        timeout_ms = config.settings["ksgate.security.store.load.timeout.ms"]
        if not topic.wait_loaded(timeout_ms / 1000):
            raise StoreUnavailable(f"the security topic {topic.settings.topic} could not be read within "
                                   f"{timeout_ms} ms (ksgate.security.store.load.timeout.ms)")
        yield topic
    finally:
        topic.stop()


def uses_security_topic(config: GatewayConfig) -> bool:
    return bool(config.settings["ksgate.security.store"] == "KAFKA")
