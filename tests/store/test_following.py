"""A copy of a PostgreSQL store's database kept current while another store
writes it: the mirror's catch-ups, and a store that follows its database
before it opens. (Recovery, a catch-up of an empty mirror, is tested on both
backends by tests/store/test_stores.py.)"""

from __future__ import annotations

import time
from typing import Any, Optional, cast

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.interfaces import IReactorFromThreads
from twisted.trial.unittest import TestCase

from tests.store.test_stores import message
from txamqp09.store import following, writes
from txamqp09.store import mirror as mirror_module
from txamqp09.store.interface import DurableBinding, DurableExchange, DurableQueue, Followable
from txamqp09.store.mirror import Mirror
from txamqp09.store.numbers import QueueNumbers
from txamqp09.store.schema import unpack_removals
from txamqp09.testing.postgresql import psycopg_missing, shared_postgresql
from txamqp09.testing.waiting import eventually

reactor = cast(IReactorFromThreads, global_reactor)
A, B = ("/", "a"), ("/", "b")


def ids(recovered: Any, queue: tuple[str, str]) -> list[int]:
    """The ids of the messages *recovered* holds on *queue*."""
    return [record.message_id for record in recovered.messages[queue]]


class MirrorTests(TestCase):
    """What a mirror of a store's database holds after each catch-up, while
    the store writes."""

    skip = psycopg_missing()

    def make(self) -> Any:
        """A new store on a new database (not opened)."""
        return self.on(shared_postgresql().new_database())

    def on(self, url: str) -> Any:
        from txamqp09.store.postgresql import PostgreSQLStore

        return PostgreSQLStore(url, reactor)

    def again(self, store: Any) -> Any:
        """Another store on *store*'s database (not opened)."""
        return self.on(store.url)

    def written(self, *names: str) -> Any:
        """An opened store with durable queues *names*, closed at the end."""
        store = self.make()
        self.addCleanup(store.close)
        store.open()
        for name in names:
            store.add_queue(DurableQueue("/", name))
        return store

    def caught_up(self, store: Any, mirror: Mirror) -> Mirror:
        """*mirror* after a catch-up on *store*'s database, in one snapshot."""
        db = store._follower_connection()
        try:
            with db.snapshot():
                mirror.catch_up(db)
        finally:
            db.close()
        return mirror

    def recovered(self, mirror: Mirror) -> Any:
        return mirror.recovered(QueueNumbers())[0]

    def rows(self, store: Any, statement: str) -> list[tuple[Any, ...]]:
        """The rows of *statement* (the SQL layer's spelling) as *store*'s reader sees them."""
        return [tuple(row) for row in store._reader().execute(statement).fetchall()]

    @inlineCallbacks
    def test_a_catch_up_reads_the_messages_added_since(self) -> Any:
        store = self.written("a", "b")
        for n in (1, 2, 3):
            store.publish(message(n, b"m%d" % n), [A])
        yield store.when_durable(store.last_sequence)
        mirror = self.caught_up(store, Mirror())
        self.assertEqual(mirror.messages, 3)
        store.publish(message(4), [B])
        store.publish(message(5), [A, B])
        store.add_exchange(DurableExchange("/", "x", "fanout"))
        store.add_binding(DurableBinding("/", "x", "b", "queue", ""))
        store.put_setting("users", "alice", {"name": "alice"})
        yield store.when_durable(store.last_sequence)
        recovered = self.recovered(self.caught_up(store, mirror))
        self.assertEqual((ids(recovered, A), ids(recovered, B)), ([1, 2, 3, 5], [4, 5]))
        self.assertEqual([m.body for m in recovered.messages[A]][:3], [b"m1", b"m2", b"m3"])
        self.assertTrue(all(m.redelivered for m in recovered.messages[A]))
        self.assertEqual(recovered.next_message_id, 6)
        self.assertEqual([(b.source, b.destination) for b in recovered.bindings], [("x", "b")])
        self.assertEqual(recovered.settings, {"users": {"alice": {"name": "alice"}}})

    @inlineCallbacks
    def test_removed_messages_are_read_from_the_removal_log(self) -> Any:
        store = self.written("a", "b")
        for n in range(1, 6):
            store.publish(message(n), [A])
        store.publish(message(6), [A, B])
        yield store.when_durable(store.last_sequence)
        mirror = self.caught_up(store, Mirror())
        store.remove("/", "a", [2, 4, 6])
        store.publish(message(7), [A])
        yield store.when_durable(store.last_sequence)
        self.assertEqual(self.caught_up(store, mirror).messages, 5, "message 6 stays on b; 7 is new")
        store.remove("/", "b", [6])
        store.publish(message(8), [A])
        store.remove("/", "a", [8])
        yield store.when_durable(store.last_sequence)
        recovered = self.recovered(self.caught_up(store, mirror))
        self.assertEqual((ids(recovered, A), ids(recovered, B)), ([1, 3, 5, 7], []))
        self.assertEqual(recovered.next_message_id, 8)
        self.assertEqual(mirror.restarts, 0)

    @inlineCallbacks
    def test_each_transaction_that_removes_messages_logs_them(self) -> Any:
        store = self.written("a", "b")
        for n in range(1, 5):
            store.publish(message(n), [A, B] if n == 4 else [A])
        yield store.when_durable(store.last_sequence)
        with store._lock:  # the writer takes nothing until all are queued
            store.remove("/", "a", [1, 2, 4])
            store.remove("/", "b", [4])
        yield store.when_durable(store.last_sequence)
        yield store.when_durable(store.remove("/", "a", [3]))
        names = dict(self.rows(store, "SELECT name, id FROM {queue_names}"))
        logged = [
            (sequence, list(unpack_removals(data)))
            for sequence, data in self.rows(store, "SELECT sequence, data FROM {removals} ORDER BY sequence")
        ]
        self.assertEqual(logged, [
            (1, [(names["a"], (1, 2, 4)), (names["b"], (4,))]),
            (2, [(names["a"], (3,))]),
        ])

    @inlineCallbacks
    def test_a_mirror_behind_the_kept_removals_starts_over(self) -> Any:
        """The writer keeps the latest rows of the removal log: a mirror that
        missed rows it deleted reads everything again."""
        self.patch(writes, "_TRIM_EVERY", 1)
        self.patch(writes, "REMOVALS_KEPT", 2)
        self.patch(mirror_module, "REMOVALS_KEPT", 2)
        store = self.written("a")
        for n in range(1, 7):
            store.publish(message(n, b"m%d" % n), [A])
        yield store.when_durable(store.last_sequence)
        mirror = self.caught_up(store, Mirror())
        for n in (1, 2, 3):
            yield store.when_durable(store.remove("/", "a", [n]))
        self.assertEqual(len(self.rows(store, "SELECT sequence FROM {removals}")), 2)
        recovered = self.recovered(self.caught_up(store, mirror))
        self.assertEqual(mirror.restarts, 1)
        self.assertEqual([m.body for m in recovered.messages[A]], [b"m4", b"m5", b"m6"])

    @inlineCallbacks
    def test_a_deleted_queue_goes_with_its_messages(self) -> Any:
        store = self.written("a", "b")
        store.publish(message(1), [A])
        store.publish(message(2), [A, B])
        store.publish(message(3), [B])
        yield store.when_durable(store.last_sequence)
        mirror = self.caught_up(store, Mirror())
        store.remove_queue("/", "b")
        yield store.when_durable(store.last_sequence)
        recovered, leftovers, unused = self.caught_up(store, mirror).recovered(QueueNumbers())
        self.assertEqual(list(recovered.messages), [A])
        self.assertEqual(ids(recovered, A), [1, 2])
        self.assertEqual((leftovers, unused), ([], []))

    @inlineCallbacks
    def test_bodies_are_held_while_the_budget_lasts(self) -> Any:
        store = self.written("a", "b")
        for n in (1, 2, 3):
            store.publish(message(n, b"%010d" % n), [A, B] if n == 1 else [A])
        yield store.when_durable(store.last_sequence)
        mirror = self.caught_up(store, Mirror(25))
        self.assertEqual(mirror.body_bytes, 20, "message 1 counts once")
        store.remove("/", "a", [1])
        store.remove("/", "b", [1])
        store.publish(message(4, b"%010d" % 4), [A])
        store.publish(message(5, b"%010d" % 5), [A])
        yield store.when_durable(store.last_sequence)
        recovered = self.recovered(self.caught_up(store, mirror))
        self.assertEqual(
            [m.body for m in recovered.messages[A]], [b"%010d" % 2, None, b"%010d" % 4, None],
            "removing message 1 made room for one more body",
        )
        self.assertEqual([m.size for m in recovered.messages[A]], [10] * 4)

    @inlineCallbacks
    def test_a_store_that_followed_its_database_reads_what_changed_when_it_opens(self) -> Any:
        """The follower's budget (all bodies) rather than open's (none)
        shows that the store opened from the followed copy."""
        writer = self.written("a", "b")
        for n in range(1, 101):
            writer.publish(message(n, b"m%d" % n), [A, B] if n % 10 == 0 else [A])
        yield writer.when_durable(writer.last_sequence)
        standby = self.again(writer)
        self.addCleanup(standby.close)
        self.assertIsInstance(standby, Followable)
        standby.follow()
        yield eventually(lambda: standby.follower.mirror.messages == 100, global_reactor, timeout=30)
        writer.remove("/", "a", list(range(1, 51)))
        writer.remove("/", "b", [10, 20])
        writer.publish(message(101, b"m101"), [B])
        yield writer.when_durable(writer.last_sequence)
        yield writer.close()
        recovered = standby.open(body_budget=0)
        self.assertTrue(recovered.followed)
        self.assertIsNone(standby.follower)
        self.assertEqual(ids(recovered, A), list(range(51, 101)))
        self.assertEqual(ids(recovered, B), [30, 40, 50, 60, 70, 80, 90, 100, 101])
        self.assertEqual([m.body for m in recovered.messages[B]][-2:], [b"m100", b"m101"])
        self.assertEqual(recovered.next_message_id, 102)
        yield standby.when_durable(standby.publish(message(102), [A]))
        standby.remove("/", "a", [51])
        yield standby.when_durable(standby.last_sequence)

    def test_closing_a_store_that_follows_stops_following(self) -> Any:
        store = self.make()
        store.follow()
        follower = store.follower
        closed = store.close()
        self.assertIsNone(store.follower)
        self.assertFalse(follower._thread.is_alive())
        return closed

    @inlineCallbacks
    def test_a_writer_that_opens_after_another_starts_the_mirror_over(self) -> Any:
        """The new writer numbers from the highest id stored, below one the
        mirror read: the same id is another message now."""
        first = self.written("a")
        for n in (1, 2, 3):
            first.publish(message(n, b"first %d" % n), [A])
        yield first.when_durable(first.last_sequence)
        mirror = self.caught_up(first, Mirror())
        first.remove("/", "a", [3])
        yield first.when_durable(first.last_sequence)
        yield first.close()
        second = self.again(first)
        self.addCleanup(second.close)
        opened = second.open()
        self.assertEqual((opened.next_message_id, opened.followed), (3, False))
        yield second.when_durable(second.publish(message(3, b"second 3"), [A]))
        recovered = self.recovered(self.caught_up(second, mirror))
        self.assertEqual([m.body for m in recovered.messages[A]], [b"first 1", b"first 2", b"second 3"])

    @inlineCallbacks
    def test_stopping_interrupts_a_catch_up_under_way(self) -> Any:
        """A catch-up that waits (here for a lock) is interrupted: the
        follower stops at once and its mirror can be used."""
        import psycopg

        writer = self.written("a")
        yield writer.when_durable(writer.publish(message(1), [A]))
        standby = self.again(writer)
        self.addCleanup(standby.close)
        standby.follow()
        yield eventually(lambda: standby.follower.mirror.messages == 1, global_reactor, timeout=30)
        locker = psycopg.connect(writer.url, autocommit=True)
        self.addCleanup(locker.close)
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE amqp09_messages IN ACCESS EXCLUSIVE MODE")
        catch_ups = standby.follower.catch_ups
        yield eventually(lambda: self.waiting_for_lock(writer.url), global_reactor, timeout=30)
        started = time.monotonic()
        mirror: Optional[Mirror] = standby.follower.stop()
        self.assertLess(time.monotonic() - started, following.STOP_SECONDS)
        self.assertEqual(standby.follower.catch_ups, catch_ups)
        self.assertIsNotNone(mirror)

    def waiting_for_lock(self, url: str) -> bool:
        """Whether a session of *url*'s database waits for a lock."""
        import psycopg

        with psycopg.connect(url, autocommit=True) as db:
            row = db.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            ).fetchone()
        return bool(row and row[0])

