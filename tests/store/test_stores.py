"""The store contract, run against the SQLite and in-memory stores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from twisted.internet import reactor as global_reactor
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.defer import inlineCallbacks
from twisted.trial.unittest import TestCase
from zope.interface.verify import verifyObject

from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    IMessageStore,
    LogRecord,
    LogSegment,
    StoredMessage,
)
from txamqp09.store.memory import MemoryStore
from txamqp09.store.sqlite import SQLiteStore, StoreInUse
from txamqp09.wire.fields import Int16


reactor = cast(IReactorFromThreads, global_reactor)
_TestCase: Any = TestCase if TYPE_CHECKING else object


def message(message_id: int, body: bytes = b"body") -> StoredMessage:
    return StoredMessage(message_id, "ex", f"key.{message_id}", b"\x10\x00\x02", body, len(body))


def record(offset: int, segment: int = 0, timestamp: int = 0) -> LogRecord:
    return LogRecord(offset, segment, timestamp or 1000 + 10 * offset, "ex", "k", b"\x00\x00", b"b%d" % offset)


class StoreContract(_TestCase):
    """Behaviour every store has; subclasses say how to make and reopen one."""

    def make(self) -> Any:
        raise NotImplementedError

    def reopen(self, store: Any) -> Any:
        raise NotImplementedError

    @inlineCallbacks
    def restarted(self, store: Any) -> Any:
        """Wait until durable, close, open again: (store, recovered)."""
        yield store.when_durable(store.last_sequence)
        yield store.close()
        fresh = self.reopen(store)
        recovered = fresh.open()
        self.addCleanup(fresh.close)
        return fresh, recovered

    def test_provides_the_interface(self) -> None:
        store = self.make()
        store.open()
        verifyObject(IMessageStore, store)
        self.assertTrue(IMessageStore.providedBy(store))

    @inlineCallbacks
    def test_topology_survives(self) -> Any:
        store = self.make()
        store.open()
        store.add_exchange(DurableExchange("/", "logs", "topic", arguments={"alternate-exchange": b"ae"}))
        store.add_queue(DurableQueue("/", "q1", arguments={"x-max-priority": Int16(5)}))
        store.add_queue(DurableQueue("/", "gone"))
        store.remove_queue("/", "gone")
        store.add_binding(DurableBinding("/", "logs", "q1", "queue", "a.#"))
        store.add_binding(DurableBinding("/", "logs", "q1", "queue", "b.*", {"k": 1}))
        store.remove_binding(DurableBinding("/", "logs", "q1", "queue", "b.*", {"k": 1}))
        _, recovered = yield self.restarted(store)
        self.assertEqual([e.name for e in recovered.exchanges], ["logs"])
        self.assertEqual(recovered.exchanges[0].arguments, {"alternate-exchange": b"ae"})
        self.assertEqual([q.name for q in recovered.queues], ["q1"])
        self.assertIsInstance(recovered.queues[0].arguments["x-max-priority"], Int16)
        self.assertEqual(
            [(b.source, b.routing_key) for b in recovered.bindings], [("logs", "a.#")]
        )

    @inlineCallbacks
    def test_messages_recovered_in_order_and_redelivered(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "a"))
        store.add_queue(DurableQueue("/", "b"))
        for n in range(1, 6):
            store.publish(message(n, b"m%d" % n), [("/", "a"), ("/", "b")])
        store.remove("/", "a", [2, 4])
        store.remove("/", "b", [1, 2, 3, 4, 5])
        _, recovered = yield self.restarted(store)
        self.assertEqual([m.body for m in recovered.messages[("/", "a")]], [b"m1", b"m3", b"m5"])
        self.assertEqual(recovered.messages[("/", "b")], [])
        self.assertTrue(all(m.redelivered for m in recovered.messages[("/", "a")]))
        self.assertEqual(recovered.next_message_id, 6)
        first = recovered.messages[("/", "a")][0]
        self.assertEqual((first.exchange, first.routing_key, first.raw_properties), ("ex", "key.1", b"\x10\x00\x02"))

    @inlineCallbacks
    def test_bodies_beyond_the_budget_are_left_on_disk_and_read_on_demand(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "a"))
        store.add_queue(DurableQueue("/", "b"))
        for n in range(1, 6):
            store.publish(message(n, b"%010d" % n), [("/", "a" if n < 4 else "b")])
        yield store.when_durable(store.last_sequence)
        self.assertEqual(store.durable_sequence, store.last_sequence)
        yield store.close()
        fresh = self.reopen(store)
        recovered = fresh.open(body_budget=25)
        self.addCleanup(fresh.close)
        found = [m for key in (("/", "a"), ("/", "b")) for m in recovered.messages[key]]
        self.assertEqual([m.body for m in found], [b"%010d" % n for n in (1, 2)] + [None] * 3)
        self.assertEqual([m.size for m in found], [10] * 5)
        self.assertEqual(fresh.read([3, 5, 4]), {n: b"%010d" % n for n in (3, 4, 5)})

    @inlineCallbacks
    def test_spilled_bodies_are_read_back_and_gone_after_a_restart(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        store.publish(message(1, b"kept"), [("/", "q")])
        store.spill(2, b"spilled two")
        store.spill(3, b"spilled three")
        store.unspill([3])
        yield store.when_durable(store.last_sequence)
        self.assertEqual(store.read([1, 2, 3]), {1: b"kept", 2: b"spilled two"})
        fresh, recovered = yield self.restarted(store)
        self.assertEqual([m.message_id for m in recovered.messages[("/", "q")]], [1])
        self.assertEqual(fresh.read([1, 2]), {1: b"kept"})

    @inlineCallbacks
    def test_deleting_queue_drops_its_messages_and_bindings(self) -> Any:
        store = self.make()
        store.open()
        store.add_exchange(DurableExchange("/", "x", "direct"))
        store.add_queue(DurableQueue("/", "q"))
        store.add_binding(DurableBinding("/", "x", "q", "queue", "k"))
        store.publish(message(1), [("/", "q")])
        store.remove_queue("/", "q")
        store.add_queue(DurableQueue("/", "q"))
        _, recovered = yield self.restarted(store)
        self.assertEqual(recovered.messages[("/", "q")], [])
        self.assertEqual(recovered.bindings, [])

    @inlineCallbacks
    def test_settings_survive_replaced_and_removed(self) -> Any:
        store = self.make()
        store.open()
        store.put_setting("users", "alice", {"name": "alice", "tags": ["monitoring"]})
        store.put_setting("users", "bob", {"name": "bob", "tags": []})
        store.put_setting("users", "alice", {"name": "alice", "tags": ["administrator"]})
        store.put_setting("policies", '["/", "ttl"]', {"pattern": "^q", "priority": 1})
        store.remove_setting("users", "bob")
        store.remove_setting("users", "nobody")
        _, recovered = yield self.restarted(store)
        self.assertEqual(
            recovered.settings,
            {
                "users": {"alice": {"name": "alice", "tags": ["administrator"]}},
                "policies": {'["/", "ttl"]': {"pattern": "^q", "priority": 1}},
            },
        )


class LogContract(StoreContract):
    """Stream logs: appended, read by offset, truncated, recovered, deleted."""

    @inlineCallbacks
    def filled(self, count: int = 10, segment_every: int = 4) -> Any:
        """An open store with stream s holding *count* records, all durable."""
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"}))
        for offset in range(count):
            store.append_log("/", "s", record(offset, offset - offset % segment_every))
        yield store.when_durable(store.last_sequence)
        return store

    @inlineCallbacks
    def test_read_by_offset_ranges(self) -> Any:
        store = yield self.filled()
        self.assertEqual([r.offset for r in store.read_log("/", "s", 3, 4)], [3, 4, 5, 6])
        self.assertEqual([r.offset for r in store.read_log("/", "s", 8, 100)], [8, 9])
        self.assertEqual(store.read_log("/", "s", 10, 5), [])
        self.assertEqual(store.read_log("/", "other", 0, 5), [])
        self.assertEqual(store.read_log("/", "s", 2, 1), [record(2)])

    @inlineCallbacks
    def test_offset_at_a_timestamp(self) -> Any:
        store = yield self.filled()
        self.assertEqual(store.log_offset_at("/", "s", 1035, 0), 4)
        self.assertEqual(store.log_offset_at("/", "s", 1040, 0), 4)
        self.assertEqual(store.log_offset_at("/", "s", 0, 6), 6)
        self.assertIsNone(store.log_offset_at("/", "s", 5000, 0))

    @inlineCallbacks
    def test_truncated_records_are_gone_and_reads_start_at_the_first_kept(self) -> Any:
        store = yield self.filled()
        store.truncate_log("/", "s", 4)
        yield store.when_durable(store.last_sequence)
        self.assertEqual([r.offset for r in store.read_log("/", "s", 0, 3)], [4, 5, 6])
        self.assertEqual(store.log_offset_at("/", "s", 0, 0), 4)

    @inlineCallbacks
    def test_segments_recovered(self) -> Any:
        store = yield self.filled()
        store.truncate_log("/", "s", 4)
        _, recovered = yield self.restarted(store)
        self.assertEqual(
            recovered.logs[("/", "s")],
            [LogSegment(4, 7, 1040, 1070, 8), LogSegment(8, 9, 1080, 1090, 4)],
        )
        self.assertEqual(recovered.messages[("/", "s")], [])

    @inlineCallbacks
    def test_deleting_the_queue_deletes_its_log(self) -> Any:
        store = yield self.filled()
        store.remove_queue("/", "s")
        store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"}))
        fresh, recovered = yield self.restarted(store)
        self.assertNotIn(("/", "s"), recovered.logs)
        self.assertEqual(fresh.read_log("/", "s", 0, 10), [])


class MemoryStoreTests(LogContract, TestCase):
    def make(self) -> MemoryStore:
        return MemoryStore()

    def reopen(self, store: MemoryStore) -> MemoryStore:
        return store


class SQLiteStoreTests(LogContract, TestCase):
    def make(self) -> SQLiteStore:
        store = SQLiteStore(Path(self.mktemp()) / "store.db", reactor)
        self.addCleanup(store.close)
        return store

    def reopen(self, store: SQLiteStore) -> SQLiteStore:
        return SQLiteStore(store.path, reactor)

    @inlineCallbacks
    def test_log_retention_returns_disk_space(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"}))
        body = os.urandom(4096)
        for offset in range(3000):
            store.append_log("/", "s", LogRecord(offset, offset - offset % 100, offset, "", "s", b"\x00\x00", body))
        yield store.when_durable(store.last_sequence)
        pages = store._reading().execute("PRAGMA page_count").fetchone()[0]
        store.truncate_log("/", "s", 2900)
        yield store.when_durable(store.last_sequence)
        # The writer reclaims pages after reporting a batch durable: once a
        # later operation is durable, that is done.
        yield store.when_durable(store.truncate_log("/", "s", 2900))
        after = store._reading().execute("PRAGMA page_count").fetchone()[0]
        self.assertLess(after, pages / 4, (pages, after))
        self.assertEqual([r.offset for r in store.read_log("/", "s", 0, 200)], list(range(2900, 3000)))

    def test_a_second_store_on_the_same_database_is_refused(self) -> None:
        store = self.make()
        store.open()
        second = SQLiteStore(store.path, reactor)
        error = self.assertRaises(StoreInUse, second.open)
        self.assertIn("in use by another broker", str(error))

    @inlineCallbacks
    def test_group_commit_covers_many_operations_with_few_fsyncs(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        sequences = [store.publish(message(n), [("/", "q")]) for n in range(1, 2001)]
        yield store.when_durable(sequences[-1])
        self.assertEqual(store.operations, 2001)
        self.assertLess(store.commits, 50)

    @inlineCallbacks
    def test_when_durable_fires_only_after_commit(self) -> Any:
        store = self.make()
        store.open()
        sequence = store.add_queue(DurableQueue("/", "q"))
        waiter = store.when_durable(sequence)
        self.assertEqual(store.commits, 0)
        yield waiter
        self.assertGreaterEqual(store.commits, 1)
        self.assertTrue(store.when_durable(sequence).called)

    @inlineCallbacks
    def test_messages_removed_before_the_writer_takes_them_are_never_written(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        store.add_queue(DurableQueue("/", "kept"))
        for n in range(1, 1001):
            store.publish(message(n), [("/", "q"), ("/", "kept")] if n == 1000 else [("/", "q")])
            store.remove("/", "q", [n])
        yield store.when_durable(store.last_sequence)
        self.assertGreater(store.cancelled, 0)
        yield store.close()
        with __import__("sqlite3").connect(store.path) as db:
            rows = db.execute("SELECT queue, message_id FROM queue_messages").fetchall()
            self.assertEqual(db.execute("SELECT id FROM messages").fetchall(), [(1000,)])
        self.assertEqual(rows, [("kept", 1000)])

    @inlineCallbacks
    def test_acked_messages_are_deleted_and_space_reclaimed(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        body = os.urandom(4096)
        for n in range(1, 3001):
            store.publish(message(n, body), [("/", "q")])
        store.remove("/", "q", list(range(1, 3001)))
        yield store.when_durable(store.last_sequence)
        yield store.close()
        with __import__("sqlite3").connect(store.path) as db:
            self.assertEqual(db.execute("SELECT count(*) FROM messages").fetchone()[0], 0)
            pages, free = (db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "freelist_count"))
        self.assertLess(free * 4, pages)


_WRITER = textwrap.dedent(
    """
    import sys
    from twisted.internet import reactor
    from txamqp09.store.interface import DurableQueue, StoredMessage
    from txamqp09.store.sqlite import SQLiteStore, StoreInUse

    store = SQLiteStore(sys.argv[1], reactor)
    store.open()
    store.add_queue(DurableQueue("/", "q"))
    # At most WINDOW messages wait for the disk, so a slow disk cannot make
    # the writer's backlog (and this process) grow without bound.
    WINDOW = 1000
    state = {"next": 1, "confirmed": 0, "paused": False}

    def confirmed(_, first, last):
        sys.stdout.write(f"{first} {last}\\n")
        sys.stdout.flush()
        state["confirmed"] = last
        if state["paused"]:
            state["paused"] = False
            publish_some()

    def publish_some():
        first = state["next"]
        if first - 1 - state["confirmed"] >= WINDOW:
            state["paused"] = True
            return
        for n in range(first, first + 50):
            sequence = store.publish(StoredMessage(n, "", "q", b"", b"%d" % n, len(b"%d" % n)), [("/", "q")])
        store.when_durable(sequence).addCallback(confirmed, first, first + 49)
        state["next"] = first + 50
        reactor.callLater(0, publish_some)

    reactor.callWhenRunning(publish_some)
    reactor.run()
    """
)


class CrashRecoveryTests(TestCase):
    """A writer killed with SIGKILL mid-stream loses nothing it confirmed."""

    def test_kill_9_keeps_every_confirmed_message(self) -> None:
        path = Path(tempfile.mkdtemp()) / "crash.db"
        script = Path(self.mktemp())
        script.write_text(_WRITER)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        child = subprocess.Popen(
            [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True, env=env
        )
        confirmed_up_to = 0
        assert child.stdout is not None
        for line in child.stdout:
            confirmed_up_to = int(line.split()[1])
            if confirmed_up_to >= 2000:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        self.assertGreaterEqual(confirmed_up_to, 2000, "the writer stopped before confirming")
        store = SQLiteStore(path, reactor)
        recovered = store.open()
        self.addCleanup(store.close)
        bodies = [int(m.body or b"") for m in recovered.messages[("/", "q")]]
        self.assertGreaterEqual(len(bodies), confirmed_up_to)
        self.assertEqual(bodies, list(range(1, len(bodies) + 1)))
