"""The upstream links' read buffers: a few large ones, shared, lent for a read and taken back once nothing uses them.

An upstream link reads into one of these (BufferedProtocol) instead of having the loop copy every read into a
fresh ``bytes`` of up to 256 KiB; a streamed Fetch chunk then goes to the client as a view of it.  A buffer may
be written again only when no view of it is alive anywhere: uvloop's ``write()`` keeps the caller's memoryview
(not a copy) of what the socket did not take, and its TLS transport keeps it in a backlog while the TLS object
cannot take it.  Rather than track who might hold a view, a buffer is reused only when CPython reports it has
no buffer exports left (``in_use``): every memoryview of it, a slice handed on or one a transport keeps, is one.
"""

from __future__ import annotations

READ_BUFFER_BYTES = 256 * 1024  # uvloop's own read size for a plain asyncio.Protocol
_FREE_MAX = 4  # reads run one at a time on the loop: a few spare buffers are enough; the rest are dropped

_free: list[bytearray] = []


def take() -> bytearray:
    """A buffer no one holds a view of: a spare one, else a new one."""
    return _free.pop() if _free else bytearray(READ_BUFFER_BYTES)


def give_back(buf: bytearray) -> bool:
    """Keep ``buf`` for another read if no view of it is alive; else leave it to its holders (freed with the
    last view). True if it was kept."""
    if in_use(buf) or len(_free) >= _FREE_MAX:
        return False
    _free.append(buf)
    return True


def in_use(buf: bytearray) -> bool:
    """Whether a memoryview of ``buf`` is alive: a bytearray with buffer exports cannot change size, so try to.
    Shrinking by one byte and growing back (the same byte) stays within its allocation: no copy, no reallocation."""
    if not buf:
        return False  # no bytes to view
    last = buf[-1]
    try:
        del buf[-1:]
    except BufferError:
        return True
    buf.append(last)
    return False


def spare() -> int:
    """Spare buffers held (for tests and the memory accounting's view of the process)."""
    return len(_free)
