"""Several gateway instances, one killed: what a producer loses, and how long it stalls.

A benchmark, not a test.  It starts an embedded Tansu broker and two ``ksgate run`` processes in
front of it (PLAINTEXT, no authorizer: only the failover is measured), a confluent-kafka producer
sending one record every 5 ms (acks=all, message.timeout.ms 10 s), and after 3 s SIGKILLs the
instance the producer is connected to.  Setups:

* list:          bootstrap.servers lists both instances; each advertises its own address
                 (librdkafka's default metadata.recovery.strategy=rebootstrap);
* list-none:     the same with metadata.recovery.strategy=none;
* balancer:      both instances advertise one address, a TCP balancer's (127.0.0.1, bootstrap
                 and node port), which connects to the first instance that accepts (127.0.0.2,
                 then 127.0.0.3: the instances bind the same ports on their own loopback address);
* balancer-none: the same with metadata.recovery.strategy=none (a client that never re-bootstraps).

For each: records acknowledged and failed, and the recovery time (the kill to the first
acknowledgement of a record sent after it).

    .venv/bin/python bench/instance_failover.py [--seconds 12] [--setups list,list-none,balancer,balancer-none]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import KafkaError, Producer

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.commands.embedded_broker import EmbeddedBroker, free_port  # noqa: E402

TANSU_NODE_ID = 111
KILL_AFTER_S = 3.0
SEND_EVERY_S = 0.005


@dataclass(slots=True)
class Outcome:
    setup: str
    killed: str
    sent: int
    acknowledged: int
    failed: int
    recovery_s: float | None  # None: no record sent after the kill was acknowledged
    first_error: str | None


class Instance:
    """One ``ksgate run`` process bound to ``host``, advertising ``advertised`` (host:port)."""

    def __init__(self, name: str, upstream: str, host: str, port: int, advertised: str, workdir: Path) -> None:
        self.name, self.host, self.port = name, host, port
        self.metrics_port = free_port()
        settings: dict[str, Any] = {
            "listeners": f"PLAINTEXT://{host}:{port}",
            "advertised.listeners": f"PLAINTEXT://{advertised}",
            "listener.name.plaintext.node.port.base": port + 1,
            "node.id.min": TANSU_NODE_ID, "node.id.max": TANSU_NODE_ID,
            "upstream.bootstrap.servers": upstream,
            "ksgate.metrics.listener": f"127.0.0.1:{self.metrics_port}",
            "log.level": "WARNING",
        }
        config = workdir / f"{name}.yaml"
        config.write_text(yaml.safe_dump(settings))
        self.log = open(workdir / f"{name}.log", "ab")  # noqa: SIM115 - closed in kill()
        self.process = subprocess.Popen([sys.executable, "-m", "gateway", "run", "--config", str(config)],
                                        cwd=REPO, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.process.returncode}")
            with contextlib.suppress(OSError), urllib.request.urlopen(
                    f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=1) as answer:
                if answer.status == 200:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready in {timeout_s} s")

    def client_connections(self) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as answer:
            text = answer.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("ksgate_connections{"))

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.log.close()


class Balancer:
    """A TCP balancer on 127.0.0.1 for ``ports``: each connection goes to the first backend host
    that accepts it (same port), and is piped both ways until either side closes."""

    def __init__(self, ports: list[int], backends: list[str]) -> None:
        self.ports, self.backends = ports, backends
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        self._started.wait(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        for port in self.ports:
            self.loop.run_until_complete(asyncio.start_server(
                lambda r, w, p=port: self._serve(r, w, p), "127.0.0.1", port))
        self._started.set()
        self.loop.run_forever()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> None:
        for host in self.backends:
            try:
                up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(host, port), 1.0)
            except (OSError, TimeoutError):
                continue
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            return
        writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


def _free_pair(host: str) -> int:
    """A port P with P+1 also free on ``host`` (bootstrap and the node port)."""
    for _ in range(100):
        port = free_port(host)
        with contextlib.suppress(OSError), socket.socket() as probe:
            probe.bind((host, port + 1))
            return port
    raise RuntimeError("no free port pair")


def run_setup(setup: str, upstream: str, seconds: float, workdir: Path) -> Outcome:
    instances: list[Instance] = []
    if setup.startswith("balancer"):
        port = _free_pair("127.0.0.1")
        hosts = ["127.0.0.2", "127.0.0.3"]
        instances = [Instance(f"{setup}-{i}", upstream, h, port, f"127.0.0.1:{port}", workdir)
                     for i, h in enumerate(hosts)]
        Balancer([port, port + 1], hosts)
        bootstrap = f"127.0.0.1:{port}"
    else:
        for i in range(2):
            port = _free_pair("127.0.0.1")
            instances.append(Instance(f"{setup}-{i}", upstream, "127.0.0.1", port, f"127.0.0.1:{port}", workdir))
        bootstrap = ",".join(f"127.0.0.1:{i.port}" for i in instances)
    try:
        for instance in instances:
            instance.wait_ready()
        return _produce_through_a_kill(setup, bootstrap, instances, seconds)
    finally:
        for instance in instances:
            instance.kill()


def _produce_through_a_kill(setup: str, bootstrap: str, instances: list[Instance], seconds: float) -> Outcome:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                              "message.timeout.ms": 10_000, "enable.idempotence": True}
    if setup.endswith("-none"):
        config["metadata.recovery.strategy"] = "none"
    producer = Producer(config)
    acked: list[tuple[float, float]] = []  # (sent, acknowledged) of each acknowledged record
    errors: list[str] = []

    def delivered(error: KafkaError | None, _message: object, sent_at: float) -> None:
        if error is None:
            acked.append((sent_at, time.monotonic()))
        else:
            errors.append(error.str())

    topic = f"failover-{setup}-{os.getpid()}"
    begun, sent, killed_at, killed = time.monotonic(), 0, None, "?"
    while time.monotonic() - begun < seconds:
        if killed_at is None and time.monotonic() - begun >= KILL_AFTER_S:
            victim = max(instances, key=Instance.client_connections)
            victim.kill()
            killed_at, killed = time.monotonic(), victim.name
        now = time.monotonic()
        producer.produce(topic, b"x" * 100, on_delivery=lambda e, m, t=now: delivered(e, m, t))
        sent += 1
        producer.poll(0)
        time.sleep(SEND_EVERY_S)
    producer.flush(15)
    # A record sent after the kill can only be acknowledged through the instance the producer found
    # next; callbacks run in poll(), every 5 ms, so that is the resolution.
    after = [done for sent_at, done in acked if killed_at is not None and sent_at > killed_at]
    recovery = min(after) - killed_at if after and killed_at is not None else None
    return Outcome(setup, killed, sent, len(acked), len(errors), None if recovery is None else round(recovery, 3),
                   errors[0] if errors else None)



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--setups", default="list,list-none,balancer,balancer-none")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ksgate-failover-") as tmp:
        broker = EmbeddedBroker().start()
        try:
            for setup in args.setups.split(","):
                print(json.dumps(asdict(run_setup(setup, broker.bootstrap, args.seconds, Path(tmp)))), flush=True)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
