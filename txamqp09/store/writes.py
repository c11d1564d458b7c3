"""What the writer does to the database: the store's operations, and one batch in one transaction.

A persistent message on one queue (the usual case) is one row of
``messages`` naming its queue by number (:mod:`~txamqp09.store.numbers`):
publishing it inserts one row, acknowledging it deletes that row, many of
them in one statement. A message on several queues has queue 0 and a row of
``message_links`` for each of them; taking it off a queue deletes that link,
and the message with its last link; each transaction that takes messages
off queues adds a row to the removal log, for readers that follow the
database (:mod:`~txamqp09.store.mirror`). Deleting a queue deletes its
messages and its number: a scan of ``messages``, skipped when no row names
it (the numbers count them).

:func:`write_batch` gathers the rows of a batch's publishes, spills and
stream appends and inserts them with the backend's bulk insert (before each
other operation, which may delete what was inserted, and at the end), then
applies the removals, all in one transaction.
"""

from __future__ import annotations

from typing import Any, Optional

from txamqp09.store.interface import DurableBinding, DurableExchange, DurableQueue
from txamqp09.store.numbers import QueueNumbers
from txamqp09.store.schema import (
    BINDINGS,
    EXCHANGES,
    MESSAGE_LINKS,
    MESSAGES,
    QUEUE_NAMES,
    QUEUES,
    REMOVALS,
    REMOVALS_KEPT,
    SETTINGS,
    SPILLED,
    STREAM_CHUNKS,
    WRITE_PROBE,
    pack_removals,
)
from txamqp09.store.sql import Database
from txamqp09.store.work import Append, Batch, Publish, Removals, Spill
from txamqp09.wire.fields import RABBITMQ

__all__ = [
    "add_binding",
    "add_exchange",
    "add_queue",
    "encode_arguments",
    "probe",
    "put_setting",
    "remove_binding",
    "remove_exchange",
    "remove_queue",
    "remove_setting",
    "truncate_log",
    "unspill",
    "write_batch",
]


def encode_arguments(arguments: dict[str, Any]) -> bytes:
    """Arguments as stored: an AMQP field table in its wire encoding."""
    return RABBITMQ.encode_table(arguments)


# -- operations -------------------------------------------------------------------


def add_exchange(db: Database, e: DurableExchange) -> None:
    db.insert(EXCHANGES, [e.vhost, e.name, e.type, int(e.auto_delete), int(e.internal), encode_arguments(e.arguments)])


def remove_exchange(db: Database, vhost: str, name: str) -> None:
    db.execute("DELETE FROM {exchanges} WHERE vhost = ? AND name = ?", (vhost, name))
    db.execute(
        "DELETE FROM {bindings} WHERE vhost = ? AND (source = ? OR"
        " (destination = ? AND destination_kind = 'exchange'))",
        (vhost, name, name),
    )


def add_queue(db: Database, q: DurableQueue) -> None:
    db.insert(QUEUES, [q.vhost, q.name, int(q.auto_delete), encode_arguments(q.arguments)])


def remove_queue(db: Database, numbers: QueueNumbers, vhost: str, name: str) -> None:
    db.execute("DELETE FROM {queues} WHERE vhost = ? AND name = ?", (vhost, name))
    db.execute(
        "DELETE FROM {bindings} WHERE vhost = ? AND destination = ? AND destination_kind = 'queue'", (vhost, name)
    )
    number, alone = numbers.forget((vhost, name))
    if number is not None:
        _purge(db, number, alone)
    db.execute("DELETE FROM {stream_chunks} WHERE vhost = ? AND queue = ?", (vhost, name))


def truncate_log(db: Database, vhost: str, queue: str, first: int) -> None:
    db.execute("DELETE FROM {stream_chunks} WHERE vhost = ? AND queue = ? AND first < ?", (vhost, queue, first))


def _binding_row(b: DurableBinding) -> list[Any]:
    return [b.vhost, b.source, b.destination, b.destination_kind, b.routing_key, encode_arguments(b.arguments)]


def add_binding(db: Database, b: DurableBinding) -> None:
    db.insert(BINDINGS, _binding_row(b))


def remove_binding(db: Database, b: DurableBinding) -> None:
    db.execute(
        "DELETE FROM {bindings} WHERE vhost = ? AND source = ? AND destination = ?"
        " AND destination_kind = ? AND routing_key = ? AND arguments = ?",
        _binding_row(b),
    )


def put_setting(db: Database, kind: str, key: str, value: str) -> None:
    db.insert(SETTINGS, [kind, key, value])


def remove_setting(db: Database, kind: str, key: str) -> None:
    db.execute("DELETE FROM {settings} WHERE kind = ? AND key = ?", (kind, key))


def unspill(db: Database, message_ids: list[int]) -> None:
    db.change_by_ids("DELETE FROM {spilled} WHERE id {ids}", (), message_ids)


def probe(db: Database, now: float) -> None:
    """The writer's small write, in a transaction of its own, after a failed one."""
    with db.transaction():
        db.insert(WRITE_PROBE, [1, now])


# -- a batch ------------------------------------------------------------------------


class _Rows:
    """The rows a batch gathers between two other operations (each a flat
    list of columns), inserted together."""

    __slots__ = ("messages", "links", "spills", "appends")

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self.links: list[Any] = []
        self.spills: list[Any] = []
        self.appends: list[Any] = []

    def insert(self, db: Database, numbers: QueueNumbers) -> None:
        """Insert the queues numbered and the rows gathered (queues before
        the messages that name them), then forget them."""
        for table, rows in (
            (QUEUE_NAMES, numbers.named), (MESSAGES, self.messages), (MESSAGE_LINKS, self.links),
            (SPILLED, self.spills), (STREAM_CHUNKS, self.appends),
        ):
            if rows:
                db.insert(table, rows)
                rows.clear()

    def __bool__(self) -> bool:
        return bool(self.messages or self.spills or self.appends)


def write_batch(db: Database, batch: Batch, numbers: QueueNumbers) -> Optional[int]:
    """Apply *batch* in one transaction; the messages (publishes and stream
    appends) it wrote, or None when it wrote nothing at all. What it numbers
    stays in *numbers* until the caller says whether the transaction
    committed (:meth:`QueueNumbers.committed`, :meth:`QueueNumbers.rolled_back`)."""
    rows = _Rows()
    messages, links = rows.messages, rows.links
    begun = False
    written = 0
    known, alone, linked = numbers.numbers, numbers.alone, numbers.linked
    for operation in batch.operations:
        if isinstance(operation, Publish):
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
                        queue_number = numbers.number(key)
                        linked.add(queue_number)
                        links += (message_id, queue_number)
                messages += (message_id, number, m.exchange, m.routing_key, m.raw_properties, m.body, m.published)
            continue
        if isinstance(operation, Spill):
            rows.spills += operation.row
            continue
        if isinstance(operation, Append):
            row = operation.row()
            written += row[3]
            rows.appends += row
            continue
        begun = begun or _begin(db)
        rows.insert(db, numbers)
        operation.apply(db)
    if rows or batch.removals:
        begun = begun or _begin(db)
        rows.insert(db, numbers)
        _remove(db, batch.removals, numbers)
    if not begun:
        return None
    db.commit()
    return written


def _begin(db: Database) -> bool:
    """Start the batch's transaction."""
    db.begin()
    return True


#: Rows of the removal log between two deletions of its old rows.
_TRIM_EVERY = 256
#: Deletes the messages of several queues among ``{ids}`` that no queue links any more.
_DELETE_ORPHANS = (
    "DELETE FROM {messages} WHERE queue = 0 AND id {ids} AND NOT EXISTS"
    " (SELECT 1 FROM {message_links} WHERE message_id = {messages}.id)"
)


def _remove(db: Database, removals: list[Removals], numbers: QueueNumbers) -> None:
    """Delete the messages of *removals* from their queues: the rows of
    those on one queue, many in each statement; from a queue that may hold
    messages of several queues, also their links, and the rows that lose
    their last link; and log them, in a database other processes follow
    (see :func:`_log_removals`). A removal for a queue without a number
    holds nothing stored. Nothing waits for an answer of the database (the
    rows deleted are counted once the batch commits) but the removal log's
    trimming, once in :data:`_TRIM_EVERY` batches."""
    known, linked = numbers.numbers, numbers.linked
    logged: list[tuple[int, list[int]]] = []
    for key, message_ids in removals:
        number = known.get(key)
        if number is not None:
            numbers.deleted(
                number, db.change_by_ids("DELETE FROM {messages} WHERE queue = ? AND id {ids}", (number,), message_ids)
            )
            if number in linked:
                db.change_by_ids("DELETE FROM {message_links} WHERE queue = ? AND message_id {ids}", (number,), message_ids)
                db.change_by_ids(_DELETE_ORPHANS, (), message_ids)
            logged.append((number, message_ids))
    if logged and db.logs_removals:
        _log_removals(db, numbers, logged)


def _log_removals(db: Database, numbers: QueueNumbers, logged: list[tuple[int, list[int]]]) -> None:
    """Add the next row of the removal log (:data:`~txamqp09.store.schema.REMOVALS`);
    every :data:`_TRIM_EVERY` rows, delete those numbered
    :data:`~txamqp09.store.schema.REMOVALS_KEPT` below it and more."""
    sequence = numbers.logged = numbers.logged + 1
    db.insert(REMOVALS, [sequence, pack_removals(logged)])
    if sequence % _TRIM_EVERY == 0:
        db.execute("DELETE FROM {removals} WHERE sequence <= ?", (sequence - REMOVALS_KEPT,))


def _purge(db: Database, number: int, alone: int) -> None:
    """Delete every message of the queue numbered *number* (deleted), and its
    number: a scan of the messages when *alone* says rows may name it."""
    if alone:
        db.execute("DELETE FROM {messages} WHERE queue = ?", (number,))
    linked = [message_id for (message_id,) in db.execute("SELECT message_id FROM {message_links} WHERE queue = ?", (number,))]
    db.execute("DELETE FROM {message_links} WHERE queue = ?", (number,))
    db.change_by_ids(_DELETE_ORPHANS, (), linked)
    db.execute("DELETE FROM {queue_names} WHERE id = ?", (number,))
