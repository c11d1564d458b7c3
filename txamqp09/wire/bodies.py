"""Message bodies received in several frames, gathered without waste.

A body that spans several frames is gathered in a :class:`BodyBuffer`
sized by the content header. A large one (:data:`MAPPED_BODY_SIZE` and
more) is written straight into an anonymous memory map of the announced
size: the system backs its pages only as they are written, so a client
that announces 127 MiB and sends 1 MiB costs 1 MiB, and the whole map goes
back to the system the moment the body is complete or dropped. Gathering
such a body as a list of frame-sized pieces would leave the C allocator
with thousands of mid-size blocks, which it keeps after they are freed.
Smaller bodies are gathered as a list of pieces (each costs what arrived;
a piece the frame scanner passed on as a view of a received block is kept
as it is, not copied) and joined: their memory is reused by the next ones, where a map per body
would cost fresh pages, faulted in and zeroed, for each (the broker has the
C allocator keep such blocks and trims them once they are no longer
reused, see :mod:`txamqp09.broker.memory`).
"""

from __future__ import annotations

import mmap
from typing import Optional, Union

__all__ = ["MAPPED_BODY_SIZE", "BodyBuffer"]

#: Announced body sizes from which the body is gathered in a memory map
#: (glibc's largest bound for allocations of their own).
MAPPED_BODY_SIZE = 32 * 1024 * 1024

Buffer = Union[bytes, bytearray, memoryview]
#: A private anonymous map: the system's shared memory (the default of an
#: anonymous map) costs more per page to fault in and to give back.
_PRIVATE = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS


class BodyBuffer:
    """The frames of one body received so far.

    :param size: the body size the content header announced (frames are
        checked against it by the caller).
    :ivar held: bytes received so far.
    """

    __slots__ = ("_map", "_parts", "held")

    def __init__(self, size: int) -> None:
        self._map: Optional[mmap.mmap] = (
            mmap.mmap(-1, size, flags=_PRIVATE) if size >= MAPPED_BODY_SIZE else None
        )
        self._parts: list[Buffer] = []
        self.held = 0

    def add(self, buf: Buffer, start: int, end: int) -> None:
        """Append ``buf[start:end]``."""
        self.held += end - start
        if self._map is None:
            self._parts.append(buf[start:end])  # one copy (bytes() of it would make a second)
            return
        with memoryview(buf) as view:
            self._map.write(view[start:end])

    def append(self, piece: Buffer) -> None:
        """Append *piece*, which is the buffer's to keep (no copy of it is made
        unless the body is gathered in a map)."""
        self.held += len(piece)
        if self._map is None:
            self._parts.append(piece)
        else:
            self._map.write(piece)

    def take(self) -> bytes:
        """The body (once every frame is in); the buffer is empty afterwards."""
        mapped = self._map
        if mapped is None:
            body = b"".join(self._parts)
            self._parts = []
        else:
            body = mapped[: self.held]
            mapped.close()
            self._map = None
        self.held = 0
        return body

    def discard(self) -> None:
        """Drop what was received (the map goes back to the system now)."""
        if self._map is not None:
            self._map.close()
            self._map = None
        self._parts = []
        self.held = 0
