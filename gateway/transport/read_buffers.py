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

# Buffers a transport still viewed when given back, looked at again by take(): at most this many, whatever the
# number of connections (8 MiB), so the process keeps no more than that beyond what the views themselves hold.
_VIEWED_MAX = 32

_free: list[bytearray] = []
_viewed: list[bytearray] = []


def take() -> bytearray:
    """A buffer no one holds a view of: a spare one, else one whose views have gone since, else a new one."""
    if _free:
        return _free.pop()
    for i, buf in enumerate(_viewed):  # a client's transport usually lets go of a chunk within a few reads
        if not in_use(buf):
            del _viewed[i]
            return buf
    return bytearray(READ_BUFFER_BYTES)


def give_back(buf: bytearray) -> bool:
    """Keep ``buf`` for another read: spare if no view of it is alive, else watched until none is (a new buffer
    costs a 256 KiB zero fill, about what the copy it replaces cost). Past the bounds it is left to its holders,
    freed with the last view. True if it was kept."""
    if not in_use(buf):
        if len(_free) < _FREE_MAX:
            _free.append(buf)
            return True
        return False
    if len(_viewed) < _VIEWED_MAX:
        _viewed.append(buf)
    return False


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
