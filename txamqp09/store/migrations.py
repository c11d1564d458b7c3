"""The rewrites of SQLite databases written in earlier layouts (see :data:`~txamqp09.store.schema.SCHEMA_VERSION`).

Version 0 kept stream logs as one row per message (``stream_log``), which
:func:`migrate_stream_log` rewrites as chunks; versions 0 and 1 kept a row
of ``queue_messages`` for each message and queue, keyed by the queue's name,
which :func:`migrate_messages` rewrites as numbered queues. Each finds what
it rewrites by the tables it sees, and changes nothing in a database that
has none of them; :func:`~txamqp09.store.sql.prepare` runs them in its
transaction.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

from txamqp09.store.chunks import CHUNK_BYTES, LogChunk
from txamqp09.store.schema import MESSAGES, STREAM_CHUNKS
from txamqp09.store.sql import Database
from txamqp09.wire.forwarding import envelope

__all__ = ["SQLITE_MIGRATIONS", "migrate_messages", "migrate_stream_log"]


def _has_table(db: Database, name: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def migrate_stream_log(db: Database) -> None:
    """Rewrite the logs of a version 0 database (one row per message in
    ``stream_log``) as chunks."""
    if _has_table(db, "stream_log"):
        rows = db.execute(
            "SELECT vhost, queue, position, segment, timestamp, exchange, routing_key,"
            " properties, body FROM stream_log ORDER BY vhost, queue, position"
        )
        for key, chunk in _chunks_of(rows):
            db.insert(STREAM_CHUNKS, [*key, *chunk.take()])
        db.execute("DROP TABLE stream_log")


def migrate_messages(db: Database) -> None:
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
    db.execute(db.create_table(MESSAGES))
    if _has_table(db, "queue_messages"):
        _number_messages(db, published)
    db.execute("DROP TABLE messages_v1")


def _number_messages(db: Database, published: str) -> None:
    """:func:`migrate_messages`' copy of the messages of ``messages_v1``
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


#: The steps from an earlier layout, in order.
SQLITE_MIGRATIONS = (migrate_stream_log, migrate_messages)
