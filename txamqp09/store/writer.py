"""The SQL stores' common half: operations queued on the reactor thread, written by one thread in batches.

Every operation is queued on the reactor thread and returns a sequence
number. One writer thread takes everything queued so far, applies it in one
transaction and commits (group commit: one commit, and so one flush to
disk, covers every operation of the batch). While a batch is being written
the next one gathers, so batches grow with the load. When a batch is
committed the reactor thread learns its last sequence number and fires the
matching :meth:`SQLStore.when_durable` Deferreds and the durable listeners:
nothing is reported durable before its COMMIT has returned.

A message removed from all its queues while its publish still waits for the
writer (a consumer acknowledged it within the same batch cycle) is never
written, as RabbitMQ's message store does. Its sequence number becomes
durable with the batch it would have been part of, or as soon as the writer
takes that batch when nothing before it in the batch is to be written (the
batches before are committed by then): under a steady load, where the
writer takes a batch the moment the previous one commits, the messages
consumed meanwhile are confirmed without waiting for a commit of their own.
Removals are gathered and applied at the end of each batch's transaction.

Transactions are bounded whatever the backlog: the writer takes at most
about :data:`BATCH_BYTES` of bodies in one transaction (a larger backlog
becomes several; a stream's chunk counts as the most it may hold) and at
most :data:`REMOVALS_PER_BATCH` removals, so that the deletes which free a
full disk never need more room than the disk has left.

Failed writes: a batch whose write fails is rolled back. Its publishes are
dropped (:meth:`SQLStore.failed_between` names them, and confirms become
nacks); its other operations (topology, removals, stream appends, spills)
are written with the next batch. The writer tries again every
:data:`RETRY_SECONDS` (with a small probe write when nothing is queued) and
tells :meth:`SQLStore.add_failure_listener`'s listeners when writes fail and
when they succeed again. A backend may settle a commit whose outcome it
could not see (its connection was lost during it) before that: it then
writes the batch again, or reports it durable, as the database says
(:meth:`SQLStore._in_doubt`). A store whose guard refuses a transaction is
fenced (:class:`~txamqp09.store.interface.Fenced`) and writes nothing more;
one that meets an error that is not the database's closes for good.

A backend (:class:`~txamqp09.store.sqlite.SQLiteStore`,
:class:`~txamqp09.store.postgresql.PostgreSQLStore`) says how to connect,
what a write error is, and what upkeep its database needs between batches.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections import deque
from heapq import heappop, heappush
from time import monotonic, time
from typing import Any, Callable, ClassVar, Optional, Sequence, Union

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorFromThreads
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from txamqp09.store import reading, writes
from txamqp09.store.chunks import LogChunk
from txamqp09.store.distribution import BATCH_MESSAGES_BUCKETS, COMMIT_SECONDS_BUCKETS, Distribution
from txamqp09.store.following import Follower
from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    Fenced,
    IMessageStore,
    Recovered,
    StoredMessage,
)
from txamqp09.store.mirror import Mirror
from txamqp09.store.numbers import QueueNumbers
from txamqp09.store.sql import Database, Migration, prepare
from txamqp09.store.work import Append, Batch, Operation, Publish, Removals, Spill, Work

__all__ = ["BATCH_BYTES", "REMOVALS_PER_BATCH", "RETRY_SECONDS", "SQLStore"]

_log = Logger()
#: Bytes of bodies (messages, log records, spills) the writer takes into one
#: transaction at most (a single larger body makes a transaction of its own).
BATCH_BYTES = 4 * 1024 * 1024
#: Removals (a message off a queue) the writer applies in one transaction at most.
REMOVALS_PER_BATCH = 1024
#: Seconds between two attempts to write after a write failed.
RETRY_SECONDS = 0.5

#: What the writer does when it has been idle for :meth:`SQLStore._idle_seconds`.
_TIDY = "tidy"
#: What the writer does, after a failed write, when nothing is queued: a small write.
_PROBE = "probe"


@implementer(IMessageStore)
class SQLStore(ABC):
    """An :class:`~txamqp09.store.interface.IMessageStore` on an SQL
    database, written by one thread (see the module's docstring).

    :param reactor: where durability is reported (``callFromThread``).
    :param location: where the store keeps its data, as thread names and
        log lines name it.
    :ivar location: the same.
    """

    #: The exceptions of a write that failed (a batch, or upkeep).
    write_errors: ClassVar[tuple[type[Exception], ...]]
    #: What rewrites a database of an earlier layout (see
    #: :func:`~txamqp09.store.sql.prepare`).
    migrations: ClassVar[Sequence[Migration]] = ()

    def __init__(self, reactor: IReactorFromThreads, location: str) -> None:
        self._reactor = reactor
        self.location = location
        #: Guards the queued work (entered directly: cheaper than entering
        #: the condition over it, which wakes the writer).
        self._mutex = threading.RLock()
        self._lock = threading.Condition(self._mutex)
        self._pending: list[Work] = []
        #: Bytes of bodies in :attr:`_pending`.
        self._pending_bytes = 0
        #: Removals not taken yet: (sequence, queue, message ids) for each
        #: call of :meth:`remove`, in order; a call's ids are settled with its sequence.
        self._removals: deque[tuple[int, tuple[str, str], list[int]]] = deque()
        #: Operations of a failed batch wait in :attr:`_pending` to be written again.
        self._carried = False
        #: Publishes not taken by the writer yet, by message id.
        self._unwritten: dict[int, Publish] = {}
        #: The queues' numbers, for the writer thread.
        self._numbers = QueueNumbers()
        self._sequence = 0
        #: The last sequence number the writer has taken.
        self._taken = 0
        self._durable = 0
        self._waiting: list[tuple[int, int, Deferred[None]]] = []
        self._listeners: list[Callable[[int], None]] = []
        self._closing = False
        self._failure: Optional[Failure] = None
        self._failure_listeners: list[Callable[[Optional[str]], None]] = []
        #: Runs of consecutive sequence numbers of publishes whose write
        #: failed, as (first, last) in two sorted lists.
        self._failed_firsts: list[int] = []
        self._failed_lasts: list[int] = []
        #: Whether the writer has told the listeners of a failure not
        #: followed by a success (writer thread).
        self._failing = False
        #: The writer's connection, once open.
        self._db: Optional[Database] = None
        self._thread: Optional[threading.Thread] = None
        self._closed: Deferred[None] = Deferred()
        #: Batches committed, for benchmarks.
        self.commits = 0
        #: Seconds each committed batch took to write and commit.
        self.commit_seconds = Distribution(COMMIT_SECONDS_BUCKETS)
        #: Messages (publishes and stream appends) each committed batch wrote.
        self.batch_messages = Distribution(BATCH_MESSAGES_BUCKETS)
        #: Operations covered by the batches taken so far, for benchmarks.
        self.operations = 0
        #: Publishes never written because every queue removed the message first.
        self.cancelled = 0
        #: Keeps a mirror of the database current until the store opens
        #: (a backend whose database another process writes meanwhile).
        self.follower: Optional[Follower] = None

    # -- what a backend provides ---------------------------------------------------

    @abstractmethod
    def _connect(self) -> Database:
        """The writer's connection (opening the store)."""

    @abstractmethod
    def _reader(self) -> Database:
        """The reactor thread's connection for reads, which sees every
        committed batch (opened when first needed)."""

    @abstractmethod
    def _close_reader(self) -> None:
        """Close the reader's connection, if open (reactor thread)."""

    def _idle_seconds(self) -> Optional[float]:
        """Seconds without work after which the writer tidies the database
        (:meth:`_tidy`); None: never."""
        return None

    def _tidy(self, db: Database) -> None:
        """Upkeep when the writer has nothing to do."""

    def _after_batch(self, db: Database, batch: Batch) -> None:
        """Upkeep after a committed batch, once it is reported durable."""

    def _apply(self, db: Database, batch: Batch) -> Optional[int]:
        """Write *batch* in one transaction: see :func:`~txamqp09.store.writes.write_batch`."""
        return writes.write_batch(db, batch, self._numbers)

    def _in_doubt(self, error: BaseException) -> Optional[bool]:
        """The write of a batch raised *error*: whether its transaction
        committed all the same (True), surely did not and the batch may be
        written again now (False), or None: it failed as writes fail (the
        backend's connection is as it was)."""
        return None

    def _ready(self, db: Database) -> None:
        """The database is recovered; the writer thread starts next."""

    def _started(self, db: Database) -> None:
        """The writer thread starts, with *db*."""

    def _finish(self, db: Database) -> None:
        """The writer stops, everything written: leave the database tidy."""

    def _release(self, db: Database) -> None:
        """The writer thread ends: close *db* and what the store holds."""
        db.close()

    # -- start-up ------------------------------------------------------------------

    def open(self, body_budget: Optional[int] = None) -> Recovered:
        """Connect, create or migrate the layout, recover (from the mirror
        :attr:`follower` kept, if any), then start the writer thread."""
        db = self._connect()
        try:
            prepare(db, self.location, self.migrations)
            recovered = self._recover(db, body_budget)
            self._ready(db)
        except BaseException:
            self._release(db)
            raise
        self._db = db
        self._thread = threading.Thread(target=self._write_loop, name=f"store {self.location}", daemon=True)
        self._thread.start()
        return recovered

    def _recover(self, db: Database, body_budget: Optional[int]) -> Recovered:
        """What the database holds, then what a previous run left behind deleted."""
        mirror = self._stop_following()
        with db.snapshot():
            recovered, leftovers, unused = reading.recover(db, body_budget, self._numbers, mirror)
        try:
            reading.forget_leftovers(db, leftovers, unused)
        except self.write_errors:
            pass  # a full disk: they are harmless, and forgotten at the next start
        return recovered

    def _stop_following(self) -> Optional[Mirror]:
        """Stop following; the mirror kept, if it can be used."""
        follower, self.follower = self.follower, None
        return follower.stop() if follower is not None else None

    # -- operations (reactor thread) -----------------------------------------------

    def _queue(self, function: Callable[..., None], *args: Any) -> int:
        return self._enqueue(Operation(function, args))

    def _enqueue(self, work: Union[Spill, Operation, Append]) -> int:
        """Queue *work* for the writer; its sequence number."""
        with self._mutex:
            self._check_open()
            self._pending.append(work)
            self._pending_bytes += work.size
            work.sequence = sequence = self._next_sequence()
            return sequence

    def _check_open(self) -> None:
        if self._closing:
            raise RuntimeError(f"store {self.location} is closed")

    def _next_sequence(self) -> int:
        """Number a new operation and wake the writer if it waits (lock held)."""
        if self._sequence == self._taken:
            self._lock.notify()
        self._sequence += 1
        return self._sequence

    def add_exchange(self, exchange: DurableExchange) -> int:
        return self._queue(writes.add_exchange, exchange)

    def remove_exchange(self, vhost: str, name: str) -> int:
        return self._queue(writes.remove_exchange, vhost, name)

    def add_queue(self, queue: DurableQueue) -> int:
        return self._queue(writes.add_queue, queue)

    def remove_queue(self, vhost: str, name: str) -> int:
        return self._queue(writes.remove_queue, self._numbers, vhost, name)

    def add_binding(self, binding: DurableBinding) -> int:
        return self._queue(writes.add_binding, binding)

    def remove_binding(self, binding: DurableBinding) -> int:
        return self._queue(writes.remove_binding, binding)

    def publish(self, message: StoredMessage, queues: Sequence[tuple[str, str]]) -> int:
        publish = Publish(message, list(queues))
        with self._mutex:
            self._check_open()
            self._pending.append(publish)
            self._pending_bytes += message.size
            self._unwritten[message.message_id] = publish
            publish.sequence = sequence = self._next_sequence()
            return sequence

    def remove(self, vhost: str, queue: str, message_ids: Sequence[int]) -> int:
        key = (vhost, queue)
        ids = []
        with self._mutex:
            self._check_open()
            unwritten = self._unwritten
            for message_id in message_ids:
                publish = unwritten.get(message_id)
                if publish is not None and key in publish.queues:
                    publish.queues.remove(key)
                    if not publish.queues:
                        del unwritten[message_id]
                        self.cancelled += 1
                else:
                    ids.append(message_id)
            sequence = self._next_sequence()
            if ids:
                self._removals.append((sequence, key, ids))
            return sequence

    def spill(self, message_id: int, body: bytes) -> int:
        return self._enqueue(Spill(message_id, body))

    def unspill(self, message_ids: Sequence[int]) -> int:
        return self._queue(writes.unspill, list(message_ids))

    def read(self, message_ids: Sequence[int]) -> dict[int, bytes]:
        return reading.read_bodies(self._reader(), message_ids)

    def append_log(self, vhost: str, queue: str, chunk: LogChunk) -> int:
        return self._enqueue(Append(vhost, queue, chunk))

    def read_log(self, vhost: str, queue: str, start: int) -> Optional[LogChunk]:
        return reading.read_log(self._reader(), vhost, queue, start)

    def log_offset_at(self, vhost: str, queue: str, timestamp: int, start: int) -> Optional[int]:
        return reading.log_offset_at(self._reader(), vhost, queue, timestamp, start)

    def truncate_log(self, vhost: str, queue: str, first: int) -> int:
        return self._queue(writes.truncate_log, vhost, queue, first)

    def put_setting(self, kind: str, key: str, value: Any) -> int:
        return self._queue(writes.put_setting, kind, key, json.dumps(value))

    def remove_setting(self, kind: str, key: str) -> int:
        return self._queue(writes.remove_setting, kind, key)

    def add_durable_listener(self, listener: Callable[[int], None]) -> None:
        self._listeners.append(listener)

    @property
    def durable_sequence(self) -> int:
        return self._durable

    def when_durable(self, sequence: int) -> Deferred[None]:
        if self._failure is not None:
            return _failed(self._failure)
        if sequence <= self._durable:
            return succeed(None)
        waiter: Deferred[None] = Deferred()
        heappush(self._waiting, (sequence, id(waiter), waiter))
        return waiter

    def failed_between(self, after: int, upto: int) -> bool:
        index = bisect_right(self._failed_lasts, after)
        return index < len(self._failed_firsts) and self._failed_firsts[index] <= upto

    def add_failure_listener(self, listener: Callable[[Optional[str]], None]) -> None:
        self._failure_listeners.append(listener)

    @property
    def last_sequence(self) -> int:
        """The sequence number of the latest operation."""
        return self._sequence

    @property
    def fenced(self) -> bool:
        """Whether a guard refused a write: the store writes nothing more."""
        return self._failure is not None and self._failure.check(Fenced) is not None

    def close(self) -> Deferred[None]:
        self._stop_following()
        self._close_reader()
        with self._mutex:
            if not self._closing:
                self._closing = True
                self._lock.notify()
            if self._thread is None and not self._closed.called:
                self._closed.callback(None)  # never opened
        return self._closed

    # -- the writer thread -----------------------------------------------------------

    def _next_batch(self, idle: bool, hold_until: float) -> Union[Batch, str, None]:
        """What the writer does next: a batch of the work queued so far, or
        :data:`_TIDY` after :meth:`_idle_seconds` without work (when *idle*
        asks for it), or :data:`_PROBE` when a write failed and nothing is
        queued; None once the store is closing and nothing is left.

        After a failed write nothing is taken before *hold_until* (a
        :func:`time.monotonic` time) unless the store is closing.
        """
        idle_seconds = self._idle_seconds() if idle else None
        with self._mutex:
            idle_since = monotonic()
            while True:
                busy = self._sequence != self._taken or self._carried
                now = monotonic()
                if self._closing:
                    return self._take() if busy else None
                if now < hold_until:
                    self._lock.wait(hold_until - now)
                elif busy:
                    return self._take()
                elif hold_until:
                    return _PROBE
                elif idle_seconds is None:
                    self._lock.wait()
                elif now - idle_since >= idle_seconds:
                    return _TIDY
                else:
                    self._lock.wait(idle_since + idle_seconds - now)

    def _take(self) -> Batch:
        """The queued work, up to about :data:`BATCH_BYTES` of bodies and
        :data:`REMOVALS_PER_BATCH` removals (lock held)."""
        pending, carried, self._carried = self._pending, self._carried, False
        first_removal = self._removals[0][0] if self._removals else None
        removals, last = self._take_removals()
        if self._pending_bytes <= BATCH_BYTES:
            batch = Batch(pending, removals, last)
            self._pending, self._pending_bytes, self._unwritten = [], 0, {}
        else:
            taken = 0
            cut = 0
            while cut < len(pending) and (not cut or taken + pending[cut].size <= BATCH_BYTES):
                taken += pending[cut].size
                cut += 1
            operations, self._pending = pending[:cut], pending[cut:]
            self._pending_bytes -= taken
            for operation in operations:
                if isinstance(operation, Publish):
                    self._unwritten.pop(operation.message.message_id, None)
            if self._pending:
                last = min(last, self._pending[0].sequence - 1)
            batch = Batch(operations, removals, last)
        if not carried:
            batch.settled = _needing_no_write(batch, first_removal)
        self._taken = batch.last_sequence
        return batch

    def _take_removals(self) -> tuple[list[Removals], int]:
        """Up to :data:`REMOVALS_PER_BATCH` queued removals, those of
        consecutive calls on the same queue together, and the last sequence
        number they settle with what precedes them (lock held)."""
        queued = self._removals
        taken: list[Removals] = []
        room = REMOVALS_PER_BATCH
        while queued and room:
            sequence, key, ids = queued[0]
            if len(ids) > room:
                queued[0] = (sequence, key, ids[room:])
                ids = ids[:room]
            else:
                queued.popleft()
            room -= len(ids)
            if taken and taken[-1][0] == key:
                taken[-1][1].extend(ids)
            else:
                taken.append((key, ids))
        return taken, queued[0][0] - 1 if queued else self._sequence

    def _write_loop(self) -> None:
        hold_until = 0.0
        idle = False
        fenced = False
        upkeep_errors: tuple[type[Exception], ...] = (OSError, *self.write_errors)
        reported = 0
        try:
            self._started(self._writer())
            while (work := self._next_batch(idle, hold_until)) is not None:
                if isinstance(work, Batch) and work.settled > reported:
                    reported = work.settled
                    self._reactor.callFromThread(self._made_durable, reported)
                try:
                    self._do(work)
                except Fenced as error:
                    self._fence(work, error)
                    fenced = True
                    break
                except self.write_errors as error:
                    self._write_failed(work, error)
                    if self._closing:
                        break
                    hold_until = monotonic() + RETRY_SECONDS
                    continue
                if hold_until or self._failing:
                    hold_until = 0.0
                    self._recovered()
                idle = work is not _TIDY
                if isinstance(work, Batch):
                    self.operations = reported = work.last_sequence
                    self._reactor.callFromThread(self._made_durable, work.last_sequence)
                    try:
                        self._after_batch(self._writer(), work)
                    except upkeep_errors as error:
                        self._write_failed(_TIDY, error)
                        hold_until = monotonic() + RETRY_SECONDS
            if not fenced:
                self._finish(self._writer())
        except Exception:
            failure = Failure()
            self._reactor.callFromThread(self._broken, failure)
        finally:
            self._release(self._writer())
            self._reactor.callFromThread(self._closed.callback, None)

    def _writer(self) -> Database:
        """The writer's connection (the backend may have replaced it)."""
        assert self._db is not None
        return self._db

    def _do(self, work: Union[Batch, str]) -> None:
        """Apply *work*: upkeep, a probe write or a batch (writer thread)."""
        if work is _TIDY:
            self._tidy(self._writer())
        elif work is _PROBE:
            writes.probe(self._writer(), time())
        else:
            assert isinstance(work, Batch)
            self._commit(work)

    def _commit(self, batch: Batch) -> None:
        """Write *batch*; count and time its commit if it wrote anything
        (writer thread). A commit in doubt is settled by :meth:`_in_doubt`:
        the batch is written again, or counts as written."""
        started = monotonic()
        numbers = self._numbers
        while True:
            try:
                written = self._apply(self._writer(), batch)
            except BaseException as error:
                committed = self._in_doubt(error)
                if not committed:
                    numbers.rolled_back()
                    if committed is None:
                        raise
                    continue
                written = batch.messages
            numbers.committed()
            break
        if written is not None:
            self.commits += 1
            self.commit_seconds.observe(monotonic() - started)
            self.batch_messages.observe(written)

    def _report(self, error: str) -> None:
        """Tell the listeners that writing fails (writer thread)."""
        self._failing = True
        self._reactor.callFromThread(self._tell, error)

    def _recovered(self) -> None:
        """Tell the listeners that writing works again (writer thread)."""
        self._failing = False
        self._reactor.callFromThread(self._tell, None)

    def _write_failed(self, work: Union[Batch, str], error: Exception) -> None:
        """A write (of a batch, or the writer's own upkeep) failed: roll back;
        drop a batch's publishes and queue its other operations again (writer thread)."""
        db = self._writer()
        db.rollback()
        described = db.describe(error)
        if not isinstance(work, Batch):
            self._report(described)
            return
        failed = _failed_publishes(work)
        kept = [operation for operation in work.operations if not isinstance(operation, Publish)]
        with self._mutex:
            self._pending[:0] = kept
            self._pending_bytes += sum(operation.size for operation in kept)
            self._removals.extendleft((work.last_sequence, key, ids) for key, ids in reversed(work.removals))
            carried = self._carried = bool(kept or work.removals)
        settled = 0 if carried else work.last_sequence
        self._failing = True
        self._reactor.callFromThread(self._dropped, failed, settled, described)

    def _fence(self, work: Union[Batch, str], error: Fenced) -> None:
        """A guard refused *work*'s transaction: roll back, write nothing
        more, and fail everything waiting and to come (writer thread)."""
        self._writer().rollback()
        failed = _failed_publishes(work) if isinstance(work, Batch) else []
        with self._mutex:
            self._closing = True
        self._reactor.callFromThread(self._fenced, failed, error)

    def _fenced(self, failed: list[list[int]], error: Fenced) -> None:
        """The store was fenced (reactor thread): say so, and fail what waits."""
        _log.warn(
            "message store {location} is fenced ({error}): it takes no more writes", location=self.location, error=error
        )
        self._record_failed(failed)
        self._fail_all(Failure(error))
        self._tell(f"Fenced: {error}")

    def _dropped(self, failed: list[list[int]], settled: int, error: str) -> None:
        """Publishes were dropped (runs of sequence numbers), the operations up
        to *settled* (0: none) are settled, and listeners hear of *error*."""
        self._record_failed(failed)
        self._tell(error)
        if settled:
            self._made_durable(settled)

    def _record_failed(self, failed: list[list[int]]) -> None:
        for first, last in failed:
            self._failed_firsts.append(first)
            self._failed_lasts.append(last)

    def _tell(self, error: Optional[str]) -> None:
        """Tell the failure listeners that a write failed (*error*), or works again (None)."""
        for listener in self._failure_listeners:
            listener(error)

    def _made_durable(self, sequence: int) -> None:
        if sequence <= self._durable:
            return
        self._durable = sequence
        for listener in self._listeners:
            listener(sequence)
        waiting = self._waiting
        while waiting and waiting[0][0] <= sequence:
            heappop(waiting)[2].callback(None)

    def _broken(self, failure: Failure) -> None:
        """The writer stopped on an unexpected error: say so once, and fail
        every write waiting and to come with it."""
        _log.failure("message store {location} broke: it takes no more writes", failure, location=self.location)
        self._fail_all(failure)

    def _fail_all(self, failure: Failure) -> None:
        """Fail every write waiting and to come with *failure* (reactor thread)."""
        self._failure = failure
        with self._mutex:
            self._closing = True
        while self._waiting:
            heappop(self._waiting)[2].errback(failure)


def _needing_no_write(batch: Batch, first_removal: Optional[int]) -> int:
    """The last sequence number up to which *batch* writes nothing: before
    its first operation to write (a publish still on a queue, or any other
    work) and before its first removal (whose sequence number is
    *first_removal*), within the batch."""
    end = batch.last_sequence if first_removal is None else min(batch.last_sequence, first_removal - 1)
    for operation in batch.operations:
        if type(operation) is not Publish or operation.queues:
            return min(end, operation.sequence - 1)
    return end


def _failed_publishes(batch: Batch) -> list[list[int]]:
    """The runs of consecutive sequence numbers of *batch*'s publishes that
    were to be written (still on a queue), as [first, last]."""
    failed: list[list[int]] = []
    for operation in batch.operations:
        if isinstance(operation, Publish) and operation.queues:
            if failed and failed[-1][1] == operation.sequence - 1:
                failed[-1][1] = operation.sequence
            else:
                failed.append([operation.sequence, operation.sequence])
    return failed


def _failed(failure: Failure) -> Deferred[None]:
    waiter: Deferred[None] = Deferred()
    waiter.errback(failure)
    return waiter
