"""Stores named by URL: ``sqlite:PATH`` or a libpq URI ``postgresql://...``.

:func:`store_from_url` makes the store a URL names, without opening it::

    store = store_from_url("sqlite:/var/lib/txamqp09/store.db", reactor)
    store = store_from_url(
        "postgresql://broker@db1:5432,db2:5432/amqp?target_session_attrs=read-write", reactor
    )

The PostgreSQL store needs psycopg 3 (the ``postgresql`` extra); it is
imported only when a URL names PostgreSQL. A URL that names neither, or a
libpq URI that libpq would refuse, raises :class:`StoreURLError` with one
line that says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from twisted.internet.interfaces import IReactorFromThreads

if TYPE_CHECKING:
    from txamqp09.store.writer import SQLStore

__all__ = ["StoreURLError", "check_store_url", "store_from_url"]

#: What a SQLite store's URL starts with.
SQLITE = "sqlite:"
#: What a PostgreSQL store's URL starts with (libpq takes both).
POSTGRESQL = ("postgresql://", "postgres://")


class StoreURLError(ValueError):
    """A store URL that names no store this broker can open (the message says why)."""


def check_store_url(url: str) -> None:
    """Refuse a URL :func:`store_from_url` would refuse, without making a store.

    :raises StoreURLError: why.
    """
    if url.startswith(SQLITE):
        _sqlite_path(url)
    elif url.startswith(POSTGRESQL):
        _postgresql_parameters(url)
    else:
        raise StoreURLError(
            f"store URL {url!r} names no store: use sqlite:PATH or postgresql://[user@]host[:port]/database"
        )


def store_from_url(
    url: str,
    reactor: IReactorFromThreads,
    application_name: str = "txamqp09",
    guard: Optional[tuple[str, Sequence[Any]]] = None,
) -> SQLStore:
    """The store *url* names, not opened yet.

    :param application_name: what a PostgreSQL store's connections are called.
    :param guard: a PostgreSQL store's guard (see
        :class:`~txamqp09.store.postgresql.PostgreSQLStore`).
    :raises StoreURLError: the URL names no store, or psycopg is missing.
    """
    check_store_url(url)
    if url.startswith(SQLITE):
        from txamqp09.store.sqlite import SQLiteStore

        return SQLiteStore(_sqlite_path(url), reactor)
    from txamqp09.store.postgresql import PostgreSQLStore

    return PostgreSQLStore(url, reactor, application_name=application_name, guard=guard)


def _sqlite_path(url: str) -> Path:
    path = url[len(SQLITE):]
    if not path:
        raise StoreURLError("store URL sqlite: names no file: use sqlite:PATH, e.g. sqlite:/var/lib/txamqp09/store.db")
    return Path(path)


def _postgresql_parameters(url: str) -> dict[str, Any]:
    """The libpq parameters of *url*.

    :raises StoreURLError: psycopg is missing, or libpq refuses the URI.
    """
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise StoreURLError(
            "the PostgreSQL store needs psycopg 3: install txamqp09[postgresql]"
        ) from None
    try:
        return conninfo_to_dict(url)
    except psycopg.ProgrammingError as error:
        raise StoreURLError(f"store URL is not a valid libpq URI: {error}") from None
