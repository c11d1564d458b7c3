"""Chunks: the unit in which a stream's log is kept, in memory and on disk.

A :class:`LogChunk` holds consecutive messages of one stream's log, all of
one segment, packed into one byte string: for each message a fixed header
(:data:`RECORD`: its timestamp, then the lengths of its envelope, properties
and body), then the envelope (exchange and routing key as two shortstrs, as
basic.deliver carries them), the raw content properties and the body. Next
to the data, :attr:`LogChunk.ends` is the chunk's offset index: where each
message's record ends, so that the message at any offset is found without
reading the ones before it. (A store records the version of this layout
with its own, such as :data:`txamqp09.store.sqlite.SCHEMA_VERSION`.)

A stream fills its newest chunk as messages arrive (:meth:`LogChunk.add`:
no Python object per message, four appends to a byte array) and hands it
to the store once; the store's writer later *takes* it
(:meth:`LogChunk.take`): what was added until then is written as one row,
and nothing more can be added (:meth:`LogChunk.add` says so, and the stream
starts a new chunk). Adding and taking are serialised by one lock, the
only thing the reactor thread and the writer thread share here.

This module imports nothing from Twisted: the broker's model uses it.
"""

from __future__ import annotations

import struct
import threading
from array import array
from bisect import bisect_left, bisect_right
from typing import Optional, Union

__all__ = ["CHUNK_BYTES", "RECORD", "ChunkRow", "LogChunk", "chunk_holding"]

#: Bytes of records a stream puts in one chunk at most (a message larger than
#: this makes a chunk of its own).
CHUNK_BYTES = 1024 * 1024
#: A record's header: timestamp (ms), envelope, properties and body lengths.
RECORD = struct.Struct("<qHII")
_RECORD_SIZE = RECORD.size
_TIMESTAMP = struct.Struct("<q")

#: What a store writes for a chunk: first offset, message count, segment,
#: first and last timestamps, body bytes, the offset index and the data.
ChunkRow = tuple[int, int, int, int, int, int, bytes, bytes]

#: Serialises :meth:`LogChunk.add` (reactor thread) and :meth:`LogChunk.take`
#: (a store's writer thread).
_GUARD = threading.Lock()


class LogChunk:
    """Consecutive messages of a stream's log, from offset :attr:`first` on.

    :ivar first: the offset of its first message.
    :ivar segment: the offset of the first message of its segment.
    :ivar data: the records, packed (see the module's docstring).
    :ivar ends: where each record ends in :attr:`data`, in order.
    :ivar first_timestamp: the timestamp of its first message (ms).
    :ivar last_timestamp: the timestamp of its last message (ms).
    :ivar size: the bytes of its messages' bodies.
    :ivar taken: how many messages a store's writer took (-1: not taken;
        once taken, nothing more is added).
    :ivar sequence: the store's sequence number of its append (0: none yet).
    """

    __slots__ = (
        "first", "segment", "data", "ends", "first_timestamp", "last_timestamp", "size", "taken",
        "sequence",
    )

    def __init__(
        self, first: int, segment: int, data: Union[bytes, bytearray, None] = None,
        ends: Optional[array[int]] = None, first_timestamp: int = 0, last_timestamp: int = 0,
        size: int = 0,
    ) -> None:
        self.first = first
        self.segment = segment
        self.data: Union[bytes, bytearray] = bytearray() if data is None else data
        self.ends: array[int] = array("Q") if ends is None else ends
        self.first_timestamp = first_timestamp
        self.last_timestamp = last_timestamp
        self.size = size
        self.taken = -1
        self.sequence = 0

    @classmethod
    def from_row(cls, row: ChunkRow) -> LogChunk:
        """A chunk as a store wrote it (see :meth:`take`), complete and closed."""
        first, count, segment, first_timestamp, last_timestamp, size, ends, data = row
        index = array("Q")
        index.frombytes(ends)
        chunk = cls(first, segment, bytes(data), index, first_timestamp, last_timestamp, size)
        chunk.taken = count
        return chunk

    @property
    def count(self) -> int:
        """How many messages it holds."""
        return len(self.ends)

    @property
    def end(self) -> int:
        """One past the offset of its last message."""
        return self.first + len(self.ends)

    @property
    def nbytes(self) -> int:
        """The bytes its records take."""
        return len(self.data)

    def add(self, timestamp: int, envelope: bytes, properties: bytes, body: bytes) -> bool:
        """Append a message (offset :attr:`end`); False, adding nothing, when
        the chunk was taken already."""
        with _GUARD:
            if self.taken >= 0:
                return False
            data: bytearray = self.data  # type: ignore[assignment]  # until taken
            data += RECORD.pack(timestamp, len(envelope), len(properties), len(body))
            data += envelope
            data += properties
            data += body
            self.ends.append(len(data))
            if len(self.ends) == 1:
                self.first_timestamp = timestamp
            self.last_timestamp = timestamp
            self.size += len(body)
        return True

    def take(self) -> ChunkRow:
        """Close the chunk (nothing can be added any more) and return what it
        holds, as a store writes it (its data becomes an immutable copy, which
        readers of the chunk share)."""
        with _GUARD:
            self.taken = count = len(self.ends)
            data = self.data = bytes(self.data)
        return (
            self.first, count, self.segment, self.first_timestamp, self.last_timestamp, self.size,
            self.ends.tobytes(), data,
        )

    def message(self, index: int) -> tuple[bytes, bytes, bytes, int]:
        """The message at *index* (offset :attr:`first` + *index*): its
        envelope, properties and body, and its timestamp."""
        data = self.data
        ends = self.ends
        start = ends[index - 1] if index else 0
        timestamp, envelope_length, properties_length, _ = RECORD.unpack_from(data, start)
        properties_at = start + _RECORD_SIZE + envelope_length
        body_at = properties_at + properties_length
        envelope = data[start + _RECORD_SIZE : properties_at]
        properties = data[properties_at:body_at]
        body = data[body_at : ends[index]]
        if type(data) is bytes:  # taken: the common case
            return envelope, properties, body, timestamp  # type: ignore[return-value]
        return bytes(envelope), bytes(properties), bytes(body), timestamp

    def timestamp(self, index: int) -> int:
        """The timestamp of the message at *index*."""
        return int(_TIMESTAMP.unpack_from(self.data, self.ends[index - 1] if index else 0)[0])

    def index_at(self, timestamp: int, start: int = 0) -> int:
        """The index of the first message from *start* on appended at or after
        *timestamp* (:attr:`count` when none is)."""
        return bisect_left(range(len(self.ends)), timestamp, lo=start, key=self.timestamp)

    def __repr__(self) -> str:
        return f"<LogChunk offsets {self.first}..{self.end} segment {self.segment} {len(self.data)} bytes>"


def chunk_holding(chunks: list[LogChunk], firsts: list[int], offset: int) -> Optional[LogChunk]:
    """The chunk of *chunks* (in order, *firsts* their first offsets) that
    holds *offset*, or None."""
    index = bisect_right(firsts, offset) - 1
    if index < 0:
        return None
    chunk = chunks[index]
    return chunk if offset < chunk.end else None
