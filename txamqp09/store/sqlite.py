"""The embedded default store: SQLite in WAL mode, written by one thread in batches.

Every operation is queued on the reactor thread and returns a sequence number.
One writer thread takes everything queued so far, applies it in one
transaction and commits; with ``synchronous=FULL`` the commit ends with one
fsync of the write-ahead log, so one fsync covers every operation of the
batch (group commit). While a batch is being written the next one gathers,
so batches grow with the load. When a batch is durable the reactor thread
learns its last sequence number and fires the matching
:meth:`SQLiteStore.when_durable` Deferreds.

A message removed from all its queues while its publish still waits for the
writer (a consumer acknowledged it within the same batch cycle) is never
written, as RabbitMQ's message store does; its sequence number becomes
durable with the batch it would have been part of. Removals are gathered and
applied at the end of each batch's transaction.

Disk space: acknowledged and purged messages are deleted in the batch that
removes their last queue reference. The database uses incremental
auto-vacuum; after a batch that may have freed pages (any batch but one of
publishes and stream appends alone), when free pages exceed a quarter of the
file (and at least :data:`VACUUM_MIN_FREE_PAGES`), they are returned to the
file system.
The write-ahead log is bounded whatever the batch sizes: the writer takes at
most about :data:`BATCH_BYTES` of bodies in one transaction (a larger backlog
becomes several; a stream's chunk counts as the most it may hold), and once
the log holds :data:`CHECKPOINT_BYTES` of pages a second connection, on a
thread of its own, copies them into the database while the writer goes on
committing; the log then starts over at the beginning of its file. Should
the log reach twice that all the same, the writer checkpoints and truncates
it itself (after reporting the batch durable, so that confirms never wait
for a checkpoint; see :meth:`SQLiteStore._checkpoint`). Removals are
bounded too: one transaction applies at most :data:`REMOVALS_PER_BATCH` of
them, so that the deletes which free a full
disk never need more room in the log than the disk has left (a drain
acknowledged faster than the writer commits would otherwise gather into one
transaction whose log outgrows the free space, fail, and fail again on every
retry). When the writer has had nothing to do for
:data:`IDLE_SECONDS` it returns every free page and empties the log, so that
the store's size follows its data; opening and closing the store do the same.

Full disks and I/O errors: a batch whose write fails is rolled back. Its
publishes are dropped (:meth:`SQLiteStore.failed_between` names them, and
confirms become nacks); its other operations (topology, removals, stream
appends, spills) are written with the next batch. The writer tries again
every :data:`RETRY_SECONDS` (with a small probe write when nothing is
queued) and tells :meth:`SQLiteStore.add_failure_listener`'s listeners when
writes fail and when they succeed again. The store closes for good only on
an error that is not the database's.

Persistent messages are rows of table ``messages``, keyed by message id. A
message on one queue (the usual case) is that one row, which names its
queue by a number (table ``queue_names``, numbered by the writer thread
when it first writes a message to the queue): publishing it inserts one
row at the end of one B-tree, acknowledging it deletes that row, many of
them in one statement. A message on several queues has queue 0 and a row
of ``message_links`` (message id, queue number) for each of them; taking it
off a queue deletes that link, and the message with its last link.
Deleting a queue deletes its messages and its number: a scan of
``messages`` (no index orders them by queue), skipped when no row names it
(the writer counts them).

Bodies the broker spills under memory pressure (messages the store does not
keep otherwise) go to a table of their own, emptied when the store opens.

Stream logs live in the table ``stream_chunks``, one row per chunk of
messages (:mod:`txamqp09.store.chunks`) keyed by (vhost, queue, first
offset): its header (message count, segment, first and last timestamps,
body bytes) in columns, then its offset index and its packed records as two
blobs. A stream's chunk is written with the batch that takes it, so one
batch writes one row per stream, however many messages it appended; a
batch of appends alone is one statement, a transaction of its own (see
:func:`_append_alone`). Reading
a chunk by offset and the search for a timestamp (a scan of chunk headers,
then a binary search inside one chunk) go through the read-only connection;
retention deletes whole chunks from the head of a log, and the freed pages
are reclaimed like any others. Recovery reports each log's segments from the
chunk headers alone, without reading the messages.
:meth:`SQLiteStore.add_durable_listener` tells the broker when batches are
durable, so that a stream hands out only messages on disk.

The database records the version of its layout (``PRAGMA user_version``,
:data:`SCHEMA_VERSION`). A database of an earlier version is migrated when
opened, in one transaction: version 0's logs (one row per message, in
``stream_log``) are rewritten as chunks; the messages of versions 0 and 1
(a row of ``queue_messages`` for each message and queue, keyed by the
queue's name, and an index of it by message) are rewritten as above. A
database of a later version than this store knows is refused
(:class:`StoreFormatError`) without being changed.

Recovery relies on SQLite's atomic commits: a batch is on disk entirely or
not at all, so a crash at any point (a torn write, a half-written batch)
leaves the state of the last committed batch. It reads ``messages`` once in
the order of their ids (the table's own order) and hands each to its
queues. Recovered messages carry their bodies up to a budget, oldest first; :meth:`SQLiteStore.read` reads others (and bodies the
broker paged out) through a second, read-only connection on the reactor
thread, which sees every committed batch. An exclusive ``flock`` on
``<database>.lock`` keeps a second process away from the database.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import struct
import threading
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from itertools import groupby
from heapq import heappop, heappush
from pathlib import Path
from time import monotonic, time
from typing import IO, Any, Callable, Iterable, Iterator, Optional, Sequence, Union, cast

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorFromThreads
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from txamqp09.store.chunks import CHUNK_BYTES, LogChunk
from txamqp09.store.distribution import BATCH_MESSAGES_BUCKETS, COMMIT_SECONDS_BUCKETS, Distribution
from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    IMessageStore,
    LogSegment,
    Recovered,
    StoredMessage,
)
from txamqp09.wire.fields import RABBITMQ
from txamqp09.wire.forwarding import envelope

__all__ = [
    "BATCH_BYTES",
    "CHECKPOINT_BYTES",
    "IDLE_SECONDS",
    "REMOVALS_PER_BATCH",
    "RETRY_SECONDS",
    "SCHEMA_VERSION",
    "SQLiteStore",
    "StoreFormatError",
    "StoreInUse",
    "VACUUM_MIN_FREE_PAGES",
]

_log = Logger()
#: Free pages worth returning to the file system after a batch.
VACUUM_MIN_FREE_PAGES = 1024
#: Bytes of frames in the write-ahead log at which the checkpointer copies
#: them into the database, beside the writer's commits; at twice as many the
#: writer checkpoints and truncates the log itself, waiting for it.
CHECKPOINT_BYTES = 4 * 1024 * 1024
#: Bytes of bodies (messages, log records, spills) the writer takes into one
#: transaction at most (a single larger body makes a transaction of its own).
BATCH_BYTES = 4 * 1024 * 1024
#: Removals (a message off a queue) the writer applies in one transaction at
#: most: each rewrites at most a few pages in the log.
REMOVALS_PER_BATCH = 1024
#: Seconds without work after which the writer returns every free page and
#: empties the write-ahead log.
IDLE_SECONDS = 1.0
#: Seconds between two attempts to write after a write failed.
RETRY_SECONDS = 0.5
#: Distinct property lists recovery keeps one copy of at a time (messages
#: published alike share one bytes object in memory).
_SHARED_PROPERTIES = 1024
#: Message ids per query of :meth:`SQLiteStore.read`.
_READ_CHUNK = 500
#: The version of the database's layout this store writes (``PRAGMA
#: user_version``): 2 keeps a message routed to one queue as one row that
#: names its queue by number; 1 kept a row of ``queue_messages`` (and an
#: index entry) per message and queue beside it; 0 kept stream logs as one
#: row per message.
SCHEMA_VERSION = 2

# The sqlite3 module binds only int, float, str and bytearray values
# directly; any other value, bytes included, first goes through its adapter
# lookup, which for bytes fails twice (raising and clearing an
# AttributeError each time) before it binds the value as a blob. Every
# message has two bytes values (properties and body): an adapter that
# returns exact bytes unchanged skips those failures. This changes how no
# value is stored.
sqlite3.register_adapter(bytes, bytes)

#: The table of persistent messages: a message on one queue names it by its
#: number (a row of ``queue_names``); one on several queues has queue 0 and
#: a row of ``message_links`` for each of them.
_MESSAGES = (
    "CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, queue INTEGER NOT NULL,"
    " exchange TEXT NOT NULL, routing_key TEXT NOT NULL, properties BLOB NOT NULL, body BLOB NOT NULL,"
    " published REAL NOT NULL)"
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS exchanges (
    vhost TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL,
    auto_delete INTEGER NOT NULL, internal INTEGER NOT NULL, arguments BLOB NOT NULL,
    PRIMARY KEY (vhost, name));
CREATE TABLE IF NOT EXISTS queues (
    vhost TEXT NOT NULL, name TEXT NOT NULL, auto_delete INTEGER NOT NULL,
    arguments BLOB NOT NULL, PRIMARY KEY (vhost, name));
CREATE TABLE IF NOT EXISTS bindings (
    vhost TEXT NOT NULL, source TEXT NOT NULL, destination TEXT NOT NULL,
    destination_kind TEXT NOT NULL, routing_key TEXT NOT NULL, arguments BLOB NOT NULL,
    PRIMARY KEY (vhost, source, destination, destination_kind, routing_key, arguments));
CREATE TABLE IF NOT EXISTS queue_names (id INTEGER PRIMARY KEY, vhost TEXT NOT NULL, name TEXT NOT NULL);
{messages};
CREATE TABLE IF NOT EXISTS message_links (
    message_id INTEGER NOT NULL, queue INTEGER NOT NULL, PRIMARY KEY (message_id, queue)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spilled (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS stream_chunks (
    vhost TEXT NOT NULL, queue TEXT NOT NULL, first INTEGER NOT NULL, count INTEGER NOT NULL,
    segment INTEGER NOT NULL, first_timestamp INTEGER NOT NULL, last_timestamp INTEGER NOT NULL,
    size INTEGER NOT NULL, ends BLOB NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (vhost, queue, first));
CREATE INDEX IF NOT EXISTS stream_chunks_by_time ON stream_chunks (vhost, queue, last_timestamp);
CREATE TABLE IF NOT EXISTS settings (
    kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (kind, key));
CREATE TABLE IF NOT EXISTS write_probe (id INTEGER PRIMARY KEY, written REAL NOT NULL);
""".format(messages=_MESSAGES)


class _QueueNumbers:
    """The numbers of the queues messages are stored on (table
    ``queue_names``), by (vhost, name): the writer thread's once the store
    is open.

    A queue gets a number when a message is first written to it, and loses
    it when it is deleted (or, at the next start, when it holds no message).
    What a transaction changes here is undone when it fails.

    :ivar named: the rows of ``queue_names`` numbered since the last insert
        (their columns one after the other).
    :ivar alone: by number (every number given), how many rows of
        ``messages`` name the queue, or more (a failed insert is not taken
        back): deleting a queue with none needs no scan of the messages.
    """

    __slots__ = ("numbers", "next", "named", "alone", "_undo", "_deleted")

    def __init__(self) -> None:
        self.numbers: dict[tuple[str, str], int] = {}
        self.next = 1
        self.named: list[Any] = []
        self.alone: dict[int, int] = {}
        #: (key, its number and rows before) for each change since the last commit.
        self._undo: list[tuple[tuple[str, str], Optional[int], int]] = []
        #: (number, rows deleted) since the last commit.
        self._deleted: list[tuple[int, int]] = []

    def load(self, names: dict[int, tuple[str, str]], alone: dict[int, int]) -> None:
        """Take the numbers of the database and the rows naming each (at start-up)."""
        self.numbers = {key: number for number, key in names.items()}
        self.next = max(names, default=0) + 1
        self.alone = alone

    def number(self, key: tuple[str, str]) -> int:
        """The number of the queue *key*, given one now if it has none."""
        number = self.numbers.get(key)
        if number is None:
            number = self.numbers[key] = self.next
            self.next += 1
            self.alone[number] = 0
            self.named += (number, *key)
            self._undo.append((key, None, 0))
        return number

    def deleted(self, number: int, rows: int) -> None:
        """*rows* of messages on the queue *number* alone were deleted."""
        self._deleted.append((number, rows))

    def forget(self, key: tuple[str, str]) -> tuple[Optional[int], int]:
        """Take the number off the queue *key* (deleted): the number it had,
        and how many rows of messages may name it."""
        number = self.numbers.pop(key, None)
        if number is None:
            return None, 0
        rows = self.alone.pop(number, 0)
        self._undo.append((key, number, rows))
        return number, rows

    def committed(self) -> None:
        """The changes so far are on disk."""
        self._undo.clear()
        alone = self.alone
        for number, rows in self._deleted:
            if number in alone:
                alone[number] -= rows
        self._deleted.clear()

    def rolled_back(self) -> None:
        """The transaction of the changes since the last commit failed: undo them."""
        for key, number, rows in reversed(self._undo):
            if number is None:
                self.alone.pop(self.numbers.pop(key), None)
            else:
                self.numbers[key] = number
                self.alone[number] = rows
        self._undo.clear()
        self._deleted.clear()
        self.named.clear()


def _table(arguments: dict[str, Any]) -> bytes:
    return RABBITMQ.encode_table(arguments)


def _arguments(blob: bytes) -> dict[str, Any]:
    return RABBITMQ.decode_table(bytes(blob), 0)[0]


class _Operation:
    """Another operation for the writer thread: a function of the database and
    its arguments.

    :ivar size: the bytes of bodies among the arguments (a spill's).
    """

    __slots__ = ("function", "args", "sequence", "size")

    def __init__(self, function: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.function = function
        self.args = args
        self.sequence = 0
        self.size = sum(len(arg) for arg in args if isinstance(arg, bytes))


class _Publish:
    """A message to write, with the queues it is still on.

    Until the writer takes it, :meth:`SQLiteStore.remove` may take queues off
    it; with none left it is not written at all.
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


class _Spill:
    """A body to keep in table ``spilled`` (:meth:`SQLiteStore.spill`): the
    writer inserts a batch's spills with multi-row statements, as it does
    messages.

    :ivar row: (message id, body).
    :ivar size: the bytes of the body.
    """

    __slots__ = ("row", "size", "sequence")

    def __init__(self, message_id: int, body: bytes) -> None:
        self.row = (message_id, body)
        self.size = len(body)
        self.sequence = 0


class _Append:
    """A chunk to write to a stream's log: what the stream added to it until
    the writer takes it. It counts towards :data:`BATCH_BYTES` as
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
        """The row of table ``stream_chunks`` (writer thread: takes the chunk)."""
        return (self.vhost, self.queue, *self.chunk.take())


#: What the writer thread applies, in order.
_Work = Union[_Publish, _Append, _Spill, _Operation]


class _Checkpointer:
    """Checkpoints the write-ahead log on a connection and a thread of its
    own, when the writer asks (see :meth:`SQLiteStore._checkpoint`).

    :ivar asked: the writer asked for a checkpoint and has not caught up
        with it yet (set and cleared by the writer thread alone).
    :ivar ended: the checkpoint asked for has ended (set by the
        checkpointer, cleared by the writer).
    """

    def __init__(
        self, db: sqlite3.Connection, reactor: IReactorFromThreads,
        failed: Callable[[Optional[str]], None], name: str,
    ) -> None:
        self._db = db
        self._reactor = reactor
        self._failed = failed
        self._wanted = threading.Condition()
        self._waiting = False
        self._running = False
        self._stopping = False
        self._failing = False
        self.asked = False
        self.ended = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the thread (writer thread)."""
        self._thread.start()

    def wake(self) -> None:
        """Checkpoint the log now (writer thread)."""
        with self._wanted:
            self._waiting = True
            self._wanted.notify()

    def settle(self) -> None:
        """Wait until no checkpoint is asked for or under way (writer thread)."""
        with self._wanted:
            while self._waiting or self._running:
                self._wanted.wait()

    def stop(self) -> None:
        """Let a checkpoint under way end, stop the thread and close the
        connection (writer thread; a second call changes nothing)."""
        with self._wanted:
            self._stopping = True
            self._wanted.notify()
        if self._thread.ident is not None:
            self._thread.join()
        self._db.close()

    def _run(self) -> None:
        while True:
            with self._wanted:
                while not self._waiting and not self._stopping:
                    self._wanted.wait()
                if self._stopping:
                    return
                self._waiting = False
                self._running = True
            try:
                self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except Exception as error:
                if not self._failing:
                    self._failing = True
                    self._reactor.callFromThread(self._failed, _describe(error))
            else:
                if self._failing:
                    self._failing = False
                    self._reactor.callFromThread(self._failed, None)
            with self._wanted:
                self._running = False
                self.ended = True
                self._wanted.notify_all()


#: The fields of the wal-index header (https://www.sqlite.org/walformat.html)
#: :class:`_LogFrames` reads: the index's version, the page size and the
#: number of frames in the log (``mxFrame``), in the machine's byte order.
_WAL_INDEX_HEADER = struct.Struct("=I8x2xHI")
#: The wal-index version this store knows the header of.
_WAL_INDEX_VERSION = 3007000
#: Bytes of the log file's header, and of each frame's header.
_WAL_HEADER = 32
_FRAME_HEADER = 24


class _LogFrames:
    """The bytes of frames the write-ahead log holds (writer thread).

    Once a checkpoint has copied every frame into the database, SQLite
    writes the next transaction from the start of the log's file again,
    over the old frames, without shrinking the file (unless it is larger
    than ``journal_size_limit``): the file's size then no longer tells what
    the log holds. SQLite keeps the count of frames in the header of the
    wal-index, the ``-shm`` file the connections to the database share
    (its layout is part of SQLite's documented file formats). When that
    header cannot be read, the file's size stands in for it.
    """

    def __init__(self, index: Path, log: Path) -> None:
        self._log = log
        try:
            self._index: Optional[int] = os.open(index, os.O_RDONLY)
        except OSError:
            self._index = None

    def size(self) -> int:
        """The bytes of the log's frames (with their headers)."""
        if self._index is not None:
            header = os.pread(self._index, _WAL_INDEX_HEADER.size, 0)
            if len(header) == _WAL_INDEX_HEADER.size:
                version, page_size, frames = _WAL_INDEX_HEADER.unpack(header)
                if version == _WAL_INDEX_VERSION:
                    page_size = 65536 if page_size == 1 else page_size
                    return _WAL_HEADER + frames * (page_size + _FRAME_HEADER) if frames else 0
        try:
            return self._log.stat().st_size
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        """Close the wal-index's file (writer thread)."""
        if self._index is not None:
            os.close(self._index)
            self._index = None


class StoreInUse(Exception):
    """Another process has the store open."""


class StoreFormatError(Exception):
    """The database was written by a later version, in a layout this store does not know."""


@dataclass
class _Batch:
    """Work taken by the writer thread in one go.

    :ivar operations: topology changes and publishes, in order.
    :ivar removals: (vhost, queue, message id) to delete, applied after the
        operations (every publish precedes its removal, and removing a row
        that an operation deleted already changes nothing).
    :ivar last_sequence: the operations up to this one are settled once the
        batch is written.
    """

    operations: list[_Work]
    removals: list[tuple[str, str, int]]
    last_sequence: int

    @property
    def may_free_pages(self) -> bool:
        """Whether writing it can free pages: it removes messages or applies
        an operation other than an insert (a publish or a stream append)."""
        return bool(self.removals) or any(type(operation) is _Operation for operation in self.operations)

    @property
    def appends_alone(self) -> bool:
        """Whether it is stream appends and nothing else, few enough for the
        parameters of one statement (see :func:`_append_alone`)."""
        operations = self.operations
        return (
            0 < len(operations) * _CHUNK_WIDTH <= _VARIABLES_PER_STATEMENT and not self.removals
            and all(type(operation) is _Append for operation in operations)
        )


#: What the writer does when it has been idle for :data:`IDLE_SECONDS`.
_TIDY = "tidy"
#: What the writer does, after a failed write, when nothing is queued: a small write.
_PROBE = "probe"


@implementer(IMessageStore)
class SQLiteStore:
    """A :class:`~txamqp09.store.interface.IMessageStore` on SQLite.

    :param path: the database file; its directory is created if missing.
    :param reactor: where durability is reported (``callFromThread``).
    """

    #: The class of the writer's connection (a subclass can inject faults).
    connection_class: type[sqlite3.Connection] = sqlite3.Connection
    #: The class of the checkpointer's connection.
    checkpoint_connection_class: type[sqlite3.Connection] = sqlite3.Connection

    def __init__(self, path: str | Path, reactor: IReactorFromThreads) -> None:
        self.path = Path(path)
        self._reactor = reactor
        #: Guards the queued work (entered directly: cheaper than entering
        #: the condition over it, which wakes the writer).
        self._mutex = threading.RLock()
        self._lock = threading.Condition(self._mutex)
        self._pending: list[_Work] = []
        #: Bytes of bodies in :attr:`_pending`.
        self._pending_bytes = 0
        #: Removals not taken yet: (sequence, rows) for each call of
        #: :meth:`remove`, in order; a call's rows are settled with its sequence.
        self._removals: deque[tuple[int, list[tuple[str, str, int]]]] = deque()
        #: Operations of a failed batch wait in :attr:`_pending` to be written again.
        self._carried = False
        #: Publishes not taken by the writer yet, by message id.
        self._unwritten: dict[int, _Publish] = {}
        #: The queues' numbers, for the writer thread.
        self._numbers = _QueueNumbers()
        self._sequence = 0
        #: The last sequence number the writer has taken.
        self._taken = 0
        self._durable = 0
        self._waiting: list[tuple[int, int, Deferred[None]]] = []
        self._listeners: list[Callable[[int], None]] = []
        self._closing = False
        self._failure: Optional[Failure] = None
        self._failure_listeners: list[Callable[[Optional[str]], None]] = []
        #: Runs of consecutive sequence numbers of publishes whose write
        #: failed, as (first, last) in two sorted lists.
        self._failed_firsts: list[int] = []
        self._failed_lasts: list[int] = []
        self._thread: Optional[threading.Thread] = None
        self._checkpointer: Optional[_Checkpointer] = None
        self._log_frames: Optional[_LogFrames] = None
        self._lock_file: Optional[IO[bytes]] = None
        #: The reactor thread's connection for :meth:`read`, opened when first needed.
        self._reader: Optional[sqlite3.Connection] = None
        self._closed: Deferred[None] = Deferred()
        #: Batches committed (each ends with one fsync), for benchmarks.
        self.commits = 0
        #: Seconds each committed batch took to write and commit.
        self.commit_seconds = Distribution(COMMIT_SECONDS_BUCKETS)
        #: Messages (publishes and stream appends) each committed batch wrote.
        self.batch_messages = Distribution(BATCH_MESSAGES_BUCKETS)
        #: Operations covered by the batches taken so far, for benchmarks.
        self.operations = 0
        #: Publishes never written because every queue removed the message first.
        self.cancelled = 0

    # -- start-up ------------------------------------------------------------

    def _connect(self, factory: Optional[type[sqlite3.Connection]] = None) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, factory=factory or self.connection_class
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(f"PRAGMA journal_size_limit={2 * CHECKPOINT_BYTES}")
        connection.execute("PRAGMA wal_autocheckpoint=0")
        return connection

    @property
    def log_path(self) -> Path:
        """The write-ahead log's file."""
        return self.path.with_name(self.path.name + "-wal")

    def open(self, body_budget: Optional[int] = None) -> Recovered:
        """Create or recover the database, then start the writer thread.

        :raises StoreInUse: another process has the database open.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = _exclusive(self.path.with_name(self.path.name + ".lock"))
        connection = self._connect()
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreFormatError(
                    f"{self.path} holds data in layout version {version}, written by a later "
                    f"version of txamqp09; this one reads versions up to {SCHEMA_VERSION}"
                )
            if connection.execute("PRAGMA page_count").fetchone()[0] <= 1:
                connection.execute("PRAGMA auto_vacuum=INCREMENTAL")
                connection.execute("VACUUM")
            connection.executescript(_SCHEMA)
            _migrate(connection)
            recovered = self._recover(connection, body_budget)
        except BaseException:
            connection.close()
            self._lock_file.close()
            raise
        try:
            _tidy(connection)
        except sqlite3.Error:
            pass  # a full disk: the writer empties the log once it can write again
        self._log_frames = _LogFrames(self.path.with_name(self.path.name + "-shm"), self.log_path)
        self._checkpointer = _Checkpointer(
            self._connect(self.checkpoint_connection_class), self._reactor, self._checkpoint_failed,
            f"checkpoints {self.path}",
        )
        self._thread = threading.Thread(
            target=self._write_loop, args=(connection,), name=f"store {self.path}", daemon=True
        )
        self._thread.start()
        return recovered

    def _recover(self, db: sqlite3.Connection, body_budget: Optional[int]) -> Recovered:
        recovered = Recovered()
        for vhost, name, kind, auto_delete, internal, args in db.execute(
            "SELECT vhost, name, type, auto_delete, internal, arguments FROM exchanges"
        ):
            recovered.exchanges.append(
                DurableExchange(vhost, name, kind, bool(auto_delete), bool(internal), _arguments(args))
            )
        for vhost, name, auto_delete, args in db.execute(
            "SELECT vhost, name, auto_delete, arguments FROM queues"
        ):
            recovered.queues.append(DurableQueue(vhost, name, bool(auto_delete), _arguments(args)))
            recovered.messages[(vhost, name)] = []
        for vhost, source, destination, kind, key, args in db.execute(
            "SELECT vhost, source, destination, destination_kind, routing_key, arguments FROM bindings"
        ):
            recovered.bindings.append(
                DurableBinding(vhost, source, destination, kind, key, _arguments(args))
            )
        leftovers, unused = self._recover_messages(db, recovered, body_budget)
        last = db.execute("SELECT max(id) FROM messages").fetchone()[0]
        recovered.next_message_id = (last or 0) + 1
        for vhost, queue, first, last, first_time, last_time, size in db.execute(
            "SELECT vhost, queue, min(first), max(first + count - 1), min(first_timestamp),"
            " max(last_timestamp), sum(size) FROM stream_chunks GROUP BY vhost, queue, segment"
            " ORDER BY vhost, queue, segment"
        ):
            recovered.logs.setdefault((vhost, queue), []).append(
                LogSegment(first, last, first_time, last_time, size)
            )
        for kind, key, value in db.execute("SELECT kind, key, value FROM settings"):
            recovered.settings.setdefault(kind, {})[key] = json.loads(value)
        try:
            _forget_leftovers(db, leftovers, unused)
        except sqlite3.Error:
            pass  # a full disk: they are harmless, and forgotten at the next start
        return recovered

    def _recover_messages(
        self, db: sqlite3.Connection, recovered: Recovered, body_budget: Optional[int]
    ) -> tuple[list[int], list[int]]:
        """Add the stored messages to their queues in *recovered*, in the
        order of their ids, with their bodies while *body_budget* lasts (in
        the same order), and take the queues' numbers; the ids of messages no
        queue holds and the numbers of queues that hold no message, to
        forget (one pass over the messages, by id: no sort, no index)."""
        names = {number: (vhost, name) for number, vhost, name in db.execute("SELECT id, vhost, name FROM queue_names")}
        queues = {number: recovered.messages.get(key, []) for number, key in names.items()}
        linked: dict[int, list[int]] = {}
        for message_id, number in db.execute("SELECT message_id, queue FROM message_links"):
            if number in queues:
                linked.setdefault(message_id, []).append(number)
        links = dict.fromkeys(queues, 0)
        leftovers: list[int] = []
        shared: dict[bytes, bytes] = {}
        rows = db.execute(
            "SELECT id, queue, exchange, routing_key, properties, CASE WHEN id < ? THEN body END,"
            " length(body), published FROM messages ORDER BY id",
            (_budget_end(db, body_budget),),
        )
        for message_id, number, exchange, key, properties, body, size, published in rows:
            if len(shared) > _SHARED_PROPERTIES:
                shared.clear()
            properties = shared.setdefault(properties, properties)
            queue = queues.get(number)
            if queue is not None:
                queue.append(
                    StoredMessage(message_id, exchange, key, properties, body, size, True, published)
                )
            elif message_id in linked:
                for number in linked[message_id]:
                    links[number] += 1
                    queues[number].append(
                        StoredMessage(message_id, exchange, key, properties, body, size, True, published)
                    )
            else:
                leftovers.append(message_id)
        used = {number for number, queue in queues.items() if queue}
        for number in used:
            recovered.messages.setdefault(names[number], queues[number])
        self._numbers.load(
            {number: key for number, key in names.items() if number in used},
            {number: len(queues[number]) - links[number] for number in used},
        )
        return leftovers, [number for number in names if number not in used]

    # -- operations (reactor thread) -------------------------------------------

    def _queue(self, function: Callable[..., None], *args: Any) -> int:
        return self._enqueue(_Operation(function, args))

    def _enqueue(self, work: Union[_Spill, _Operation]) -> int:
        """Queue *work* for the writer; its sequence number."""
        with self._mutex:
            self._check_open()
            self._pending.append(work)
            self._pending_bytes += work.size
            work.sequence = sequence = self._next_sequence()
            return sequence

    def _check_open(self) -> None:
        if self._closing:
            raise RuntimeError(f"store {self.path} is closed")

    def _next_sequence(self) -> int:
        """Number a new operation and wake the writer if it waits (lock held)."""
        if self._sequence == self._taken:
            self._lock.notify()
        self._sequence += 1
        return self._sequence

    def add_exchange(self, exchange: DurableExchange) -> int:
        return self._queue(_add_exchange, exchange)

    def remove_exchange(self, vhost: str, name: str) -> int:
        return self._queue(_remove_exchange, vhost, name)

    def add_queue(self, queue: DurableQueue) -> int:
        return self._queue(_add_queue, queue)

    def remove_queue(self, vhost: str, name: str) -> int:
        return self._queue(_remove_queue, self._numbers, vhost, name)

    def add_binding(self, binding: DurableBinding) -> int:
        return self._queue(_add_binding, binding)

    def remove_binding(self, binding: DurableBinding) -> int:
        return self._queue(_remove_binding, binding)

    def publish(self, message: StoredMessage, queues: Sequence[tuple[str, str]]) -> int:
        publish = _Publish(message, list(queues))
        with self._mutex:
            self._check_open()
            self._pending.append(publish)
            self._pending_bytes += message.size
            self._unwritten[message.message_id] = publish
            publish.sequence = sequence = self._next_sequence()
            return sequence

    def remove(self, vhost: str, queue: str, message_ids: Sequence[int]) -> int:
        key = (vhost, queue)
        rows = []
        with self._mutex:
            self._check_open()
            unwritten = self._unwritten
            for message_id in message_ids:
                publish = unwritten.get(message_id)
                if publish is not None and key in publish.queues:
                    publish.queues.remove(key)
                    if not publish.queues:
                        del unwritten[message_id]
                        self.cancelled += 1
                else:
                    rows.append((vhost, queue, message_id))
            sequence = self._next_sequence()
            if rows:
                self._removals.append((sequence, rows))
            return sequence

    def spill(self, message_id: int, body: bytes) -> int:
        return self._enqueue(_Spill(message_id, body))

    def unspill(self, message_ids: Sequence[int]) -> int:
        return self._queue(_unspill, [(message_id,) for message_id in message_ids])

    def read(self, message_ids: Sequence[int]) -> dict[int, bytes]:
        bodies = self._read_from("messages", message_ids)
        if len(bodies) < len(message_ids):
            bodies.update(self._read_from("spilled", [i for i in message_ids if i not in bodies]))
        return bodies

    def _read_from(self, table: str, message_ids: Sequence[int]) -> dict[int, bytes]:
        """The bodies of *table* (messages or spilled) with these ids."""
        reader = self._reading()
        bodies: dict[int, bytes] = {}
        for start in range(0, len(message_ids), _READ_CHUNK):
            chunk = message_ids[start : start + _READ_CHUNK]
            rows = reader.execute(
                f"SELECT id, body FROM {table} WHERE id IN ({', '.join('?' * len(chunk))})", chunk
            )
            bodies.update(rows)
        return bodies

    def _reading(self) -> sqlite3.Connection:
        """The reactor thread's read-only connection, which sees every committed batch."""
        if self._reader is None:
            self._reader = sqlite3.connect(self.path, isolation_level=None)
            self._reader.execute("PRAGMA query_only=1")
        return self._reader

    def append_log(self, vhost: str, queue: str, chunk: LogChunk) -> int:
        append = _Append(vhost, queue, chunk)
        with self._mutex:
            self._check_open()
            self._pending.append(append)
            self._pending_bytes += append.size
            append.sequence = sequence = self._next_sequence()
            return sequence

    def read_log(self, vhost: str, queue: str, start: int) -> Optional[LogChunk]:
        reader = self._reading()
        for condition in ("first <= ? ORDER BY first DESC", "first > ? ORDER BY first"):
            row = reader.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM stream_chunks WHERE vhost = ? AND queue = ?"
                f" AND {condition} LIMIT 1",
                (vhost, queue, start),
            ).fetchone()
            if row is not None and row[0] + row[1] > start:
                return LogChunk.from_row(row)
        return None

    def log_offset_at(self, vhost: str, queue: str, timestamp: int, start: int) -> Optional[int]:
        """The first chunk with a message at or after *timestamp* and after
        *start* (found by its last timestamp, which an index orders as the
        offsets are: timestamps never decrease along a log), then a binary
        search inside it."""
        row = self._reading().execute(
            f"SELECT {_CHUNK_COLUMNS} FROM stream_chunks WHERE vhost = ? AND queue = ?"
            " AND last_timestamp >= ? AND first + count > ? ORDER BY last_timestamp, first LIMIT 1",
            (vhost, queue, timestamp, start),
        ).fetchone()
        if row is None:
            return None
        chunk = LogChunk.from_row(row)
        return chunk.first + chunk.index_at(timestamp, max(start - chunk.first, 0))

    def truncate_log(self, vhost: str, queue: str, first: int) -> int:
        return self._queue(_truncate_log, vhost, queue, first)

    def put_setting(self, kind: str, key: str, value: Any) -> int:
        return self._queue(_put_setting, kind, key, json.dumps(value))

    def remove_setting(self, kind: str, key: str) -> int:
        return self._queue(_remove_setting, kind, key)

    def add_durable_listener(self, listener: Callable[[int], None]) -> None:
        self._listeners.append(listener)

    @property
    def durable_sequence(self) -> int:
        return self._durable

    def when_durable(self, sequence: int) -> Deferred[None]:
        if self._failure is not None:
            return _failed(self._failure)
        if sequence <= self._durable:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        heappush(self._waiting, (sequence, id(waiter), waiter))
        return waiter

    def failed_between(self, after: int, upto: int) -> bool:
        index = bisect_right(self._failed_lasts, after)
        return index < len(self._failed_firsts) and self._failed_firsts[index] <= upto

    def add_failure_listener(self, listener: Callable[[Optional[str]], None]) -> None:
        self._failure_listeners.append(listener)

    @property
    def last_sequence(self) -> int:
        """The sequence number of the latest operation."""
        return self._sequence

    def close(self) -> Deferred[None]:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        with self._mutex:
            if not self._closing:
                self._closing = True
                self._lock.notify()
        return self._closed

    # -- the writer thread -----------------------------------------------------

    def _next_batch(self, idle: bool, hold_until: float) -> Union[_Batch, str, None]:
        """What the writer does next: a batch of the work queued so far, or
        :data:`_TIDY` after :data:`IDLE_SECONDS` without work (when *idle*
        asks for it), or :data:`_PROBE` when a write failed and nothing is
        queued; None once the store is closing and nothing is left.

        After a failed write nothing is taken before *hold_until* (a
        :func:`time.monotonic` time) unless the store is closing.
        """
        with self._mutex:
            idle_since = monotonic()
            while True:
                busy = self._sequence != self._taken or self._carried
                now = monotonic()
                if self._closing:
                    return self._take() if busy else None
                if now < hold_until:
                    self._lock.wait(hold_until - now)
                elif busy:
                    return self._take()
                elif hold_until:
                    return _PROBE
                elif not idle:
                    self._lock.wait()
                elif now - idle_since >= IDLE_SECONDS:
                    return _TIDY
                else:
                    self._lock.wait(idle_since + IDLE_SECONDS - now)

    def _take(self) -> _Batch:
        """The queued work, up to about :data:`BATCH_BYTES` of bodies and
        :data:`REMOVALS_PER_BATCH` removals (lock held)."""
        pending, self._carried = self._pending, False
        removals, last = self._take_removals()
        if self._pending_bytes <= BATCH_BYTES:
            batch = _Batch(pending, removals, last)
            self._pending, self._pending_bytes, self._unwritten = [], 0, {}
        else:
            taken = 0
            cut = 0
            while cut < len(pending) and (not cut or taken + pending[cut].size <= BATCH_BYTES):
                taken += pending[cut].size
                cut += 1
            operations, self._pending = pending[:cut], pending[cut:]
            self._pending_bytes -= taken
            for operation in operations:
                if isinstance(operation, _Publish):
                    self._unwritten.pop(operation.message.message_id, None)
            if self._pending:
                last = min(last, self._pending[0].sequence - 1)
            batch = _Batch(operations, removals, last)
        self._taken = batch.last_sequence
        return batch

    def _take_removals(self) -> tuple[list[tuple[str, str, int]], int]:
        """Up to :data:`REMOVALS_PER_BATCH` queued removals, and the last
        sequence number they settle with what precedes them (lock held)."""
        queued = self._removals
        taken: list[tuple[str, str, int]] = []
        while queued and len(taken) < REMOVALS_PER_BATCH:
            sequence, rows = queued[0]
            room = REMOVALS_PER_BATCH - len(taken)
            if len(rows) > room:
                taken.extend(rows[:room])
                queued[0] = (sequence, rows[room:])
            else:
                taken.extend(rows)
                queued.popleft()
        return taken, queued[0][0] - 1 if queued else self._sequence

    def _write_loop(self, db: sqlite3.Connection) -> None:
        hold_until = 0.0
        idle = False
        checkpointer = self._checkpointer
        assert checkpointer is not None
        checkpointer.start()
        try:
            while (work := self._next_batch(idle, hold_until)) is not None:
                try:
                    if work is _TIDY:
                        _tidy(db)
                    elif work is _PROBE:
                        db.execute("INSERT OR REPLACE INTO write_probe VALUES (1, ?)", (time(),))
                    else:
                        assert isinstance(work, _Batch)
                        self._commit(db, work)
                except sqlite3.Error as error:
                    self._write_failed(db, work, error)
                    if self._closing:
                        break
                    hold_until = monotonic() + RETRY_SECONDS
                    continue
                if hold_until:
                    hold_until = 0.0
                    self._reactor.callFromThread(self._tell, None)
                idle = work is not _TIDY
                if isinstance(work, _Batch):
                    self.operations = work.last_sequence
                    self._reactor.callFromThread(self._made_durable, work.last_sequence)
                    try:
                        self._bound(db, work.may_free_pages)
                    except (OSError, sqlite3.Error) as error:
                        self._write_failed(db, _TIDY, error)
                        hold_until = monotonic() + RETRY_SECONDS
            checkpointer.stop()
            _tidy_on_close(db)
        except Exception:
            failure = Failure()
            self._reactor.callFromThread(self._broken, failure)
        finally:
            checkpointer.stop()
            if self._log_frames is not None:
                self._log_frames.close()
            db.close()
            if self._lock_file is not None:
                self._lock_file.close()
            self._reactor.callFromThread(self._closed.callback, None)

    def _commit(self, db: sqlite3.Connection, batch: _Batch) -> None:
        """Write *batch*; count and time its commit if it wrote anything (writer thread)."""
        started = monotonic()
        written = _write(db, batch, self._numbers)
        if written is not None:
            self.commits += 1
            self.commit_seconds.observe(monotonic() - started)
            self.batch_messages.observe(written)

    def _bound(self, db: sqlite3.Connection, freed: bool) -> None:
        """Keep the files small after a batch: have the log checkpointed
        (see :meth:`_checkpoint`), return free pages when the batch may have
        *freed* some (see the module's docstring).

        A batch of inserts alone (publishes, stream appends) frees no page:
        after it, free pages are fewer or as many and the file as large or
        larger, so the reclaim after the last batch that deleted anything
        decided for it already. Skipping the free-page count there spares the
        writer thread one SQLite call, and with it one more wait for the GIL
        while the reactor thread runs, before it takes the next batch.
        """
        self._checkpoint(db)
        if freed:
            _reclaim(db)

    def _checkpoint(self, db: sqlite3.Connection) -> None:
        """Checkpoint the log beside the commits (writer thread, after a batch).

        Once the log holds :data:`CHECKPOINT_BYTES` of frames, the
        checkpointer copies them into the database on its own connection
        and thread, while the writer goes on committing (a PASSIVE
        checkpoint, which waits for nobody and makes nobody wait). When it
        is done, the writer copies what was committed meanwhile (a PASSIVE
        checkpoint of its own, a few batches' pages): the log is then
        entirely in the database, and SQLite writes the next transaction
        from the start of the log's file again, over the old frames, with
        no file to truncate and grow again. Should the log reach twice
        :data:`CHECKPOINT_BYTES` all the same (a checkpointer slower than
        the writer, or failing, or a reader holding on to old frames), the
        writer checkpoints it and truncates it itself, waiting for it (and
        for a copy of the checkpointer's under way: SQLite lets one
        connection checkpoint at a time).
        """
        checkpointer, frames = self._checkpointer, self._log_frames
        assert checkpointer is not None and frames is not None
        log = frames.size()
        if log >= 2 * CHECKPOINT_BYTES:
            if db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]:
                # Busy: SQLite lets one connection checkpoint at a time, and
                # the checkpointer's copy is under way. The log is bounded
                # here, so wait for that copy to end and truncate after it.
                checkpointer.settle()
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        elif checkpointer.ended:
            checkpointer.ended = checkpointer.asked = False
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        elif log >= CHECKPOINT_BYTES and not checkpointer.asked:
            checkpointer.asked = True
            checkpointer.wake()

    def _checkpoint_failed(self, error: Optional[str]) -> None:
        """The checkpointer's checkpoint failed with *error*, or works
        again (None): say so in the log once each time (reactor thread)."""
        if error is not None:
            _log.warn(
                "checkpoints of {path} beside the commits fail ({error}): the writer makes them",
                path=str(self.path), error=error,
            )
        else:
            _log.info("checkpoints of {path} beside the commits work again", path=str(self.path))

    def log_allowance(self) -> int:
        """Bytes the write-ahead log's file may still grow by before the
        writer checkpoints and truncates it."""
        return max(2 * CHECKPOINT_BYTES - self.log_size(), 0)

    def log_size(self) -> int:
        """The bytes of the write-ahead log's file."""
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def _write_failed(self, db: sqlite3.Connection, work: Union[_Batch, str], error: Exception) -> None:
        """A write (of a batch, or the writer's own upkeep) failed: roll back;
        drop a batch's publishes and queue its other operations again (writer thread)."""
        if db.in_transaction:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite rolled the transaction back itself
        if not isinstance(work, _Batch):
            self._reactor.callFromThread(self._tell, _describe(error))
            return
        failed: list[list[int]] = []
        kept: list[_Work] = []
        for operation in work.operations:
            if not isinstance(operation, _Publish):
                kept.append(operation)
            elif operation.queues:
                if failed and failed[-1][1] == operation.sequence - 1:
                    failed[-1][1] = operation.sequence
                else:
                    failed.append([operation.sequence, operation.sequence])
        with self._mutex:
            self._pending[:0] = kept
            self._pending_bytes += sum(operation.size for operation in kept)
            if work.removals:
                self._removals.appendleft((work.last_sequence, work.removals))
            carried = self._carried = bool(kept or work.removals)
        settled = 0 if carried else work.last_sequence
        self._reactor.callFromThread(self._dropped, failed, settled, _describe(error))

    def _dropped(self, failed: list[list[int]], settled: int, error: str) -> None:
        """Publishes were dropped (runs of sequence numbers), the operations up
        to *settled* (0: none) are settled, and listeners hear of *error*."""
        for first, last in failed:
            self._failed_firsts.append(first)
            self._failed_lasts.append(last)
        self._tell(error)
        if settled:
            self._made_durable(settled)

    def _tell(self, error: Optional[str]) -> None:
        """Tell the failure listeners that a write failed (*error*), or works again (None)."""
        for listener in self._failure_listeners:
            listener(error)

    def _made_durable(self, sequence: int) -> None:
        if sequence <= self._durable:
            return
        self._durable = sequence
        for listener in self._listeners:
            listener(sequence)
        waiting = self._waiting
        while waiting and waiting[0][0] <= sequence:
            heappop(waiting)[2].callback(None)

    def _broken(self, failure: Failure) -> None:
        """The writer stopped on an unexpected error: say so once, and fail
        every write waiting and to come with it."""
        _log.failure("message store {path} broke: it takes no more writes", failure, path=str(self.path))
        self._failure = failure
        with self._mutex:
            self._closing = True
        while self._waiting:
            heappop(self._waiting)[2].errback(failure)


def _exclusive(path: Path) -> IO[bytes]:
    """*path* opened and locked for this process alone (the lock ends with it).

    :raises StoreInUse: another process holds the lock.
    """
    lock_file = open(path, "ab")
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock_file.close()
        raise StoreInUse(
            f"{path.parent} is in use by another broker; give each broker its own data directory"
        ) from None
    return lock_file


def _failed(failure: Failure) -> Deferred[None]:
    waiter: Deferred[None] = Deferred()
    waiter.errback(failure)
    return waiter


# -- operations (writer thread) -------------------------------------------------


def _add_exchange(db: sqlite3.Connection, e: DurableExchange) -> None:
    db.execute(
        "INSERT OR REPLACE INTO exchanges VALUES (?, ?, ?, ?, ?, ?)",
        (e.vhost, e.name, e.type, e.auto_delete, e.internal, _table(e.arguments)),
    )


def _remove_exchange(db: sqlite3.Connection, vhost: str, name: str) -> None:
    db.execute("DELETE FROM exchanges WHERE vhost = ? AND name = ?", (vhost, name))
    db.execute(
        "DELETE FROM bindings WHERE vhost = ? AND (source = ? OR"
        " (destination = ? AND destination_kind = 'exchange'))",
        (vhost, name, name),
    )


def _add_queue(db: sqlite3.Connection, q: DurableQueue) -> None:
    db.execute(
        "INSERT OR REPLACE INTO queues VALUES (?, ?, ?, ?)",
        (q.vhost, q.name, q.auto_delete, _table(q.arguments)),
    )


def _remove_queue(db: sqlite3.Connection, numbers: _QueueNumbers, vhost: str, name: str) -> None:
    db.execute("DELETE FROM queues WHERE vhost = ? AND name = ?", (vhost, name))
    db.execute(
        "DELETE FROM bindings WHERE vhost = ? AND destination = ? AND destination_kind = 'queue'",
        (vhost, name),
    )
    number, alone = numbers.forget((vhost, name))
    if number is not None:
        _purge(db, number, alone)
    db.execute("DELETE FROM stream_chunks WHERE vhost = ? AND queue = ?", (vhost, name))


def _truncate_log(db: sqlite3.Connection, vhost: str, queue: str, first: int) -> None:
    db.execute(
        "DELETE FROM stream_chunks WHERE vhost = ? AND queue = ? AND first < ?", (vhost, queue, first)
    )


def _binding_row(b: DurableBinding) -> tuple[Any, ...]:
    return (b.vhost, b.source, b.destination, b.destination_kind, b.routing_key, _table(b.arguments))


def _add_binding(db: sqlite3.Connection, b: DurableBinding) -> None:
    db.execute("INSERT OR IGNORE INTO bindings VALUES (?, ?, ?, ?, ?, ?)", _binding_row(b))


def _remove_binding(db: sqlite3.Connection, b: DurableBinding) -> None:
    db.execute(
        "DELETE FROM bindings WHERE vhost = ? AND source = ? AND destination = ?"
        " AND destination_kind = ? AND routing_key = ? AND arguments = ?",
        _binding_row(b),
    )


def _put_setting(db: sqlite3.Connection, kind: str, key: str, value: str) -> None:
    db.execute("INSERT OR REPLACE INTO settings VALUES (?, ?, ?)", (kind, key, value))


def _remove_setting(db: sqlite3.Connection, kind: str, key: str) -> None:
    db.execute("DELETE FROM settings WHERE kind = ? AND key = ?", (kind, key))


def _unspill(db: sqlite3.Connection, message_ids: list[tuple[int]]) -> None:
    db.executemany("DELETE FROM spilled WHERE id = ?", message_ids)


def _write(db: sqlite3.Connection, batch: _Batch, numbers: _QueueNumbers) -> Optional[int]:
    """Apply *batch* in one transaction; the messages (publishes and stream
    appends) it wrote, or None when it wrote nothing at all. When it fails,
    what it changed in *numbers* is undone."""
    try:
        written = _apply(db, batch, numbers)
    except BaseException:
        numbers.rolled_back()
        raise
    numbers.committed()
    return written


def _apply(db: sqlite3.Connection, batch: _Batch, numbers: _QueueNumbers) -> Optional[int]:
    """:func:`_write`'s transaction. A message on one queue is one row of
    ``messages``; one on several has a row of ``message_links`` for each."""
    if batch.appends_alone:
        return _append_alone(db, cast(list[_Append], batch.operations))
    messages: list[Any] = []
    links: list[Any] = []
    spills: list[Any] = []
    appends: list[tuple[Any, ...]] = []
    begun = False
    written = 0
    known, alone = numbers.numbers, numbers.alone

    def insert_gathered() -> None:
        """Insert the rows gathered so far (each list emptied)."""
        _insert_messages(db, messages, links, numbers.named)
        _insert_spilled(db, spills)
        _insert_log(db, appends)

    for operation in batch.operations:
        if isinstance(operation, _Publish):
            queues = operation.queues
            if queues:
                written += 1
                m = operation.message
                message_id = m.message_id
                if len(queues) == 1:
                    number = known.get(queues[0]) or numbers.number(queues[0])
                    alone[number] += 1
                else:
                    number = 0
                    for key in queues:
                        links += (message_id, numbers.number(key))
                messages += (message_id, number, m.exchange, m.routing_key, m.raw_properties, m.body, m.published)
            continue
        if isinstance(operation, _Spill):
            spills += operation.row
            continue
        if isinstance(operation, _Append):
            row = operation.row()
            written += row[3]
            appends.append(row)
            continue
        begun = begun or _begin(db)
        insert_gathered()
        operation.function(db, *operation.args)
    if messages or spills or batch.removals or appends:
        begun = begun or _begin(db)
        insert_gathered()
        _remove(db, batch.removals, numbers)
    if not begun:
        return None
    db.execute("COMMIT")
    return written


def _begin(db: sqlite3.Connection) -> bool:
    """Start the batch's transaction."""
    db.execute("BEGIN")
    return True


def _insert_messages(db: sqlite3.Connection, messages: list[Any], links: list[Any], named: list[Any]) -> None:
    """Insert the queues numbered, the gathered messages and their queue
    links (the columns of their rows one after the other), then forget them."""
    if named:
        _insert_rows(db, "INSERT INTO queue_names VALUES", 3, named)
        named.clear()
    if messages:
        _insert_rows(db, "INSERT INTO messages VALUES", 7, messages)
        _insert_rows(db, "INSERT OR IGNORE INTO message_links VALUES", 2, links)
        messages.clear()
        links.clear()


def _insert_spilled(db: sqlite3.Connection, spills: list[Any]) -> None:
    """Insert the gathered spilled bodies (ids and bodies one after the
    other; a body spilled again replaces itself), then forget them."""
    if spills:
        _insert_rows(db, "INSERT OR REPLACE INTO spilled VALUES", 2, spills)
        spills.clear()


#: Values one statement of :func:`_insert_rows` binds at most: SQLite's
#: smallest default limit (builds before 3.32 allow no more).
_VARIABLES_PER_STATEMENT = 999


def _insert_rows(db: sqlite3.Connection, insert: str, width: int, values: list[Any]) -> None:
    """Insert rows of *width* columns, given as one flat list of *values*,
    with many rows in each statement: SQLite runs each statement in one step
    (one release of the GIL), where ``executemany`` takes one per row.

    Statements take a power of two of rows (the largest that fits
    :data:`_VARIABLES_PER_STATEMENT`, then halving for the rest), so that a
    batch of any size needs only a few distinct statements.
    """
    rows = len(values) // width
    size = 1 << ((_VARIABLES_PER_STATEMENT // width).bit_length() - 1)
    done = 0
    while done < rows:
        while size > rows - done:
            size >>= 1
        db.execute(_multi_row(insert, width, size), values[done * width : (done + size) * width])
        done += size


@lru_cache(maxsize=64)
def _multi_row(insert: str, width: int, rows: int) -> str:
    """*insert* followed by a VALUES list of *rows* rows of *width* parameters."""
    row = "(" + ", ".join("?" * width) + ")"
    return f"{insert} {', '.join([row] * rows)}"


#: Inserts rows of ``stream_chunks`` (a chunk written again after a failed
#: batch replaces itself).
_INSERT_CHUNKS = "INSERT OR REPLACE INTO stream_chunks VALUES"
#: The columns of a row of ``stream_chunks``.
_CHUNK_WIDTH = 10


def _insert_log(db: sqlite3.Connection, appends: list[tuple[Any, ...]]) -> None:
    """Insert the gathered log chunks, then forget them."""
    if appends:
        db.executemany(_multi_row(_INSERT_CHUNKS, _CHUNK_WIDTH, 1), appends)
        appends.clear()


def _append_alone(db: sqlite3.Connection, appends: list[_Append]) -> int:
    """Write a batch of stream appends alone with one statement outside any
    transaction: SQLite makes a single statement its own transaction, so its
    rows are on disk all or none (with ``synchronous=FULL`` its commit ends
    with the log's fsync, as a batch's COMMIT does), and the writer thread
    makes one call into SQLite instead of three (BEGIN, the insert, COMMIT):
    each call releases the interpreter's lock, and getting it back means
    waiting for the reactor thread to let go of it. The messages written."""
    values: list[Any] = []
    written = 0
    for append in appends:
        row = append.row()
        written += row[3]
        values += row
    db.execute(_multi_row(_INSERT_CHUNKS, _CHUNK_WIDTH, len(appends)), values)
    return written


def _migrate(db: sqlite3.Connection) -> None:
    """Rewrite a database of an earlier layout (see :data:`SCHEMA_VERSION`)
    in the current one, in one transaction, and mark it as of
    :data:`SCHEMA_VERSION` (a new database has nothing to rewrite)."""
    if db.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        _migrate_stream_log(db)
        _migrate_messages(db)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        _roll_back(db)
        raise


def _roll_back(db: sqlite3.Connection) -> None:
    """End a failed transaction of *db* (SQLite may have rolled it back itself:
    a full disk or an I/O error can end it)."""
    if db.in_transaction:
        db.execute("ROLLBACK")


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def _migrate_stream_log(db: sqlite3.Connection) -> None:
    """Rewrite the logs of a version 0 database (one row per message in
    ``stream_log``) as chunks."""
    if _has_table(db, "stream_log"):
        rows = db.execute(
            "SELECT vhost, queue, position, segment, timestamp, exchange, routing_key,"
            " properties, body FROM stream_log ORDER BY vhost, queue, position"
        )
        for key, chunk in _chunks_of(rows):
            db.execute("INSERT INTO stream_chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (*key, *chunk.take()))
        db.execute("DROP TABLE stream_log")


def _migrate_messages(db: sqlite3.Connection) -> None:
    """Rewrite the messages of a version 0 or 1 database (a row of
    ``queue_messages`` for each message and queue, keyed by the queue's
    name) in table ``messages`` of version 2: each queue numbered, a
    message on one queue naming its number, one on several linked to each.
    Messages on no queue are left out; a database written before messages
    kept their publish time gets 0 for it."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    if "queue" in columns:
        return
    published = "m.published" if "published" in columns else "0"
    db.execute("ALTER TABLE messages RENAME TO messages_v1")
    db.execute(_MESSAGES)
    if _has_table(db, "queue_messages"):
        _number_messages(db, published)
    db.execute("DROP TABLE messages_v1")


def _number_messages(db: sqlite3.Connection, published: str) -> None:
    """:func:`_migrate_messages`' copy of the messages of ``messages_v1``
    that ``queue_messages`` puts on queues (their *published* column)."""
    db.execute("INSERT INTO queue_names (vhost, name) SELECT DISTINCT vhost, queue FROM queue_messages")
    db.execute("CREATE INDEX queue_names_by_name ON queue_names (vhost, name)")
    db.execute(
        "CREATE TEMPORARY TABLE queue_counts AS SELECT q.message_id AS id, count(*) AS queues,"
        " min(n.id) AS number FROM queue_messages q JOIN queue_names n ON n.vhost = q.vhost AND n.name = q.queue"
        " GROUP BY q.message_id"
    )
    db.execute(
        "INSERT INTO messages SELECT m.id, CASE WHEN c.queues = 1 THEN c.number ELSE 0 END, m.exchange,"
        f" m.routing_key, m.properties, m.body, {published} FROM queue_counts c JOIN messages_v1 m ON m.id = c.id"
        " ORDER BY m.id"
    )
    db.execute(
        "INSERT INTO message_links SELECT q.message_id, n.id FROM queue_messages q"
        " JOIN queue_names n ON n.vhost = q.vhost AND n.name = q.queue"
        " WHERE q.message_id IN (SELECT id FROM queue_counts WHERE queues > 1)"
    )
    for statement in ("DROP TABLE queue_counts", "DROP INDEX queue_names_by_name", "DROP TABLE queue_messages"):
        db.execute(statement)


def _chunks_of(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[tuple[str, str], LogChunk]]:
    """(vhost, queue) and chunk for each chunk the version 0 rows of
    ``stream_log`` make (in order), cut at segments and at
    :data:`~txamqp09.store.chunks.CHUNK_BYTES`."""
    key: Optional[tuple[str, str]] = None
    chunk: Optional[LogChunk] = None
    for vhost, queue, offset, segment, timestamp, exchange, routing_key, properties, body in rows:
        if (
            chunk is None or key != (vhost, queue) or chunk.segment != segment or chunk.end != offset
            or chunk.nbytes >= CHUNK_BYTES
        ):
            if chunk is not None and key is not None:
                yield key, chunk
            key, chunk = (vhost, queue), LogChunk(offset, segment)
        chunk.add(timestamp, envelope(exchange, routing_key), bytes(properties), bytes(body))
    if chunk is not None and key is not None:
        yield key, chunk


#: The columns of ``stream_chunks`` that :meth:`LogChunk.from_row` takes.
_CHUNK_COLUMNS = "first, count, segment, first_timestamp, last_timestamp, size, ends, data"

#: Deletes a message of several queues once none links it.
_DELETE_ORPHANS = (
    "DELETE FROM messages WHERE id = ? AND queue = 0 AND NOT EXISTS"
    " (SELECT 1 FROM message_links WHERE message_id = ?)"
)


def _remove(db: sqlite3.Connection, removals: list[tuple[str, str, int]], numbers: _QueueNumbers) -> None:
    """Delete the messages of *removals* (vhost, queue, message id) from
    their queues: the rows of those on one queue, many in each statement;
    for those on several, the link, and the row with the last link. A
    removal for a queue without a number holds nothing stored."""
    known = numbers.numbers
    for key, rows in groupby(removals, _queue_of):
        number = known.get(key)
        if number is not None:
            numbers.deleted(number, _remove_from(db, number, [row[2] for row in rows]))


def _remove_from(db: sqlite3.Connection, number: int, message_ids: list[int]) -> int:
    """Delete *message_ids* from the queue numbered *number*: as the rows
    of messages on it alone, with statements of powers of two of ids (few
    distinct statements, as :func:`_insert_rows`); the ids of a statement
    that deleted fewer rows than it named go on to the links. The rows of
    messages on it alone it deleted."""
    size = 1 << ((_VARIABLES_PER_STATEMENT - 1).bit_length() - 1)
    done = deleted = 0
    while done < len(message_ids):
        while size > len(message_ids) - done:
            size >>= 1
        some = message_ids[done : done + size]
        rows = db.execute(_delete_by_id(size), [number, *some]).rowcount
        if rows < size:
            _unlink(db, number, some)
        deleted += rows
        done += size
    return deleted


@lru_cache(maxsize=16)
def _delete_by_id(count: int) -> str:
    """The statement that deletes the messages of one queue, by *count* ids."""
    return f"DELETE FROM messages WHERE queue = ? AND id IN ({', '.join('?' * count)})"


def _unlink(db: sqlite3.Connection, number: int, message_ids: list[int]) -> None:
    """Take messages of several queues off the queue numbered *number*."""
    db.executemany("DELETE FROM message_links WHERE message_id = ? AND queue = ?", [(i, number) for i in message_ids])
    db.executemany(_DELETE_ORPHANS, [(i, i) for i in message_ids])


def _queue_of(removal: tuple[str, str, int]) -> tuple[str, str]:
    return removal[0], removal[1]


def _purge(db: sqlite3.Connection, number: int, alone: int) -> None:
    """Delete every message of the queue numbered *number* (deleted), and its
    number: a scan of the messages when *alone* says rows may name it."""
    if alone:
        db.execute("DELETE FROM messages WHERE queue = ?", (number,))
    linked = db.execute("SELECT message_id FROM message_links WHERE queue = ?", (number,)).fetchall()
    db.execute("DELETE FROM message_links WHERE queue = ?", (number,))
    db.executemany(_DELETE_ORPHANS, [(i, i) for (i,) in linked])
    db.execute("DELETE FROM queue_names WHERE id = ?", (number,))


def _budget_end(db: sqlite3.Connection, budget: Optional[int]) -> int:
    """The first message id whose body is not recovered: the bodies of the
    messages before it, in the order of their ids, fit *budget* (None: all)."""
    if budget is not None:
        for message_id, size in db.execute("SELECT id, length(body) FROM messages ORDER BY id"):
            budget -= size
            if budget < 0:
                return int(message_id)
    return (1 << 63) - 1


def _reclaim(db: sqlite3.Connection) -> None:
    """Return the free pages to the file system when they are many."""
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    if free >= VACUUM_MIN_FREE_PAGES and free * 4 >= db.execute("PRAGMA page_count").fetchone()[0]:
        db.executescript("PRAGMA incremental_vacuum;")


def _forget_leftovers(db: sqlite3.Connection, message_ids: list[int], numbers: list[int]) -> None:
    """Delete what a previous run left behind: messages no queue holds
    (*message_ids*), the numbers of queues that hold none, spilled bodies."""
    db.execute("BEGIN")
    try:
        db.executemany("DELETE FROM messages WHERE id = ?", [(i,) for i in message_ids])
        db.executemany("DELETE FROM message_links WHERE message_id = ?", [(i,) for i in message_ids])
        db.executemany("DELETE FROM queue_names WHERE id = ?", [(n,) for n in numbers])
        db.execute("DELETE FROM spilled")
        db.execute("COMMIT")
    except BaseException:
        _roll_back(db)
        raise


def _tidy(db: sqlite3.Connection) -> None:
    """Return every free page to the file system and empty the write-ahead log."""
    db.executescript("PRAGMA incremental_vacuum;")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _tidy_on_close(db: sqlite3.Connection) -> None:
    """Leave the files as small as the data for the next start; a failure
    (a full disk) only leaves them larger, everything is written already."""
    try:
        _tidy(db)
    except sqlite3.Error:
        return


def _describe(error: Exception) -> str:
    """What went wrong with a write, for logs and clients."""
    return f"{type(error).__name__}: {error}"
