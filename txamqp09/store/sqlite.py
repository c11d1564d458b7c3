"""The embedded default store: SQLite in WAL mode, one file, one process.

The shared SQL layer (:mod:`~txamqp09.store.writer`, batching and group
commit; :mod:`~txamqp09.store.writes` and :mod:`~txamqp09.store.reading`,
the statements; :mod:`~txamqp09.store.schema`, the layout) does the work;
this module adds what is SQLite's own. With ``synchronous=FULL`` a batch's
COMMIT ends with one fsync of the write-ahead log, so one fsync covers every
operation of the batch.

Disk space: acknowledged and purged messages are deleted in the batch that
removes their last queue reference. The database uses incremental
auto-vacuum; after a batch that may have freed pages (any batch but one of
publishes and stream appends alone), when free pages exceed a quarter of the
file (and at least :data:`VACUUM_MIN_FREE_PAGES`), they are returned to the
file system.
The write-ahead log is bounded whatever the batch sizes: the writer takes at
most about :data:`~txamqp09.store.writer.BATCH_BYTES` of bodies in one
transaction, and once the log holds :data:`CHECKPOINT_BYTES` of pages a
second connection, on a thread of its own
(:class:`~txamqp09.store.checkpoints.Checkpointer`), copies them into the
database while the writer goes on committing; the log then starts over at
the beginning of its file. Should the log reach twice that all the same,
the writer checkpoints and truncates it itself (after reporting the batch
durable, so that confirms never wait for a checkpoint; see
:meth:`SQLiteStore._checkpoint`). Removals are bounded too
(:data:`~txamqp09.store.writer.REMOVALS_PER_BATCH` in one transaction), so
that the deletes which free a full disk never need more room in the log
than the disk has left. When the writer has had nothing to do for
:data:`IDLE_SECONDS` it returns every free page and empties the log, so that
the store's size follows its data; opening and closing the store do the same.

A batch of stream appends alone is one multi-row statement outside any
transaction (see :func:`_append_alone`). Rows are inserted many in each
statement, and statements over many ids take them in ``IN`` lists, both in
powers of two within SQLite's limit on bound variables, so that a batch of
any size needs only a few distinct statements.

The database records the version of its layout in ``PRAGMA user_version``;
databases of versions 0 and 1 are migrated when opened
(:mod:`~txamqp09.store.migrations`). Recovery relies on SQLite's atomic
commits: a batch is on disk entirely or not at all, so a crash at any point
(a torn write, a half-written batch) leaves the state of the last committed
batch. :meth:`SQLiteStore.read` and the log reads go through a second,
read-only connection on the reactor thread, which sees every committed
batch. An exclusive ``flock`` on ``<database>.lock`` keeps a second process
away from the database.
"""

from __future__ import annotations

import fcntl
import sqlite3
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, ContextManager, Iterator, Optional, Sequence, cast

from twisted.internet.interfaces import IReactorFromThreads
from twisted.logger import Logger

from txamqp09.store.checkpoints import Checkpointer, LogFrames
from txamqp09.store.migrations import SQLITE_MIGRATIONS
from txamqp09.store.schema import (
    BLOB, INTEGER, REAL, SCHEMA_VERSION, STREAM_CHUNKS, TEXT, Conflict, StoreFormatError, Table,
)
from txamqp09.store.sql import Cursor, Database, runs
from txamqp09.store.work import Append, Batch
from txamqp09.store.writer import SQLStore

__all__ = [
    "CHECKPOINT_BYTES",
    "IDLE_SECONDS",
    "SCHEMA_VERSION",
    "SQLiteDatabase",
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
#: Seconds without work after which the writer returns every free page and
#: empties the write-ahead log.
IDLE_SECONDS = 1.0
#: Values one statement binds at most: SQLite's smallest default limit
#: (builds before 3.32 allow no more).
_VARIABLES_PER_STATEMENT = 999

# The sqlite3 module binds only int, float, str and bytearray values
# directly; any other value, bytes included, first goes through its adapter
# lookup, which for bytes fails twice (raising and clearing an
# AttributeError each time) before it binds the value as a blob. Every
# message has two bytes values (properties and body): an adapter that
# returns exact bytes unchanged skips those failures. This changes how no
# value is stored.
sqlite3.register_adapter(bytes, bytes)

#: How an insert into a table of each conflict rule starts.
_INSERTS = {
    Conflict.FAIL: "INSERT INTO",
    Conflict.IGNORE: "INSERT OR IGNORE INTO",
    Conflict.REPLACE: "INSERT OR REPLACE INTO",
}


def _insert_into(table: Table) -> str:
    """The start of an insert of rows of *table*, up to its VALUES."""
    return f"{_INSERTS[table.conflict]} {table.name} VALUES"


@lru_cache(maxsize=64)
def _multi_row(insert: str, width: int, rows: int) -> str:
    """*insert* followed by a VALUES list of *rows* rows of *width* parameters."""
    row = "(" + ", ".join("?" * width) + ")"
    return f"{insert} {', '.join([row] * rows)}"


@lru_cache(maxsize=64)
def _with_ids(statement: str, count: int) -> str:
    """*statement* (translated) with its ``{ids}`` an IN list of *count* parameters."""
    return statement.replace("{ids}", f"IN ({', '.join('?' * count)})")


class SQLiteDatabase(Database):
    """A :class:`~txamqp09.store.sql.Database` on an :mod:`sqlite3` connection
    (in autocommit mode: transactions are the SQL layer's BEGIN and COMMIT)."""

    types = {INTEGER: "INTEGER", TEXT: "TEXT", BLOB: "BLOB", REAL: "REAL"}

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def execute(self, statement: str, parameters: Sequence[Any] = ()) -> Cursor:
        return self.connection.execute(self.sql(statement), parameters)

    def insert(self, table: Table, values: list[Any]) -> None:
        """Many rows in each statement: SQLite runs each statement in one
        step (one release of the GIL), where ``executemany`` would take one
        per row. Statements take a power of two of rows (see
        :func:`~txamqp09.store.sql.runs`) within :data:`_VARIABLES_PER_STATEMENT`."""
        width = table.width
        insert = _insert_into(table)
        for start, size in runs(len(values) // width, _VARIABLES_PER_STATEMENT // width):
            self.connection.execute(_multi_row(insert, width, size), values[start * width : (start + size) * width])

    def by_ids(
        self, statement: str, parameters: Sequence[Any], ids: Sequence[int]
    ) -> Iterator[tuple[Sequence[int], Cursor]]:
        """Statements of powers of two of ids (few distinct statements, as
        :meth:`insert`)."""
        translated = self.sql(statement)
        for start, size in runs(len(ids), _VARIABLES_PER_STATEMENT - len(parameters)):
            some = ids[start : start + size]
            yield some, self.connection.execute(_with_ids(translated, size), [*parameters, *some])

    def begin(self) -> None:
        self.connection.execute("BEGIN")

    def commit(self) -> None:
        self.connection.execute("COMMIT")

    def rollback(self) -> None:
        """SQLite may have rolled the transaction back itself: a full disk or
        an I/O error can end it."""
        if self.connection.in_transaction:
            try:
                self.connection.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite rolled the transaction back itself

    def schema_transaction(self) -> ContextManager[None]:
        """``BEGIN IMMEDIATE``: the database's write lock from the start."""
        return self.plain_transaction("BEGIN IMMEDIATE")

    def schema_version(self) -> int:
        return int(self.connection.execute("PRAGMA user_version").fetchone()[0])

    def set_schema_version(self, version: int) -> None:
        self.connection.execute(f"PRAGMA user_version = {int(version)}")

    def _options(self, table: Table) -> str:
        return " WITHOUT ROWID" if table.clustered else ""

    def close(self) -> None:
        self.connection.close()


class StoreInUse(Exception):
    """Another process has the store open."""


class SQLiteStore(SQLStore):
    """A :class:`~txamqp09.store.interface.IMessageStore` on SQLite.

    :meth:`open` raises :class:`StoreInUse` when another process has the
    database open, :class:`~txamqp09.store.schema.StoreFormatError` when a
    later version wrote it.

    :param path: the database file; its directory is created if missing.
    :param reactor: where durability is reported (``callFromThread``).
    """

    #: The class of the writer's connection (a subclass can inject faults).
    connection_class: type[sqlite3.Connection] = sqlite3.Connection
    #: The class of the checkpointer's connection.
    checkpoint_connection_class: type[sqlite3.Connection] = sqlite3.Connection
    write_errors = (sqlite3.Error,)
    migrations = SQLITE_MIGRATIONS

    def __init__(self, path: str | Path, reactor: IReactorFromThreads) -> None:
        self.path = Path(path)
        super().__init__(reactor, str(self.path))
        self._checkpointer: Optional[Checkpointer] = None
        self._log_frames: Optional[LogFrames] = None
        self._lock_file: Optional[IO[bytes]] = None
        #: The reactor thread's read-only connection, opened when first needed.
        self._read_only: Optional[sqlite3.Connection] = None

    # -- start-up ------------------------------------------------------------

    def _sqlite(self, factory: Optional[type[sqlite3.Connection]] = None) -> sqlite3.Connection:
        connection = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, factory=factory or self.connection_class
        )
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        connection.execute(f"PRAGMA journal_size_limit={2 * CHECKPOINT_BYTES}")
        connection.execute("PRAGMA wal_autocheckpoint=0")
        return connection

    def _connect(self) -> SQLiteDatabase:
        """Lock the database for this process, then connect; a new database
        gets incremental auto-vacuum.

        :raises StoreInUse: another process has the database open.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_file = _exclusive(self.path.with_name(self.path.name + ".lock"))
        try:
            connection = self._sqlite()
        except BaseException:
            self._lock_file.close()
            raise
        if connection.execute("PRAGMA page_count").fetchone()[0] <= 1:
            connection.execute("PRAGMA auto_vacuum=INCREMENTAL")
            connection.execute("VACUUM")
        return SQLiteDatabase(connection)

    @property
    def log_path(self) -> Path:
        """The write-ahead log's file."""
        return self.path.with_name(self.path.name + "-wal")

    def _ready(self, db: Database) -> None:
        """Empty the log recovery found, and make the checkpointer."""
        try:
            _tidy(cast(SQLiteDatabase, db).connection)
        except sqlite3.Error:
            pass  # a full disk: the writer empties the log once it can write again
        self._log_frames = LogFrames(self.path.with_name(self.path.name + "-shm"), self.log_path)
        self._checkpointer = Checkpointer(
            self._sqlite(self.checkpoint_connection_class), self._reactor, self._checkpoint_failed,
            f"checkpoints {self.path}",
        )

    # -- reads (reactor thread) ----------------------------------------------

    def _reading(self) -> sqlite3.Connection:
        """The reactor thread's read-only connection, which sees every committed batch."""
        if self._read_only is None:
            self._read_only = sqlite3.connect(self.path, isolation_level=None)
            self._read_only.execute("PRAGMA query_only=1")
        return self._read_only

    def _reader(self) -> SQLiteDatabase:
        return SQLiteDatabase(self._reading())

    def _close_reader(self) -> None:
        if self._read_only is not None:
            self._read_only.close()
            self._read_only = None

    # -- the writer thread -----------------------------------------------------

    def _started(self, db: Database) -> None:
        assert self._checkpointer is not None
        self._checkpointer.start()

    def _idle_seconds(self) -> Optional[float]:
        return IDLE_SECONDS

    def _tidy(self, db: Database) -> None:
        _tidy(cast(SQLiteDatabase, db).connection)

    def _apply(self, db: Database, batch: Batch) -> Optional[int]:
        """A batch of stream appends alone is one statement (see :func:`_append_alone`)."""
        if _appends_alone(batch):
            return _append_alone(cast(SQLiteDatabase, db), cast(list[Append], batch.operations))
        return super()._apply(db, batch)

    def _after_batch(self, db: Database, batch: Batch) -> None:
        self._bound(cast(SQLiteDatabase, db).connection, batch.may_free_space)

    def _finish(self, db: Database) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        _tidy_on_close(cast(SQLiteDatabase, db).connection)

    def _release(self, db: Database) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        if self._log_frames is not None:
            self._log_frames.close()
        db.close()
        if self._lock_file is not None:
            self._lock_file.close()

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


def _appends_alone(batch: Batch) -> bool:
    """Whether *batch* is stream appends and nothing else, few enough for
    the parameters of one statement (see :func:`_append_alone`)."""
    operations = batch.operations
    return (
        0 < len(operations) * STREAM_CHUNKS.width <= _VARIABLES_PER_STATEMENT and not batch.removals
        and all(type(operation) is Append for operation in operations)
    )


def _append_alone(db: SQLiteDatabase, appends: list[Append]) -> int:
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
    db.connection.execute(_multi_row(_insert_into(STREAM_CHUNKS), STREAM_CHUNKS.width, len(appends)), values)
    return written


def _reclaim(db: sqlite3.Connection) -> None:
    """Return the free pages to the file system when they are many."""
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    if free >= VACUUM_MIN_FREE_PAGES and free * 4 >= db.execute("PRAGMA page_count").fetchone()[0]:
        db.executescript("PRAGMA incremental_vacuum;")


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
