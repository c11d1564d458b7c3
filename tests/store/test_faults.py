"""The SQLite store when writes fail (a full disk, I/O errors), and the bounds on its files."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from pathlib import Path
from typing import Any, Optional, cast

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.interfaces import IReactorFromThreads
from twisted.logger import formatEvent, globalLogPublisher
from twisted.trial.unittest import TestCase

from tests.store.test_stores import assert_version_1_recovered, chunk_of, message, version_1_database
from txamqp09.store import sqlite, writer
from txamqp09.store.interface import DurableBinding, DurableQueue
from txamqp09.store.sqlite import SQLiteStore
from txamqp09.testing.faults import (
    DISK_FULL,
    IO_ERROR,
    Faults,
    MountFailed,
    faulty_connection,
    faulty_store,
    mount_small_file_system,
    unmount,
)
from txamqp09.testing.waiting import eventually

reactor = cast(IReactorFromThreads, global_reactor)
Q = ("/", "q")
#: Bytes left free for a migration: room for the write-ahead log's index
#: and the new layout's empty tables, not for the copy of
#: version_1_database's 64 KiB body.
FREE_FOR_MIGRATION = 128 * 1024


class Reports:
    """What a store tells its failure listeners, waited for in order."""

    def __init__(self, store: SQLiteStore) -> None:
        self.heard: list[Optional[str]] = []
        self._waiting: list[tuple[int, Deferred[None]]] = []
        store.add_failure_listener(self._heard)

    def _heard(self, error: Optional[str]) -> None:
        self.heard.append(error)
        ready = [waiter for count, waiter in self._waiting if len(self.heard) >= count]
        self._waiting = [(count, waiter) for count, waiter in self._waiting if len(self.heard) < count]
        for waiter in ready:
            waiter.callback(None)

    def until(self, count: int) -> Deferred[None]:
        """Fires once *count* reports have arrived."""
        waiter: Deferred[None] = Deferred()
        if len(self.heard) >= count:
            waiter.callback(None)
        else:
            self._waiting.append((count, waiter))
        return waiter


def disk_use(store: SQLiteStore) -> int:
    """Bytes of the database and its log."""
    return store.path.stat().st_size + store.log_size()


class WriteFailureTests(TestCase):
    """Writes that fail with ENOSPC or EIO at chosen statements."""

    def setUp(self) -> None:
        self.patch(writer, "RETRY_SECONDS", 0.02)

    def make(self) -> tuple[SQLiteStore, Faults, Reports]:
        store, faults = faulty_store(Path(self.mktemp()) / "store.db", reactor)
        self.addCleanup(store.close)
        store.open()
        return store, faults, Reports(store)

    @inlineCallbacks
    def recovered(self, store: SQLiteStore) -> Any:
        """Close *store* once everything is settled, and open it again."""
        yield store.when_durable(store.last_sequence)
        yield store.close()
        fresh = SQLiteStore(store.path, reactor)
        self.addCleanup(fresh.close)
        return fresh.open()

    @inlineCallbacks
    def test_a_full_disk_drops_the_batch_publishes_and_writing_resumes(self) -> Any:
        """The publishes of a batch that failed are dropped; writing resumes,
        and the number Q got in that batch (its first message's) is given
        and written again with its next message."""
        store, faults, reports = self.make()
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        faults.arm("INSERT INTO messages", DISK_FULL)
        failed = [store.publish(message(n), [Q]) for n in (1, 2)]
        yield store.when_durable(failed[-1])
        self.assertTrue(store.failed_between(failed[0] - 1, failed[0]))
        self.assertTrue(store.failed_between(failed[1] - 1, failed[1]))
        yield reports.until(1)
        self.assertIn(DISK_FULL, reports.heard[0] or "")
        written = store.publish(message(3), [Q])
        yield store.when_durable(written)
        yield reports.until(2)
        self.assertIsNone(reports.heard[1])
        self.assertFalse(store.failed_between(failed[-1], written))
        recovered = yield self.recovered(store)
        self.assertEqual([m.message_id for m in recovered.messages[Q]], [3])

    @inlineCallbacks
    def test_spilled_bodies_of_a_failed_batch_are_written_with_the_next(self) -> Any:
        store, faults, reports = self.make()
        faults.arm("INSERT OR REPLACE INTO spilled", DISK_FULL)
        with store._lock:  # the writer takes nothing until all are queued
            spilled = [store.spill(n, b"spilled %d" % n) for n in range(1, 301)]
        yield store.when_durable(spilled[-1])
        self.assertEqual(faults.raised, [("INSERT OR REPLACE INTO SPILLED", DISK_FULL)])
        self.assertFalse(store.failed_between(0, spilled[-1]), "spills are not publishes: none is dropped")
        self.assertEqual(store.read(list(range(1, 301))), {n: b"spilled %d" % n for n in range(1, 301)})
        yield reports.until(2)
        self.assertIsNone(reports.heard[1])

    @inlineCallbacks
    def test_deleting_a_queue_scans_the_messages_only_while_rows_name_it(self) -> Any:
        """The writer counts the rows naming each queue; an acknowledgement
        whose batch failed and was written again counts once."""
        store, faults, reports = self.make()
        store.publish(message(1), [Q])
        store.publish(message(2), [Q])
        yield store.when_durable(store.last_sequence)
        faults.arm("COMMIT", IO_ERROR)
        yield store.when_durable(store.remove(*Q, [1]))
        self.assertEqual(len(faults.raised), 1)
        yield store.when_durable(store.remove_queue(*Q))
        self.assertEqual(store._reading().execute("SELECT id FROM messages").fetchall(), [])
        yield store.when_durable(store.publish(message(3), [("/", "q2")]))
        yield store.when_durable(store.remove("/", "q2", [3]))
        faults.arm("DELETE FROM messages WHERE queue = ?", DISK_FULL)
        yield store.when_durable(store.remove_queue("/", "q2"))
        self.assertEqual(len(faults.raised), 1, "a queue no row names is deleted without a scan")

    @inlineCallbacks
    def test_an_io_error_at_commit_keeps_the_other_operations_for_the_next_batch(self) -> Any:
        store, faults, reports = self.make()
        store.add_queue(DurableQueue(*Q))
        yield store.when_durable(store.publish(message(1), [Q]))
        faults.arm("COMMIT", IO_ERROR, times=2)
        declared = store.add_queue(DurableQueue("/", "q2"))
        dropped = store.publish(message(2), [Q, ("/", "q2")])
        acked = store.remove(*Q, [1])
        bound = store.add_binding(DurableBinding("/", "amq.direct", "q2", "queue", "k"))
        # The operations other than the publish are written again: what
        # waits for them waits until a write succeeds.
        waiter = store.when_durable(bound)
        yield reports.until(2)
        self.assertEqual(reports.heard, [f"OperationalError: {IO_ERROR}"] * 2)
        yield waiter
        self.assertTrue(store.failed_between(declared, dropped))
        self.assertFalse(store.failed_between(dropped, bound))
        self.assertFalse(store.failed_between(0, declared))
        self.assertLess(acked, bound)
        yield reports.until(3)
        self.assertIsNone(reports.heard[2])
        recovered = yield self.recovered(store)
        self.assertEqual(sorted(q.name for q in recovered.queues), ["q", "q2"])
        self.assertEqual(recovered.messages[Q], [])
        self.assertEqual(recovered.messages[("/", "q2")], [])
        self.assertEqual([b.routing_key for b in recovered.bindings], ["k"])

    @inlineCallbacks
    def test_a_failed_batch_of_appends_alone_is_written_again(self) -> Any:
        # Written as one statement outside a transaction: nothing to roll
        # back, and the chunk is written whole with the next attempt.
        store, faults, reports = self.make()
        yield store.when_durable(store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"})))
        faults.arm("INSERT OR REPLACE INTO stream_chunks", DISK_FULL)
        appended = store.append_log("/", "s", chunk_of(0, 50, 0, 64))
        yield store.when_durable(appended)
        self.assertFalse(store.failed_between(appended - 1, appended))
        yield reports.until(2)
        self.assertIn(DISK_FULL, reports.heard[0] or "")
        self.assertIsNone(reports.heard[1])
        self.assertEqual(faults.raised, [("INSERT OR REPLACE INTO STREAM_CHUNKS", DISK_FULL)])
        recovered = yield self.recovered(store)
        self.assertEqual(recovered.logs[("/", "s")][0].last, 49)

    @inlineCallbacks
    def test_with_nothing_queued_a_probe_write_finds_when_the_disk_works_again(self) -> Any:
        store, faults, reports = self.make()
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        faults.arm("INSERT INTO messages", DISK_FULL)
        faults.arm("INSERT OR REPLACE INTO write_probe", DISK_FULL, times=2)
        yield store.when_durable(store.publish(message(1), [Q]))
        yield reports.until(4)
        self.assertEqual([error is None for error in reports.heard], [False, False, False, True])
        self.assertEqual([prefix for prefix, _ in faults.raised][1:], ["INSERT OR REPLACE INTO WRITE_PROBE"] * 2)

    @inlineCallbacks
    def test_a_failed_checkpoint_is_reported_and_retried(self) -> Any:
        self.patch(sqlite, "CHECKPOINT_BYTES", 1)
        store, faults, reports = self.make()
        faults.arm("PRAGMA WAL_CHECKPOINT", DISK_FULL)
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        yield reports.until(2)
        self.assertIn(DISK_FULL, reports.heard[0] or "")
        self.assertIsNone(reports.heard[1])
        yield store.when_durable(store.publish(message(1), [Q]))
        yield eventually(lambda: store.log_size() == 0, global_reactor)


class FullFileSystemTests(TestCase):
    """A real full disk: a tmpfs of 2 MiB."""

    def test_a_migration_on_a_full_disk_leaves_version_1_for_the_next_start(self) -> None:
        path = version_1_database(self.mount / "data")
        stat = os.statvfs(self.mount)
        filler = self.mount / "filler"
        filler.write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - FREE_FOR_MIGRATION))
        error = self.assertRaises(sqlite3.OperationalError, SQLiteStore(path, reactor).open)
        self.assertIn(DISK_FULL, str(error))
        with sqlite3.connect(path) as db:
            self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 1)
            self.assertEqual(db.execute("SELECT count(*) FROM queue_messages").fetchone()[0], 5)
        filler.unlink()
        store = SQLiteStore(path, reactor)
        self.addCleanup(store.close)
        assert_version_1_recovered(self, store, store.open(), True)

    def setUp(self) -> None:
        self.patch(writer, "RETRY_SECONDS", 0.02)
        self.mount = Path(self.mktemp()).absolute()
        try:
            mount_small_file_system(self.mount, 2 * 1024 * 1024)
        except MountFailed as error:
            raise self.skipTest(f"no small file system to fill: {error}") from None
        self.addCleanup(unmount, self.mount)

    @inlineCallbacks
    def test_confirmed_messages_survive_a_full_file_system(self) -> Any:
        filler = self.mount / "filler"
        filler.write_bytes(b"\0" * 512 * 1024)
        store = SQLiteStore(self.mount / "store.db", reactor)
        store.open()
        reports = Reports(store)
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        body = os.urandom(16 * 1024)
        written = []
        number = 0
        while not reports.heard:
            number += 1
            sequence = store.publish(message(number, body), [Q])
            yield store.when_durable(sequence)
            if not store.failed_between(sequence - 1, sequence):
                written.append(number)
        self.assertIn(DISK_FULL, reports.heard[0] or "")
        self.assertGreater(len(written), 10)
        filler.unlink()
        number += 1
        sequence = store.publish(message(number, body), [Q])
        yield store.when_durable(sequence)
        self.assertFalse(store.failed_between(sequence - 1, sequence))
        written.append(number)
        yield store.close()
        reopened = SQLiteStore(store.path, reactor)
        recovered = reopened.open()
        yield reopened.close()
        self.assertEqual([m.message_id for m in recovered.messages[Q]], written)
        self.assertTrue(all(m.body == body for m in recovered.messages[Q]))


class LogBoundTests(TestCase):
    """The write-ahead log stays small whatever the batches, and disk use follows the data."""

    def make(self, path: Optional[Path] = None) -> SQLiteStore:
        store = SQLiteStore(path or Path(self.mktemp()) / "store.db", reactor)
        self.addCleanup(store.close)
        return store

    @inlineCallbacks
    def test_one_message_per_commit_keeps_the_log_under_its_limit(self) -> Any:
        store = self.make()
        store.open()
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        body = os.urandom(1024)
        largest = 0
        for number in range(1, 801):
            yield store.when_durable(store.publish(message(number, body), [Q]))
            store.remove(*Q, [number])
            largest = max(largest, store.log_size())
        self.assertGreater(store.commits, 790)
        self.assertLess(largest, 2 * sqlite.CHECKPOINT_BYTES)

    @inlineCallbacks
    def test_a_large_backlog_is_written_in_bounded_transactions(self) -> Any:
        self.patch(writer, "BATCH_BYTES", 1024 * 1024)
        self.patch(sqlite, "CHECKPOINT_BYTES", 1024 * 1024)
        store = self.make()
        store.open()
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        sizes = []
        store.add_durable_listener(lambda _: sizes.append(store.log_size()))
        body = os.urandom(128 * 1024)
        last = 0
        for number in range(1, 161):
            last = store.publish(message(number, body), [Q])
        yield store.when_durable(last)
        self.assertGreaterEqual(store.commits, 20)
        # Twice the checkpoint size, the batch that went over it, and the
        # next batch being written while the size is read (each batch about
        # 1.13 MiB in the log: eight bodies of 33 pages, and their frames' headers).
        self.assertLess(max(sizes), 4.5 * 1024 * 1024)
        recovered = yield self.reopened(store)
        self.assertEqual(len(recovered.messages[Q]), 160)

    @inlineCallbacks
    def test_a_drain_acknowledged_at_once_is_removed_in_bounded_transactions(self) -> Any:
        # Deleting rewrites the pages in the log: one transaction for a whole
        # backlog would need as much room as the data, which a full disk lacks.
        self.patch(writer, "REMOVALS_PER_BATCH", 100)
        store = self.make()
        store.open()
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        body = os.urandom(1024)
        for number in range(1, 1001):
            store.publish(message(number, body), [Q])
        yield store.when_durable(store.last_sequence)
        before = store.commits
        yield store.when_durable(store.remove(*Q, list(range(1, 1001))))
        self.assertEqual(store.commits - before, 10)
        recovered = yield self.reopened(store)
        self.assertEqual(recovered.messages[Q], [])

    @inlineCallbacks
    def reopened(self, store: SQLiteStore) -> Any:
        yield store.close()
        return self.make(store.path).open()

    @inlineCallbacks
    def test_opening_the_store_empties_the_log_it_finds(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue(*Q))
        for number in range(1, 201):
            store.publish(message(number, os.urandom(1024)), [Q])
        yield store.when_durable(store.last_sequence)
        # A copy taken while the store is open is what a crash leaves.
        crashed = Path(self.mktemp())
        crashed.mkdir()
        shutil.copy(store.path, crashed / "store.db")
        shutil.copy(store.log_path, crashed / "store.db-wal")
        self.assertGreater((crashed / "store.db-wal").stat().st_size, 200 * 1024)
        copy = self.make(crashed / "store.db")
        recovered = copy.open()
        self.assertEqual(copy.log_size(), 0)
        self.assertEqual(len(recovered.messages[Q]), 200)

    @inlineCallbacks
    def test_free_pages_are_counted_after_batches_that_delete_alone(self) -> Any:
        self.patch(sqlite, "IDLE_SECONDS", 60.0)  # no tidying while the test looks
        statements: list[str] = []

        class Recording(sqlite3.Connection):
            def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
                statements.append(sql)
                return super().execute(sql, parameters)

        store = self.make()
        store.connection_class = Recording
        store.open()
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        body = os.urandom(4096)
        for number in range(1, 2001):
            yield store.when_durable(store.publish(message(number, body), [Q]))
            if number % 500 == 0:
                yield store.when_durable(store.append_log("/", "s", chunk_of(number, number + 100, 0, 64)))
        counted = statements.count("PRAGMA freelist_count")
        self.assertLessEqual(counted, 1)  # only after the queue's declaration
        store.remove(*Q, list(range(1, 2001)))
        yield store.when_durable(store.last_sequence)
        # The next batch is taken once the writer is done with the removals'.
        yield store.when_durable(store.publish(message(2001, b"after"), [Q]))
        self.assertGreater(statements.count("PRAGMA freelist_count"), counted)
        with sqlite3.connect(store.path) as db:
            pages, free = (db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "freelist_count"))
        self.assertGreater(pages, 0)
        self.assertLess(free * 4, pages)

    @inlineCallbacks
    def test_disk_use_follows_the_data_once_a_backlog_is_drained(self) -> Any:
        self.patch(sqlite, "IDLE_SECONDS", 0.1)
        store = self.make()
        store.open()
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        yield eventually(lambda: store.log_size() == 0, global_reactor)
        idle = disk_use(store)
        body = os.urandom(1024)
        for number in range(1, 10001):
            store.publish(message(number, body), [Q])
        yield store.when_durable(store.last_sequence)
        self.assertGreater(disk_use(store), 10 * 1024 * 1024)
        for first in range(1, 10001, 500):
            store.remove(*Q, list(range(first, first + 500)))
        yield store.when_durable(store.last_sequence)
        yield eventually(lambda: disk_use(store) <= 2 * idle, global_reactor)
        pages = sqlite3.connect(store.path).execute("PRAGMA page_count").fetchone()[0]
        self.assertLessEqual(pages * 4096, 2 * idle)


class Checkpoints(sqlite3.Connection):
    """A connection that records its checkpoints (in :attr:`made`) and
    makes none while :attr:`held` is clear."""

    made: list[str]
    held: threading.Event

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql.startswith("PRAGMA wal_checkpoint"):
            self.held.wait()
            self.made.append(sql)
        return super().execute(sql, parameters)


def free() -> threading.Event:
    """An event that is set: what holds nothing."""
    event = threading.Event()
    event.set()
    return event


def checkpoints(made: list[str], held: Optional[threading.Event] = None) -> type[sqlite3.Connection]:
    """A class of :class:`Checkpoints` recording into *made*, held by *held* (never by default)."""
    return type("Recorded", (Checkpoints,), {"made": made, "held": held or free()})


class BusyOnce(Checkpoints):
    """A connection that records its checkpoints (in :attr:`made`) and,
    once :attr:`armed` is set, answers the first TRUNCATE one as SQLite
    does while another connection checkpoints: busy, nothing copied."""

    armed: threading.Event

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        if sql == "PRAGMA wal_checkpoint(TRUNCATE)" and self.armed.is_set() and "busy" not in self.made:
            self.made.append("busy")
            return sqlite3.Connection.execute(self, "SELECT 1, -1, -1")
        return super().execute(sql, parameters)


class CheckpointerTests(TestCase):
    """The log is checkpointed beside the commits, and bounded when that falls behind or fails."""

    def setUp(self) -> None:
        self.patch(sqlite, "CHECKPOINT_BYTES", 256 * 1024)
        self.patch(sqlite, "IDLE_SECONDS", 60.0)  # no tidying while the tests look
        self.patch(writer, "RETRY_SECONDS", 0.02)

    def make(self) -> SQLiteStore:
        store = SQLiteStore(Path(self.mktemp()) / "store.db", reactor)
        self.addCleanup(store.close)
        return store

    @inlineCallbacks
    def appended(self, store: SQLiteStore, chunks: int, patient: bool = True) -> Any:
        """Append *chunks* chunks of 100 messages of 256 B to stream s, each
        after the one before is durable (and, when *patient*, after the
        checkpoint the writer asked for has ended: a checkpointer that the
        machine's load keeps off the processors is not what is tested); the
        largest size of the log's file seen after each."""
        yield store.when_durable(store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"})))
        checkpointer = store._checkpointer
        assert checkpointer is not None
        largest = 0
        for n in range(chunks):
            yield store.when_durable(store.append_log("/", "s", chunk_of(100 * n, 100 * (n + 1), 0, 256)))
            largest = max(largest, store.log_size())
            if patient and checkpointer.asked:
                # The writer may see the end first (it still had this batch's
                # upkeep to do) and catch up with it, clearing both flags.
                yield eventually(
                    lambda: checkpointer.ended or not checkpointer.asked, global_reactor, what="the checkpoint's end"
                )
        return largest

    @inlineCallbacks
    def test_checkpoints_are_made_beside_the_commits(self) -> Any:
        writer: list[str] = []
        checkpointer: list[str] = []
        store = self.make()
        store.connection_class = checkpoints(writer)
        store.checkpoint_connection_class = checkpoints(checkpointer)
        store.open()
        writer.clear()  # opening tidies the log
        largest = yield self.appended(store, 200)  # 5.6 MB of chunks
        self.assertGreaterEqual(checkpointer.count("PRAGMA wal_checkpoint(PASSIVE)"), 5)
        self.assertNotIn("PRAGMA wal_checkpoint(TRUNCATE)", writer)
        # The writer copies what came after the checkpointer's copy began.
        self.assertEqual(set(writer), {"PRAGMA wal_checkpoint(PASSIVE)"})
        # The log starts over at the beginning of its file: the file is not
        # truncated, and never grows to twice the checkpoint size.
        self.assertLess(largest, 2 * sqlite.CHECKPOINT_BYTES)
        self.assertGreater(store.log_size(), 0)
        recovered = yield self.reopened(store)
        self.assertEqual(recovered.logs[("/", "s")][0].last, 19999)

    @inlineCallbacks
    def test_a_checkpointer_that_falls_behind_leaves_the_log_bounded(self) -> Any:
        writer: list[str] = []
        checkpointer: list[str] = []
        held = threading.Event()
        store = self.make()
        self.addCleanup(held.set)  # before the store closes
        store.connection_class = checkpoints(writer)
        store.checkpoint_connection_class = checkpoints(checkpointer, held)
        store.open()
        writer.clear()
        largest = yield self.appended(store, 100, patient=False)
        self.assertEqual(checkpointer, [])
        self.assertIn("PRAGMA wal_checkpoint(TRUNCATE)", writer)
        # Twice the checkpoint size and the one chunk that went over it.
        self.assertLess(largest, 2 * sqlite.CHECKPOINT_BYTES + 64 * 1024)
        held.set()
        recovered = yield self.reopened(store)
        self.assertEqual(recovered.logs[("/", "s")][0].last, 9999)

    @inlineCallbacks
    def test_the_writer_bounds_the_log_after_a_copy_under_way(self) -> Any:
        # SQLite answers a checkpoint "busy" while another connection's is
        # under way: the writer at the bound waits for the checkpointer's copy
        # to end, then truncates the log.
        made: list[str] = []
        held, armed = threading.Event(), threading.Event()
        self.addCleanup(held.set)  # before the store closes
        store = self.make()
        store.connection_class = type("Busy", (BusyOnce,), {"made": made, "held": free(), "armed": armed})
        store.checkpoint_connection_class = checkpoints(made, held)
        store.open()
        yield store.when_durable(store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"})))
        armed.set()
        for n in range(100):
            durable = store.when_durable(store.append_log("/", "s", chunk_of(100 * n, 100 * (n + 1), 0, 256)))
            yield eventually(lambda: durable.called or "busy" in made, global_reactor, what="a commit or a busy answer")
            if "busy" in made:
                break
        self.assertIn("busy", made, "the log never reached twice the checkpoint size")
        held.set()  # the checkpointer's copy goes on, and ends
        busy = made.index("busy")
        yield eventually(lambda: len(made) >= busy + 3, global_reactor, what="the writer's truncation")
        self.assertEqual(made[busy:busy + 3], ["busy", "PRAGMA wal_checkpoint(PASSIVE)", "PRAGMA wal_checkpoint(TRUNCATE)"])
        yield durable
        recovered = yield self.reopened(store)
        self.assertEqual(recovered.logs[("/", "s")][0].last, 100 * (n + 1) - 1)

    @inlineCallbacks
    def test_a_failing_checkpointer_leaves_checkpoints_to_the_writer(self) -> Any:
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        faults = Faults()
        faults.arm("PRAGMA WAL_CHECKPOINT", DISK_FULL, times=1000)
        store = self.make()
        store.checkpoint_connection_class = faulty_connection(faults)
        store.open()
        reports = Reports(store)
        largest = yield self.appended(store, 100)
        self.assertGreater(len(faults.raised), 2)
        # The writer's own checkpoints after each failed one keep the log
        # starting over in its file, and no write failed.
        self.assertLess(largest, 2 * sqlite.CHECKPOINT_BYTES)
        self.assertEqual(reports.heard, [])
        faults.disarm()
        yield self.appended_more(store)

        def said() -> list[str]:
            return [formatEvent(event) for event in events if "beside the commits" in event.get("log_format", "")]

        # The checkpointer tells the reactor thread it works again; that call
        # may come after the durable notice appended_more waited for.
        yield eventually(lambda: len(said()) >= 2, global_reactor, what="the second log line")
        self.assertEqual(len(said()), 2, said())
        self.assertIn(DISK_FULL, said()[0])
        self.assertIn(str(store.path), said()[0])
        self.assertIn("work again", said()[1])

    @inlineCallbacks
    def appended_more(self, store: SQLiteStore) -> Any:
        """Append until the checkpointer has made a checkpoint since now."""
        checkpointer = store._checkpointer
        assert checkpointer is not None
        offset = 100_000
        asked = checkpointer.asked
        while True:
            yield store.when_durable(store.append_log("/", "s", chunk_of(offset, offset + 100, offset, 256)))
            offset += 100
            if asked and not checkpointer.asked:
                return
            asked = checkpointer.asked

    @inlineCallbacks
    def reopened(self, store: SQLiteStore) -> Any:
        yield store.close()
        fresh = SQLiteStore(store.path, reactor)
        self.addCleanup(fresh.close)
        return fresh.open()


class BrokenWriterTests(TestCase):
    """An unexpected error stops the writer: it is logged once, with what
    broke, and the store takes no more writes."""

    @inlineCallbacks
    def test_logged_once(self) -> Any:
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        store = SQLiteStore(Path(self.mktemp()) / "store.db", reactor)
        self.addCleanup(store.close)
        store.open()

        def trip(db: sqlite3.Connection, freed: bool) -> None:
            raise RuntimeError("the writer tripped")

        self.patch(store, "_bound", trip)
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))

        def broke() -> list[dict[str, Any]]:
            return [event for event in events if "log_failure" in event]

        yield eventually(broke, reactor, what="the writer's failure logged")
        self.assertRaises(RuntimeError, store.publish, message(1), [Q])  # closed
        (event,) = broke()
        self.assertEqual(str(event["log_failure"].value), "the writer tripped")
        self.assertIn(str(store.path), formatEvent(event))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
