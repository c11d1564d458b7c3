"""A group of two broker processes on a PostgreSQL primary with a synchronous
standby, failing in each of the ways docs/high-availability.rst names, under
a pika publisher with confirms and a pika consumer that acknowledges: no
confirmed message may be lost (duplicates are counted and logged).

1. kill -9 of the active broker;
2. the active stopped (SIGSTOP) for 8 s and resumed: the standby serves
   within 5 s of the stop, and the woken broker serves and confirms nothing;
3. the active's database sessions ended (``pg_terminate_backend``): it stops
   serving before the standby starts;
4. kill -9 of the PostgreSQL primary and promotion of its standby:
   publishing resumes without a broker restart.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import gatherResults, inlineCallbacks
from twisted.internet.task import deferLater
from twisted.python import log
from twisted.trial.unittest import TestCase

from tests.group.clients import Consumer, Ledger, Publisher
from tests.group.support import (
    SERVING, STANDING_BY, GroupBroker, ReplicatedPostgreSQL, accepts, shared_replicated, until,
)
from txamqp09.client import ConnectionClosed, Message, connect
from txamqp09.testing.postgresql import psycopg_missing

#: Confirms to see before a failure, and again after it.
CONFIRMS = 200
#: How long the active stays stopped.
HANG_SECONDS = 8.0
#: The longest the standby may take to serve after the active hangs.
TAKEOVER_SECONDS = 5.0
#: The brokers' lease period (the default).
LEASE_PERIOD = 3.0
#: The queue the SIGSTOP test's own client consumes, one message at a time.
WATCHED = "watched"
#: A lease that outlasts a PostgreSQL failover on a busy machine.
DATABASE_FAILOVER_LEASE = ("--lease-period", "12", "--lease-renew", "1")
#: The exit status of a fenced broker.
EXIT_FENCED = 75


class FailoverTestCase(TestCase):
    """Two brokers of a group and the pika clients, on a new database."""

    skip = psycopg_missing()
    timeout = 180

    def database(self) -> str:
        """The group's database (on the shared replicated pair)."""
        return shared_replicated().new_database()

    @inlineCallbacks
    def group(self, *extra: str) -> Any:
        """An active broker and a standby, and the clients publishing and
        consuming through them; fires once *CONFIRMS* were confirmed."""
        self.url = url = self.database()
        self.active = yield self.broker(url, "node-a", *extra, until=SERVING)
        self.standby = yield self.broker(url, "node-b", *extra)
        self.assertNotIn(SERVING, self.standby.log)
        ports = [self.active.port, self.standby.port]
        self.ledger = Ledger()
        self.publisher = Publisher(ports, self.ledger)
        self.consumer = Consumer(ports, self.ledger)
        self.publisher.start()
        self.consumer.start()
        self.addCleanup(self.consumer.stop)
        self.addCleanup(self.publisher.stop)
        yield until(lambda: self.ledger.confirm_count >= CONFIRMS)

    @inlineCallbacks
    def broker(self, url: str, node: str, *extra: str, until: bytes = STANDING_BY) -> Any:
        """A broker of the group, killed at the end; fires once its log matched *until*."""
        broker = GroupBroker(self.mktemp(), url, node, *extra)
        self.addCleanup(lambda: log.msg(f"{node}'s output:\n" + broker.log.decode(errors="replace")))
        self.addCleanup(broker.kill)
        yield broker.start(reactor, until)
        return broker

    @inlineCallbacks
    def resumed_and_drained(self, after: float) -> Any:
        """Wait for *CONFIRMS* confirms after *after*, stop publishing, let
        the consumer take everything confirmed, and check that nothing
        confirmed was lost; log the counts."""
        yield until(lambda: self.ledger.confirms_after(after) >= CONFIRMS)
        self.publisher.stop()
        self.assertIsNone(self.publisher.error)
        yield until(lambda: not self.ledger.lost(), timeout=30).addErrback(lambda _: None)
        self.consumer.stop()
        self.assertIsNone(self.consumer.error)
        log.msg(f"{self.id()}: {self.ledger.summary()}")
        self.assertEqual(self.ledger.lost(), set(), self.ledger.summary())


class BrokerFailureTests(FailoverTestCase):
    """The active broker fails; the standby takes over."""

    @inlineCallbacks
    def test_kill_9_of_the_active(self) -> Any:
        """kill -9 of the active: the standby serves, the clients move to
        it, and every confirmed message is received."""
        yield self.group()
        killed_at = time.monotonic()
        yield self.active.kill()
        yield self.standby.wait_for(rb"group role active: took the lease \(epoch 2\): the lease session of node-a ended")
        yield self.resumed_and_drained(killed_at)

    @inlineCallbacks
    def test_clean_stop_of_the_active_hands_over_at_once(self) -> Any:
        """SIGTERM of the active: it closes its store, then releases the
        lease; the standby serves before the lease would have expired."""
        yield self.group()
        stopped_at = time.monotonic()
        yield self.active.stop()
        self.assertIn(b"group role stopped: the broker stops; lease released", self.active.log)
        yield self.standby.wait_for(SERVING)
        self.assertLess(time.monotonic() - stopped_at, LEASE_PERIOD)
        self.assertIn(b"had expired or was released", self.standby.log)
        yield self.resumed_and_drained(stopped_at)

    @inlineCallbacks
    def test_stopped_active_is_replaced_and_serves_nothing_when_it_wakes(self) -> Any:
        """SIGSTOP of the active for 8 s: the standby serves within 5 s of
        the stop; resumed, the old active delivers nothing to its consumer
        whose ack it had not read, confirms nothing of what it had not read,
        closes its connections and exits as fenced."""
        yield self.group()
        watcher = yield connect(reactor, self.active.url, heartbeat=0)
        self.addCleanup(watcher.dropConnection)
        channel = yield watcher.channel()
        yield channel.confirm_select()
        yield channel.queue_declare(WATCHED, durable=True)
        yield gatherResults([
            channel.basic_publish(b"ready", routing_key=WATCHED, properties={"delivery_mode": 2})
            for _ in range(10)
        ])
        yield channel.basic_qos(1)
        deliveries: list[Message] = []
        yield channel.basic_consume(WATCHED, deliveries.append)
        yield until(lambda: bool(deliveries))
        stopped_at = time.monotonic()
        self.active.signal(signal.SIGSTOP)
        # Read after the wake, the ack would let the next ready message go.
        deliveries[0].ack()
        confirms = [channel.basic_publish(b"unread", routing_key=WATCHED, properties={"delivery_mode": 2}) for _ in range(5)]
        outcomes: list[Any] = []
        for confirm in confirms:
            confirm.addBoth(outcomes.append)
        yield until(lambda: accepts(self.standby.port), interval=0.01)
        took = time.monotonic() - stopped_at
        log.msg(f"the standby served {took:.2f} s after SIGSTOP of the active")
        self.assertLessEqual(took, TAKEOVER_SECONDS)
        yield deferLater(reactor, max(stopped_at + HANG_SECONDS - time.monotonic(), 0))
        self.active.signal(signal.SIGCONT)
        closed = yield watcher.whenClosed()
        yield self.active.ended
        self.assertEqual(self.active.exit_code, EXIT_FENCED)
        self.assertIn(b"group role fenced", self.active.log)
        self.assertEqual(len(deliveries), 1)
        self.assertEqual(len(outcomes), len(confirms))
        self.assertFalse([outcome for outcome in outcomes if outcome is True or outcome is None])
        self.assertIsInstance(closed, ConnectionClosed)
        self.assertEqual(closed.reply_code, 320)
        yield self.resumed_and_drained(stopped_at + HANG_SECONDS)

    @inlineCallbacks
    def test_terminated_sessions_stop_the_active_before_the_standby_serves(self) -> Any:
        """pg_terminate_backend of the active's database sessions: it stops
        serving and exits as fenced; when the standby serves, the old
        active's port refuses connections."""
        yield self.group()
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as session:
            name = session.execute(
                "SELECT session FROM amqp09_group_members WHERE node = %s", (self.active.node,)
            ).fetchone()[0]
            terminated_at = time.monotonic()
            ended = session.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchone()[0]
        self.assertGreaterEqual(ended, 2)
        yield until(lambda: accepts(self.standby.port), interval=0.005)
        self.assertFalse(accepts(self.active.port))
        yield self.active.ended
        self.assertEqual(self.active.exit_code, EXIT_FENCED)
        yield self.resumed_and_drained(terminated_at)


class DatabaseFailoverTests(FailoverTestCase):
    """The PostgreSQL primary dies and its standby is promoted."""

    def database(self) -> str:
        self.servers = ReplicatedPostgreSQL()
        self.addCleanup(self.servers.remove)
        return self.servers.new_database()

    @inlineCallbacks
    def test_primary_killed_and_standby_promoted(self) -> Any:
        """kill -9 of the primary, then promotion of its standby: the active
        broker blocks its publishers meanwhile, follows the promoted server,
        keeps its lease and serves again; nothing confirmed is lost. (The
        lease is long enough for a promotion on a busy machine.)"""
        yield self.group(*DATABASE_FAILOVER_LEASE)
        killed_at = time.monotonic()
        self.servers.primary.kill()
        assert self.servers.standby is not None
        self.servers.standby.promote()
        yield self.resumed_and_drained(killed_at)
        pause = self.ledger.longest_pause_after(killed_at)
        log.msg(f"no confirm for {pause:.2f} s after kill -9 of the primary")
        self.assertTrue(self.active.running)
        self.assertNotIn(b"group role active", self.standby.log)
