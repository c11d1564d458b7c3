"""One connection of an SQL store, as the shared SQL layer uses it.

The SQL layer (:mod:`~txamqp09.store.writes`, :mod:`~txamqp09.store.reading`,
:mod:`~txamqp09.store.schema`) writes its statements once, in one spelling:
tables named in braces (``{messages}``), parameters as ``?``, and the ids
of a statement that takes many as ``{ids}``::

    db.execute("DELETE FROM {settings} WHERE kind = ? AND key = ?", (kind, key))

A backend's :class:`Database` wraps its driver's connection and translates
that spelling into its own once per statement text (its table names, its
parameter markers), and does what engines do differently: inserting many
rows (multi-row statements for SQLite, ``COPY`` for PostgreSQL), statements
over many ids (``IN`` lists of bounded length, or one array), the DDL of
:mod:`~txamqp09.store.schema`'s tables, transactions and where the layout's
version is kept.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, Callable, ClassVar, ContextManager, Iterator, Protocol, Sequence

from txamqp09.store.schema import INDEXES, SCHEMA_VERSION, TABLES, StoreFormatError, Table

__all__ = ["Cursor", "Database", "Migration", "describe", "prepare", "runs"]


class Cursor(Protocol):
    """What a statement returns: its rows (iterated or fetched) and the
    number of rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Database(ABC):
    """A connection as the SQL layer uses it (see the module's docstring).

    :cvar prefix: what the backend's table names start with.
    :cvar types: the backend's name of each portable column type.
    :cvar logs_removals: whether write transactions keep the removal log
        (:data:`~txamqp09.store.schema.REMOVALS`), for a database that
        other processes follow.
    """

    prefix: ClassVar[str] = ""
    types: ClassVar[dict[str, str]]
    logs_removals: ClassVar[bool] = False
    #: Statement texts translated so far, by their shared spelling.
    _translated: ClassVar[dict[str, str]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._translated = {}

    # -- statements ------------------------------------------------------------

    @classmethod
    def table(cls, name: str) -> str:
        """The backend's name of the table *name*."""
        return cls.prefix + name

    @classmethod
    def sql(cls, statement: str) -> str:
        """*statement*, in the shared spelling, in the backend's."""
        translated = cls._translated.get(statement)
        if translated is None:
            names = {table.name: cls.table(table.name) for table in TABLES}
            translated = cls._markers(statement.format_map({**names, "ids": "{ids}"}))
            cls._translated[statement] = translated
        return translated

    @classmethod
    def _markers(cls, statement: str) -> str:
        """*statement* with its ``?`` in the backend's spelling (this one's)."""
        return statement

    @abstractmethod
    def execute(self, statement: str, parameters: Sequence[Any] = ()) -> Cursor:
        """Run *statement* (shared spelling) with *parameters*."""

    @abstractmethod
    def insert(self, table: Table, values: list[Any]) -> None:
        """Insert rows of *table*, given as one flat list of *values* (the
        columns of each row one after the other), as its
        :attr:`~txamqp09.store.schema.Table.conflict` says."""

    @abstractmethod
    def by_ids(
        self, statement: str, parameters: Sequence[Any], ids: Sequence[int]
    ) -> Iterator[tuple[Sequence[int], Cursor]]:
        """Run *statement* (shared spelling, whose ``{ids}`` stands for a
        condition on a column: its ids among *ids*) for all of *ids*, after
        *parameters*, in as many statements as the backend needs: each
        statement's ids and its cursor."""

    def change_by_ids(self, statement: str, parameters: Sequence[Any], ids: Sequence[int]) -> Callable[[], int]:
        """Run *statement*, which changes rows (shared spelling, ``{ids}`` as
        for :meth:`by_ids`), for all of *ids*; a function that tells how
        many rows it changed, to call once the transaction has committed (a
        backend may send the statement without waiting for its answer).
        This one waits for it."""
        changed = sum(cursor.rowcount for _, cursor in self.by_ids(statement, parameters, ids))
        return lambda: changed

    # -- transactions ----------------------------------------------------------

    @abstractmethod
    def begin(self) -> None:
        """Start a transaction that writes the store's data."""

    @abstractmethod
    def commit(self) -> None:
        """Commit the transaction."""

    @abstractmethod
    def rollback(self) -> None:
        """End a failed transaction, if one is open (the engine may have
        ended it already, or the connection may be gone)."""

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction (:meth:`begin`), committed when the block
        ends, rolled back when it raises."""
        self.begin()
        try:
            yield
        except BaseException:
            self.rollback()
            raise
        self.commit()

    @contextmanager
    def plain_transaction(self, begin: str = "BEGIN") -> Iterator[None]:
        """A transaction started by *begin* as it is (no guard: reading,
        preparing the layout), committed when the block ends, rolled back
        when it raises."""
        self.execute(begin)
        try:
            yield
        except BaseException:
            self.rollback()
            raise
        self.execute("COMMIT")

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """A block whose reads all see one state of the database (recovery);
        a backend whose writer is alone in the database needs nothing."""
        yield

    def writers(self) -> frozenset[str]:
        """The stores that have written the database and not closed, by
        name, for a reader that follows it (a store that opens it after
        another numbers its messages afresh); a backend whose database one
        process alone opens names none."""
        return frozenset()

    # -- the layout ------------------------------------------------------------

    @abstractmethod
    def schema_transaction(self) -> ContextManager[None]:
        """The transaction of :func:`prepare`, which
        no other connection preparing the same database runs at once."""

    @abstractmethod
    def schema_version(self) -> int:
        """The version of the layout recorded in the database (0: none)."""

    @abstractmethod
    def set_schema_version(self, version: int) -> None:
        """Record the layout's version."""

    def create_tables(self) -> None:
        """Create the tables and indexes of the layout that are missing."""
        for table in TABLES:
            self.execute(self.create_table(table))
        for index in INDEXES:
            self.execute(
                f"CREATE INDEX IF NOT EXISTS {self.table(index.name)} ON {self.table(index.table.name)}"
                f" ({', '.join(index.columns)})"
            )

    def create_table(self, table: Table) -> str:
        """The statement that creates *table* when it is missing."""
        key = table.key
        columns = [
            f"{name} {self.types[kind]} {'PRIMARY KEY' if key == (name,) else 'NOT NULL'}"
            for name, kind in table.columns
        ]
        if len(key) > 1:
            columns.append(f"PRIMARY KEY ({', '.join(key)})")
        return f"CREATE TABLE IF NOT EXISTS {self.table(table.name)} ({', '.join(columns)}){self._options(table)}"

    def _options(self, table: Table) -> str:
        """What follows the column list of *table*'s definition."""
        return ""

    def interrupt(self) -> None:
        """From another thread: stop the statement under way, if any (it
        fails with the backend's error); nothing once the connection is
        closed. A backend whose database no other process reads (nothing
        follows it) need not."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection (a second call changes nothing)."""

    def describe(self, error: Exception) -> str:
        """What went wrong with a statement, for logs and clients."""
        return describe(error)


def describe(error: Exception) -> str:
    """What went wrong with a write, for logs and clients."""
    return f"{type(error).__name__}: {error}"


def runs(count: int, largest: int) -> Iterator[tuple[int, int]]:
    """(start, length) of consecutive runs covering *count* items, each of
    a power of two no larger than *largest*: the largest such first, then
    halving for the rest. Statements over many rows or ids take them so, and
    a batch of any size needs only a few distinct statements (which an engine
    may keep prepared)."""
    size = 1 << (largest.bit_length() - 1)
    done = 0
    while done < count:
        while size > count - done:
            size >>= 1
        yield done, size
        done += size


#: A step that rewrites a database of an earlier layout (inside
#: :func:`prepare`'s transaction; one with nothing to rewrite changes nothing).
Migration = Callable[[Database], None]


def prepare(db: Database, where: str, migrations: Sequence[Migration] = ()) -> None:
    """Make the database behind *db* one of :data:`SCHEMA_VERSION`: refuse
    a later version, then in one transaction create the tables and indexes
    that are missing, run *migrations* on a database of an earlier version
    and record the version. Nothing changes when any step fails.

    :param where: names the database in the refusal.
    :raises StoreFormatError: the database is of a later version.
    """
    with db.schema_transaction():
        version = db.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreFormatError(
                f"{where} holds data in layout version {version}, written by a later "
                f"version of txamqp09; this one reads versions up to {SCHEMA_VERSION}"
            )
        db.create_tables()
        if version < SCHEMA_VERSION:
            for migrate in migrations:
                migrate(db)
            db.set_schema_version(SCHEMA_VERSION)
