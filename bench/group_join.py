"""How long a consumer-group join takes on the embedded (Tansu) broker, direct and through ksgate.

Prints, for each path, the seconds from subscribe() to the first delivered record of a fresh group: most of it
is the broker's join/sync, which the gateway only relays (the README's quickstart quotes this figure).
Usage: PYTHONPATH=. .venv/bin/python bench/group_join.py [--repeat N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer

from gateway.commands.embedded_broker import EmbeddedBroker
from tests.harness import GatewayThread


def first_record_s(bootstrap: str, topic: str) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"join-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    started = time.monotonic()
    try:
        consumer.subscribe([topic])
        while time.monotonic() - started < 120:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return time.monotonic() - started
        raise RuntimeError("no record within 120 s")
    finally:
        consumer.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    broker = EmbeddedBroker().start()
    gateway = GatewayThread(broker.bootstrap, {"authorizer.class.name": ""}).start()
    try:
        topic = f"join-{uuid.uuid4().hex[:6]}"
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topic, b"x")
        producer.flush(30)
        for name, bootstrap in (("direct", broker.bootstrap), ("through ksgate", gateway.bootstrap)):
            times = [first_record_s(bootstrap, topic) for _ in range(args.repeat)]
            print(f"{name:15} first record of a new group after {statistics.median(times):5.1f} s "
                  f"(median of {args.repeat}: {', '.join(f'{t:.1f}' for t in times)})", flush=True)
    finally:
        gateway.stop()
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
