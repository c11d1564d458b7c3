"""The tables every SQL store keeps, described once, and their version.

Each table is described as data (:class:`Table`): its columns with a
portable type, its primary key and what an insert does when the key is
there already. A backend's :class:`~txamqp09.store.sql.Database` turns the
descriptions into its own DDL and insert statements, so that the SQLite
and PostgreSQL stores keep the same layout under their own spelling
(PostgreSQL's tables carry a prefix, as they share a database with others).

The layout:

``exchanges``, ``queues``, ``bindings``
    The durable topology; arguments are AMQP field tables in their wire
    encoding.
``queue_names``
    The numbers of the queues that hold messages (numbered by the writer
    when it first writes a message to a queue).
``messages``
    The persistent messages: a message on one queue names its number; one
    on several has queue 0 and a row of ``message_links`` for each.
``spilled``
    Bodies the broker paged out under memory pressure; emptied at each open.
``stream_chunks``
    Stream logs, one row per chunk (:mod:`txamqp09.store.chunks`).
``settings``
    The runtime configuration: JSON values by kind and key.
``removals``
    The removal log: for each transaction that took messages off queues,
    a row numbered in order with the queues' numbers and the messages' ids
    (:func:`pack_removals`), so that a reader following the database learns
    what was removed since it last looked without reading every stored id.
    The writer keeps the last :data:`REMOVALS_KEPT` numbers. Only backends
    whose databases other processes follow write it (PostgreSQL's; a
    SQLite store's stays empty).
``write_probe``
    The writer's small write that finds when writing works again.

:data:`SCHEMA_VERSION` is the version of this layout.
:func:`~txamqp09.store.sql.prepare` reads a database's version, refuses one
written by a later version of txamqp09 (:class:`StoreFormatError`), creates
what is missing and runs the backend's migrations from an earlier version,
all in one transaction.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Iterator, Sequence

__all__ = [
    "BINDINGS",
    "Conflict",
    "EXCHANGES",
    "INDEXES",
    "Index",
    "MESSAGES",
    "MESSAGE_LINKS",
    "QUEUES",
    "QUEUE_NAMES",
    "REMOVALS",
    "REMOVALS_KEPT",
    "SCHEMA_VERSION",
    "SETTINGS",
    "SPILLED",
    "STREAM_CHUNKS",
    "StoreFormatError",
    "TABLES",
    "Table",
    "WRITE_PROBE",
    "pack_removals",
    "unpack_removals",
]

#: The version of the layout the stores write: 3 adds the removal log
#: (a writer of version 2 would not keep it); 2 keeps a message routed to
#: one queue as one row that names its queue by number; 1 kept a row of
#: ``queue_messages`` (and an index entry) per message and queue beside it;
#: 0 kept stream logs as one row per message.
SCHEMA_VERSION = 3
#: The numbers of the removal log a writer keeps at least: it deletes the
#: rows numbered this much below its latest now and then.
REMOVALS_KEPT = 4096


class StoreFormatError(Exception):
    """The database was written by a later version, in a layout this store does not know."""


class Conflict(Enum):
    """What an insert does with a row whose key is there already."""

    #: The insert fails (keys the writer never inserts twice).
    FAIL = "fail"
    #: The row there stays.
    IGNORE = "ignore"
    #: The new row replaces it.
    REPLACE = "replace"


#: Portable column types; each backend names its own.
INTEGER = "integer"
TEXT = "text"
BLOB = "blob"
REAL = "real"


@dataclass(frozen=True)
class Table:
    """A table: its columns (name, portable type) in order, its primary key
    and what an insert does on a key that is there.

    :ivar clustered: SQLite keeps the rows in the order of the key, with
        no rowid beside it (``WITHOUT ROWID``).
    """

    name: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]
    conflict: Conflict
    clustered: bool = False

    @property
    def width(self) -> int:
        """The number of columns."""
        return len(self.columns)


@dataclass(frozen=True)
class Index:
    """A secondary index of a table."""

    name: str
    table: Table
    columns: tuple[str, ...]


EXCHANGES = Table(
    "exchanges",
    (("vhost", TEXT), ("name", TEXT), ("type", TEXT), ("auto_delete", INTEGER), ("internal", INTEGER),
     ("arguments", BLOB)),
    ("vhost", "name"), Conflict.REPLACE,
)
QUEUES = Table(
    "queues",
    (("vhost", TEXT), ("name", TEXT), ("auto_delete", INTEGER), ("arguments", BLOB)),
    ("vhost", "name"), Conflict.REPLACE,
)
BINDINGS = Table(
    "bindings",
    (("vhost", TEXT), ("source", TEXT), ("destination", TEXT), ("destination_kind", TEXT),
     ("routing_key", TEXT), ("arguments", BLOB)),
    ("vhost", "source", "destination", "destination_kind", "routing_key", "arguments"), Conflict.IGNORE,
)
QUEUE_NAMES = Table("queue_names", (("id", INTEGER), ("vhost", TEXT), ("name", TEXT)), ("id",), Conflict.FAIL)
MESSAGES = Table(
    "messages",
    (("id", INTEGER), ("queue", INTEGER), ("exchange", TEXT), ("routing_key", TEXT), ("properties", BLOB),
     ("body", BLOB), ("published", REAL)),
    ("id",), Conflict.FAIL,
)
MESSAGE_LINKS = Table(
    "message_links", (("message_id", INTEGER), ("queue", INTEGER)), ("message_id", "queue"), Conflict.IGNORE,
    clustered=True,
)
SPILLED = Table("spilled", (("id", INTEGER), ("body", BLOB)), ("id",), Conflict.REPLACE)
STREAM_CHUNKS = Table(
    "stream_chunks",
    (("vhost", TEXT), ("queue", TEXT), ("first", INTEGER), ("count", INTEGER), ("segment", INTEGER),
     ("first_timestamp", INTEGER), ("last_timestamp", INTEGER), ("size", INTEGER), ("ends", BLOB),
     ("data", BLOB)),
    ("vhost", "queue", "first"), Conflict.REPLACE,
)
SETTINGS = Table("settings", (("kind", TEXT), ("key", TEXT), ("value", TEXT)), ("kind", "key"), Conflict.REPLACE)
REMOVALS = Table("removals", (("sequence", INTEGER), ("data", BLOB)), ("sequence",), Conflict.FAIL)
WRITE_PROBE = Table("write_probe", (("id", INTEGER), ("written", REAL)), ("id",), Conflict.REPLACE)

#: Every table, in the order they are created.
TABLES = (
    EXCHANGES, QUEUES, BINDINGS, QUEUE_NAMES, MESSAGES, MESSAGE_LINKS, SPILLED, STREAM_CHUNKS, SETTINGS,
    REMOVALS, WRITE_PROBE,
)
#: Every secondary index: the chunks of a log by their last timestamp, for
#: the search of an offset by time.
INDEXES = (Index("stream_chunks_by_time", STREAM_CHUNKS, ("vhost", "queue", "last_timestamp")),)


def pack_removals(removals: Iterable[tuple[int, Sequence[int]]]) -> bytes:
    """A row's ``data`` of the removal log: for each queue's number and the
    ids of the messages taken off it, the number, the count of ids and the
    ids, as signed 64-bit little-endian integers."""
    values: list[int] = []
    for number, message_ids in removals:
        values += (number, len(message_ids), *message_ids)
    return struct.pack(f"<{len(values)}q", *values)


def unpack_removals(data: bytes) -> Iterator[tuple[int, tuple[int, ...]]]:
    """The queues' numbers and ids of a row's ``data`` of the removal log
    (see :func:`pack_removals`)."""
    values = struct.unpack(f"<{len(data) // 8}q", data)
    position = 0
    while position < len(values):
        number, count = values[position], values[position + 1]
        position += 2
        yield number, values[position : position + count]
        position += count
