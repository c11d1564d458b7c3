"""Two members of a group in one process: roles, takeover and fencing, on a
real PostgreSQL server (the brokers are stand-ins that listen on a real port)."""

from __future__ import annotations

import time
from typing import Any, Optional

from twisted.internet import reactor
from twisted.internet.defer import Deferred, inlineCallbacks
from twisted.internet.interfaces import IListeningPort
from twisted.internet.protocol import Factory, Protocol
from twisted.trial.unittest import TestCase

from tests.group.support import until
from txamqp09.broker.serving import ServingWindow
from txamqp09.testing.postgresql import psycopg_missing, shared_postgresql

try:
    import psycopg

    from txamqp09.group import lease
    from txamqp09.group.keeper import LeaseTiming
    from txamqp09.group.records import Identity
    from txamqp09.group.service import GroupService, Role
except ImportError:  # the tests skip, through psycopg_missing()
    pass

#: A short lease, so that expiries come within the test's time.
TIMING_PERIOD = 1.5
TIMING_RENEW = 0.3
#: Seconds a test waits for a role change before it fails.
WAIT = 20.0


class StandInBroker:
    """Serves by listening on a port of 127.0.0.1 (nothing is spoken on it),
    and records when it started and stopped serving."""

    def __init__(self) -> None:
        self.port: Optional[IListeningPort] = None
        self.served_at: Optional[float] = None
        self.stopped_at: Optional[float] = None
        self.stop_reason: Optional[str] = None
        self.serving: Deferred[None] = Deferred()
        self.stopped: Deferred[None] = Deferred()

    def serve(self) -> None:
        self.port = reactor.listenTCP(0, Factory.forProtocol(Protocol), interface="127.0.0.1")
        self.served_at = time.monotonic()
        self.serving.callback(None)

    def stop_serving(self, reason: str) -> None:
        self.stopped_at = time.monotonic()
        self.stop_reason = reason
        assert self.port is not None
        self.port.stopListening()
        self.stopped.callback(None)

    def close(self) -> Any:
        """Stop listening, if it still does."""
        if self.port is not None and self.stopped_at is None:
            return self.port.stopListening()
        return None

    def addresses(self) -> list[tuple[str, str, int]]:
        if self.port is None or self.stopped_at is not None:
            return []
        return [("amqp", "127.0.0.1", self.port.getHost().port)]


def within(waited: Deferred[Any], seconds: float = WAIT) -> Deferred[Any]:
    """*waited*, failing with a timeout after *seconds*."""
    return waited.addTimeout(seconds, reactor)


class Member:
    """A group service with its stand-in broker and a record of its exit."""

    def __init__(self, url: str, name: str) -> None:
        self.broker = StandInBroker()
        self.exited: Deferred[None] = Deferred()
        self.identity = Identity.new(name)
        self.window = ServingWindow()
        self.service = GroupService(
            url, self.identity, LeaseTiming(TIMING_PERIOD, TIMING_RENEW), self.broker, self.window, reactor,
            exit=lambda: self.exited.callback(None),
        )


class GroupServiceTests(TestCase):
    """Members of one group, started and stopped by the test."""

    skip = psycopg_missing()

    def setUp(self) -> None:
        self.url = shared_postgresql().new_database()

    def member(self, name: str) -> Member:
        """A started member (stopped at the end of the test)."""
        member = Member(self.url, name)
        member.service.startService()
        self.addCleanup(member.broker.close)
        self.addCleanup(lambda: member.service.leave(clean=False))
        return member

    def session(self) -> "psycopg.Connection[Any]":
        connection = psycopg.connect(self.url, autocommit=True)
        self.addCleanup(connection.close)
        return connection

    @inlineCallbacks
    def active_and_standby(self) -> Any:
        """A first member that became active, then a second, a standby seen by the first."""
        first = self.member("node-a")
        yield within(first.broker.serving)
        second = self.member("node-b")
        yield within(until(lambda: {m.node for m in first.service.status().members} == {"node-a", "node-b"}))
        return first, second

    @inlineCallbacks
    def test_first_member_serves_second_stands_by(self) -> None:
        """The first member takes the lease and serves; the second stays a
        standby; both see both members and the same lease."""
        first, second = yield self.active_and_standby()
        yield within(until(lambda: second.service.status().lease is not None))
        self.assertEqual(first.service.role, Role.ACTIVE)
        self.assertEqual(second.service.role, Role.STANDBY)
        self.assertIsNone(second.broker.served_at)
        status = first.service.status()
        self.assertEqual(status.lease.holder if status.lease else None, "node-a")
        self.assertGreater(status.deadline or 0, 0)
        self.assertEqual(second.service.status().lease.holder, "node-a")
        roles = {member["node"]: member["role"] for member in status.as_json()["members"]}
        self.assertEqual(roles, {"node-a": "active", "node-b": "standby"})

    @inlineCallbacks
    def test_clean_stop_hands_over_at_once(self) -> None:
        """An active member that stops releases its lease: the standby takes
        over well before the lease would have expired."""
        first, second = yield self.active_and_standby()
        stopped_at = time.monotonic()
        yield within(first.service.leave(clean=True))
        yield within(second.broker.serving)
        self.assertLess(second.broker.served_at - stopped_at, TIMING_PERIOD)
        self.assertEqual(second.service.status().lease.epoch, 2)
        self.assertFalse(first.exited.called)

    @inlineCallbacks
    def test_terminated_lease_session_fences_before_takeover(self) -> None:
        """pg_terminate_backend of the active's lease session: the active
        stops serving and exits; the standby serves only after the active
        stopped, before the lease would have expired."""
        first, second = yield self.active_and_standby()
        terminated_at = time.monotonic()
        self.session().execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (first.identity.session,),
        )
        yield within(second.broker.serving)
        yield within(first.exited)
        self.assertEqual(first.service.role, Role.FENCED)
        self.assertLess(first.broker.stopped_at, second.broker.served_at)
        self.assertIn("presence lock", first.broker.stop_reason)
        self.assertLess(second.broker.served_at - terminated_at, TIMING_PERIOD)

    @inlineCallbacks
    def test_unrenewed_lease_fences_before_expiry(self) -> None:
        """An active whose renewals cannot commit (the lease row is locked)
        stops serving at its deadline, before the standby can take the lease."""
        first, second = yield self.active_and_standby()
        blocker = self.session()
        blocker.execute("BEGIN")
        blocker.execute(f"SELECT 1 FROM {lease.LEASE_TABLE} FOR UPDATE")
        try:
            yield within(first.broker.stopped)
            self.assertIn("not renewed", first.broker.stop_reason)
            self.assertIsNone(second.broker.served_at)
            self.assertFalse(lease.read(self.session()).lapsed)
        finally:
            blocker.execute("ROLLBACK")
        yield within(first.exited)
        yield within(second.broker.serving)
        self.assertLess(first.broker.stopped_at, second.broker.served_at)
        self.assertEqual(second.service.status().lease.holder, "node-b")
