"""The PostgreSQL store when its server stops, crashes, is replaced or fences it.

Each test runs a private PostgreSQL server on loopback (see
:mod:`txamqp09.testing.postgresql`) that it stops, restarts or promotes.
"""

from __future__ import annotations

import tempfile
from typing import Any, Optional, cast

from twisted.internet import reactor as global_reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.interfaces import IReactorFromThreads
from twisted.internet.task import LoopingCall
from twisted.trial.unittest import TestCase

from tests.store.test_faults import Reports
from tests.store.test_stores import message
from txamqp09.store import writer
from txamqp09.store.interface import DurableQueue, Fenced, StoreUnavailable
from txamqp09.store.schema import SCHEMA_VERSION, StoreFormatError
from txamqp09.testing.postgresql import PostgreSQL, group_url, psycopg_missing
from txamqp09.testing.rabbitmq import free_port
from txamqp09.testing.waiting import eventually

reactor = cast(IReactorFromThreads, global_reactor)
Q = ("/", "q")


class Publisher:
    """Publishes message 1, 2, 3 ... to queue q of *store*, one every
    *interval* seconds, and counts which were confirmed (durable) and which
    refused (their write dropped)."""

    def __init__(self, store: Any, interval: float = 0.002) -> None:
        self.store = store
        self.published = 0
        self.confirmed: list[int] = []
        self.refused: list[int] = []
        self._loop = LoopingCall(self._publish)
        self._loop.clock = global_reactor
        self._interval = interval

    def start(self) -> None:
        self._loop.start(self._interval)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def _publish(self) -> None:
        self.published += 1
        number = self.published
        sequence = self.store.publish(message(number, b"%d" % number), [Q])
        self.store.when_durable(sequence).addCallback(self._settled, number, sequence)

    def _settled(self, _: None, number: int, sequence: int) -> None:
        refused = self.store.failed_between(sequence - 1, sequence)
        (self.refused if refused else self.confirmed).append(number)

    def settled(self) -> Deferred[Any]:
        """Stop, and fire once every message published is confirmed or refused."""
        self.stop()
        return eventually(
            lambda: len(self.confirmed) + len(self.refused) == self.published, global_reactor, timeout=60,
            what="every publish settled",
        )

    def until_confirmed(self, count: int) -> Deferred[Any]:
        """Fires once *count* more messages than now are confirmed."""
        target = len(self.confirmed) + count
        return eventually(lambda: len(self.confirmed) >= target, global_reactor, timeout=60, what=f"{count} confirms")


class PostgreSQLTestCase(TestCase):
    """A private server for each test, and stores on it closed at the end."""

    skip = psycopg_missing()
    timeout = 240

    def setUp(self) -> None:
        self.patch(writer, "RETRY_SECONDS", 0.05)
        self.server = self.started_server()
        self.url = self.server.new_database()

    def started_server(self) -> PostgreSQL:
        server = PostgreSQL(tempfile.mkdtemp(prefix="txamqp09-store-"))
        self.addCleanup(server.remove)
        server.start()
        return server

    def store(self, url: Optional[str] = None, **options: Any) -> Any:
        """A store on *url* (the test's database), opened, closed at the end."""
        from txamqp09.store.postgresql import PostgreSQLStore

        store = PostgreSQLStore(url or self.url, reactor, **options)
        self.addCleanup(store.close)
        store.open()
        return store

    def sql(self, statement: str, server: Optional[PostgreSQL] = None) -> str:
        """Run *statement* on the test's database (of *server*)."""
        return (server or self.server).execute(statement, database=self.url.rsplit("/", 1)[1])


class ReconnectionTests(PostgreSQLTestCase):
    """The writer connects again after losing its server; nothing confirmed is lost or written twice."""

    @inlineCallbacks
    def reopened_ids(self, store: Any, url: Optional[str] = None) -> Any:
        """Close *store*, open its database with a new store: the ids on queue q."""
        yield store.close()
        from txamqp09.store.postgresql import PostgreSQLStore

        fresh = PostgreSQLStore(url or self.url, reactor)
        self.addCleanup(fresh.close)
        return [m.message_id for m in fresh.open().messages[Q]]

    @inlineCallbacks
    def publishing(self, url: Optional[str] = None) -> Any:
        """A store on *url* with queue q, and a :class:`Publisher` publishing
        to it that has had 100 messages confirmed: (store, its reports, publisher)."""
        store = self.store(url)
        reports = Reports(store)
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        publisher = Publisher(store)
        publisher.start()
        self.addCleanup(publisher.stop)
        yield publisher.until_confirmed(100)
        return store, reports, publisher

    @inlineCallbacks
    def assert_every_publish_kept(self, store: Any, publisher: Publisher, url: Optional[str] = None) -> Any:
        """Once 100 more messages are confirmed: every message *publisher*
        published was confirmed, none refused (a batch of a lost connection
        is written again, not dropped), and the database holds each once."""
        yield publisher.until_confirmed(100)
        yield publisher.settled()
        published = list(range(1, publisher.published + 1))
        self.assertEqual(publisher.refused, [], "a batch of a lost connection is written again, not dropped")
        self.assertEqual(sorted(publisher.confirmed), published, "what waited during the outage is confirmed after")
        ids = yield self.reopened_ids(store, url)
        self.assertEqual(ids, published, "each message once, in order")

    @inlineCallbacks
    def terminated(self, waiting: str) -> Any:
        """Wait until one session of the server is *waiting* (a condition on
        ``pg_stat_activity``), then end it as ``pg_terminate_backend`` does."""
        yield eventually(
            lambda: self.server.execute(f"SELECT count(*) FROM pg_stat_activity WHERE {waiting}") == "1",
            global_reactor, what=f"a session where {waiting}",
        )
        self.server.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {waiting}")

    @inlineCallbacks
    def test_a_server_stopped_at_once_and_started_again_loses_nothing_confirmed(self) -> Any:
        store, reports, publisher = yield self.publishing()
        self.server.stop("immediate")
        yield reports.until(1)
        self.assertIsNotNone(reports.heard[0])
        yield eventually(lambda: publisher.published > len(publisher.confirmed) + 50, global_reactor)
        self.server.start()
        yield reports.until(2)
        self.assertIsNone(reports.heard[1], "writing works again")
        yield self.assert_every_publish_kept(store, publisher)

    @inlineCallbacks
    def test_a_commit_whose_answer_was_lost_is_settled_by_what_the_database_holds(self) -> Any:
        """The connection ends while COMMIT waits for a synchronous standby
        that never answers: the transaction committed locally, so the batch
        is durable, and not written again."""
        store = self.store(application_name="in-doubt-committed")
        reports = Reports(store)
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        self.server.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
        self.server.execute("SELECT pg_reload_conf()")
        with store._lock:  # one batch
            sequences = [store.publish(message(n), [Q]) for n in range(1, 11)]
        yield self.terminated("application_name = 'in-doubt-committed' AND wait_event = 'SyncRep'")
        self.server.execute("ALTER SYSTEM RESET synchronous_standby_names")
        self.server.execute("SELECT pg_reload_conf()")
        yield store.when_durable(sequences[-1])
        self.assertFalse(store.failed_between(sequences[0] - 1, sequences[-1]))
        yield reports.until(2)
        self.assertEqual([error is None for error in reports.heard], [False, True])
        self.assertEqual(self.sql("SELECT count(*), count(DISTINCT id) FROM amqp09_messages"), "10|10")
        ids = yield self.reopened_ids(store)
        self.assertEqual(ids, list(range(1, 11)))

    @inlineCallbacks
    def test_a_transaction_cut_short_before_its_commit_is_written_again(self) -> Any:
        """The connection ends while the batch's transaction waits for a
        lock: nothing of it committed, so it is written again, whole."""
        import psycopg

        store = self.store(application_name="in-doubt-rolled-back")
        reports = Reports(store)
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        with psycopg.connect(self.url, autocommit=True) as holder:
            holder.execute("BEGIN")
            holder.execute("SELECT * FROM amqp09_writers FOR UPDATE")
            with store._lock:  # one batch
                sequences = [store.publish(message(n), [Q]) for n in range(1, 11)]
            yield self.terminated("application_name = 'in-doubt-rolled-back' AND wait_event_type = 'Lock'")
            yield reports.until(1)
            holder.execute("COMMIT")
        yield store.when_durable(sequences[-1])
        self.assertFalse(store.failed_between(sequences[0] - 1, sequences[-1]))
        yield reports.until(2)
        self.assertIsNone(reports.heard[1])
        ids = yield self.reopened_ids(store)
        self.assertEqual(ids, list(range(1, 11)))

    @inlineCallbacks
    def test_the_writer_follows_a_promoted_standby(self) -> Any:
        """A URI naming both servers: after the primary's crash and the
        standby's promotion, the writer goes on with the new primary and
        every confirmed message is there."""
        standby = self.server.add_standby(tempfile.mkdtemp(prefix="txamqp09-standby-"))
        self.addCleanup(standby.remove)
        self.server.make_synchronous()
        url = group_url([self.server, standby], self.url.rsplit("/", 1)[1])
        store, reports, publisher = yield self.publishing(url)
        self.server.kill()
        yield reports.until(1)
        standby.promote()
        yield reports.until(2)
        yield self.assert_every_publish_kept(store, publisher, url)


class WriteFailureTests(PostgreSQLTestCase):
    """A statement the server refuses, on a connection that works, fails its batch as the SQLite store's do."""

    @inlineCallbacks
    def test_a_refused_batch_drops_its_publishes_keeps_the_rest_and_writing_goes_on(self) -> Any:
        store = self.store()
        reports = Reports(store)
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        yield store.when_durable(store.publish(message(1), [Q]))
        with store._lock:  # one batch: a second message 1 is refused by the key of messages
            refused = store.publish(message(1, b"again"), [Q])
            declared = store.add_queue(DurableQueue("/", "q2"))
        yield store.when_durable(declared)
        self.assertTrue(store.failed_between(refused - 1, refused))
        self.assertFalse(store.failed_between(refused, declared), "the declaration is written with the next batch")
        yield reports.until(1)
        self.assertIn("UniqueViolation", reports.heard[0] or "")
        yield store.when_durable(store.publish(message(2), [Q]))
        yield reports.until(2)
        self.assertIsNone(reports.heard[1])
        yield store.close()
        from txamqp09.store.postgresql import PostgreSQLStore

        fresh = PostgreSQLStore(self.url, reactor)
        self.addCleanup(fresh.close)
        recovered = fresh.open()
        self.assertEqual([(m.message_id, m.body) for m in recovered.messages[Q]], [(1, b"body"), (2, b"body")])
        self.assertEqual(sorted(q.name for q in recovered.queues), ["q", "q2"])


class FencingTests(PostgreSQLTestCase):
    """A guard that finds no row fences the store: nothing of the refused batch is confirmed."""

    GUARD = ("SELECT 1 FROM lease WHERE name = %s AND holder = %s FOR SHARE", ("group", "broker-1"))

    def setUp(self) -> None:
        super().setUp()
        self.sql("CREATE TABLE lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL)")
        self.sql("INSERT INTO lease VALUES ('group', 'broker-1')")

    @inlineCallbacks
    def test_a_lease_taken_by_another_fences_the_next_batch(self) -> Any:
        store = self.store(guard=self.GUARD)
        reports = Reports(store)
        yield store.when_durable(store.add_queue(DurableQueue(*Q)))
        yield store.when_durable(store.publish(message(1), [Q]))
        self.sql("UPDATE lease SET holder = 'broker-2'")
        with store._lock:  # one batch
            refused = [store.publish(message(n), [Q]) for n in (2, 3)]
        failure = yield self.assertFailure(store.when_durable(refused[-1]), Fenced)
        self.assertIn("guard", str(failure))
        self.assertTrue(store.failed_between(refused[0] - 1, refused[-1]))
        self.assertTrue(store.fenced)
        yield reports.until(1)
        self.assertTrue((reports.heard[0] or "").startswith("Fenced: "), reports.heard)
        self.assertRaises(RuntimeError, store.publish, message(4), [Q])
        yield self.assertFailure(store.when_durable(store.last_sequence + 1), Fenced)
        self.assertEqual(self.sql("SELECT id FROM amqp09_messages"), "1", "nothing of the refused batch")

    def test_opening_without_the_lease_is_refused(self) -> None:
        from txamqp09.store.postgresql import PostgreSQLStore

        self.sql("UPDATE lease SET holder = 'broker-2'")
        store = PostgreSQLStore(self.url, reactor, guard=self.GUARD)
        self.addCleanup(store.close)
        self.assertRaises(Fenced, store.open)

    def test_connections_carry_the_application_name(self) -> None:
        self.store(application_name="broker-1")
        self.assertEqual(
            self.server.execute("SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'broker-1'"), "t"
        )


class OpeningTests(PostgreSQLTestCase):
    """A store connects only when opened, in tables of its own, of a known layout."""

    def test_a_store_is_made_without_connecting_and_says_why_it_cannot_open(self) -> None:
        from txamqp09.store.postgresql import PostgreSQLStore

        store = PostgreSQLStore(f"postgresql://postgres:secret@127.0.0.1:{free_port()}/nowhere", reactor)
        self.addCleanup(store.close)
        error = self.assertRaises(StoreUnavailable, store.open)
        self.assertIn("127.0.0.1", str(error))
        self.assertNotIn("secret", str(error))
        self.assertEqual(len(str(error).splitlines()), 1)

    def test_tables_are_its_own_and_of_the_current_layout(self) -> None:
        self.store()
        self.assertEqual(self.sql("SELECT version FROM amqp09_schema"), str(SCHEMA_VERSION))
        self.assertEqual(
            self.sql("SELECT to_regclass('amqp09_messages') IS NOT NULL, to_regclass('messages') IS NULL"), "t|t"
        )

    @inlineCallbacks
    def test_a_database_of_a_later_layout_is_refused_and_left_alone(self) -> Any:
        store = self.store()
        yield store.close()
        self.sql(f"UPDATE amqp09_schema SET version = {SCHEMA_VERSION + 1}")
        from txamqp09.store.postgresql import PostgreSQLStore

        later = PostgreSQLStore(self.url, reactor)
        self.addCleanup(later.close)
        error = self.assertRaises(StoreFormatError, later.open)
        self.assertIn(f"layout version {SCHEMA_VERSION + 1}", str(error))
        self.assertEqual(self.sql("SELECT version FROM amqp09_schema"), str(SCHEMA_VERSION + 1))
