"""A client that pipelines thousands of cheap requests and never reads: over real sockets, the
gateway stops reading it, holds a bounded amount for it, and serves an honest client meanwhile.

The cheap requests are the ones the gateway answers itself (ApiVersions, a denied CreateTopics,
DescribeAcls): nothing upstream slows them down, so only the client's own full socket can.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from authz.model import AclOperation, ResourceType
from gateway.commands.embedded_broker import EmbeddedBroker
from gateway.stores.file_acls import FileAclStore
from protocol.api_keys import ApiKey
from protocol.frame_receiver import FrameReceiver
from tests.authz.helpers import acl
from tests.harness import GatewayThread
from tests.wire_client import assert_served, request_frame

QUEUED_MAX_REQUESTS = 64
BUFFER_MAX_BYTES = 64 * 1024  # connection.buffer.max.bytes: the client transport's high-water mark
ROUNDS = 15_000  # × 3 requests: ~10 MB of answers, far more than the buffer and the kernel socket buffers hold (4 MiB)
ANSWER_MAX_BYTES = 2048  # larger than any of the three answers
# What may sit in the gateway for the flooder: a full transport buffer (one write may cross the
# mark by one flush of answers) and queued.max.requests answers held in their slots.
BOUND_BYTES = BUFFER_MAX_BYTES + 2 * QUEUED_MAX_REQUESTS * ANSWER_MAX_BYTES
READ_MAX_BYTES = FrameReceiver.SCRATCH_BYTES  # one read of small frames
WAIT_S = 30.0  # an upper bound on how long the gateway may take to reach a state, not a timing


@pytest.fixture
def gateway(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[GatewayThread]:
    acls = tmp_path / "acls.json"
    # ANONYMOUS may describe the cluster (DescribeAcls is answered), nothing else (CreateTopics is denied).
    FileAclStore(acls).add([acl("kafka-cluster", AclOperation.DESCRIBE, principal="User:ANONYMOUS",
                                resource_type=ResourceType.CLUSTER)])
    running = GatewayThread(broker.bootstrap, {
        "ksgate.acl.file": str(acls), "allow.everyone.if.no.acl.found": False,
        "queued.max.requests": QUEUED_MAX_REQUESTS, "connection.buffer.max.bytes": BUFFER_MAX_BYTES}).start()
    try:
        yield running
    finally:
        running.stop()


def _cheap_requests(rounds: int) -> bytes:
    api_versions = {"client_software_name": "flood", "client_software_version": "1"}
    create = {"topics": [{"name": "denied", "num_partitions": 1, "replication_factor": 1, "assignments": [],
                          "configs": []}], "timeout_ms": 1000, "validate_only": False}
    describe = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    out = bytearray()
    for i in range(rounds):
        out += request_frame(ApiKey.API_VERSIONS, 3, 3 * i, api_versions)
        out += request_frame(ApiKey.CREATE_TOPICS, 7, 3 * i + 1, create)
        out += request_frame(ApiKey.DESCRIBE_ACLS, 3, 3 * i + 2, describe)
    return bytes(out)


@dataclass(slots=True, frozen=True)
class Held:
    """What the gateway holds for one connection, read on its loop."""

    reading: bool  # the client transport is reading
    write_buffer: int  # bytes in the client transport's write buffer
    queued: int  # requests counted against queued.max.requests (answers owed or held for the client)
    held_frames: int  # frames read but not yet handled (at most one read's worth)


def _held(gateway: GatewayThread, port: int) -> Held | None:
    """None until the gateway has accepted the connection."""
    def read() -> Held | None:
        conn = next((c for c in gateway.gateway._connections if c.session.client.port == port), None)
        if conn is None:
            return None
        assert conn.transport is not None
        session = conn.session
        return Held(conn.transport.is_reading(), conn.transport.get_write_buffer_size(),
                    session.queued_requests, session.held_frames)
    held: Held | None = gateway.call(read)
    return held


class Flooder:
    """A client with small socket buffers that sends requests and, until told, reads nothing."""

    def __init__(self, address: str, data: bytes) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        self.sock.connect((host, int(port)))
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.data = memoryview(data)
        self.sent = 0
        self.received = bytearray()

    def push_until(self, done: Callable[[bool], bool]) -> None:
        """Send what the gateway accepts until ``done(stalled)``; stalled: the socket took nothing this round."""
        deadline = time.monotonic() + WAIT_S
        while True:
            stalled = True
            if self.sent < len(self.data):
                _, writable, _ = select.select([], [self.sock], [], 0.05)
                stalled = not (writable and self._send_some())
            if done(stalled):
                return
            assert time.monotonic() < deadline, "the gateway did not reach the expected state"

    def _send_some(self) -> bool:
        try:
            self.sent += self.sock.send(self.data[self.sent : self.sent + 65536])
        except BlockingIOError:
            return False
        return True

    def exchange_until_answered(self, answers: int) -> list[int]:
        """Send the rest and read every answer; their correlation ids, in order."""
        deadline = time.monotonic() + WAIT_S
        ids: list[int] = []
        while len(ids) < answers:
            assert time.monotonic() < deadline, f"{len(ids)} of {answers} answers arrived"
            want_write = [self.sock] if self.sent < len(self.data) else []
            readable, writable, _ = select.select([self.sock], want_write, [], 0.05)
            if writable:
                self._send_some()
            if readable:
                chunk = self.sock.recv(1 << 20)
                assert chunk, "the gateway closed the connection"
                self.received += chunk
                while len(self.received) >= 8 and len(self.received) >= 4 + (
                        size := struct.unpack_from(">i", self.received)[0]):
                    ids.append(struct.unpack_from(">i", self.received, 4)[0])
                    del self.received[: 4 + size]
        return ids


def test_a_client_that_never_reads_is_paused_with_bounded_memory_and_others_are_served(
        gateway: GatewayThread) -> None:
    data = _cheap_requests(ROUNDS)
    flooder = Flooder(gateway.bootstrap, data)
    try:
        worst = Held(True, 0, 0, 0)

        def paused_or_overflowing(stalled: bool) -> bool:
            nonlocal worst
            held = _held(gateway, flooder.port)
            if held is None:
                return False
            worst = Held(held.reading, max(worst.write_buffer, held.write_buffer), max(worst.queued, held.queued),
                         max(worst.held_frames, held.held_frames))
            return held.write_buffer > BOUND_BYTES or (stalled and not held.reading)

        flooder.push_until(paused_or_overflowing)
        held = _held(gateway, flooder.port)
        assert held is not None
        assert worst.write_buffer <= BOUND_BYTES, f"{worst.write_buffer} bytes buffered for a client that never reads"
        assert worst.queued <= QUEUED_MAX_REQUESTS  # queued.max.requests bites, local answers included
        assert worst.held_frames <= READ_MAX_BYTES // 4  # a read's worth of frames waits, no more
        # The gateway stopped reading the client that does not read (what it already sent waits in the
        # kernel's socket buffers, which autotuning may grow to hold all of it).
        assert not held.reading

        assert_served(gateway.bootstrap)

        # Once it reads, it gets every answer, in order, and the rest of its flood is read.
        ids = flooder.exchange_until_answered(3 * ROUNDS)
        assert ids == list(range(3 * ROUNDS))
    finally:
        flooder.sock.close()
