"""What an SQL store reads back: everything at start-up, and bodies and log chunks on demand.

Recovery reads ``messages`` once in the order of their ids and hands each
message to its queues (a catch-up of an empty :class:`~txamqp09.store.mirror.Mirror`,
or of the one a standby kept current); messages carry their bodies up to a
budget, oldest first, and the others are read on demand (:func:`read_bodies`).
Each stream's log is reported by its segments, from the chunk headers alone.
What a previous run left behind (messages no queue holds, numbers of queues
that hold none, spilled bodies) is deleted after recovery
(:func:`forget_leftovers`).
"""

from __future__ import annotations

from typing import Optional, Sequence

from txamqp09.store.chunks import LogChunk
from txamqp09.store.interface import Recovered
from txamqp09.store.mirror import Mirror
from txamqp09.store.numbers import QueueNumbers
from txamqp09.store.sql import Database

__all__ = ["forget_leftovers", "log_offset_at", "read_bodies", "read_log", "recover"]

#: The columns of ``stream_chunks`` that :meth:`LogChunk.from_row` takes.
_CHUNK_COLUMNS = "first, count, segment, first_timestamp, last_timestamp, size, ends, data"


def recover(
    db: Database, body_budget: Optional[int], numbers: QueueNumbers, mirror: Optional[Mirror] = None
) -> tuple[Recovered, list[int], list[int]]:
    """Everything the database holds, with message bodies while *body_budget*
    lasts (None: all), and the queues' numbers taken into *numbers*; also the
    ids of messages no queue holds and the numbers of queues that hold none,
    for :func:`forget_leftovers`. Given a *mirror* of the database kept by
    following it, only what changed since its last catch-up is read (and
    its own body budget counts)."""
    followed = mirror is not None
    if mirror is None:
        mirror = Mirror(body_budget)
    mirror.catch_up(db)
    recovered, leftovers, unused = mirror.recovered(numbers)
    recovered.followed = followed
    return recovered, leftovers, unused


def forget_leftovers(db: Database, message_ids: list[int], numbers: list[int]) -> None:
    """Delete what a previous run left behind: messages no queue holds
    (*message_ids*), the numbers of queues that hold none, spilled bodies."""
    with db.transaction():
        db.change_by_ids("DELETE FROM {messages} WHERE id {ids}", (), message_ids)
        db.change_by_ids("DELETE FROM {message_links} WHERE message_id {ids}", (), message_ids)
        db.change_by_ids("DELETE FROM {queue_names} WHERE id {ids}", (), numbers)
        db.execute("DELETE FROM {spilled}")


def read_bodies(db: Database, message_ids: Sequence[int]) -> dict[int, bytes]:
    """The bodies of stored or spilled messages with these ids."""
    bodies = _bodies_in(db, "messages", message_ids)
    if len(bodies) < len(message_ids):
        bodies.update(_bodies_in(db, "spilled", [i for i in message_ids if i not in bodies]))
    return bodies


def _bodies_in(db: Database, table: str, message_ids: Sequence[int]) -> dict[int, bytes]:
    """The bodies of *table* (messages or spilled) with these ids."""
    bodies: dict[int, bytes] = {}
    for _, rows in db.by_ids(f"SELECT id, body FROM {{{table}}} WHERE id {{ids}}", (), message_ids):
        bodies.update(rows)
    return bodies


def read_log(db: Database, vhost: str, queue: str, start: int) -> Optional[LogChunk]:
    """The chunk of a log that holds offset *start* (the first retained one
    when *start* was removed; None past the end)."""
    for condition in ("first <= ? ORDER BY first DESC", "first > ? ORDER BY first"):
        row = db.execute(
            f"SELECT {_CHUNK_COLUMNS} FROM {{stream_chunks}} WHERE vhost = ? AND queue = ? AND {condition} LIMIT 1",
            (vhost, queue, start),
        ).fetchone()
        if row is not None and row[0] + row[1] > start:
            return LogChunk.from_row(row)
    return None


def log_offset_at(db: Database, vhost: str, queue: str, timestamp: int, start: int) -> Optional[int]:
    """The first offset from *start* on whose timestamp is at least
    *timestamp*: the first chunk with a message at or after *timestamp* and
    after *start* (found by its last timestamp, which an index orders as the
    offsets are: timestamps never decrease along a log), then a binary
    search inside it."""
    row = db.execute(
        f"SELECT {_CHUNK_COLUMNS} FROM {{stream_chunks}} WHERE vhost = ? AND queue = ?"
        " AND last_timestamp >= ? AND first + count > ? ORDER BY last_timestamp, first LIMIT 1",
        (vhost, queue, timestamp, start),
    ).fetchone()
    if row is None:
        return None
    chunk = LogChunk.from_row(row)
    return chunk.first + chunk.index_at(timestamp, max(start - chunk.first, 0))
