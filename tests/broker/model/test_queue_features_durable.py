"""The queue features with durable queues and persistent messages, across restarts."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, cast

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.interfaces import IReactorFromThreads
from twisted.trial.unittest import SynchronousTestCase, TestCase

from tests.broker.model.support import World
from txamqp09.broker.model import Broker, Persistence
from txamqp09.store.interface import DurableQueue, StoredMessage
from txamqp09.store.memory import MemoryStore
from txamqp09.store.sqlite import SQLiteStore

#: The clock's time when the tests publish.
_START = 1_700_000_000.0


class RestartTests(SynchronousTestCase):
    """A broker on a MemoryStore, restarted on the same store and clock."""

    def setUp(self) -> None:
        self.store = MemoryStore()
        self.store.open()
        self.world = World(Broker(persistence=Persistence(self.store)).vhosts["/"])
        self.world.clock.advance(_START)

    def restart(self, down: float = 0.0) -> World:
        """A new broker restored from the store after *down* seconds, its
        clock that much past the old one's (whose timers are gone with it)."""
        now = self.world.clock.seconds() + down
        broker = Broker(persistence=Persistence(self.store))
        self.world = World(broker.vhosts["/"])
        self.world.clock.advance(now)
        broker.restore(self.store.open())
        return self.world

    def test_message_ttl_counts_from_the_publish_across_a_restart(self) -> None:
        self.world.declare("q", {"x-message-ttl": 10_000}, durable=True)
        self.world.publish("q", b"queue-ttl", delivery_mode=2)
        self.world.publish("q", b"own-ttl", delivery_mode=2, expiration="20000")
        self.world.clock.advance(6)
        world = self.restart()
        self.assertEqual(world.bodies("q"), [b"queue-ttl", b"own-ttl"])
        world.clock.advance(3.75)
        self.assertEqual(world.bodies("q"), [b"queue-ttl", b"own-ttl"])
        world.clock.advance(0.25)
        self.assertEqual(world.bodies("q"), [])
        self.assertEqual(self.store.messages.get(("/", "q"), {}), {})

    def test_expired_while_down_is_dead_lettered_at_start(self) -> None:
        self.world.declare("dead", durable=True)
        self.world.declare(
            "q", {"x-message-ttl": 1000, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"},
            durable=True,
        )
        self.world.publish("q", b"m", delivery_mode=2)
        world = self.restart(down=2)
        self.assertEqual(world.bodies("q"), [b"m"])  # until the start's timer runs
        world.clock.advance(0)
        self.assertEqual(world.bodies("q"), [])
        self.assertEqual(world.bodies("dead"), [b"m"])
        [death] = world.vhost.queues["dead"].messages[0][1].properties.headers["x-death"]
        self.assertEqual((death["reason"], death["queue"]), (b"expired", b"q"))
        self.assertEqual([m.body for m in self.store.messages[("/", "dead")].values()], [b"m"])

    def test_dead_lettered_persistent_message_is_stored_on_its_new_queue(self) -> None:
        self.world.declare("dead", durable=True)
        self.world.declare(
            "q", {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}, durable=True
        )
        self.world.publish("q", b"job", delivery_mode=2, expiration="60000")
        got = self.world.get("q", no_ack=False)
        assert got is not None
        self.world.session.reject(got[0], requeue=False)
        self.assertEqual(self.store.messages.get(("/", "q"), {}), {})
        self.assertEqual([m.body for m in self.store.messages[("/", "dead")].values()], [b"job"])
        world = self.restart()
        dead = world.get("dead")
        assert dead is not None
        headers = dead[1].properties.headers
        self.assertEqual(headers["x-death"][0]["reason"], b"rejected")
        self.assertEqual(headers["x-death"][0]["original-expiration"], b"60000")
        self.assertIsNone(dead[1].properties.expiration)

    def test_priority_queue_keeps_its_order_across_a_restart(self) -> None:
        self.world.declare("q", {"x-max-priority": 5}, durable=True)
        for body, priority in ((b"low", 1), (b"high", 5), (b"none", None)):
            self.world.publish("q", body, delivery_mode=2, priority=priority)
        world = self.restart()
        self.assertEqual(world.bodies("q"), [b"high", b"low", b"none"])

    def test_queue_expiry_counts_from_the_restart(self) -> None:
        self.world.declare("q", {"x-expires": 1000}, durable=True)
        self.world.clock.advance(0.75)
        world = self.restart()
        world.clock.advance(0.75)
        self.assertIn("q", world.vhost.queues)
        world.clock.advance(0.25)
        self.assertNotIn("q", world.vhost.queues)
        self.assertNotIn(("/", "q"), self.store.queues)


class SQLitePublishTimeTests(TestCase):
    """The SQLite store keeps each message's publish time, also in a database
    written before it did."""

    reactor = cast(IReactorFromThreads, global_reactor)

    @inlineCallbacks
    def test_publish_time_survives_and_old_databases_gain_the_column(self) -> Any:
        path = Path(self.mktemp()) / "store.db"
        path.parent.mkdir()
        with sqlite3.connect(path) as old:
            old.execute(
                "CREATE TABLE messages (id INTEGER PRIMARY KEY, exchange TEXT NOT NULL,"
                " routing_key TEXT NOT NULL, properties BLOB NOT NULL, body BLOB NOT NULL)"
            )
        old.close()
        store = SQLiteStore(path, self.reactor)
        store.open()
        store.add_queue(DurableQueue("/", "q"))
        store.publish(StoredMessage(1, "", "q", b"\x10\x00\x02", b"m", 1, published=_START + 0.25), [("/", "q")])
        yield store.when_durable(store.last_sequence)
        yield store.close()
        reopened = SQLiteStore(path, self.reactor)
        recovered = reopened.open()
        self.addCleanup(reopened.close)
        [record] = recovered.messages[("/", "q")]
        self.assertEqual((record.body, record.published), (b"m", _START + 0.25))
