"""What the upstream read path costs per MB streamed: UpstreamLink between two real sockets, nothing else.

A measurement, not a test.  A child process plays the broker (1 MiB answers, back to back, as fast as the socket
takes them), another the client (reads and drops); this process runs uvloop with one UpstreamLink whose owner
streams every answer to the client's socket as the session does (head, then each chunk as it arrives, upstream
reading paused while the client's transport is full).  Printed: this process's CPU (user + system, getrusage)
per MB relayed, best and median of ``--repeat`` runs.  ``--tree`` imports another checkout's gateway/ (e.g. a
snapshot of main) so both can be compared on the same minutes: the difference is what the link's read path
costs, the sockets' own work being the same for both.

    python bench/anchors/upstream_read_cost.py [--tree /path/to/checkout] [--mb 512] [--repeat 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import socket
import statistics
import struct
import sys
from pathlib import Path
from typing import Any

ANSWER_BYTES = 1 << 20


def _broker(sock: socket.socket, total: int) -> None:
    answer = struct.pack(">ii", ANSWER_BYTES - 4, 1) + bytes(ANSWER_BYTES - 8)
    sent = 0
    while sent < total:
        sock.sendall(answer)
        sent += len(answer)
    sock.close()


def _client(sock: socket.socket, total: int) -> None:
    got = 0
    buf = bytearray(1 << 20)
    while got < total and (n := sock.recv_into(buf)):
        got += n
    sock.close()


def _child(run: Any, sock: socket.socket, total: int) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            run(sock, total)
        finally:
            os._exit(0)
    sock.close()
    return pid


async def _relay(link_cls: Any, total: int) -> float:
    loop = asyncio.get_running_loop()
    up_mine, up_theirs = socket.socketpair()
    down_mine, down_theirs = socket.socketpair()
    pids = [_child(_broker, up_theirs, total), _child(_client, down_theirs, total)]
    done = loop.create_future()
    links: list[Any] = []

    class Client(asyncio.Protocol):
        def pause_writing(self) -> None:
            links[0].transport.pause_reading()

        def resume_writing(self) -> None:
            links[0].transport.resume_reading()

    client, _ = await loop.connect_accepted_socket(Client, down_mine)

    class Owner:
        relayed = 0

        def upstream_frames(self, frames: list[memoryview]) -> list[Any]:
            for wire in frames:
                client.write(wire)
            return self._count(sum(map(len, frames)))

        def may_stream(self, upstream_id: int, size: int) -> bool:
            return True

        def stream_started(self, upstream_id: int, head: bytearray) -> list[Any]:
            client.write(head)
            return self._count(len(head))

        def stream_chunk(self, chunk: memoryview) -> list[Any]:
            client.write(chunk)
            return self._count(len(chunk))

        def stream_ended(self) -> list[Any]:
            return []

        def upstream_lost(self, error: str | None) -> list[Any]:
            return []

        def _count(self, n: int) -> list[Any]:
            self.relayed += n
            if self.relayed >= total and not done.done():
                done.set_result(None)
            return []

    start = resource.getrusage(resource.RUSAGE_SELF)
    link = link_cls(Owner(), lambda actions: None, 64 << 20)
    links.append(link)
    upstream, _ = await loop.connect_accepted_socket(lambda: link, up_mine)
    await done
    end = resource.getrusage(resource.RUSAGE_SELF)
    upstream.close()
    client.close()
    for pid in pids:  # done with them: the measured part is over, whatever is left unsent or unread
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
    return cpu / (total / 1e6) * 1e6  # us per MB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--mb", type=int, default=512, help="MiB relayed per run")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    import uvloop

    from gateway.transport.upstream_link import UpstreamLink

    total = args.mb * ANSWER_BYTES
    runs = [uvloop.run(_relay(UpstreamLink, total)) for _ in range(args.repeat)]
    print(f"tree {args.tree.resolve()}: {UpstreamLink.__mro__[1].__name__}, {args.mb} MiB x {args.repeat}")
    print(f"  process CPU per MB relayed: best {min(runs):.0f} us, median {statistics.median(runs):.0f} us "
          f"[{' '.join(f'{r:.0f}' for r in runs)}]")


if __name__ == "__main__":
    main()
