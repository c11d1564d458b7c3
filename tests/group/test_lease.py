"""The lease rules of :mod:`txamqp09.group.lease`, on a real PostgreSQL server."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from twisted.python.reflect import requireModule
from twisted.trial.unittest import TestCase

from txamqp09.testing.postgresql import psycopg_missing, shared_postgresql

try:
    import psycopg

    from txamqp09.group import lease
    from txamqp09.group.records import Address, Identity
except ImportError:  # the tests skip, through psycopg_missing()
    pass

PERIOD = 30.0
#: A lease period short enough to watch one expire.
SHORT = 0.3


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll *condition* until it holds (failing after *timeout* seconds)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {condition}")
        time.sleep(0.01)


class LeaseTestCase(TestCase):
    """A new database with the group's tables, and sessions named after members."""

    skip = psycopg_missing()

    def setUp(self) -> None:
        self.url = shared_postgresql().new_database()
        self.a = Identity.new("node-a")
        self.b = Identity.new("node-b")
        lease.prepare(self.session(Identity("setup", "lease tests")))

    def session(self, me: Any) -> "psycopg.Connection[Any]":
        """A new autocommit session named after *me* (closed at the end)."""
        connection = psycopg.connect(self.url, autocommit=True, application_name=me.session)
        self.addCleanup(connection.close)
        return connection


class TakeTests(LeaseTestCase):
    """Taking the lease."""

    def test_never_held_lease_is_taken_with_epoch_one(self) -> None:
        """A lease nobody held is free; taking it records the holder, its
        session, its backend pid and an expiry one period ahead."""
        connection = self.session(self.a)
        before = lease.read(connection)
        self.assertTrue(before.free)
        self.assertIsNone(before.holder)
        taken = lease.take(connection, self.a, PERIOD, before.epoch, holder_gone=False)
        assert taken is not None
        self.assertEqual((taken.holder, taken.holder_session, taken.epoch), ("node-a", self.a.session, before.epoch + 1))
        pid = connection.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.assertEqual(taken.holder_pid, pid)
        self.assertFalse(taken.free)
        self.assertAlmostEqual(taken.seconds_left(), PERIOD, delta=1.0)

    def test_held_lease_is_not_taken(self) -> None:
        """While the holder's lease lasts, another member cannot take it."""
        first = lease.take(self.session(self.a), self.a, PERIOD, 0, holder_gone=False)
        assert first is not None
        self.assertIsNone(lease.take(self.session(self.b), self.b, PERIOD, first.epoch, holder_gone=False))
        self.assertEqual(lease.read(self.session(self.b)).holder, "node-a")

    def test_holder_gone_takes_an_unexpired_lease(self) -> None:
        """A member that knows the holder's session ended takes the lease
        before it expires, with the next epoch."""
        first = lease.take(self.session(self.a), self.a, PERIOD, 0, holder_gone=False)
        assert first is not None
        taken = lease.take(self.session(self.b), self.b, PERIOD, first.epoch, holder_gone=True)
        assert taken is not None
        self.assertEqual((taken.holder, taken.epoch), ("node-b", first.epoch + 1))

    def test_stale_epoch_takes_nothing(self) -> None:
        """Two members that read the same epoch: only the first takes it."""
        seen = lease.read(self.session(self.a)).epoch
        self.assertIsNotNone(lease.take(self.session(self.a), self.a, PERIOD, seen, holder_gone=True))
        self.assertIsNone(lease.take(self.session(self.b), self.b, PERIOD, seen, holder_gone=True))
        self.assertEqual(lease.read(self.session(self.b)).holder, "node-a")

    def test_expired_lease_is_free(self) -> None:
        """Once the period passed by the database's clock, the lease is free
        and another member takes it."""
        connection = self.session(self.b)
        first = lease.take(self.session(self.a), self.a, SHORT, 0, holder_gone=False)
        assert first is not None
        self.assertIsNone(lease.take(connection, self.b, PERIOD, first.epoch, holder_gone=False))
        wait_until(lambda: lease.read(connection).lapsed)
        self.assertTrue(lease.read(connection).free)
        taken = lease.take(connection, self.b, PERIOD, first.epoch, holder_gone=False)
        assert taken is not None
        self.assertEqual(taken.holder, "node-b")

    def test_released_lease_is_taken_at_once(self) -> None:
        """A holder that releases its lease lets another member take it now."""
        holder = self.session(self.a)
        first = lease.take(holder, self.a, PERIOD, 0, holder_gone=False)
        assert first is not None
        self.assertFalse(lease.release(self.session(self.b), self.b))
        self.assertTrue(lease.release(holder, self.a))
        self.assertTrue(lease.read(holder).free)
        self.assertIsNotNone(lease.take(self.session(self.b), self.b, PERIOD, first.epoch, holder_gone=False))


class RenewTests(LeaseTestCase):
    """Renewing the lease."""

    def test_holder_renews(self) -> None:
        """The holder's renewal moves the expiry forward and records the
        renewing session's pid."""
        first = lease.take(self.session(self.a), self.a, SHORT * 10, 0, holder_gone=False)
        assert first is not None
        other_session = self.session(self.a)
        renewed = lease.renew(other_session, self.a, PERIOD)
        assert renewed is not None
        self.assertGreater(renewed.expires, first.expires)
        self.assertEqual(renewed.holder_pid, other_session.execute("SELECT pg_backend_pid()").fetchone()[0])
        self.assertEqual(renewed.epoch, first.epoch)

    def test_non_holder_renewal_is_refused(self) -> None:
        """A member that does not hold the lease cannot renew it, and the
        lease stays as it was."""
        first = lease.take(self.session(self.a), self.a, PERIOD, 0, holder_gone=False)
        assert first is not None
        self.assertIsNone(lease.renew(self.session(self.b), self.b, PERIOD))
        after = lease.read(self.session(self.b))
        self.assertEqual((after.holder, after.expires), ("node-a", first.expires))

    def test_expired_lease_is_not_renewed(self) -> None:
        """An expired lease belongs to nobody: its former holder cannot renew it."""
        connection = self.session(self.a)
        self.assertIsNotNone(lease.take(connection, self.a, SHORT, 0, holder_gone=False))
        wait_until(lambda: lease.read(connection).lapsed)
        self.assertIsNone(lease.renew(connection, self.a, PERIOD))

    def test_renewal_after_takeover_is_refused(self) -> None:
        """Once another member took the lease, the former holder's renewal is refused."""
        first = lease.take(self.session(self.a), self.a, PERIOD, 0, holder_gone=False)
        assert first is not None
        self.assertIsNotNone(lease.take(self.session(self.b), self.b, PERIOD, first.epoch, holder_gone=True))
        self.assertIsNone(lease.renew(self.session(self.a), self.a, PERIOD))


class GuardTests(LeaseTestCase):
    """The guard the store runs first in each write transaction."""

    def guarded(self, connection: "psycopg.Connection[Any]", me: Identity) -> bool:
        """Whether *me*'s guard returns a row on *connection* (in an open transaction)."""
        statement, parameters = lease.guard(me)
        return connection.execute(statement, parameters).fetchone() is not None

    def test_guard_passes_for_the_holder_only(self) -> None:
        """The holder's guard returns a row; another member's none."""
        connection = self.session(self.a)
        self.assertFalse(self.guarded(connection, self.a))
        self.assertIsNotNone(lease.take(connection, self.a, PERIOD, 0, holder_gone=False))
        self.assertTrue(self.guarded(connection, self.a))
        self.assertFalse(self.guarded(connection, self.b))

    def test_guard_fails_once_the_lease_expired(self) -> None:
        """The holder's guard returns no row once its lease expired."""
        connection = self.session(self.a)
        self.assertIsNotNone(lease.take(connection, self.a, SHORT, 0, holder_gone=False))
        wait_until(lambda: lease.read(connection).lapsed)
        self.assertFalse(self.guarded(connection, self.a))

    def test_takeover_waits_for_a_guarded_transaction(self) -> None:
        """A takeover's UPDATE waits for the holder's open guarded
        transaction; after the takeover the holder's guard finds no row, so
        the old holder commits nothing more."""
        first = lease.take(self.session(self.a), self.a, PERIOD, 0, holder_gone=False)
        assert first is not None
        store = self.session(self.a)
        taker = self.session(self.b)
        store.execute("CREATE TABLE messages (id int)")
        with store.transaction():
            self.assertTrue(self.guarded(store, self.a))
            store.execute("INSERT INTO messages VALUES (1)")
            with self.assertRaises(psycopg.errors.LockNotAvailable):
                lease.take(taker, self.b, PERIOD, first.epoch, holder_gone=True, lock_timeout=0.2)
        taken = lease.take(taker, self.b, PERIOD, first.epoch, holder_gone=True)
        assert taken is not None
        self.assertEqual(taker.execute("SELECT id FROM messages").fetchall(), [(1,)])
        with store.transaction():
            self.assertFalse(self.guarded(store, self.a))

    def test_guard_waits_for_a_takeover_then_fails(self) -> None:
        """A guard that runs while a takeover's UPDATE is not committed waits
        for it, and then finds no row."""
        first = lease.take(self.session(self.a), self.a, PERIOD, 0, holder_gone=False)
        assert first is not None
        store = self.session(self.a)
        taker = self.session(self.b)
        results: list[bool] = []
        with taker.transaction():
            taker.execute(
                f"UPDATE {lease.LEASE_TABLE} SET holder = %s, holder_session = %s, epoch = epoch + 1",
                (self.b.node, self.b.session),
            )
            thread = threading.Thread(target=lambda: results.append(self.guarded(store, self.a)))
            thread.start()
            wait_until(lambda: _waiting_for_lock(taker, self.a.session))
            self.assertEqual(results, [])
        thread.join()
        self.assertEqual(results, [False])


def _waiting_for_lock(connection: "psycopg.Connection[Any]", session: str) -> bool:
    """Whether a session named *session* waits for a lock."""
    row = connection.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'",
        (session,),
    ).fetchone()
    return bool(row and row[0])


class SessionTests(LeaseTestCase):
    """Ending a former holder's sessions, and the presence lock."""

    def test_end_sessions_ends_the_named_sessions_only(self) -> None:
        """Every session named after the former holder ends; others and the
        caller's own stay."""
        victims = [self.session(self.a), self.session(self.a)]
        bystander = self.session(self.b)
        own = self.session(self.a)
        self.assertEqual(lease.end_sessions(own, self.a.session), 2)
        for victim in victims:
            with self.assertRaises(psycopg.OperationalError):
                victim.execute("SELECT 1")
        self.assertEqual(bystander.execute("SELECT 1").fetchone(), (1,))
        self.assertEqual(own.execute("SELECT 1").fetchone(), (1,))

    def test_presence_lock(self) -> None:
        """The presence lock has one holder, whose pid others see; a request
        queued for it waits while it is held and is granted once the
        holder's session ends; a cancelled request leaves its session usable."""
        holder = self.session(self.a)
        waiter = self.session(self.b)
        self.assertIsNone(lease.presence_holder(waiter))
        self.assertTrue(lease.claim_presence(holder))
        self.assertFalse(lease.claim_presence(waiter))
        self.assertEqual(lease.presence_holder(self.session(self.b)), _pid(holder))
        request = lease.PresenceRequest(waiter)
        wait_until(lambda: _waiting_for_lock(holder, self.b.session))
        self.assertFalse(request.granted())
        holder.close()
        wait_until(request.granted)
        self.assertEqual(lease.presence_holder(waiter), _pid(waiter))
        other = self.session(self.a)
        queued = lease.PresenceRequest(other)
        wait_until(lambda: _waiting_for_lock(waiter, self.a.session))
        queued.cancel()
        self.assertEqual(other.execute("SELECT 1").fetchone(), (1,))
        self.assertEqual(lease.presence_holder(other), _pid(waiter))
        lease.drop_presence(waiter)
        self.assertIsNone(lease.presence_holder(waiter))


def _pid(connection: "psycopg.Connection[Any]") -> int:
    """The backend pid of *connection*."""
    return int(connection.execute("SELECT pg_backend_pid()").fetchone()[0])


class MemberTests(LeaseTestCase):
    """The members table."""

    def test_record_and_forget(self) -> None:
        """A member's row holds its role, addresses and round trip, is
        replaced by its next write, and is removed when it leaves."""
        connection = self.session(self.a)
        amqp = Address("amqp", "127.0.0.1", 5672)
        lease.record_member(connection, self.a, "standby", [amqp, Address("http", "127.0.0.1", 15672)], 0.002)
        lease.record_member(connection, self.b, "standby", [], None)
        lease.record_member(connection, self.a, "active", [amqp], 0.001)
        rows = lease.members(connection)
        self.assertEqual([(row.node, row.role) for row in rows], [("node-a", "active"), ("node-b", "standby")])
        self.assertEqual(rows[0].amqp_addresses(), [amqp])
        self.assertEqual(rows[0].round_trip, 0.001)
        self.assertIsNotNone(rows[0].last_seen)
        lease.forget_member(connection, self.a)
        self.assertEqual([row.node for row in lease.members(connection)], ["node-b"])

    def test_prepare_twice(self) -> None:
        """Preparing an existing group changes nothing."""
        connection = self.session(self.a)
        taken = lease.take(connection, self.a, PERIOD, 0, holder_gone=False)
        lease.prepare(connection)
        self.assertEqual(lease.read(connection).epoch, taken.epoch if taken else None)


class IdentityTests(TestCase):
    """A member's names."""

    skip = None if requireModule("psycopg") is not None else "psycopg 3 is not installed"

    def test_session_names_are_unique_and_fit(self) -> None:
        """Each process gets a session name of its own, named after its node,
        that PostgreSQL keeps whole (63 bytes) even for a long node name."""
        first, second = Identity.new("mq1:5672"), Identity.new("mq1:5672")
        self.assertNotEqual(first.session, second.session)
        self.assertTrue(first.session.startswith("txamqp09@mq1:5672 "))
        long = Identity.new("é" * 80)
        self.assertLessEqual(len(long.session.encode()), 63)
        self.assertNotEqual(long.session, Identity.new("é" * 80).session)
