"""The malloc settings keep megabyte buffers on the (warm) heap instead of fresh mmap()ed pages."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

# In a fresh interpreter, so glibc's own threshold adjustment (after a large free) has not
# happened yet: allocate a 2 MiB buffer and report whether it got mmap()ed pages.
_PROBE = """
import ctypes, sys
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                      "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
if sys.argv[1] == "tuned":
    from gateway.ops.allocator import keep_large_buffers_on_the_heap
    assert keep_large_buffers_on_the_heap()
before = mallinfo2().hblks
buffer = bytearray(2 << 20)
print(mallinfo2().hblks - before)
"""


def _has_mallinfo2() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), "mallinfo2")
    except OSError:
        return False


def _mmapped_blocks_for_a_2mib_buffer(mode: str) -> int:
    done = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
    return int(done.stdout)


@pytest.mark.skipif(not _has_mallinfo2(), reason="glibc >= 2.33 only (mallopt thresholds, mallinfo2)")
def test_megabyte_buffers_come_from_the_heap_once_tuned() -> None:
    assert _mmapped_blocks_for_a_2mib_buffer("plain") == 1  # glibc's default: fresh pages, faulted in
    assert _mmapped_blocks_for_a_2mib_buffer("tuned") == 0


# Megabyte buffers on the tuned heap, all freed but the last (which pins the heap's top, so
# glibc's automatic trimming of the top cannot return the rest): resident KiB before and after.
_HOLES = """
import resource, sys
from pathlib import Path
from gateway.ops.allocator import give_back_free_memory, keep_large_buffers_on_the_heap
def rss_kib():
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() // 1024
assert keep_large_buffers_on_the_heap()
buffers = [bytearray(b"x" * (1 << 20)) for _ in range(64)]
pin = buffers.pop()
del buffers
before = rss_kib()
assert give_back_free_memory()
print(before - rss_kib())
"""


@pytest.mark.skipif(not _has_mallinfo2(), reason="glibc only (malloc_trim)")
def test_freed_heap_buffers_are_given_back_to_the_kernel() -> None:
    done = subprocess.run([sys.executable, "-c", _HOLES], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert int(done.stdout) > 32 * 1024  # most of the 63 MiB freed below the pinned top
