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
becomes several; a stream's chunk counts as the most it may hold), and once the log file has grown to
:data:`CHECKPOINT_BYTES` it checkpoints the log into the database and
truncates it (after reporting the batch durable, so that confirms never wait
for a checkpoint). Removals are bounded too: one transaction applies at most
:data:`REMOVALS_PER_BATCH` of them, so that the deletes which free a full
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
:data:`SCHEMA_VERSION`). A database of version 0 (stream logs as one row per
message, in ``stream_log``) is migrated when opened: its logs are rewritten
as chunks, in one transaction. A database of a later version than this
store knows is refused (:class:`StoreFormatError`) without being changed.

Recovery relies on SQLite's atomic commits: a batch is on disk entirely or
not at all, so a crash at any point (a torn write, a half-written batch)
leaves the state of the last committed batch. Recovered messages carry their
bodies up to a budget; :meth:`SQLiteStore.read` reads others (and bodies the
broker paged out) through a second, read-only connection on the reactor
thread, which sees every committed batch. An exclusive ``flock`` on
``<database>.lock`` keeps a second process away from the database.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
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
#: Size of the write-ahead log file at which the writer checkpoints and truncates it.
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
#: user_version``): 1 keeps stream logs in chunks; 0 kept one row per message.
SCHEMA_VERSION = 1

# The sqlite3 module binds only int, float, str and bytearray values
# directly; any other value, bytes included, first goes through its adapter
# lookup, which for bytes fails twice (raising and clearing an
# AttributeError each time) before it binds the value as a blob. Every
# message has two bytes values (properties and body): an adapter that
# returns exact bytes unchanged skips those failures. This changes how no
# value is stored.
sqlite3.register_adapter(bytes, bytes)

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
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY, exchange TEXT NOT NULL, routing_key TEXT NOT NULL,
    properties BLOB NOT NULL, body BLOB NOT NULL, published REAL NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS queue_messages (
    vhost TEXT NOT NULL, queue TEXT NOT NULL, message_id INTEGER NOT NULL,
    PRIMARY KEY (vhost, queue, message_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS queue_messages_by_message ON queue_messages (message_id);
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
"""


class _Budget:
    """An SQL function for recovery: true while the bodies read so far fit *limit*."""

    def __init__(self, limit: Optional[int]) -> None:
        self.left = limit

    def __call__(self, size: int) -> bool:
        if self.left is None:
            return True
        self.left -= size
        return self.left >= 0


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
_Work = Union[_Publish, _Append, _Operation]


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

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, factory=self.connection_class
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(f"PRAGMA journal_size_limit={CHECKPOINT_BYTES}")
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
        except BaseException:
            connection.close()
            self._lock_file.close()
            raise
        if connection.execute("PRAGMA page_count").fetchone()[0] <= 1:
            connection.execute("PRAGMA auto_vacuum=INCREMENTAL")
            connection.execute("VACUUM")
        connection.executescript(_SCHEMA)
        _add_published_column(connection)
        _migrate_stream_log(connection)
        recovered = self._recover(connection, body_budget)
        try:
            _tidy(connection)
        except sqlite3.Error:
            pass  # a full disk: the writer empties the log once it can write again
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
        db.create_function("within_budget", 1, _Budget(body_budget), deterministic=False)
        rows = db.execute(
            "SELECT q.vhost, q.queue, m.id, m.exchange, m.routing_key, m.properties,"
            " CASE WHEN within_budget(length(m.body)) THEN m.body END, length(m.body), m.published"
            " FROM queue_messages q JOIN messages m ON m.id = q.message_id"
            " ORDER BY q.vhost, q.queue, q.message_id"
        )
        shared: dict[bytes, bytes] = {}
        for vhost, queue, message_id, exchange, key, properties, body, size, published in rows:
            if len(shared) > _SHARED_PROPERTIES:
                shared.clear()
            recovered.messages.setdefault((vhost, queue), []).append(
                StoredMessage(
                    message_id, exchange, key, shared.setdefault(properties, properties), body, size,
                    redelivered=True, published=published,
                )
            )
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
            _forget_leftovers(db)
        except sqlite3.Error:
            pass  # a full disk: they are harmless, and forgotten at the next start
        return recovered

    # -- operations (reactor thread) -------------------------------------------

    def _queue(self, function: Callable[..., None], *args: Any) -> int:
        operation = _Operation(function, args)
        with self._mutex:
            self._check_open()
            self._pending.append(operation)
            self._pending_bytes += operation.size
            operation.sequence = sequence = self._next_sequence()
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
        return self._queue(_remove_queue, vhost, name)

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
        return self._queue(_spill, message_id, body)

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
            _tidy_on_close(db)
        except Exception:
            failure = Failure()
            self._reactor.callFromThread(self._broken, failure)
        finally:
            db.close()
            if self._lock_file is not None:
                self._lock_file.close()
            self._reactor.callFromThread(self._closed.callback, None)

    def _commit(self, db: sqlite3.Connection, batch: _Batch) -> None:
        """Write *batch*; count and time its commit if it wrote anything (writer thread)."""
        started = monotonic()
        written = _write(db, batch)
        if written is not None:
            self.commits += 1
            self.commit_seconds.observe(monotonic() - started)
            self.batch_messages.observe(written)

    def _bound(self, db: sqlite3.Connection, freed: bool) -> None:
        """Keep the files small after a batch: checkpoint a log grown to
        :data:`CHECKPOINT_BYTES`, return free pages when the batch may have
        *freed* some (see the module's docstring).

        A batch of inserts alone (publishes, stream appends) frees no page:
        after it, free pages are fewer or as many and the file as large or
        larger, so the reclaim after the last batch that deleted anything
        decided for it already. Skipping the free-page count there spares the
        writer thread one SQLite call, and with it one more wait for the GIL
        while the reactor thread runs, before it takes the next batch.
        """
        if self.log_size() >= CHECKPOINT_BYTES:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if freed:
            _reclaim(db)

    def log_allowance(self) -> int:
        """Bytes the write-ahead log may still grow by before it is checkpointed."""
        return max(CHECKPOINT_BYTES - self.log_size(), 0)

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


def _remove_queue(db: sqlite3.Connection, vhost: str, name: str) -> None:
    db.execute("DELETE FROM queues WHERE vhost = ? AND name = ?", (vhost, name))
    db.execute(
        "DELETE FROM bindings WHERE vhost = ? AND destination = ? AND destination_kind = 'queue'",
        (vhost, name),
    )
    _purge(db, vhost, name)
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


def _spill(db: sqlite3.Connection, message_id: int, body: bytes) -> None:
    db.execute("INSERT OR REPLACE INTO spilled VALUES (?, ?)", (message_id, body))


def _unspill(db: sqlite3.Connection, message_ids: list[tuple[int]]) -> None:
    db.executemany("DELETE FROM spilled WHERE id = ?", message_ids)


def _write(db: sqlite3.Connection, batch: _Batch) -> Optional[int]:
    """Apply *batch* in one transaction; the messages (publishes and stream
    appends) it wrote, or None when it wrote nothing at all."""
    if batch.appends_alone:
        return _append_alone(db, cast(list[_Append], batch.operations))
    messages: list[Any] = []
    links: list[Any] = []
    appends: list[tuple[Any, ...]] = []
    begun = False
    written = 0
    for operation in batch.operations:
        if isinstance(operation, _Publish):
            if operation.queues:
                written += 1
                m = operation.message
                message_id = m.message_id
                messages += (message_id, m.exchange, m.routing_key, m.raw_properties, m.body, m.published)
                for vhost, queue in operation.queues:
                    links += (vhost, queue, message_id)
            continue
        if isinstance(operation, _Append):
            row = operation.row()
            written += row[3]
            appends.append(row)
            continue
        begun = begun or _begin(db)
        _insert_messages(db, messages, links)
        _insert_log(db, appends)
        operation.function(db, *operation.args)
    if messages or batch.removals or appends:
        begun = begun or _begin(db)
        _insert_messages(db, messages, links)
        _insert_log(db, appends)
        _remove(db, batch.removals)
    if not begun:
        return None
    db.execute("COMMIT")
    return written


def _add_published_column(db: sqlite3.Connection) -> None:
    """Give a database written before messages kept their publish time that column."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    if "published" not in columns:
        db.execute("ALTER TABLE messages ADD COLUMN published REAL NOT NULL DEFAULT 0")


def _begin(db: sqlite3.Connection) -> bool:
    """Start the batch's transaction."""
    db.execute("BEGIN")
    return True


def _insert_messages(db: sqlite3.Connection, messages: list[Any], links: list[Any]) -> None:
    """Insert the gathered messages and their queue links (the columns of
    their rows one after the other), then forget them."""
    if messages:
        _insert_rows(db, "INSERT INTO messages VALUES", 6, messages)
        _insert_rows(db, "INSERT OR IGNORE INTO queue_messages VALUES", 3, links)
        messages.clear()
        links.clear()


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


def _migrate_stream_log(db: sqlite3.Connection) -> None:
    """Rewrite the logs of a version 0 database (one row per message in
    ``stream_log``) as chunks, in one transaction, and mark the database as
    of :data:`SCHEMA_VERSION`."""
    if db.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        old = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'stream_log'")
        if old.fetchone() is not None:
            rows = db.execute(
                "SELECT vhost, queue, position, segment, timestamp, exchange, routing_key,"
                " properties, body FROM stream_log ORDER BY vhost, queue, position"
            )
            for key, chunk in _chunks_of(rows):
                db.execute(
                    "INSERT INTO stream_chunks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", (*key, *chunk.take())
                )
            db.execute("DROP TABLE stream_log")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


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

_DELETE_ORPHANS = (
    "DELETE FROM messages WHERE id = ? AND NOT EXISTS"
    " (SELECT 1 FROM queue_messages WHERE message_id = ?)"
)


def _remove(db: sqlite3.Connection, removals: list[tuple[str, str, int]]) -> None:
    if removals:
        db.executemany(
            "DELETE FROM queue_messages WHERE vhost = ? AND queue = ? AND message_id = ?", removals
        )
        db.executemany(_DELETE_ORPHANS, [(message_id, message_id) for _, _, message_id in removals])


def _purge(db: sqlite3.Connection, vhost: str, queue: str) -> None:
    ids = [
        row[0]
        for row in db.execute(
            "SELECT message_id FROM queue_messages WHERE vhost = ? AND queue = ?", (vhost, queue)
        )
    ]
    db.execute("DELETE FROM queue_messages WHERE vhost = ? AND queue = ?", (vhost, queue))
    db.executemany(_DELETE_ORPHANS, [(message_id, message_id) for message_id in ids])


def _reclaim(db: sqlite3.Connection) -> None:
    """Return the free pages to the file system when they are many."""
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    if free >= VACUUM_MIN_FREE_PAGES and free * 4 >= db.execute("PRAGMA page_count").fetchone()[0]:
        db.executescript("PRAGMA incremental_vacuum;")


def _forget_leftovers(db: sqlite3.Connection) -> None:
    """Delete what a previous run left behind: messages no queue holds, spilled bodies."""
    db.execute(
        "DELETE FROM messages WHERE NOT EXISTS"
        " (SELECT 1 FROM queue_messages WHERE message_id = messages.id)"
    )
    db.execute("DELETE FROM spilled")


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
