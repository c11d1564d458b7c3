"""The store contract, run against the SQLite and in-memory stores."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from twisted.internet import reactor as global_reactor
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.defer import inlineCallbacks
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import TestCase
from zope.interface.verify import verifyObject

from txamqp09.store.interface import (
    DurableBinding,
    DurableExchange,
    DurableQueue,
    IMessageStore,
    LogSegment,
    StoredMessage,
)
from txamqp09.store.chunks import LogChunk
from txamqp09.store.memory import MemoryStore
from txamqp09.store.sqlite import SCHEMA_VERSION, SQLiteStore, StoreFormatError, StoreInUse
from txamqp09.store.url import store_from_url
from txamqp09.testing.postgresql import psycopg_missing, shared_postgresql
from txamqp09.wire.fields import RABBITMQ
from txamqp09.wire.forwarding import envelope
from txamqp09.wire.fields import Int16


reactor = cast(IReactorFromThreads, global_reactor)
_TestCase: Any = TestCase if TYPE_CHECKING else object


def message(message_id: int, body: bytes = b"body") -> StoredMessage:
    return StoredMessage(message_id, "ex", f"key.{message_id}", b"\x10\x00\x02", body, len(body))


def chunk_of(first: int, end: int, segment: int, body_size: int = 0) -> LogChunk:
    """Offsets [first, end) of segment *segment*; the message at offset n is
    appended at 1000 + 10 n ms, its body b"b<n>" (or *body_size* random bytes)."""
    chunk = LogChunk(first, segment)
    for offset in range(first, end):
        body = os.urandom(body_size) if body_size else b"b%d" % offset
        chunk.add(1000 + 10 * offset, envelope("ex", "k"), b"\x00\x00", body)
    return chunk


def offsets_and_bodies(chunk: LogChunk) -> list[tuple[int, bytes]]:
    return [(chunk.first + index, chunk.message(index)[2]) for index in range(chunk.count)]


def old_database(directory: Path, script: str) -> tuple[Path, sqlite3.Connection]:
    """A new database file in *directory* (made) with the table of queues of
    versions 0 and 1 and the tables *script* makes: its path, and a connection to it."""
    path = directory / "store.db"
    directory.mkdir()
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript(
        "CREATE TABLE queues (vhost TEXT NOT NULL, name TEXT NOT NULL, auto_delete INTEGER NOT NULL,"
        " arguments BLOB NOT NULL, PRIMARY KEY (vhost, name));" + script
    )
    return path, db


def version_1_database(directory: Path, published: bool = True) -> Path:
    """A database in *directory* as version 1 wrote it (without the publish times when
    not *published*, as before they were kept): queues a, b, c and
    stream s; message 1 on a, 2 on a and b, 3 on b, 4 on c (a body of
    64 KiB), 5 on no queue; a spilled body; one chunk of s's log."""
    path, db = old_database(
        directory,
        "CREATE TABLE messages (id INTEGER PRIMARY KEY, exchange TEXT NOT NULL, routing_key TEXT NOT NULL,"
        " properties BLOB NOT NULL, body BLOB NOT NULL"
        + (", published REAL NOT NULL DEFAULT 0);" if published else ");")
        + "CREATE TABLE queue_messages (vhost TEXT NOT NULL, queue TEXT NOT NULL, message_id INTEGER NOT NULL,"
        " PRIMARY KEY (vhost, queue, message_id)) WITHOUT ROWID;"
        "CREATE INDEX queue_messages_by_message ON queue_messages (message_id);"
        "CREATE TABLE spilled (id INTEGER PRIMARY KEY, body BLOB NOT NULL);"
        "CREATE TABLE stream_chunks (vhost TEXT NOT NULL, queue TEXT NOT NULL, first INTEGER NOT NULL,"
        " count INTEGER NOT NULL, segment INTEGER NOT NULL, first_timestamp INTEGER NOT NULL,"
        " last_timestamp INTEGER NOT NULL, size INTEGER NOT NULL, ends BLOB NOT NULL, data BLOB NOT NULL,"
        " PRIMARY KEY (vhost, queue, first));"
        "PRAGMA user_version = 1;"
    )
    db.executemany("INSERT INTO queues VALUES ('/', ?, 0, x'00000000')", [("a",), ("b",), ("c",)])
    db.execute("INSERT INTO queues VALUES ('/', 's', 0, ?)", (RABBITMQ.encode_table({"x-queue-type": b"stream"}),))
    for n in range(1, 6):
        body = bytes(65536) if n == 4 else b"m%d" % n
        row = (n, "ex", f"key.{n}", b"\x10\x00\x02" + bytes([n]), body) + ((1000.0 + n,) if published else ())
        db.execute(f"INSERT INTO messages VALUES ({', '.join('?' * len(row))})", row)
    db.executemany(
        "INSERT INTO queue_messages VALUES ('/', ?, ?)", [("a", 1), ("a", 2), ("b", 2), ("b", 3), ("c", 4)]
    )
    db.execute("INSERT INTO spilled VALUES (6, x'00')")
    db.execute("INSERT INTO stream_chunks VALUES ('/', 's', ?, ?, ?, ?, ?, ?, ?, ?)", chunk_of(0, 3, 0).take())
    db.close()
    return path



def assert_version_1_recovered(case: TestCase, store: SQLiteStore, recovered: Any, published: bool) -> None:
    """What :func:`version_1_database` wrote comes back from *store* (*case* asserts)."""
    case.assertEqual(
        {name: [m.message_id for m in recovered.messages[("/", name)]] for name in "abc"},
        {"a": [1, 2], "b": [2, 3], "c": [4]},
    )
    for name in "abc":
        for m in recovered.messages[("/", name)]:
            n = m.message_id
            case.assertEqual(
                (m.exchange, m.routing_key, m.raw_properties, m.body, m.size, m.redelivered, m.published),
                ("ex", f"key.{n}", b"\x10\x00\x02" + bytes([n]), bytes(65536) if n == 4 else b"m%d" % n,
                 65536 if n == 4 else 2, True, 1000.0 + n if published else 0.0),
            )
    case.assertEqual(recovered.next_message_id, 5, "message 5 was on no queue: forgotten")
    case.assertEqual(recovered.logs[("/", "s")], [LogSegment(0, 2, 1000, 1020, 6)])
    case.assertEqual(offsets_and_bodies(store.read_log("/", "s", 0)), [(0, b"b0"), (1, b"b1"), (2, b"b2")])
    case.assertEqual(store.read([4, 5, 6]), {4: bytes(65536)}, "spilled bodies do not survive a restart")


class StoreContract(_TestCase):
    """Behaviour every store has; subclasses say how to make and reopen one."""

    def make(self) -> Any:
        raise NotImplementedError

    def reopen(self, store: Any) -> Any:
        raise NotImplementedError

    def with_queues(self, *names: str) -> Any:
        """A store made and opened, with durable queues *names* of vhost /."""
        store = self.make()
        store.open()
        for name in names:
            store.add_queue(DurableQueue("/", name))
        return store

    @inlineCallbacks
    def restarted(self, store: Any, body_budget: Any = None) -> Any:
        """Wait until durable, close, open again (with *body_budget*): (store, recovered)."""
        yield store.when_durable(store.last_sequence)
        yield store.close()
        fresh = self.reopen(store)
        recovered = fresh.open(body_budget)
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
        store = self.with_queues("a", "b")
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
    def test_a_message_on_several_queues_stays_on_each_until_removed_from_it(self) -> Any:
        store = self.with_queues("a", "b", "c")
        store.publish(message(1), [("/", "a"), ("/", "b")])
        store.publish(message(2), [("/", "a")])
        store.publish(message(3), [("/", "b"), ("/", "c")])
        store.remove("/", "a", [1, 2])
        store, recovered = yield self.restarted(store)
        self.assertEqual(
            {name: [m.message_id for m in recovered.messages[("/", name)]] for name in "abc"},
            {"a": [], "b": [1, 3], "c": [3]},
        )
        store.remove("/", "b", [1, 3])
        store, recovered = yield self.restarted(store)
        self.assertEqual(
            {name: [m.message_id for m in recovered.messages[("/", name)]] for name in "abc"},
            {"a": [], "b": [], "c": [3]},
        )
        self.assertEqual(store.read([1, 3]), {3: b"body"})
        store.remove("/", "c", [3])
        store, recovered = yield self.restarted(store)
        self.assertEqual(sum(len(messages) for messages in recovered.messages.values()), 0)
        self.assertEqual(store.read([1, 2, 3]), {})

    @inlineCallbacks
    def test_the_body_budget_counts_a_message_on_several_queues_once(self) -> Any:
        store = self.with_queues("a", "b")
        for n in range(1, 4):
            store.publish(message(n, b"%010d" % n), [("/", "b"), ("/", "a")] if n == 1 else [("/", "b")])
        _, recovered = yield self.restarted(store, 20)
        self.assertEqual([m.body for m in recovered.messages[("/", "a")]], [b"%010d" % 1])
        self.assertEqual(
            [m.body for m in recovered.messages[("/", "b")]], [b"%010d" % 1, b"%010d" % 2, None]
        )

    @inlineCallbacks
    def test_bodies_beyond_the_budget_are_left_on_disk_and_read_on_demand(self) -> Any:
        store = self.with_queues("a", "b")
        for n in range(1, 6):
            store.publish(message(n, b"%010d" % n), [("/", "a" if n < 4 else "b")])
        yield store.when_durable(store.last_sequence)
        self.assertEqual(store.durable_sequence, store.last_sequence)
        fresh, recovered = yield self.restarted(store, 25)
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
    def filled(self) -> Any:
        """An open store with stream s holding offsets 0-9 in segments of four
        (0, 4, 8), in chunks [0, 3) [3, 4) [4, 7) [7, 8) [8, 10), all durable."""
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"}))
        for first, end in ((0, 3), (3, 4), (4, 7), (7, 8), (8, 10)):
            store.append_log("/", "s", chunk_of(first, end, first - first % 4))
        yield store.when_durable(store.last_sequence)
        return store

    @inlineCallbacks
    def test_read_the_chunk_holding_an_offset(self) -> Any:
        store = yield self.filled()
        self.assertEqual(offsets_and_bodies(store.read_log("/", "s", 5)), [(4, b"b4"), (5, b"b5"), (6, b"b6")])
        self.assertEqual(store.read_log("/", "s", 4).first, 4)
        self.assertEqual(store.read_log("/", "s", 9).first, 8)
        self.assertIsNone(store.read_log("/", "s", 10))
        self.assertIsNone(store.read_log("/", "other", 0))
        envelope_bytes, properties, body, timestamp = store.read_log("/", "s", 2).message(2)
        self.assertEqual((envelope_bytes, properties, body, timestamp), (envelope("ex", "k"), b"\x00\x00", b"b2", 1020))

    @inlineCallbacks
    def test_offsets_run_on_across_chunk_boundaries(self) -> Any:
        store = yield self.filled()
        read: list[tuple[int, bytes]] = []
        chunk = store.read_log("/", "s", 0)
        while chunk is not None:
            read.extend(offsets_and_bodies(chunk))
            chunk = store.read_log("/", "s", chunk.end)
        self.assertEqual(read, [(n, b"b%d" % n) for n in range(10)])

    @inlineCallbacks
    def test_offset_at_a_timestamp(self) -> Any:
        store = yield self.filled()
        self.assertEqual(store.log_offset_at("/", "s", 1035, 0), 4)
        self.assertEqual(store.log_offset_at("/", "s", 1040, 0), 4)
        self.assertEqual(store.log_offset_at("/", "s", 1045, 0), 5, "inside a chunk")
        self.assertEqual(store.log_offset_at("/", "s", 1071, 0), 8, "past a chunk's last")
        self.assertEqual(store.log_offset_at("/", "s", 0, 6), 6)
        self.assertIsNone(store.log_offset_at("/", "s", 5000, 0))

    @inlineCallbacks
    def test_truncation_removes_whole_chunks_and_reads_start_at_the_first_kept(self) -> Any:
        store = yield self.filled()
        store.truncate_log("/", "s", 4)
        yield store.when_durable(store.last_sequence)
        self.assertEqual(store.read_log("/", "s", 0).first, 4)
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
        self.assertIsNone(fresh.read_log("/", "s", 0))

    @inlineCallbacks
    def test_messages_added_to_a_chunk_until_it_is_taken_are_written(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"}))
        chunk = chunk_of(0, 1, 0)
        sequence = store.append_log("/", "s", chunk)
        added = 1
        while added < 200 and chunk.add(1000, envelope("ex", "k"), b"\x00\x00", b"b%d" % added):
            added += 1
        yield store.when_durable(sequence)
        if hasattr(store, "commits"):
            self.assertFalse(chunk.add(1000, b"", b"", b"late"), "a written chunk takes no more")
        _, recovered = yield self.restarted(store)
        self.assertEqual(recovered.logs[("/", "s")][0].last, added - 1)


class SQLStoreContract(LogContract):
    """Behaviour of the SQL stores (one writer, batches, the shared layout),
    whose tables a test reads through :meth:`rows`."""

    def rows(self, store: Any, statement: str) -> list[tuple[Any, ...]]:
        """The rows of *statement* (the SQL layer's spelling: ``{messages}``)
        as *store*'s reader sees them."""
        return [tuple(row) for row in store._reader().execute(statement).fetchall()]

    @inlineCallbacks
    def test_a_transaction_takes_chunks_within_its_batch_bytes(self) -> Any:
        store = self.make()
        store.open()
        for n in range(10):
            store.add_queue(DurableQueue("/", f"s{n}", arguments={"x-queue-type": b"stream"}))
        yield store.when_durable(store.last_sequence)
        before = store.commits
        with store._lock:  # the writer takes nothing until all ten are queued
            for n in range(10):
                store.append_log("/", f"s{n}", chunk_of(0, 3, 0))
        yield store.when_durable(store.last_sequence)
        self.assertEqual(store.commits - before, 3, "each chunk counts as CHUNK_BYTES of BATCH_BYTES")
        _, recovered = yield self.restarted(store)
        self.assertEqual([recovered.logs[("/", f"s{n}")][0].last for n in range(10)], [2] * 10)

    @inlineCallbacks
    def test_a_large_batch_of_messages_on_many_queues_is_recovered_whole(self) -> Any:
        """Many messages written together (more than one statement of rows
        takes), one of them on more queues than one statement of links
        takes, each with its own properties and body."""
        store = self.make()
        store.open()
        names = [f"q{n}" for n in range(400)]
        for name in names:
            store.add_queue(DurableQueue("/", name))
        wide = [("/", name) for name in names]
        yield store.when_durable(store.last_sequence)
        before = store.commits
        with store._lock:  # the writer takes nothing until all are queued
            for n in range(1, 1202):
                store.publish(
                    StoredMessage(n, "ex", f"key.{n}", b"\x10\x00\x02" + bytes([n % 251]), b"m%d" % n, 4, published=n / 8),
                    wide if n == 600 else [("/", "q0"), ("/", f"q{n % 3 + 1}")],
                )
        yield store.when_durable(store.last_sequence)
        self.assertEqual(store.commits - before, 1)
        _, recovered = yield self.restarted(store)
        first = recovered.messages[("/", "q0")]
        self.assertEqual([m.message_id for m in first], list(range(1, 1202)))
        self.assertEqual(
            [(m.routing_key, m.raw_properties, m.body, m.published) for m in first[598:601]],
            [(f"key.{n}", b"\x10\x00\x02" + bytes([n % 251]), b"m%d" % n, n / 8) for n in (599, 600, 601)],
        )
        self.assertEqual([m.message_id for m in recovered.messages[("/", "q399")]], [600])
        self.assertEqual(
            len(recovered.messages[("/", "q1")]) + len(recovered.messages[("/", "q2")])
            + len(recovered.messages[("/", "q3")]),
            1200 + 3,
        )

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
        self.assertEqual(
            self.rows(store, "SELECT n.name, m.id FROM {messages} m JOIN {queue_names} n ON n.id = m.queue"),
            [("kept", 1000)],
            "written as a message of one queue",
        )
        self.assertEqual(self.rows(store, "SELECT * FROM {message_links}"), [])

    @inlineCallbacks
    def test_a_message_removed_before_its_batch_is_taken_is_settled_before_that_batch_commits(self) -> Any:
        """Nothing before it waits to be written: it is settled when the
        writer takes its batch, while the message after it is still being
        written."""
        store = self.make()
        store.open()
        yield store.when_durable(store.add_queue(DurableQueue("/", "q")))
        applying, release = threading.Event(), threading.Event()
        apply = store._apply

        def held(db: Any, batch: Any) -> Any:
            applying.set()
            release.wait(30)
            return apply(db, batch)

        store._apply = held
        self.addCleanup(release.set)
        with store._lock:  # the writer takes all three in one batch
            consumed = store.publish(message(1), [("/", "q")])
            store.remove("/", "q", [1])
            kept = store.publish(message(2), [("/", "q")])
        settled = store.when_durable(consumed)
        yield deferToThread(applying.wait, 30)
        yield settled.addTimeout(10, global_reactor)
        self.assertLess(store.durable_sequence, kept)
        release.set()
        yield store.when_durable(kept)
        self.assertEqual(self.rows(store, "SELECT id FROM {messages}"), [(2,)])

    @inlineCallbacks
    def test_a_message_on_one_queue_is_one_row(self) -> Any:
        """A message on one queue is one row naming the queue's number; one
        on several has a link to each; each goes with its last queue."""
        store = self.make()
        store.open()
        store.publish(message(1), [("/", "a")])
        store.publish(message(2), [("/", "a"), ("/", "b")])
        store.publish(message(3), [("/", "b")])
        yield store.when_durable(store.last_sequence)
        names = dict(self.rows(store, "SELECT name, id FROM {queue_names}"))
        self.assertEqual(
            self.rows(store, "SELECT id, queue FROM {messages} ORDER BY id"), [(1, names["a"]), (2, 0), (3, names["b"])]
        )
        self.assertEqual(
            self.rows(store, "SELECT * FROM {message_links} ORDER BY queue"), [(2, names["a"]), (2, names["b"])]
        )
        store.remove("/", "a", [1, 2])
        yield store.when_durable(store.last_sequence)
        self.assertEqual(self.rows(store, "SELECT id FROM {messages} ORDER BY id"), [(2,), (3,)])
        self.assertEqual(self.rows(store, "SELECT * FROM {message_links}"), [(2, names["b"])])
        store.remove_queue("/", "b")
        yield store.when_durable(store.last_sequence)
        self.assertEqual(self.rows(store, "SELECT count(*) FROM {messages}"), [(0,)])
        self.assertEqual(self.rows(store, "SELECT count(*) FROM {message_links}"), [(0,)])
        self.assertEqual(self.rows(store, "SELECT name FROM {queue_names}"), [("a",)])
        fresh, recovered = yield self.restarted(store)
        self.assertEqual(recovered.messages, {})
        self.assertEqual(
            self.rows(fresh, "SELECT count(*) FROM {queue_names}"), [(0,)],
            "a queue holding no message loses its number at the start",
        )

    @inlineCallbacks
    def test_a_queue_deleted_and_declared_again_in_one_batch_keeps_its_new_messages(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        yield store.when_durable(store.publish(message(1), [("/", "q")]))
        with store._lock:  # the writer takes nothing until all are queued
            store.publish(message(2), [("/", "q"), ("/", "other")])
            store.remove_queue("/", "q")
            store.add_queue(DurableQueue("/", "q"))
            store.publish(message(3), [("/", "q")])
            store.publish(message(4), [("/", "q"), ("/", "other")])
            store.remove("/", "q", [1, 2])
        yield store.when_durable(store.last_sequence)
        _, recovered = yield self.restarted(store)
        self.assertEqual([m.message_id for m in recovered.messages[("/", "q")]], [3, 4])
        self.assertEqual([m.message_id for m in recovered.messages[("/", "other")]], [2, 4])

    @inlineCallbacks
    def acked(self) -> Any:
        """A store (closed) whose queue q received 3000 messages of 4 KiB,
        all acknowledged (removed) once durable or before."""
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        body = os.urandom(4096)
        for n in range(1, 3001):
            store.publish(message(n, body), [("/", "q")])
        store.remove("/", "q", list(range(1, 3001)))
        yield store.when_durable(store.last_sequence)
        self.assertEqual(self.rows(store, "SELECT count(*) FROM {messages}"), [(0,)])
        yield store.close()
        return store

    @inlineCallbacks
    def test_acked_messages_are_deleted(self) -> Any:
        store = yield self.acked()
        fresh, recovered = yield self.restarted(store)
        self.assertEqual(recovered.messages[("/", "q")], [])
        self.assertEqual(recovered.next_message_id, 1)


class MemoryStoreTests(LogContract, TestCase):
    def make(self) -> MemoryStore:
        return MemoryStore()

    def reopen(self, store: MemoryStore) -> MemoryStore:
        return store


class SQLiteStoreTests(SQLStoreContract, TestCase):
    def make(self) -> SQLiteStore:
        store = SQLiteStore(Path(self.mktemp()) / "store.db", reactor)
        self.addCleanup(store.close)
        return store

    def reopen(self, store: SQLiteStore) -> SQLiteStore:
        return SQLiteStore(store.path, reactor)

    @inlineCallbacks
    def test_no_removal_log_is_kept(self) -> Any:
        """Nothing follows a SQLite database: acknowledged messages leave nothing behind."""
        store = yield self.acked()
        fresh, _ = yield self.restarted(store)
        self.assertEqual(self.rows(fresh, "SELECT count(*) FROM {removals}"), [(0,)])

    @inlineCallbacks
    def test_space_of_acked_messages_is_reclaimed(self) -> Any:
        store = yield self.acked()
        with sqlite3.connect(store.path) as db:
            pages, free = (db.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "freelist_count"))
        self.assertLess(free * 4, pages)

    @inlineCallbacks
    def test_a_batch_of_appends_alone_is_one_statement_outside_a_transaction(self) -> Any:
        """Appends alone go to SQLite as one statement (its own transaction);
        a batch with anything else in it is still one BEGIN ... COMMIT."""
        statements: list[str] = []

        def record(sql: str) -> None:
            if not sql.startswith("PRAGMA"):  # upkeep after a batch, while the test goes on
                statements.append(sql.split(" (", 1)[0])

        class Recording(sqlite3.Connection):
            def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
                record(sql)
                return super().execute(sql, parameters)

            def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
                record(sql)
                return super().executemany(sql, parameters)

        store = self.make()
        store.connection_class = Recording
        store.open()
        for n in range(3):
            store.add_queue(DurableQueue("/", f"s{n}", arguments={"x-queue-type": b"stream"}))
        store.add_queue(DurableQueue("/", "q"))
        yield store.when_durable(store.last_sequence)
        statements.clear()
        before = store.commits
        with store._lock:  # the writer takes nothing until all three are queued
            for n in range(3):
                store.append_log("/", f"s{n}", chunk_of(0, 3 + n, 0))
        yield store.when_durable(store.last_sequence)
        self.assertEqual(store.commits - before, 1)
        self.assertEqual(statements[0], "INSERT OR REPLACE INTO stream_chunks VALUES")
        self.assertNotIn("BEGIN", statements)
        self.assertNotIn("COMMIT", statements)
        statements.clear()
        with store._lock:
            store.append_log("/", "s0", chunk_of(3, 5, 0))
            store.publish(message(1), [("/", "q")])
        yield store.when_durable(store.last_sequence)
        self.assertEqual(statements[0], "BEGIN")
        self.assertIn("INSERT OR REPLACE INTO stream_chunks VALUES", statements)
        self.assertIn("COMMIT", statements)
        _, recovered = yield self.restarted(store)
        self.assertEqual([recovered.logs[("/", f"s{n}")][-1].last for n in range(3)], [4, 3, 4])
        self.assertEqual([m.message_id for m in recovered.messages[("/", "q")]], [1])

    @inlineCallbacks
    def test_log_retention_returns_disk_space(self) -> Any:
        store = self.make()
        store.open()
        store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"}))
        for first in range(0, 3000, 100):
            store.append_log("/", "s", chunk_of(first, first + 100, first, body_size=4096))
        yield store.when_durable(store.last_sequence)
        pages = store._reading().execute("PRAGMA page_count").fetchone()[0]
        store.truncate_log("/", "s", 2900)
        yield store.when_durable(store.last_sequence)
        # The writer reclaims pages after reporting a batch durable: once a
        # later operation is durable, that is done.
        yield store.when_durable(store.truncate_log("/", "s", 2900))
        after = store._reading().execute("PRAGMA page_count").fetchone()[0]
        self.assertLess(after, pages / 4, (pages, after))
        kept = store.read_log("/", "s", 0)
        self.assertEqual((kept.first, kept.end), (2900, 3000))

    def version_0_database(self, messages: int) -> Path:
        """A database as version 0 wrote it: stream s with one row per message
        in stream_log, in segments of 1000 (offset n appended at 1000 + n ms)."""
        path, db = old_database(
            Path(self.mktemp()),
            "CREATE TABLE stream_log (vhost TEXT NOT NULL, queue TEXT NOT NULL, position INTEGER NOT NULL,"
            " segment INTEGER NOT NULL, timestamp INTEGER NOT NULL, exchange TEXT NOT NULL,"
            " routing_key TEXT NOT NULL, properties BLOB NOT NULL, body BLOB NOT NULL,"
            " PRIMARY KEY (vhost, queue, position));"
        )
        db.execute("INSERT INTO queues VALUES ('/', 's', 0, x'00000000')")
        db.executemany(
            "INSERT INTO stream_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [("/", "s", n, n - n % 1000, 1000 + n, "amq.direct", "k", b"\x00\x00", b"m%d" % n) for n in range(messages)],
        )
        db.close()
        return path

    def test_a_version_0_log_is_migrated_to_chunks(self) -> None:
        path = self.version_0_database(2500)
        store = SQLiteStore(path, reactor)
        recovered = store.open()
        self.addCleanup(store.close)
        self.assertEqual(
            recovered.logs[("/", "s")],
            [LogSegment(0, 999, 1000, 1999, 3890), LogSegment(1000, 1999, 2000, 2999, 5000),
             LogSegment(2000, 2499, 3000, 3499, 2500)],
        )
        chunk = store.read_log("/", "s", 1234)
        self.assertEqual(chunk.first, 1000, "a segment's rows make one chunk")
        self.assertEqual(chunk.message(234), (envelope("amq.direct", "k"), b"\x00\x00", b"m1234", 2234))
        self.assertEqual(store.log_offset_at("/", "s", 2600, 0), 1600)
        reader = store._reading()
        self.assertEqual(reader.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
        self.assertIsNone(
            reader.execute("SELECT 1 FROM sqlite_master WHERE name = 'stream_log'").fetchone(), "the old table went"
        )

    @inlineCallbacks
    def test_a_version_1_database_is_migrated(self) -> Any:
        for published in (True, False):
            path = version_1_database(Path(self.mktemp()), published)
            store = SQLiteStore(path, reactor)
            recovered = store.open()
            assert_version_1_recovered(self, store, recovered, published)
            reader = store._reading()
            self.assertEqual(reader.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION)
            self.assertEqual(
                reader.execute(
                    "SELECT name FROM sqlite_master WHERE name IN ('queue_messages', 'queue_messages_by_message',"
                    " 'messages_v1', 'queue_counts', 'queue_names_by_name')"
                ).fetchall(),
                [],
                "the old tables and index went, and what the migration made for itself",
            )
            self.assertEqual(
                reader.execute("SELECT m.id, n.name FROM messages m JOIN queue_names n ON n.id = m.queue").fetchall(),
                [(1, "a"), (3, "b"), (4, "c")],
            )
            # The migrated message on two queues leaves each separately.
            store.remove("/", "b", [2])
            store, recovered = yield self.restarted(store)
            self.assertEqual([m.message_id for m in recovered.messages[("/", "a")]], [1, 2])
            self.assertEqual([m.message_id for m in recovered.messages[("/", "b")]], [3])
            store.remove("/", "a", [2])
            store, recovered = yield self.restarted(store)
            self.assertEqual([m.message_id for m in recovered.messages[("/", "a")]], [1])
            self.assertEqual(store.read([2]), {})
            yield store.close()

    def test_a_failed_migration_leaves_version_1_as_it_was(self) -> None:
        path = version_1_database(Path(self.mktemp()))
        with sqlite3.connect(path) as db:
            # The migration fails halfway: its links are refused.
            db.execute(
                "CREATE TABLE message_links (message_id INTEGER NOT NULL, queue INTEGER NOT NULL,"
                " PRIMARY KEY (message_id, queue)) WITHOUT ROWID"
            )
            db.execute("CREATE TRIGGER refuse BEFORE INSERT ON message_links BEGIN SELECT RAISE(ABORT, 'no room'); END")
        error = self.assertRaises(sqlite3.IntegrityError, SQLiteStore(path, reactor).open)
        self.assertIn("no room", str(error))
        with sqlite3.connect(path) as db:
            db.execute("DROP TRIGGER refuse")
            self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], 1)
            self.assertEqual(db.execute("SELECT count(*) FROM queue_messages").fetchone()[0], 5)
        store = SQLiteStore(path, reactor)
        self.addCleanup(store.close)
        assert_version_1_recovered(self, store, store.open(), True)

    def test_a_database_of_a_later_version_is_refused_and_left_alone(self) -> None:
        path = self.version_0_database(10)
        with sqlite3.connect(path) as db:
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        error = self.assertRaises(StoreFormatError, SQLiteStore(path, reactor).open)
        self.assertIn(f"layout version {SCHEMA_VERSION + 1}", str(error))
        with sqlite3.connect(path) as db:
            self.assertEqual(db.execute("PRAGMA user_version").fetchone()[0], SCHEMA_VERSION + 1)
            self.assertEqual(db.execute("SELECT count(*) FROM stream_log").fetchone()[0], 10)
        store = SQLiteStore(path, reactor)
        self.assertRaises(StoreFormatError, store.open)

    def test_a_second_store_on_the_same_database_is_refused(self) -> None:
        store = self.make()
        store.open()
        second = SQLiteStore(store.path, reactor)
        error = self.assertRaises(StoreInUse, second.open)
        self.assertIn("in use by another broker", str(error))

#: The end of a child process that writes to a store until it is killed:
#: ``write_50(written)`` writes 50 more items (after *written* of them) and
#: returns the sequence number that makes them durable and the new count;
#: each count made durable is printed on a line. At most WINDOW items wait
#: for the disk, so a slow disk cannot make the writer's backlog (and the
#: process) grow without bound.
_WINDOWED = """
WINDOW = 2000
state = {"written": 0, "confirmed": 0, "paused": False}

def confirmed(_, written):
    if written > state["confirmed"]:
        sys.stdout.write(f"{written}\\n")
        sys.stdout.flush()
        state["confirmed"] = written
    if state["paused"]:
        state["paused"] = False
        write_some()

def write_some():
    if state["written"] - state["confirmed"] >= WINDOW:
        state["paused"] = True
        return
    sequence, state["written"] = write_50(state["written"])
    store.when_durable(sequence).addCallback(confirmed, state["written"])
    reactor.callLater(0, write_some)

reactor.callWhenRunning(write_some)
reactor.run()
"""

#: Messages 1, 2, 3 ... published to queue q, with body b"<n>".
_WRITER = textwrap.dedent(
    """
    import sys
    from twisted.internet import reactor
    from txamqp09.store.interface import DurableQueue, StoredMessage
    from txamqp09.store.url import store_from_url

    store = store_from_url(sys.argv[1], reactor)
    store.open()
    store.add_queue(DurableQueue("/", "q"))

    def write_50(written):
        for n in range(written + 1, written + 51):
            sequence = store.publish(StoredMessage(n, "", "q", b"", b"%d" % n, len(b"%d" % n)), [("/", "q")])
        return sequence, written + 50
    """
) + _WINDOWED

#: Messages 1, 2, 3 ... published to queue q (every third to queue r as
#: well), with body b"<n>"; each call acknowledges on q the 50 messages
#: published two calls before, after publishing: a count made durable means
#: that every message up to it is stored and every one up to 100 before it
#: is off q.
_ACKING_WRITER = textwrap.dedent(
    """
    import sys
    from twisted.internet import reactor
    from txamqp09.store.interface import DurableQueue, StoredMessage
    from txamqp09.store.url import store_from_url

    store = store_from_url(sys.argv[1], reactor)
    store.open()
    store.add_queue(DurableQueue("/", "q"))
    store.add_queue(DurableQueue("/", "r"))

    def write_50(written):
        for n in range(written + 1, written + 51):
            queues = [("/", "q"), ("/", "r")] if n % 3 == 0 else [("/", "q")]
            store.publish(StoredMessage(n, "", "q", b"", b"%d" % n, len(b"%d" % n)), queues)
        sequence = store.remove("/", "q", range(max(written - 99, 1), max(written - 49, 1)))
        return sequence, written + 50
    """
) + _WINDOWED

#: Offsets 0, 1, 2 ... appended to the log of stream s, with body b"<offset>"
#: and timestamp <offset>, into chunks the writer takes while they are filled.
_LOG_WRITER = textwrap.dedent(
    """
    import sys
    from twisted.internet import reactor
    from txamqp09.store.chunks import LogChunk
    from txamqp09.store.interface import DurableQueue
    from txamqp09.store.url import store_from_url

    store = store_from_url(sys.argv[1], reactor)
    store.open()
    store.add_queue(DurableQueue("/", "s", arguments={"x-queue-type": b"stream"}))
    chunks = [LogChunk(0, 0)]

    def write_50(written):
        for offset in range(written, written + 50):
            body = b"%d" % offset
            if not chunks[-1].sequence or not chunks[-1].add(offset, b"\\x00\\x01s", b"\\x00\\x00", body):
                chunks[-1] = LogChunk(offset, 0)
                chunks[-1].add(offset, b"\\x00\\x01s", b"\\x00\\x00", body)
                chunks[-1].sequence = store.append_log("/", "s", chunks[-1])
        return chunks[-1].sequence, written + 50
    """
) + _WINDOWED


class CrashRecoveryContract(_TestCase):
    """A writer killed with SIGKILL mid-stream loses nothing it confirmed;
    subclasses say where the store is (:meth:`store_url`) and how to open it."""

    def store_url(self) -> str:
        raise NotImplementedError

    def opened(self, url: str) -> Any:
        """The store at *url*, made and closed at the end of the test."""
        store = store_from_url(url, reactor)
        self.addCleanup(store.close)
        return store

    def killed_writer(self, script_text: str, until: int) -> tuple[Any, Any, int]:
        """Run *script_text* (a writer that prints what it made durable) until
        it has confirmed *until* items, kill -9 it, and open its store:
        (store, recovered, confirmed)."""
        url = self.store_url()
        script = Path(self.mktemp())
        script.write_text(script_text)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        child = subprocess.Popen(
            [sys.executable, str(script), url], stdout=subprocess.PIPE, text=True, env=env
        )
        confirmed = 0
        assert child.stdout is not None
        for line in child.stdout:
            confirmed = int(line)
            if confirmed >= until:
                break
        child.send_signal(signal.SIGKILL)
        child.wait()
        self.assertGreaterEqual(confirmed, until, "the writer stopped before confirming")
        store = self.opened(url)
        recovered = store.open()
        return store, recovered, confirmed

    def test_kill_9_keeps_every_confirmed_message(self) -> None:
        _, recovered, confirmed = self.killed_writer(_WRITER, 2000)
        bodies = [int(m.body or b"") for m in recovered.messages[("/", "q")]]
        self.assertGreaterEqual(len(bodies), confirmed)
        self.assertEqual(bodies, list(range(1, len(bodies) + 1)))

    def test_kill_9_while_acknowledging_keeps_each_unacknowledged_message_once(self) -> None:
        """Every confirmed message comes back once on each queue it was not
        acknowledged from; none acknowledged durably comes back."""
        _, recovered, confirmed = self.killed_writer(_ACKING_WRITER, 6000)
        on_q = [int(m.body or b"") for m in recovered.messages[("/", "q")]]
        on_r = [int(m.body or b"") for m in recovered.messages[("/", "r")]]
        self.assertEqual([m.message_id for m in recovered.messages[("/", "q")]], on_q)
        self.assertGreaterEqual(on_q[-1], confirmed)
        self.assertGreater(on_q[0], confirmed - 100, "acknowledged messages came back")
        self.assertLessEqual(on_q[0], on_q[-1] - 99, "messages not acknowledged are missing")
        self.assertEqual(on_q, list(range(on_q[0], on_q[-1] + 1)))
        self.assertEqual(on_r, list(range(3, on_r[-1] + 1, 3)))
        self.assertGreaterEqual(on_r[-1], confirmed - 2)
        self.assertIn(on_r[-1], (on_q[-1], on_q[-1] - 1, on_q[-1] - 2), "publishes are written in order")

    def test_kill_9_during_appends_keeps_every_confirmed_offset(self) -> None:
        self.assert_log_kept(*self.killed_writer(_LOG_WRITER, 20000))

    def assert_log_kept(self, store: Any, recovered: Any, confirmed: int) -> None:
        """The recovered log of stream s holds every offset confirmed, each
        message the one appended at its offset, and nothing else."""
        (segment,) = recovered.logs[("/", "s")]
        self.assertGreaterEqual(segment.last, confirmed - 1)
        offsets: list[int] = []
        chunk = store.read_log("/", "s", 0)
        while chunk is not None:
            for index in range(chunk.count):
                _, _, body, timestamp = chunk.message(index)
                self.assertEqual((int(body), timestamp), (chunk.first + index, chunk.first + index))
            offsets.extend(range(chunk.first, chunk.end))
            chunk = store.read_log("/", "s", chunk.end)
        self.assertEqual(offsets, list(range(segment.last + 1)))
        self.assertEqual(segment.size, sum(len(b"%d" % n) for n in offsets))


class SQLiteCrashRecoveryTests(CrashRecoveryContract, TestCase):
    def store_url(self) -> str:
        return f"sqlite:{Path(tempfile.mkdtemp()) / 'crash.db'}"

    def test_kill_9_while_checkpoints_are_made_beside_the_commits_keeps_every_confirmed_offset(self) -> None:
        # A log checkpointed every 16 KiB: the checkpointer's copies and the
        # log starting over in its file again and again before the kill.
        script = _LOG_WRITER.replace(
            "store = store_from_url(",
            "from txamqp09.store import sqlite\nsqlite.CHECKPOINT_BYTES = 16 * 1024\nstore = store_from_url(",
        )
        self.assertNotEqual(script, _LOG_WRITER)
        self.assert_log_kept(*self.killed_writer(script, 40000))


class PostgreSQLStoreTests(SQLStoreContract, TestCase):
    skip = psycopg_missing()

    def make(self) -> Any:
        return self.made(shared_postgresql().new_database())

    def made(self, url: str) -> Any:
        from txamqp09.store.postgresql import PostgreSQLStore

        store = PostgreSQLStore(url, reactor)
        self.addCleanup(store.close)
        return store

    def reopen(self, store: Any) -> Any:
        return self.made(store.url)


class PostgreSQLCrashRecoveryTests(CrashRecoveryContract, TestCase):
    skip = psycopg_missing()

    def store_url(self) -> str:
        return shared_postgresql().new_database()
