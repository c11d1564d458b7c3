"""The PostgreSQL store: the shared SQL layer on a PostgreSQL database, through psycopg 3.

The store keeps the layout of :mod:`~txamqp09.store.schema` in tables of its
own (their names start with ``amqp09_``), beside two of PostgreSQL's alone:
``amqp09_schema`` (the layout's version) and ``amqp09_writers`` (one row per
open store: the number of its latest write transaction). The writer thread
writes batches as the SQLite store does (:mod:`~txamqp09.store.writer`):
one transaction for many operations, sent in pipeline mode (its statements
go out without waiting for each other's answers: a batch is one round trip),
its rows inserted by multi-row statements, its acknowledgements deleted with
``id = ANY(...)`` (the rows they deleted are counted once it has committed),
its statements written with PostgreSQL's numbered parameters and their
values sent in binary, and what
waits for a batch (a publisher confirm, a tx.commit-ok) is released only
once its COMMIT has returned. With ``synchronous_standby_names`` set on the
server, that is once a standby has the batch on disk too.

Losing the connection: when the writer's connection breaks (the primary
stopped, crashed or is being replaced) the failure listeners hear of it
(the broker blocks its publishers), and the writer connects again, every
:data:`~txamqp09.store.writer.RETRY_SECONDS`, to whichever host of the URI
accepts it (a libpq URI naming several hosts with
``target_session_attrs=read-write`` follows a promoted standby). The batch
it was writing is settled on the new connection: each write transaction
first records its own number in the store's row of ``amqp09_writers``, so
the row tells whether the transaction whose COMMIT went unanswered
committed (the batch is then reported durable) or not (the batch is
written again, whole). Reading the row waits for the lock of a transaction
still under way on the old connection, so a late commit is never missed.
Nothing is confirmed that was not committed, and nothing is written twice.
Errors that leave the connection working (a full disk on the server, a
refused statement) are handled as the SQLite store handles its own: the
batch's publishes are dropped (their confirms become nacks) and its other
operations are written with the next.

Fencing: a store may be given a *guard*, an SQL statement and its
parameters that every write transaction runs first. When it returns no row
(it runs as ``SELECT 1 / count(*) FROM (guard)``, so that no row aborts the
transaction before anything of it can commit) the transaction is rolled back, the store is fenced
(:class:`~txamqp09.store.interface.Fenced`): what waits fails, the failure
listeners hear ``"Fenced: ..."``, and the store writes nothing more. Its
connections carry an *application_name*, by which another process can end
them (``pg_terminate_backend`` over ``pg_stat_activity``). A store is
constructed without connecting; :meth:`~txamqp09.store.writer.SQLStore.open`
connects, prepares the layout and recovers.

Following: another process may follow the database while a store writes
it. Each write transaction that takes messages off queues adds a row to
the removal log (``amqp09_removals``), and before a store opens,
:meth:`PostgreSQLStore.follow` keeps a copy of the database current in a
thread of its own (:mod:`~txamqp09.store.following`), so that opening reads
only what changed since: a standby of a group takes over so.
"""

from __future__ import annotations

import itertools
import uuid
from contextlib import ExitStack, contextmanager
from functools import lru_cache
from typing import Any, Callable, Iterator, Optional, Sequence, Union, cast

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from twisted.internet.interfaces import IReactorFromThreads

from txamqp09.store import writer
from txamqp09.store.following import Follower
from txamqp09.store.interface import Fenced, Recovered, StoredMessage, StoreUnavailable
from txamqp09.store.mirror import Mirror
from txamqp09.store.schema import BLOB, INTEGER, REAL, TEXT, Conflict, Table
from txamqp09.store.sql import Cursor, Database, runs
from txamqp09.store.work import Batch
from txamqp09.store.writer import SQLStore

__all__ = [
    "DEFAULT_PARAMETERS",
    "Guard",
    "PostgreSQLDatabase",
    "PostgreSQLStore",
    "connection_parameters",
    "redacted",
]

#: A guard: an SQL statement (psycopg's ``%s`` parameters) and its parameters.
Guard = tuple[str, Sequence[Any]]

#: libpq parameters the store sets when the URI does not: give up on a host
#: that does not answer within 5 s (then try the next), notice a peer gone
#: silent (a machine that died) within about 11 s of quiet, and plan
#: without JIT compilation or parallel workers. The store's statements
#: touch few rows each; on a table whose statistics lag behind a burst of
#: writes (none yet, or taken before 100,000 messages came and went) the
#: planner overestimates them, and compiling and starting workers made
#: reading 50 new rows take 46 ms instead of 1 ms.
DEFAULT_PARAMETERS = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "options": "-c jit=off -c max_parallel_workers_per_gather=0",
}
#: Parameters one statement may have (the protocol counts them in 16 bits).
_PARAMETERS_PER_STATEMENT = 65535
#: Ids one statement of :meth:`PostgreSQLDatabase.by_ids` takes at most.
_IDS_PER_STATEMENT = 65536
#: Seconds :meth:`PostgreSQLDatabase.interrupt` waits for the server to hear its request.
_CANCEL_SECONDS = 1.0
#: The key of the advisory lock that serialises preparing the layout.
_SCHEMA_LOCK = 0x616D717030390001


def connection_parameters(url: str, application_name: str) -> dict[str, Any]:
    """The libpq parameters of *url*, with :data:`DEFAULT_PARAMETERS` where
    it sets none and *application_name* unless it sets one.

    :raises psycopg.ProgrammingError: *url* is not a libpq URI.
    """
    return {**DEFAULT_PARAMETERS, "application_name": application_name, **conninfo_to_dict(url)}


class PostgreSQLDatabase(Database):
    """A :class:`~txamqp09.store.sql.Database` on a psycopg connection in
    autocommit mode (transactions are explicit BEGIN and COMMIT).

    :param guard: run first by every write transaction (see the module's docstring).
    :param writer: the store's row in ``amqp09_writers`` that write
        transactions number themselves in (None: a connection that only reads).
    :param numbers: where write transactions take their numbers.
    :ivar transaction_number: the number of the latest write transaction begun.
    """

    prefix = "amqp09_"
    logs_removals = True
    types = {INTEGER: "BIGINT", TEXT: "TEXT", BLOB: "BYTEA", REAL: "DOUBLE PRECISION"}

    def __init__(
        self,
        connection: psycopg.Connection[Any],
        guard: Optional[Guard] = None,
        writer: Optional[str] = None,
        numbers: Optional[Iterator[int]] = None,
    ) -> None:
        self.connection = connection
        self._guard = guard
        self._writer = writer
        self._numbers = numbers if numbers is not None else itertools.count(1)
        self.transaction_number = 0
        #: The pipeline of the write transaction under way, and what leaves it.
        self._pipeline: Optional[psycopg.Pipeline] = None
        self._leave_pipeline = ExitStack()

    @property
    def lost(self) -> bool:
        """Whether the connection is gone (broken or closed)."""
        return self.connection.broken or self.connection.closed

    @classmethod
    def _markers(cls, statement: str) -> str:
        """PostgreSQL's numbered parameters: the statements go to the server
        as they are (psycopg's ``%s`` would be parsed on every execution of
        a statement of more than a few parameters)."""
        parts = statement.split("?")
        numbered = [parts[0]]
        for number, part in enumerate(parts[1:], 1):
            numbered += (f"${number}", part)
        return "".join(numbered)

    def execute(self, statement: str, parameters: Sequence[Any] = ()) -> Cursor:
        """The statement's rows are all fetched at once (psycopg converts
        them in one call, where iterating over its cursor costs a Python
        call per row); in a write transaction, once what was sent before
        it is answered too."""
        return self._answered(self.sql(statement), parameters)

    def _answered(self, statement: str, parameters: Sequence[Any]) -> _Fetched:
        """Run *statement* (translated) and wait for its answer."""
        with self._fencing():
            cursor = self._send(statement, parameters)
            if self._pipeline is not None:
                self._pipeline.sync()
        return _Fetched(cursor)

    def _send(self, statement: str, parameters: Sequence[Any]) -> psycopg.RawCursor[Any]:
        """Run *statement* (translated: numbered parameters), its parameters
        in binary; in a write transaction, without waiting for its answer."""
        return psycopg.RawCursor(self.connection).execute(statement, parameters, binary=True)

    @contextmanager
    def _fencing(self) -> Iterator[None]:
        """The guard's failure as :class:`Fenced`: the division by zero it
        is made to raise (nothing else the store sends divides) may surface
        with any statement of the transaction, as psycopg reads answers
        while it sends."""
        try:
            yield
        except psycopg.errors.DivisionByZero as error:
            if self._guard is None:
                raise
            raise Fenced(f"the guard of the store's writes found no row ({self._guard[0]!r})") from error

    def insert(self, table: Table, values: list[Any]) -> None:
        """Multi-row statements (runs of powers of two of rows within
        PostgreSQL's limit on parameters), each keeping or replacing a row
        of the same key as the table says; of rows that replace, the last of
        each key (one statement may not change a row twice). In a write
        transaction they are sent without waiting for their answers."""
        width = table.width
        if table.conflict is Conflict.REPLACE:
            values = _last_of_each_key(table, values)
        with self._fencing():
            for start, size in runs(len(values) // width, _PARAMETERS_PER_STATEMENT // width):
                self._send(_insert_rows(table, size), values[start * width : (start + size) * width])

    def by_ids(
        self, statement: str, parameters: Sequence[Any], ids: Sequence[int]
    ) -> Iterator[tuple[Sequence[int], Cursor]]:
        """One statement per :data:`_IDS_PER_STATEMENT` ids, as one array."""
        translated = _with_array(self.sql(statement), len(parameters))
        for some in _slices(ids):
            yield some, self._answered(translated, [*parameters, some])

    def change_by_ids(self, statement: str, parameters: Sequence[Any], ids: Sequence[int]) -> Callable[[], int]:
        """As :meth:`by_ids`, and in a write transaction without waiting for
        the answers: the rows changed are known once it has committed."""
        translated = _with_array(self.sql(statement), len(parameters))
        with self._fencing():
            cursors = [self._send(translated, [*parameters, some]) for some in _slices(ids)]
        return lambda: sum(cursor.rowcount for cursor in cursors)

    def begin(self) -> None:
        """Start a write transaction in pipeline mode: its statements are
        sent as they come, and answered together at the COMMIT. It begins with the guard,
        made to fail (a division by zero) when it finds no row, so that the
        transaction aborts and nothing of it can commit (see
        :meth:`_fencing`), and with the transaction's number in the store's
        row."""
        connection = self.connection
        self.transaction_number = number = next(self._numbers)
        self._pipeline = self._leave_pipeline.enter_context(connection.pipeline())
        with self._fencing():
            connection.execute("BEGIN")
            if self._guard is not None:
                connection.execute(_guarded(self._guard[0]), self._guard[1])
            if self._writer is not None:
                connection.execute(
                    "INSERT INTO amqp09_writers VALUES (%s, %s)"
                    " ON CONFLICT (writer) DO UPDATE SET transaction = EXCLUDED.transaction",
                    (self._writer, number),
                )

    def commit(self) -> None:
        """COMMIT, and the answers to the whole transaction; a COMMIT that
        PostgreSQL answered with a rollback (the transaction had failed) fails.

        :raises psycopg.DatabaseError: the transaction did not commit.
        """
        with self._fencing():
            committing = self.connection.execute("COMMIT")
            self._pipeline = None
            self._leave_pipeline.close()
        if committing.statusmessage != "COMMIT":
            raise psycopg.DatabaseError(
                f"the transaction was not committed (PostgreSQL answered {committing.statusmessage})"
            )

    def rollback(self) -> None:
        self._end_pipeline()
        if self.lost or self.connection.info.transaction_status == TransactionStatus.IDLE:
            return
        try:
            self.connection.execute("ROLLBACK")
        except psycopg.Error:
            pass  # the connection went meanwhile

    def committed(self, transaction: int) -> bool:
        """Whether the write transaction numbered *transaction* (begun on
        another connection of the same store) committed; waits for it to
        end if it is still under way."""
        with self.plain_transaction():
            row = self.connection.execute(
                "SELECT transaction FROM amqp09_writers WHERE writer = %s FOR UPDATE", (self._writer,)
            ).fetchone()
        return row is not None and row[0] == transaction

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read-only transaction that sees one state of the database."""
        self.connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        try:
            yield
        finally:
            self.rollback()

    @contextmanager
    def schema_transaction(self) -> Iterator[None]:
        """One process prepares the layout at a time (an advisory lock held
        until the transaction ends)."""
        with self.plain_transaction():
            self.connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            yield

    def schema_version(self) -> int:
        if self.connection.execute("SELECT to_regclass('amqp09_schema')").fetchone()[0] is None:  # type: ignore[index]
            return 0
        row = self.connection.execute("SELECT max(version) FROM amqp09_schema").fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0

    def set_schema_version(self, version: int) -> None:
        self.connection.execute("DELETE FROM amqp09_schema")
        self.connection.execute("INSERT INTO amqp09_schema VALUES (%s)", (version,))

    def create_tables(self) -> None:
        """The shared tables, the version's and the writers'."""
        super().create_tables()
        self.connection.execute("CREATE TABLE IF NOT EXISTS amqp09_schema (version INTEGER NOT NULL)")
        self.connection.execute(
            "CREATE TABLE IF NOT EXISTS amqp09_writers (writer TEXT PRIMARY KEY, transaction BIGINT NOT NULL)"
        )

    def writers(self) -> frozenset[str]:
        """The rows of ``amqp09_writers``."""
        return frozenset(row[0] for row in self.connection.execute("SELECT writer FROM amqp09_writers"))

    def forget_writer(self) -> None:
        """Delete the store's row in ``amqp09_writers`` (closing)."""
        self.connection.execute("DELETE FROM amqp09_writers WHERE writer = %s", (self._writer,))

    def forget_idle_writers(self) -> None:
        """Delete the rows of stores that no transaction holds (opening:
        stores that ended without closing)."""
        self.connection.execute(
            "DELETE FROM amqp09_writers WHERE writer IN"
            " (SELECT writer FROM amqp09_writers WHERE writer <> %s FOR UPDATE SKIP LOCKED)",
            (self._writer,),
        )

    def _end_pipeline(self) -> None:
        """Leave the pipeline of a write transaction that failed, if any."""
        self._pipeline = None
        try:
            self._leave_pipeline.close()
        except psycopg.Error:
            pass  # the error that ended the transaction, or the connection's loss

    def interrupt(self) -> None:
        """Ask the server to cancel the statement under way (waiting at most
        :data:`_CANCEL_SECONDS` for it to hear)."""
        try:
            self.connection.cancel_safe(timeout=_CANCEL_SECONDS)
        except psycopg.Error:
            pass  # closed meanwhile, or the server cannot be reached: the statement fails anyway

    def close(self) -> None:
        self._end_pipeline()
        self.connection.close()

    def describe(self, error: Exception) -> str:
        """The first line of the error (libpq's messages run on with details)."""
        return f"{type(error).__name__}: {_first_line(error)}"


class _Fetched:
    """A statement's result, its rows fetched."""

    __slots__ = ("rowcount", "_rows")

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self.rowcount = cursor.rowcount
        self._rows = cursor.fetchall() if cursor.description is not None else []

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return self._rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


def _guarded(guard: str) -> str:
    """*guard* made to fail (a division by zero) when it returns no row."""
    return f"SELECT 1 / count(*) FROM ({guard.strip().rstrip(';')}) AS guard"


def _with_array(statement: str, parameters: int) -> str:
    """*statement* (translated, after *parameters* parameters) with its
    ``{ids}`` a condition on one array parameter, the last."""
    return statement.replace("{ids}", f"= ANY(${parameters + 1})")


def _slices(ids: Sequence[int]) -> Iterator[list[int]]:
    """*ids* in lists of :data:`_IDS_PER_STATEMENT` at most."""
    for start in range(0, len(ids), _IDS_PER_STATEMENT):
        yield list(ids[start : start + _IDS_PER_STATEMENT])


@lru_cache(maxsize=64)
def _insert_rows(table: Table, rows: int) -> str:
    """The insert of *rows* rows of *table*, keeping or replacing a row of the same key."""
    width = table.width
    values = ", ".join(
        "(" + ", ".join(f"${row * width + column}" for column in range(1, width + 1)) + ")" for row in range(rows)
    )
    statement = f"INSERT INTO {PostgreSQLDatabase.table(table.name)} VALUES {values}"
    if table.conflict is Conflict.FAIL:
        return statement
    statement += f" ON CONFLICT ({', '.join(table.key)}) DO "
    if table.conflict is Conflict.IGNORE:
        return statement + "NOTHING"
    names = [name for name, _ in table.columns if name not in table.key]
    return statement + "UPDATE SET " + ", ".join(f"{name} = EXCLUDED.{name}" for name in names)


def _last_of_each_key(table: Table, values: list[Any]) -> list[Any]:
    """The rows of *values* (flat) with one row per key of *table*: the last."""
    width = table.width
    positions = [index for index, (name, _) in enumerate(table.columns) if name in table.key]
    rows: dict[tuple[Any, ...], list[Any]] = {}
    for start in range(0, len(values), width):
        row = values[start : start + width]
        rows[tuple(row[position] for position in positions)] = row
    if len(rows) * width == len(values):
        return values
    return [value for row in rows.values() for value in row]


class PostgreSQLStore(SQLStore):
    """A :class:`~txamqp09.store.interface.IMessageStore` on PostgreSQL (see
    the module's docstring). Constructing it does not connect.

    :param url: a libpq URI (``postgresql://user@host1,host2/db?target_session_attrs=read-write``).
    :param reactor: where durability is reported (``callFromThread``).
    :param application_name: the name its connections carry.
    :param guard: an SQL statement and its parameters that every write
        transaction runs first; no row fences the store.
    """

    write_errors = (psycopg.Error,)

    def __init__(
        self,
        url: str,
        reactor: IReactorFromThreads,
        application_name: str = "txamqp09",
        guard: Optional[Guard] = None,
    ) -> None:
        self.url = url
        self._parameters = connection_parameters(url, application_name)
        super().__init__(reactor, redacted(url))
        self.application_name = application_name
        self._guard = guard
        self._writer_id = uuid.uuid4().hex
        self._transactions = itertools.count(1)
        self._read_db: Optional[PostgreSQLDatabase] = None

    def _connection(self) -> psycopg.Connection[Any]:
        """A new connection (autocommit) to whichever host accepts it.

        :raises StoreUnavailable: no host did.
        """
        try:
            return psycopg.connect(make_conninfo("", **self._parameters), autocommit=True)
        except psycopg.OperationalError as error:
            raise StoreUnavailable(f"cannot connect to {self.location}: {_first_line(error)}") from error

    def _connect(self) -> PostgreSQLDatabase:
        return PostgreSQLDatabase(self._connection(), self._guard, self._writer_id, self._transactions)

    def open(self, body_budget: Optional[int] = None) -> Recovered:
        """Connect, prepare the layout, recover and start the writer.

        :raises StoreUnavailable: the database could not be reached, or the
            connection was lost while opening.
        :raises Fenced: the guard refused the writes of opening.
        """
        try:
            return super().open(body_budget)
        except psycopg.OperationalError as error:
            raise StoreUnavailable(f"{self.location}: {_first_line(error)}") from error

    def _ready(self, db: Database) -> None:
        cast(PostgreSQLDatabase, db).forget_idle_writers()

    # -- reads (reactor thread) ----------------------------------------------

    def _reader(self) -> PostgreSQLDatabase:
        """Connected again after its connection was lost."""
        if self._read_db is None or self._read_db.lost:
            self._read_db = PostgreSQLDatabase(self._connection())
        return self._read_db

    def _close_reader(self) -> None:
        if self._read_db is not None:
            self._read_db.close()
            self._read_db = None

    # -- following (a standby's) --------------------------------------------

    def follow(
        self, body_budget: Optional[int] = None, prepare: Optional[Callable[[StoredMessage], Any]] = None
    ) -> None:
        """Before the store opens, while another process writes its database:
        keep a mirror of it current (:mod:`~txamqp09.store.following`), with
        bodies while *body_budget* lasts (None: all), so that :meth:`open`
        reads only what changed since (with this budget rather than its
        own); the messages of one queue read meanwhile get ``prepare(record)``
        as their :attr:`~txamqp09.store.interface.StoredMessage.prepared`
        (see :class:`~txamqp09.store.interface.Followable`)."""
        self.follower = Follower(
            self._follower_connection, Mirror(body_budget, prepare), (psycopg.Error, StoreUnavailable),
            f"follows {self.location}",
        )
        self.follower.start()

    def _follower_connection(self) -> PostgreSQLDatabase:
        """A new connection for the follower's thread."""
        return PostgreSQLDatabase(self._connection())

    # -- the writer thread ---------------------------------------------------

    def _in_doubt(self, error: BaseException) -> Optional[bool]:
        """After the connection was lost: connect again (until the store
        closes) and read whether the transaction committed (see the
        module's docstring)."""
        db = cast(PostgreSQLDatabase, self._writer())
        if not isinstance(error, psycopg.Error) or not db.lost:
            return None
        transaction = db.transaction_number
        self._report(db.describe(error))
        while (again := self._reconnected()) is not None:
            try:
                return again.committed(transaction)
            except psycopg.Error:
                if not again.lost:
                    return None
        return None

    def _reconnected(self) -> Optional[PostgreSQLDatabase]:
        """The writer's connection, made again (every
        :data:`~txamqp09.store.writer.RETRY_SECONDS` until a host accepts
        it); None once the store is closing."""
        while True:
            with self._lock:
                if self._closing:
                    return None
            try:
                connection = self._connection()
            except StoreUnavailable:
                with self._lock:
                    if not self._closing:
                        self._lock.wait(writer.RETRY_SECONDS)
                continue
            self._writer().close()
            self._db = db = PostgreSQLDatabase(connection, self._guard, self._writer_id, self._transactions)
            return db

    def _finish(self, db: Database) -> None:
        try:
            cast(PostgreSQLDatabase, db).forget_writer()
        except psycopg.Error:
            pass  # unreachable: the row is forgotten by the next store that opens

    def _write_failed(self, work: Union[Batch, str], error: Exception) -> None:
        """A write failed: on a lost connection, connect again before the
        next attempt."""
        super()._write_failed(work, error)
        if cast(PostgreSQLDatabase, self._writer()).lost:
            self._reconnected()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def redacted(url: str) -> str:
    """*url* without its password, for logs and thread names."""
    try:
        parameters = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "a PostgreSQL database"
    hosts = str(parameters.get("host", "localhost")).split(",")
    ports = str(parameters.get("port", "5432")).split(",")
    if len(ports) < len(hosts):
        ports = ports * len(hosts)
    addresses = ",".join(f"{host}:{port}" for host, port in zip(hosts, ports))
    user = parameters.get("user")
    return f"postgresql://{f'{user}@' if user else ''}{addresses}/{parameters.get('dbname', '')}"
