"""An SQL store's durable state as a reader last saw it, brought up to date by reading what changed.

A :class:`Mirror` starts empty; each :meth:`Mirror.catch_up`, run inside
one snapshot of the database, makes it what the database holds then:

- The topology, the settings, the queues' numbers and the streams' log
  segments are read whole each time: they are small.
- Messages added since the last catch-up are those whose ids are above the
  highest id read so far: a writer numbers messages in increasing order and
  commits them in that order. Each comes with its body while the body
  budget lasts (bodies of the mirror's messages, oldest first, a message on
  several queues counted once); the others are read on demand once the
  broker serves.
- Messages removed since (acknowledged, dropped, purged, their queue
  deleted) are found by a *scan*, when the caller asks for one: the ids of
  the stored messages (ids alone: PostgreSQL reads them from the primary
  key's index when its pages are all visible) and the links to queues,
  compared with those the mirror holds. Ids the scan finds that the mirror
  does not hold (a write the mirror's reads missed, such as a batch written
  again after the database's failover) are read then.
- A writer that opens the database after another (a takeover) numbers from
  the highest id stored then, which may lie below ids the mirror read
  (the previous writer's newest messages removed since): when the database
  names a writer the mirror has not seen (:meth:`~.sql.Database.writers`),
  it starts over.

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
from txamqp09.store.sql import Database
from txamqp09.wire.fields import RABBITMQ

__all__ = ["Mirror"]

#: Distinct property lists a catch-up keeps one copy of at a time (messages
#: published alike share one bytes object in memory).
_SHARED_PROPERTIES = 1024
#: The largest message id.
_NO_ID = (1 << 63) - 1
#: The columns of a message row a catch-up reads (its body given by the caller).
_MESSAGE_COLUMNS = "id, queue, exchange, routing_key, properties, {body}, length(body), published"
#: A row of ``message_links``: (message id, queue number).
Link = tuple[int, int]


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
    :ivar messages: how many messages it holds (on one queue or several).
    """

    def __init__(
        self, body_budget: Optional[int] = None, prepare: Optional[Callable[[StoredMessage], Any]] = None
    ) -> None:
        self.body_budget = body_budget
        self.prepare = prepare
        #: Every writer named by the database so far.
        self._writers: frozenset[str] = frozenset()
        self._start_over()

    def _start_over(self) -> None:
        """Hold nothing."""
        self.topology = Recovered()
        self.body_bytes = 0
        #: The numbers of the queues that hold messages: (vhost, name) by number.
        self._names: dict[int, tuple[str, str]] = {}
        #: The highest message id read.
        self._high = 0
        #: Messages on one queue: their queue's number, by id.
        self._alone: dict[int, int] = {}
        #: Messages on several queues (stored with queue 0), by id.
        self._shared: dict[int, StoredMessage] = {}
        #: The links of those messages to their queues: (message id, number).
        self._links: set[Link] = set()
        #: Each queue's messages, by number, then by id (in the order of ids
        #: unless the number is in :attr:`_unordered`).
        self._queued: dict[int, dict[int, StoredMessage]] = {}
        #: Queues given messages out of the order of ids (by a scan).
        self._unordered: set[int] = set()

    @property
    def messages(self) -> int:
        """How many messages the mirror holds."""
        return len(self._alone) + len(self._shared)

    # -- catching up ---------------------------------------------------------------

    def catch_up(self, db: Database, scan: bool) -> None:
        """Read what changed since the last catch-up (inside a snapshot of
        *db*); with *scan*, find the messages removed since too."""
        writers = db.writers()
        if not writers <= self._writers:
            self._start_over()
            self._writers |= writers
        self.topology = _topology(db)
        self._names = {number: (vhost, name) for number, vhost, name in db.execute(
            "SELECT id, vhost, name FROM {queue_names}"
        )}
        if scan and self._high:
            self._scan(db, self._high)
        self._read_new(db)

    def _read_new(self, db: Database) -> None:
        """Read the messages above the highest id read so far, in the order of
        their ids, with their bodies while the budget lasts."""
        after = self._high
        links: dict[int, list[int]] = {}
        for message_id, number in db.execute(
            "SELECT message_id, queue FROM {message_links} WHERE message_id > ?", (after,)
        ):
            links.setdefault(message_id, []).append(number)
        body_end = _budget_end(db, self._room(), after)
        rows = db.execute(
            f"SELECT {_MESSAGE_COLUMNS.format(body='CASE WHEN id < ? THEN body END')} FROM {{messages}}"
            " WHERE id > ? ORDER BY id",
            (body_end, after),
        )
        self._add(rows, links, False)

    def _room(self) -> Optional[int]:
        """Bytes of bodies the budget still has room for (None: no budget)."""
        if self.body_budget is None:
            return None
        return max(self.body_budget - self.body_bytes, 0)

    def _add(self, rows: Iterable[Any], links: dict[int, list[int]], scanned: bool) -> None:
        """Hold the messages of *rows* (columns as :data:`_MESSAGE_COLUMNS`),
        each on its queue or, stored with queue 0, on the queues *links*
        names for it; *scanned*: rows a scan found, whose ids may lie below
        those held (the queues they join are sorted again when recovered)."""
        shared_properties: dict[bytes, bytes] = {}
        queued = self._queued
        budget = self.body_budget
        prepare = self.prepare
        for message_id, number, exchange, key, properties, body, size, published in rows:
            if len(shared_properties) > _SHARED_PROPERTIES:
                shared_properties.clear()
            if body is not None and budget is not None and self.body_bytes + size > budget:
                body = None
            record = StoredMessage(
                message_id, exchange, key, shared_properties.setdefault(properties, properties), body, size,
                True, published,
            )
            if body is not None:
                self.body_bytes += size
            numbers = [number] if number else links.get(message_id, [])
            if number:
                self._alone[message_id] = number
                if prepare is not None:
                    record.prepared = prepare(record)
            else:
                self._shared[message_id] = record
                self._links.update((message_id, linked) for linked in numbers)
            for queue in numbers:
                held = queued.get(queue)
                if held is None:
                    held = queued[queue] = {}
                held[message_id] = record
                if scanned:
                    self._unordered.add(queue)
            if message_id > self._high:
                self._high = message_id

    def _scan(self, db: Database, known: int) -> None:
        """Compare the ids of the messages up to *known* (the highest id
        held) and of their links with those held: forget the messages and
        links that are gone, read those that are new."""
        present = {row[0] for row in db.execute("SELECT id FROM {messages} WHERE id <= ?", (known,))}
        links = {tuple(link) for link in db.execute(
            "SELECT message_id, queue FROM {message_links} WHERE message_id <= ?", (known,)
        )}
        for message_id in self._alone.keys() - present:
            self._forget(self._queued[self._alone.pop(message_id)].pop(message_id))
        for message_id, number in self._links - links:
            self._queued[number].pop(message_id, None)
        self._links &= links
        for message_id in self._shared.keys() - present:
            self._forget(self._shared.pop(message_id))
        unknown = sorted(present - self._alone.keys() - self._shared.keys())
        self._link(links - self._links)
        if unknown:
            linked: dict[int, list[int]] = {}
            for message_id, number in links:
                linked.setdefault(message_id, []).append(number)
            for _, rows in db.by_ids(
                f"SELECT {_MESSAGE_COLUMNS.format(body='body')} FROM {{messages}} WHERE id {{ids}}", (), unknown
            ):
                self._add(sorted(rows), linked, True)

    def _link(self, added: set[Link]) -> None:
        """Put messages held on several queues on the queues of links a scan
        found that the mirror did not hold (links of messages it does not
        hold come with them)."""
        for message_id, number in added:
            record = self._shared.get(message_id)
            if record is not None:
                self._links.add((message_id, number))
                self._queued.setdefault(number, {})[message_id] = record
                self._unordered.add(number)

    def _forget(self, record: StoredMessage) -> None:
        """The message *record* is gone from the database: its body no longer counts."""
        if record.body is not None:
            self.body_bytes -= record.size

    # -- what a store recovers ---------------------------------------------------

    def recovered(self, numbers: QueueNumbers) -> tuple[Recovered, list[int], list[int]]:
        """Everything the database held at the last catch-up, and the
        queues' numbers taken into *numbers*; also the ids of messages no
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
                records = list(held.values())
                if number in self._unordered:
                    records.sort(key=_message_id)
                recovered.messages[key] = records
        leftovers = [
            message_id for number, held in self._queued.items() if number not in used
            for message_id in held if message_id in self._alone
        ]
        linked = {message_id for message_id, number in self._links if number in used}
        leftovers += [message_id for message_id in self._shared if message_id not in linked]
        recovered.next_message_id = max(max(self._alone, default=0), max(self._shared, default=0)) + 1
        shared_on = dict.fromkeys(used, 0)
        for _, number in self._links:
            if number in shared_on:
                shared_on[number] += 1
        numbers.load(used, {number: len(self._queued[number]) - shared_on[number] for number in used})
        return recovered, leftovers, [number for number in names if number not in used]


def _message_id(record: StoredMessage) -> int:
    return record.message_id


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
