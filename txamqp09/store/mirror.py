"""An SQL store's durable state as a reader last saw it, brought up to date by reading what changed.

A :class:`Mirror` starts empty; each :meth:`Mirror.catch_up`, run inside
one snapshot of the database, makes it what the database holds then:

- The topology, the settings, the queues' numbers and the streams' log
  segments are read whole each time: they are small. A queue whose number
  went was deleted, with its messages.
- Messages taken off their queues since the last catch-up (acknowledged,
  dropped, purged) are read from the removal log
  (:data:`~txamqp09.store.schema.REMOVALS`): its rows numbered above the
  last one read. When the writer has deleted some of those (the mirror fell
  more than :data:`~txamqp09.store.schema.REMOVALS_KEPT` rows behind), the
  mirror starts over.
- Messages added since are those whose ids are above the highest id read
  so far: a writer numbers messages in increasing order and commits them in
  that order. Each comes with its body while the body budget lasts (bodies
  of the mirror's messages in the order they were read, a message on
  several queues counted once); the others are read on demand once the
  broker serves.
- A writer that opens the database after another (a takeover) numbers from
  the highest id stored then, which may lie below ids the mirror read (the
  previous writer's newest messages removed since): when the database
  names a writer the mirror has not seen (:meth:`~.sql.Database.writers`),
  the mirror starts over.

So a catch-up reads what changed, whatever the number of messages stored.
Recovery at start-up is one catch-up from an empty mirror
(:func:`~txamqp09.store.reading.recover`); a broker standing by keeps one
current (:mod:`~txamqp09.store.following`), so that taking over reads only
what changed since.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable, Optional

from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    LogSegment,
    Recovered,
    StoredMessage,
)
from txamqp09.store.numbers import QueueNumbers
from txamqp09.store.schema import REMOVALS_KEPT, unpack_removals
from txamqp09.store.sql import Database
from txamqp09.wire.fields import RABBITMQ

__all__ = ["Mirror"]

#: Distinct property lists a catch-up keeps one copy of at a time (messages
#: published alike share one bytes object in memory).
_SHARED_PROPERTIES = 1024
#: The largest message id.
_NO_ID = (1 << 63) - 1


def _arguments(blob: bytes) -> dict[str, Any]:
    return RABBITMQ.decode_table(bytes(blob), 0)[0]


class Mirror:
    """What an SQL store's database holds, as of the last :meth:`catch_up`
    (see the module's docstring).

    :param body_budget: bytes of bodies the mirror holds at most (None: all).
    :param prepare: what gives each message of one queue it reads its
        :attr:`~txamqp09.store.interface.StoredMessage.prepared` (None: nothing).
    :ivar topology: the durable topology, settings and logs last read (its
        ``messages`` are empty: see :meth:`recovered`).
    :ivar body_bytes: the bytes of bodies the mirror holds.
    """

    def __init__(
        self, body_budget: Optional[int] = None, prepare: Optional[Callable[[StoredMessage], Any]] = None
    ) -> None:
        self.body_budget = body_budget
        self.prepare = prepare
        #: Every writer named by the database so far.
        self._writers: frozenset[str] = frozenset()
        #: Times the mirror started over (for tests and benchmarks).
        self.restarts = 0
        self._start_over()

    def _start_over(self) -> None:
        """Hold nothing."""
        self.topology = Recovered()
        self.body_bytes = 0
        #: The numbers of the queues that hold messages: (vhost, name) by number.
        self._names: dict[int, tuple[str, str]] = {}
        #: The highest message id read.
        self._high = 0
        #: The number of the last row of the removal log read.
        self._logged = 0
        #: Messages on several queues (stored with queue 0), by id.
        self._shared: dict[int, StoredMessage] = {}
        #: The queues' numbers each of those is on, by id.
        self._links: dict[int, set[int]] = {}
        #: Each queue's messages, by number, then by id (in the order of ids).
        self._queued: dict[int, dict[int, StoredMessage]] = {}

    @property
    def messages(self) -> int:
        """How many messages the mirror holds."""
        held = sum(len(messages) for messages in self._queued.values())
        return held - sum(len(queues) - 1 for queues in self._links.values())

    # -- catching up ---------------------------------------------------------------

    def catch_up(self, db: Database) -> None:
        """Read what changed since the last catch-up (inside a snapshot of *db*)."""
        writers = db.writers()
        if not writers <= self._writers:
            self._restart()
            self._writers |= writers
        self._read_removals(db)
        self.topology = _topology(db)
        names = {number: (vhost, name) for number, vhost, name in db.execute(
            "SELECT id, vhost, name FROM {queue_names}"
        )}
        for number in self._names.keys() - names.keys():
            self._queue_deleted(number)
        self._names = names
        self._read_new(db)

    def _restart(self) -> None:
        """Start over, if the mirror holds anything."""
        if self._high:
            self.restarts += 1
            self._start_over()

    def _read_removals(self, db: Database) -> None:
        """Take off their queues the messages of the removal log's rows
        numbered above the last one read (starting over when some of them
        are gone)."""
        newest = db.execute("SELECT max(sequence) FROM {removals}").fetchone()[0] or 0
        if newest - REMOVALS_KEPT > self._logged:
            self._restart()
        elif self._high:
            for _, data in db.execute(
                "SELECT sequence, data FROM {removals} WHERE sequence > ? ORDER BY sequence", (self._logged,)
            ):
                for number, message_ids in unpack_removals(bytes(data)):
                    self._take_off(number, message_ids)
        self._logged = newest

    def _take_off(self, number: int, message_ids: Iterable[int]) -> None:
        """Take the messages *message_ids* off the queue numbered *number*;
        one on no queue then is gone (its row deleted with its last link)."""
        held = self._queued.get(number)
        if held is None:
            return
        for message_id in message_ids:
            record = held.pop(message_id, None)
            if record is None:
                continue
            if message_id not in self._shared:
                self._forget(record)
                continue
            queues = self._links[message_id]
            queues.discard(number)
            if not queues:
                del self._links[message_id]
                self._forget(self._shared.pop(message_id))

    def _queue_deleted(self, number: int) -> None:
        """The queue numbered *number* was deleted: take its messages off it."""
        self._take_off(number, list(self._queued.get(number, ())))
        self._queued.pop(number, None)

    def _forget(self, record: StoredMessage) -> None:
        """The message *record* is gone from the database: its body no longer counts."""
        if record.body is not None:
            self.body_bytes -= record.size

    def _read_new(self, db: Database) -> None:
        """Read the messages above the highest id read so far, in the order of
        their ids, with their bodies while the budget lasts."""
        after = self._high
        links: dict[int, list[int]] = {}
        for message_id, number in db.execute(
            "SELECT message_id, queue FROM {message_links} WHERE message_id > ?", (after,)
        ):
            links.setdefault(message_id, []).append(number)
        rows = db.execute(
            "SELECT id, queue, exchange, routing_key, properties, CASE WHEN id < ? THEN body END,"
            " length(body), published FROM {messages} WHERE id > ? ORDER BY id",
            (_budget_end(db, self._room(), after), after),
        )
        self._add(rows, links)

    def _room(self) -> Optional[int]:
        """Bytes of bodies the budget still has room for (None: no budget)."""
        if self.body_budget is None:
            return None
        return max(self.body_budget - self.body_bytes, 0)

    def _add(self, rows: Iterable[Any], links: dict[int, list[int]]) -> None:
        """Hold the messages of *rows* (id, queue number, exchange, routing
        key, properties, body or None, size, publish time), in the order of
        their ids: each on its queue or, stored with queue 0, on the queues
        *links* names for it."""
        shared_properties: dict[bytes, bytes] = {}
        queued = self._queued
        prepare = self.prepare
        body_bytes = 0
        message_id = self._high
        for message_id, number, exchange, key, properties, body, size, published in rows:
            if len(shared_properties) > _SHARED_PROPERTIES:
                shared_properties.clear()
            record = StoredMessage(
                message_id, exchange, key, shared_properties.setdefault(properties, properties), body, size,
                True, published,
            )
            if body is not None:
                body_bytes += size
            if number:
                held = queued.get(number)
                if held is None:
                    held = queued[number] = {}
                held[message_id] = record
                if prepare is not None:
                    record.prepared = prepare(record)
            else:
                self._share(record, links.get(message_id, []))
        self.body_bytes += body_bytes
        self._high = message_id

    def _share(self, record: StoredMessage, numbers: list[int]) -> None:
        """Hold *record*, a message of several queues, on the queues numbered *numbers*."""
        message_id = record.message_id
        self._shared[message_id] = record
        self._links[message_id] = set(numbers)
        for number in numbers:
            self._queued.setdefault(number, {})[message_id] = record

    # -- what a store recovers ---------------------------------------------------

    def recovered(self, numbers: QueueNumbers) -> tuple[Recovered, list[int], list[int]]:
        """Everything the database held at the last catch-up, and the
        writer's numbers taken into *numbers*; also the ids of messages no
        queue holds and the numbers of queues that hold none, for
        :func:`~txamqp09.store.reading.forget_leftovers`. The mirror is spent."""
        recovered = self.topology
        names = self._names
        for record in recovered.queues:
            recovered.messages[(record.vhost, record.name)] = []
        used: dict[int, tuple[str, str]] = {}
        for number, held in self._queued.items():
            key = names.get(number)
            if key is not None and held:
                used[number] = key
                recovered.messages[key] = list(held.values())
        leftovers = [
            message_id for number, held in self._queued.items() if number not in used
            for message_id in held if message_id not in self._shared
        ]
        leftovers += [message_id for message_id, queues in self._links.items() if not queues & used.keys()]
        newest = [next(reversed(held)) for held in self._queued.values() if held]
        recovered.next_message_id = max(newest + list(self._shared), default=0) + 1
        shared_on = dict.fromkeys(used, 0)
        for queues in self._links.values():
            for number in queues & used.keys():
                shared_on[number] += 1
        numbers.load(
            used, {number: len(self._queued[number]) - shared_on[number] for number in used},
            [number for number, shared in shared_on.items() if shared], self._logged,
        )
        return recovered, leftovers, [number for number in names if number not in used]


def _topology(db: Database) -> Recovered:
    """The durable topology, the streams' log segments and the settings
    (no messages)."""
    topology = Recovered()
    for vhost, name, kind, auto_delete, internal, args in db.execute(
        "SELECT vhost, name, type, auto_delete, internal, arguments FROM {exchanges}"
    ):
        topology.exchanges.append(
            DurableExchange(vhost, name, kind, bool(auto_delete), bool(internal), _arguments(args))
        )
    for vhost, name, auto_delete, args in db.execute("SELECT vhost, name, auto_delete, arguments FROM {queues}"):
        topology.queues.append(DurableQueue(vhost, name, bool(auto_delete), _arguments(args)))
    for vhost, source, destination, kind, key, args in db.execute(
        "SELECT vhost, source, destination, destination_kind, routing_key, arguments FROM {bindings}"
    ):
        topology.bindings.append(DurableBinding(vhost, source, destination, kind, key, _arguments(args)))
    for vhost, queue, first, last, first_time, last_time, size in db.execute(
        "SELECT vhost, queue, min(first), max(first + count - 1), min(first_timestamp),"
        " max(last_timestamp), sum(size) FROM {stream_chunks} GROUP BY vhost, queue, segment"
        " ORDER BY vhost, queue, segment"
    ):
        topology.logs.setdefault((vhost, queue), []).append(
            LogSegment(int(first), int(last), int(first_time), int(last_time), int(size))
        )
    for kind, key, value in db.execute("SELECT kind, key, value FROM {settings}"):
        topology.settings.setdefault(kind, {})[key] = json.loads(value)
    return topology


def _budget_end(db: Database, budget: Optional[int], after: int) -> int:
    """The first message id above *after* whose body is not read: the bodies
    of the messages from *after* up to it, in the order of their ids, fit
    *budget* (None: all). The bodies' total comes first: when they all fit
    (the usual case), that one scan of their lengths is all."""
    if budget is None:
        return _NO_ID
    if budget <= 0:
        return after + 1
    if (db.execute("SELECT sum(length(body)) FROM {messages} WHERE id > ?", (after,)).fetchone()[0] or 0) > budget:
        row = db.execute(
            "SELECT id FROM (SELECT id, sum(length(body)) OVER (ORDER BY id) AS total FROM {messages}"
            " WHERE id > ?) AS bodies WHERE total > ? ORDER BY id LIMIT 1",
            (after, budget),
        ).fetchone()
        if row is not None:
            return int(row[0])
    return _NO_ID
