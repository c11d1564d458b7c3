"""What an SQL store reads back: everything at start-up, and bodies and log chunks on demand.

Recovery reads ``messages`` once in the order of their ids and hands each
message to its queues; messages carry their bodies up to a budget, oldest
first, and the others are read on demand (:func:`read_bodies`). Each
stream's log is reported by its segments, from the chunk headers alone.
What a previous run left behind (messages no queue holds, numbers of queues
that hold none, spilled bodies) is deleted after recovery
(:func:`forget_leftovers`).
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from txamqp09.store.chunks import LogChunk
from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    LogSegment,
    Recovered,
    StoredMessage,
)
from txamqp09.store.numbers import QueueNumbers
from txamqp09.store.sql import Database
from txamqp09.wire.fields import RABBITMQ

__all__ = ["forget_leftovers", "log_offset_at", "read_bodies", "read_log", "recover"]

#: Distinct property lists recovery keeps one copy of at a time (messages
#: published alike share one bytes object in memory).
_SHARED_PROPERTIES = 1024
#: The largest message id.
_NO_ID = (1 << 63) - 1
#: The columns of ``stream_chunks`` that :meth:`LogChunk.from_row` takes.
_CHUNK_COLUMNS = "first, count, segment, first_timestamp, last_timestamp, size, ends, data"


def _arguments(blob: bytes) -> dict[str, Any]:
    return RABBITMQ.decode_table(bytes(blob), 0)[0]


def recover(db: Database, body_budget: Optional[int], numbers: QueueNumbers) -> tuple[Recovered, list[int], list[int]]:
    """Everything the database holds, with message bodies while *body_budget*
    lasts (None: all), and the queues' numbers taken into *numbers*; also the
    ids of messages no queue holds and the numbers of queues that hold none,
    for :func:`forget_leftovers`."""
    recovered = Recovered()
    for vhost, name, kind, auto_delete, internal, args in db.execute(
        "SELECT vhost, name, type, auto_delete, internal, arguments FROM {exchanges}"
    ):
        recovered.exchanges.append(
            DurableExchange(vhost, name, kind, bool(auto_delete), bool(internal), _arguments(args))
        )
    for vhost, name, auto_delete, args in db.execute("SELECT vhost, name, auto_delete, arguments FROM {queues}"):
        recovered.queues.append(DurableQueue(vhost, name, bool(auto_delete), _arguments(args)))
        recovered.messages[(vhost, name)] = []
    for vhost, source, destination, kind, key, args in db.execute(
        "SELECT vhost, source, destination, destination_kind, routing_key, arguments FROM {bindings}"
    ):
        recovered.bindings.append(DurableBinding(vhost, source, destination, kind, key, _arguments(args)))
    leftovers, unused = _recover_messages(db, recovered, body_budget, numbers)
    last = db.execute("SELECT max(id) FROM {messages}").fetchone()[0]
    recovered.next_message_id = (last or 0) + 1
    for vhost, queue, first, last, first_time, last_time, size in db.execute(
        "SELECT vhost, queue, min(first), max(first + count - 1), min(first_timestamp),"
        " max(last_timestamp), sum(size) FROM {stream_chunks} GROUP BY vhost, queue, segment"
        " ORDER BY vhost, queue, segment"
    ):
        recovered.logs.setdefault((vhost, queue), []).append(
            LogSegment(int(first), int(last), int(first_time), int(last_time), int(size))
        )
    for kind, key, value in db.execute("SELECT kind, key, value FROM {settings}"):
        recovered.settings.setdefault(kind, {})[key] = json.loads(value)
    return recovered, leftovers, unused


def _recover_messages(
    db: Database, recovered: Recovered, body_budget: Optional[int], numbers: QueueNumbers
) -> tuple[list[int], list[int]]:
    """Add the stored messages to their queues in *recovered*, in the
    order of their ids, with their bodies while *body_budget* lasts (in
    the same order), and take the queues' numbers; the ids of messages no
    queue holds and the numbers of queues that hold no message, to
    forget (one pass over the messages, by id)."""
    names = {number: (vhost, name) for number, vhost, name in db.execute("SELECT id, vhost, name FROM {queue_names}")}
    queues = {number: recovered.messages.get(key, []) for number, key in names.items()}
    linked: dict[int, list[int]] = {}
    for message_id, number in db.execute("SELECT message_id, queue FROM {message_links}"):
        if number in queues:
            linked.setdefault(message_id, []).append(number)
    links = dict.fromkeys(queues, 0)
    leftovers: list[int] = []
    shared: dict[bytes, bytes] = {}
    rows = db.execute(
        "SELECT id, queue, exchange, routing_key, properties, CASE WHEN id < ? THEN body END,"
        " length(body), published FROM {messages} ORDER BY id",
        (_budget_end(db, body_budget),),
    )
    for message_id, number, exchange, key, properties, body, size, published in rows:
        if len(shared) > _SHARED_PROPERTIES:
            shared.clear()
        properties = shared.setdefault(properties, properties)
        queue = queues.get(number)
        if queue is not None:
            queue.append(StoredMessage(message_id, exchange, key, properties, body, size, True, published))
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
    numbers.load(
        {number: key for number, key in names.items() if number in used},
        {number: len(queues[number]) - links[number] for number in used},
        [number for number in used if links[number]],
    )
    return leftovers, [number for number in names if number not in used]


def _budget_end(db: Database, budget: Optional[int]) -> int:
    """The first message id whose body is not recovered: the bodies of the
    messages before it, in the order of their ids, fit *budget* (None: all).
    The bodies' total comes first: when they all fit (the usual case), that
    one scan of their lengths is all."""
    if budget is not None and (db.execute("SELECT sum(length(body)) FROM {messages}").fetchone()[0] or 0) > budget:
        row = db.execute(
            "SELECT id FROM (SELECT id, sum(length(body)) OVER (ORDER BY id) AS total FROM {messages}) AS bodies"
            " WHERE total > ? ORDER BY id LIMIT 1",
            (budget,),
        ).fetchone()
        if row is not None:
            return int(row[0])
    return _NO_ID


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
