"""The stores a gateway configuration names, opened by the operator commands (``ksgate users/tokens --config``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TypeVar

from gateway.config import ConfigError, GatewayConfig
from gateway.stores.security_topic import SecurityTopic

T = TypeVar("T")


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


@contextlib.contextmanager
def configured_store(config: GatewayConfig, file_key: str, from_file: Callable[[str], T],
                     from_topic: Callable[[SecurityTopic], T]) -> Iterator[T]:
    """The store ``config`` names: ``from_file`` of the file ``file_key`` names (FILE store), or ``from_topic``
    of the replayed security topic (KAFKA store; stopped afterwards)."""
    if uses_security_topic(config):
        with replayed_security_topic(config) as topic:
            yield from_topic(topic)
        return
    path = config.settings[file_key]
    if path is None:
        raise ConfigError(f"{file_key}: not set in the configuration")
    yield from_file(path)
