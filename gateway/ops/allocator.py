"""Process-wide malloc settings for a relay that moves 64 KiB – 1 MiB buffers, and giving
freed heap back to the kernel after a burst (glibc only).

glibc serves an allocation above M_MMAP_THRESHOLD (128 KiB at start) with fresh mmap()ed
pages and hands heap tops above M_TRIM_THRESHOLD back to the kernel.  For the gateway,
which allocates and frees such buffers on every read (uvloop's per-read ``bytes`` of up
to 256 KiB, receive buffers of large requests), that is a page fault per 4 KiB on first
touch, more CPU than copying the bytes.  glibc raises both thresholds by itself after
the first large free, but whether that happens depends on the allocation pattern; fixed
settings make it deterministic.  Allocations above the threshold (e.g. a 100 MB request)
are still mmap()ed and returned to the kernel when freed.
"""

from __future__ import annotations

import ctypes

_M_TRIM_THRESHOLD = -1  # from glibc's <malloc.h>
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 2 * MMAP_THRESHOLD_BYTES  # what glibc's own dynamic adjustment would pick


def keep_large_buffers_on_the_heap() -> bool:
    """Apply the settings; False where the C library has no (working) mallopt, e.g. musl or macOS."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


def give_back_free_memory() -> bool:
    """glibc's malloc_trim(0): return free heap pages to the kernel, holes included (not only
    the heap's top), after large buffers below the mmap threshold were freed.  False where
    there is no malloc_trim."""
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes = (ctypes.c_size_t,)
    malloc_trim.restype = ctypes.c_int
    malloc_trim(0)
    return True
