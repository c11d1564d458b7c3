"""What the reactor thread queues for an SQL store's writer, and what the writer takes at once.

Each operation gets a sequence number when queued. Publishes, spills and
stream appends are records the writer gathers into multi-row inserts;
anything else is an :class:`Operation`, a function of the database run in
order between them. The writer takes what is queued as a :class:`Batch`,
written in one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Union

from txamqp09.store.chunks import CHUNK_BYTES, LogChunk
from txamqp09.store.interface import StoredMessage

if TYPE_CHECKING:
    from txamqp09.store.sql import Database

__all__ = ["Append", "Batch", "Operation", "Publish", "Removals", "Spill", "Work"]


class Operation:
    """An operation other than a publish, spill or append: a function of the
    database and its arguments.

    :ivar size: the bytes of bodies among the arguments.
    """

    __slots__ = ("function", "args", "sequence", "size")

    def __init__(self, function: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args
        self.sequence = 0
        self.size = sum(len(arg) for arg in args if isinstance(arg, bytes))

    def apply(self, db: Database) -> None:
        """Run the operation on *db* (writer thread)."""
        self.function(db, *self.args)


class Publish:
    """A message to write, with the queues it is still on.

    Until the writer takes it, a removal may take queues off it; with none
    left it is not written at all.
    """

    __slots__ = ("message", "queues", "sequence")

    def __init__(self, message: StoredMessage, queues: list[tuple[str, str]]) -> None:
        self.message = message
        self.queues = queues
        self.sequence = 0

    @property
    def size(self) -> int:
        """The bytes of its body."""
        return self.message.size


class Spill:
    """A body to keep in table ``spilled``.

    :ivar row: (message id, body).
    :ivar size: the bytes of the body.
    """

    __slots__ = ("row", "size", "sequence")

    def __init__(self, message_id: int, body: bytes) -> None:
        self.row = (message_id, body)
        self.size = len(body)
        self.sequence = 0


class Append:
    """A chunk to write to a stream's log: what the stream added to it until
    the writer takes it. It counts as
    :data:`~txamqp09.store.chunks.CHUNK_BYTES`, the most a stream puts in one
    chunk (but for a single larger message), whatever it holds when queued."""

    __slots__ = ("vhost", "queue", "chunk", "sequence")

    size = CHUNK_BYTES

    def __init__(self, vhost: str, queue: str, chunk: LogChunk) -> None:
        self.vhost = vhost
        self.queue = queue
        self.chunk = chunk
        self.sequence = 0

    def row(self) -> tuple[Any, ...]:
        """The row of table ``stream_chunks`` (writer thread: takes the chunk,
        and gives the same row when called again)."""
        return (self.vhost, self.queue, *self.chunk.take())


#: What the writer applies, in order.
Work = Union[Publish, Append, Spill, Operation]
#: A queue (vhost, name) and the ids of messages to delete from it.
Removals = tuple[tuple[str, str], list[int]]


@dataclass
class Batch:
    """Work taken by the writer in one go.

    :ivar operations: topology changes and publishes, in order.
    :ivar removals: the messages to delete from each queue, applied after the
        operations (every publish precedes its removal, and removing a row
        that an operation deleted already changes nothing).
    :ivar last_sequence: the operations up to this one are settled once the
        batch is written.
    :ivar settled: the operations up to this one need no write: they are
        settled as soon as the batch is taken (0: none).
    """

    operations: list[Work]
    removals: list[Removals]
    last_sequence: int
    settled: int = 0

    @property
    def may_free_space(self) -> bool:
        """Whether writing it can free space: it removes messages or applies
        an operation other than an insert (a publish or a stream append)."""
        return bool(self.removals) or any(type(operation) is Operation for operation in self.operations)

    @property
    def messages(self) -> int:
        """The messages it writes: publishes still on a queue, and those of
        stream appends (once taken)."""
        count = 0
        for operation in self.operations:
            if type(operation) is Publish:
                count += bool(operation.queues)
            elif type(operation) is Append:
                count += max(operation.chunk.taken, 0)
        return count
