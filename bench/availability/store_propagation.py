"""How soon a change to the replicated security store is answered, and honoured by every other instance.

A benchmark, not a test.  Starts a broker (the embedded Tansu, or Apache Kafka 4.4 with ``--upstream
kafka``) and ``--instances`` security-store tails on one fresh security topic (gateway/stores/
security_topic.py's ``SecurityTopic``, each with its own thread, event loop and connections, as in
one ``ksgate run`` each; here in one process so that one clock times them all).  Each repeat, the
first instance appends one ACL record (as CreateAcls does) and the bench takes

* answer: from the call to ``append`` to its return (the writer's acknowledgement, then its own tail
  having applied the record: what the admin client waits for);
* honoured: from that return to the moment the *last* other instance applied the record (its store
  listener, run right after the new snapshot is swapped in); negative if all did before the answer.

The tails are started ``fetch max wait / instances`` apart, so that their long-polls are out of phase
as independent instances' would be.

    .venv/bin/python bench/availability/store_propagation.py [--upstream tansu|kafka] [--repeat 50]
        [--instances 3] [--pause-ms 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO))

from authz.model import (  # noqa: E402
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from bench.throughput import loadavg, machine, upstream_broker  # noqa: E402
from gateway.config import UpstreamConfig  # noqa: E402
from gateway.stores.security_records import AppliedRecords, acl_record  # noqa: E402
from gateway.stores.security_topic import SecurityTopic, StoreTopicSettings  # noqa: E402


class Honoured:
    """The monotonic time each instance first applied an offset at or past ``target``."""

    def __init__(self, topics: list[SecurityTopic]) -> None:
        self.target = -1
        self.seen: dict[int, float] = {}
        self.all_seen = threading.Event()
        self.expected = len(topics)
        for index, topic in enumerate(topics):
            topic.subscribe(lambda _applied, i=index, t=topic: self._applied(i, t))

    def expect(self, target: int) -> None:
        self.target, self.seen = target, {}
        self.all_seen.clear()

    def _applied(self, index: int, topic: SecurityTopic, _unused: AppliedRecords | None = None) -> None:
        if self.target >= 0 and topic.next_offset > self.target and index not in self.seen:
            self.seen[index] = time.monotonic()
            if len(self.seen) == self.expected:
                self.all_seen.set()


def binding(n: int) -> AclBinding:
    return AclBinding(ResourcePattern(ResourceType.TOPIC, f"bench-{n}", PatternType.LITERAL),
                      AccessControlEntry("User:bench", "*", AclOperation.READ, AclPermissionType.ALLOW))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--upstream", choices=("tansu", "kafka"), default="tansu")
    parser.add_argument("--instances", type=int, default=3, help="store tails; the first one writes")
    parser.add_argument("--repeat", type=int, default=50, help="changes measured")
    parser.add_argument("--pause-ms", type=float, default=50.0, help="idle time between changes")
    parser.add_argument("--fetch-max-wait-ms", type=int, default=500,
                        help="the tails' Fetch wait (ksgate.security.store.fetch.max.wait.ms)")
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    info = machine()
    print(f"machine: {info['nproc']} CPUs, {info['cpu_model']}; load average before: {loadavg()}", file=sys.stderr)
    answers: list[float] = []
    honoured: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ksgate-store-") as tmp, \
            upstream_broker(args.upstream, "plaintext", Path(tmp)) as broker:
        host, port = broker.gateway_upstream.split(",")[0].rsplit(":", 1)
        upstream = UpstreamConfig(((host, int(port)),))
        settings = StoreTopicSettings(topic=f"_ksgate_security_bench_{uuid.uuid4().hex[:8]}",
                                      fetch_max_wait_ms=args.fetch_max_wait_ms)
        topics = [SecurityTopic(upstream, None, settings) for _ in range(args.instances)]
        for topic in topics:
            # Staggered starts: independent instances long-poll in independent phases (started together,
            # they would poll in step, and a broker that holds every Fetch for its whole wait would show
            # the others applying a change exactly when the writer does).
            topic.start()
            time.sleep(args.fetch_max_wait_ms / 1000 / args.instances)
        try:
            for topic in topics:
                if not topic.wait_loaded(60):
                    raise RuntimeError("a store tail did not load the topic within 60 s")
            others = Honoured(topics[1:])
            writer = topics[0]
            for n in range(-5, args.repeat):  # the first five warm the connections: not reported
                time.sleep(args.pause_ms / 1000)  # the tails are idle in their long-poll when a change comes
                others.expect(writer.next_offset)  # the record's offset is at least this
                start = time.monotonic()
                last = writer.append([acl_record(binding(n))])
                answered = time.monotonic()
                del last
                if not others.all_seen.wait(10):
                    raise RuntimeError(f"change {n}: not applied by every instance within 10 s")
                if n >= 0:
                    answers.append((answered - start) * 1000)
                    honoured.append((max(others.seen.values()) - answered) * 1000)
        finally:
            for topic in topics:
                topic.stop()
    print(f"upstream: {broker.description}; {args.instances} instances; fetch max wait {args.fetch_max_wait_ms} ms; "
          f"{args.repeat} changes; load average after: {loadavg()}")
    for name, values in (("answer (append returns)", answers), ("honoured by all others after the answer", honoured)):
        print(f"{name:<42} p50 {statistics.median(values):7.1f}  p90 {percentile(values, 90):7.1f}  "
              f"max {max(values):7.1f}  min {min(values):7.1f} ms")
    if args.json:
        print(json.dumps({"answer_ms": answers, "honoured_after_answer_ms": honoured, "machine": info,
                          "args": vars(args)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
