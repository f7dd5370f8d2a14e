"""The embedded broker can advertise another address than its own (a TCP proxy in front of it)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from gateway.commands.embedded_broker import EmbeddedBroker, free_port

pytestmark = pytest.mark.broker


def brokers_in_metadata(bootstrap: str) -> set[str]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=20)
    return {f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def test_metadata_names_the_advertised_address_not_the_listener() -> None:
    front = f"127.0.0.1:{free_port()}"
    with EmbeddedBroker(advertised=front) as broker:
        assert brokers_in_metadata(broker.bootstrap) == {front}


def test_metadata_names_the_listener_by_default() -> None:
    with EmbeddedBroker() as broker:
        assert brokers_in_metadata(broker.bootstrap) == {broker.bootstrap}
