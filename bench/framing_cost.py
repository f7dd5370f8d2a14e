"""What framing costs per small frame: the client side's FrameReceiver, the upstream side's FrameSplitter.

A measurement, not a test.  Times, with ``timeit`` (best of ``--repeat``), what a relayed single-record
Produce costs the framing layer: one read of one request into the receiver's buffer (``get_buffer``, the
socket's copy, ``buffer_updated``, the frame read and dropped as the session would), and one answer fed to
the upstream splitter as ``data_received`` gets it (a fresh ``bytes`` per read); plus a bare ``Frame`` (what each
request cost before the receiver handed out wire views; the upstream link's own login still makes them).
``--tree`` imports another checkout's protocol/ (e.g. main) to compare both on the same minutes.

    python bench/framing_cost.py [--tree /path/to/checkout] [--number 200000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A single-record Produce v9 of a 100-byte record, and its answer, as librdkafka and Tansu send them.
REQUEST_BYTES = 180
ANSWER_BYTES = 60


def _receiver_one_read(tree_modules: tuple[type, type], per_read: int) -> Callable[[], None]:
    receiver_cls, pool_cls = tree_modules
    receiver = receiver_cls(100 * 1024 * 1024, pool=pool_cls())
    wire = (REQUEST_BYTES - 4).to_bytes(4, "big") + bytes(range(256))[: REQUEST_BYTES - 4]
    data = wire * per_read

    def one_read() -> None:
        buf = receiver.get_buffer()
        n = len(data)
        buf[:n] = data  # the socket's copy
        buf.release()
        for frame in receiver.buffer_updated(n):  # a Frame before the receiver handed out wire views, a view since
            frame.payload[4:8] if hasattr(frame, "payload") else frame[8:12]  # the session reads the header, lets it go

    return one_read


def _upstream_one_answer(link_cls: type) -> Callable[[], None]:
    """UpstreamLink.data_received (its FrameSplitter), the session's part a no-op that reads the header."""

    class Owner:
        def upstream_frames(self, frames: list[Any]) -> list[Any]:
            for frame in frames:  # a Frame before the splitter handed out wire views (lane2), a view since
                (frame.payload if hasattr(frame, "payload") else frame[4:])[0:4]
            return []

    link = link_cls(Owner(), lambda actions: None, 100 * 1024 * 1024)
    answer = (ANSWER_BYTES - 4).to_bytes(4, "big") + bytes(ANSWER_BYTES - 4)

    def one_answer() -> None:
        link.data_received(bytes(answer))  # data_received gets a fresh bytes object per read

    return one_answer


def _bare_frame(frame_cls: type) -> Callable[[], None]:
    view = memoryview(bytes(REQUEST_BYTES))
    return lambda: frame_cls(view)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    sys.path.insert(0, str(args.tree.resolve()))
    from gateway.transport.upstream_link import UpstreamLink
    from protocol.frame_receiver import BufferPool, FrameReceiver
    from protocol.framing import Frame

    cases: dict[str, Callable[[], None]] = {
        f"FrameReceiver: one {REQUEST_BYTES}-byte request per read": _receiver_one_read(
            (FrameReceiver, BufferPool), 1),
        f"FrameReceiver: four {REQUEST_BYTES}-byte requests per read (per request)": _receiver_one_read(
            (FrameReceiver, BufferPool), 4),
        f"UpstreamLink (FrameSplitter): one {ANSWER_BYTES}-byte answer per read": _upstream_one_answer(UpstreamLink),
        "Frame(view) alone": _bare_frame(Frame),
    }
    per = {"four": 4}
    print(f"tree {args.tree.resolve()}, best of {args.repeat} x {args.number}")
    for name, fn in cases.items():
        best = min(timeit.repeat(fn, number=args.number, repeat=args.repeat)) / args.number
        divisor = next((v for k, v in per.items() if k in name), 1)
        print(f"  {name:<68} {best * 1e9 / divisor:8.0f} ns")


if __name__ == "__main__":
    main()
