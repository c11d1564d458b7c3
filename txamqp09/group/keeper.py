"""The thread that keeps one broker's place in the group.

A :class:`Keeper` owns one database session, the *lease session*, named
after the broker's :class:`~txamqp09.group.lease.Identity`, and runs the
rules of :mod:`txamqp09.group.lease` on it in a thread of its own, since
most of its time is spent blocked in the database. It reports to the
reactor thread through :class:`KeeperEvents` (every call made with
``callFromThread``) and decides nothing about serving: that is
:class:`~txamqp09.group.service.GroupService`'s part.

As a **standby** it waits on the active's presence lock
(:func:`~txamqp09.group.lease.wait_presence`), waking at least every
renewal interval and at the lease's expiry to write its member row and read
the lease again. It takes the lease when

- the lease is free (never held, released, or expired by the database's
  clock); a holder whose lease expired is hung or cut off, and its sessions
  are ended first; or
- the lease session of the holder ended (the presence lock it was seen
  holding, on this same uninterrupted connection, was granted to this
  session) *and* the holder's AMQP listeners refuse connections
  (:mod:`txamqp09.group.probe`): a holder that only lost its session stops
  serving on its own first. While they still accept, the standby asks again
  every :data:`PROBE_INTERVAL` seconds, until they refuse or the lease expires.

Taking over ends the old holder's sessions (so that a hung process that
wakes up can commit nothing, and its open transactions release the lease
row) and bumps the epoch.

As the **active** it renews the lease every renewal interval and watches its
session between renewals: a session that ends (terminated, or the server
gone) is noticed at once. It then reconnects (the multi-host URI leads to
the writable server) and, if it can take the presence lock again and renew
the lease, carries on; if a standby holds the presence lock, or the lease
was taken or expired, the lease is lost.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

import psycopg

from txamqp09.group import lease
from txamqp09.group.records import Address, Identity, Lease, Member, member_named
from txamqp09.group.probe import Listening, listening

__all__ = ["Keeper", "KeeperEvents", "LeaseTiming", "PROBE_INTERVAL"]

#: Seconds between two looks at a holder's listeners after its session ended.
PROBE_INTERVAL = 0.05
#: Seconds a connection attempt to a listener may take.
PROBE_TIMEOUT = 0.25
#: Seconds between two attempts to reach the database.
RECONNECT_INTERVAL = 0.2
#: Seconds the standby waits between looks while nobody holds the presence
#: lock though the lease is held (the holder is reconnecting after a failover).
ORPHAN_INTERVAL = 0.1
#: Seconds past the lease's expiry a waiting standby looks again.
EXPIRY_SLACK = 0.02


@dataclass(frozen=True)
class LeaseTiming:
    """How long a lease lasts and how often the active renews it (seconds)."""

    period: float
    renew: float

    def __post_init__(self) -> None:
        if not 0 < self.renew < self.period:
            raise ValueError(
                f"the lease renewal interval ({self.renew} s) must be positive and shorter "
                f"than the lease period ({self.period} s)"
            )


class KeeperEvents(Protocol):
    """What a :class:`Keeper` reports, in the reactor thread."""

    def lease_taken(self, taken: Lease, sent_at: float, previous: Lease, holder_gone: bool) -> None:
        """This broker took the lease with a statement sent at *sent_at*
        (``time.monotonic``), from *previous*: free, or *holder_gone*."""

    def lease_renewed(self, renewed: Lease, sent_at: float) -> None:
        """This broker renewed its lease with a statement sent at *sent_at*."""

    def lease_lost(self, reason: str) -> None:
        """This broker no longer holds the lease (the keeper's thread ends)."""

    def observed(self, current: Lease, members: list[Member]) -> None:
        """The lease and the member rows, as last read."""

    def session_changed(self, error: Optional[str]) -> None:
        """The lease session broke (*error*) or is back (None)."""


class _Stopping(Exception):
    """The keeper was asked to stop."""


class Keeper:
    """Keeps *me*'s place in the group on the database at *url* (see the
    module's docstring).

    :param call: runs a function in the reactor thread (``reactor.callFromThread``).
    :param addresses: this broker's listeners now, as (protocol, host,
        port) (read in the keeper's thread).
    :param connect_options: more libpq parameters for the lease session.
    """

    def __init__(
        self,
        url: str,
        me: Identity,
        timing: LeaseTiming,
        events: KeeperEvents,
        call: Callable[..., None],
        addresses: Callable[[], Sequence[tuple[str, str, int]]],
        connect_options: Optional[dict[str, Any]] = None,
    ) -> None:
        self.url = url
        self.me = me
        self.timing = timing
        self.events = events
        self._call = call
        self._addresses = addresses
        self._connect_options = connect_options or {}
        self._stopping = threading.Event()
        self._release = False
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._connection: Optional[psycopg.Connection[Any]] = None
        #: The lease session's queued request for the presence lock (a standby's).
        self._request: Optional[lease.PresenceRequest] = None
        self._active = False
        self._host = "127.0.0.1"
        self._thread = threading.Thread(target=self._run, name=f"group keeper {me.node}", daemon=True)
        #: Guards :attr:`_finished` and :attr:`_done` between the two threads.
        self._lock = threading.Lock()
        self._finished: list[Callable[[], None]] = []
        self._done = False

    # -- the reactor's side ----------------------------------------------------

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self, clean: bool, finished: Callable[[], None]) -> None:
        """Stop; when *clean*, end this broker's lease (if it holds it) and
        remove its member row first. *finished* is called (in the reactor
        thread) once the thread is done."""
        with self._lock:
            done = self._done
            if not done:
                self._finished.append(finished)
                self._release = clean
                self._stopping.set()
                self._wake_writer.send(b"x")
        if done:
            finished()

    # -- the thread --------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._keep()
        except _Stopping:
            if self._release:
                self._goodbye()
        except Exception as error:
            self._report(self.events.lease_lost, f"the group keeper failed: {type(error).__name__}: {error}")
            raise
        finally:
            self._close()
            with self._lock:
                self._done = True
                self._wake_reader.close()
                self._wake_writer.close()
                finished = list(self._finished)
            for call in finished:
                self._call(call)

    def _keep(self) -> None:
        """Stand by until this broker holds the lease, then hold it, on one
        lease session after another (a broken one is reported and replaced)."""
        while True:
            connection = self._connection if self._connection is not None else self._connect()
            try:
                if self._active:
                    self._hold(connection)
                else:
                    self._stand_by(connection)
            except psycopg.Error as error:
                if self._stopping.is_set():
                    raise _Stopping() from error
                if not isinstance(error, psycopg.OperationalError):
                    raise
                self._report(self.events.session_changed, _describe(error))
                self._close()

    def _goodbye(self) -> None:
        """A clean stop: end this broker's lease (when it holds it) and
        remove its member row, so that a standby takes over at once."""
        connection = self._connection
        if connection is None or connection.broken:
            return
        try:
            if self._active:
                lease.release(connection, self.me)
            lease.forget_member(connection, self.me)
        except psycopg.Error:
            pass

    def _open(self) -> psycopg.Connection[Any]:
        """A new session named after this member (retrying until one opens)."""
        while True:
            self._check_stopping()
            try:
                return psycopg.connect(
                    self.url, autocommit=True, application_name=self.me.session, **self._connect_options
                )
            except psycopg.OperationalError:
                self._stopping.wait(RECONNECT_INTERVAL)

    def _connect(self) -> psycopg.Connection[Any]:
        """A new lease session; the tables are made first. The active's new
        session must take the presence lock and renew the lease, or the
        lease is lost."""
        while True:
            connection = self._connection = self._open()
            try:
                lease.prepare(connection)
                lease.check_client_connection(connection)
                self._host = lease.client_host(connection)
                if self._active:
                    self._reclaim(connection)
            except psycopg.OperationalError:
                self._close()
                self._stopping.wait(RECONNECT_INTERVAL)
                continue
            self._report(self.events.session_changed, None)
            return connection

    def _reclaim(self, connection: psycopg.Connection[Any]) -> None:
        """The active's new session: take the presence lock and renew."""
        if not lease.claim_presence(connection):
            self._lose("a standby holds the group's presence lock: it saw this broker's lease session end")
        self._renew(connection)

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _check_stopping(self) -> None:
        if self._stopping.is_set():
            raise _Stopping()

    def _report(self, event: Callable[..., None], *args: Any) -> None:
        self._call(event, *args)

    def _lose(self, reason: str) -> None:
        """The lease is lost: report it and end the thread."""
        self._report(self.events.lease_lost, reason)
        self._release = False
        raise _Stopping()

    # -- standby -------------------------------------------------------------------

    def _stand_by(self, watch: psycopg.Connection[Any]) -> None:
        """Stand by until this broker takes the lease: *watch*, the lease
        session (one uninterrupted session), waits in the presence lock's
        queue while a second session looks at the lease every renewal
        interval and at its expiry."""
        poll = self._open()
        try:
            self._wait_for_lease(watch, poll)
        finally:
            self._cancel_request()
            poll.close()

    def _wait_for_lease(self, watch: psycopg.Connection[Any], poll: psycopg.Connection[Any]) -> None:
        holding = False
        #: The pid that held the presence lock when this session's request
        #: for it was sent: when the request is granted, that session ended.
        gone_pid: Optional[int] = None
        while not self._active:
            self._check_stopping()
            current, members = self._look(poll, "standby")
            if current.lapsed and current.holder_session not in (None, self.me.session):
                # A holder whose lease expired is hung or cut off: its sessions
                # end, and so does its hold on the presence lock.
                lease.end_sessions(poll, current.holder_session)
            if holding:
                holding = self._try_take(watch, current, members, gone_pid)
            elif self._request is None and current.free and lease.claim_presence(watch):
                holding, gone_pid = True, None
            elif self._request is None:
                gone_pid = self._request_presence(watch, current)
            elif self._granted(min(self.timing.renew, current.seconds_left() + EXPIRY_SLACK)):
                holding = True

    def _request_presence(self, watch: psycopg.Connection[Any], current: Lease) -> Optional[int]:
        """Queue for the presence lock on *watch*, if it is held by the
        lease's holder (or by another taker of a free lease); the pid
        holding it. Otherwise (nobody holds it though the lease is held:
        its holder is reconnecting after a database failover) wait a little."""
        holder_pid = lease.presence_holder(watch)
        if current.free or (holder_pid is not None and holder_pid == current.holder_pid):
            self._request = lease.PresenceRequest(watch)
            return holder_pid
        self._stopping.wait(min(ORPHAN_INTERVAL, current.seconds_left() + EXPIRY_SLACK))
        return None

    def _granted(self, seconds: float) -> bool:
        """Wait at most *seconds* for the queued request; whether it was granted."""
        request = self._request
        assert request is not None
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([request.fileno(), self._wake_reader.fileno()], [], [], left)
            self._check_stopping()
            if readable and request.granted():
                self._request = None
                return True
        return False

    def _cancel_request(self) -> None:
        """Drop a queued request (its session is about to close)."""
        request, self._request = self._request, None
        if request is not None:
            request.cancel()

    def _look(self, connection: psycopg.Connection[Any], role: str) -> tuple[Lease, list[Member]]:
        """Write this member's row, then read the lease and the members (reported)."""
        started = time.monotonic()
        current = lease.read(connection)
        round_trip = time.monotonic() - started
        lease.record_member(connection, self.me, role, self._reachable(), round_trip)
        members = lease.members(connection)
        self._report(self.events.observed, current, members)
        return current, members

    def _reachable(self) -> list[Address]:
        """This broker's listeners, an address of every interface given as
        the one the database sees this broker come from."""
        return [
            Address(protocol, self._host if host in ("0.0.0.0", "::", "") else host, port)
            for protocol, host, port in self._addresses()
        ]

    def _try_take(
        self, connection: psycopg.Connection[Any], current: Lease, members: list[Member], gone_pid: Optional[int]
    ) -> bool:
        """This session holds the presence lock: take the lease if the rules
        allow; whether to keep holding the presence lock."""
        if current.free:
            return self._take(connection, current, holder_gone=False)
        if gone_pid is None or gone_pid != current.holder_pid:
            lease.drop_presence(connection)
            return False
        holder = member_named(members, current.holder)
        addresses = holder.amqp_addresses() if holder is not None and holder.session == current.holder_session else []
        if listening(addresses, PROBE_TIMEOUT) is Listening.NO:
            return self._take(connection, current, holder_gone=True)
        self._stopping.wait(min(PROBE_INTERVAL, current.seconds_left() + EXPIRY_SLACK))
        return True

    def _take(self, connection: psycopg.Connection[Any], current: Lease, holder_gone: bool) -> bool:
        """Take the lease from *current* (ending its holder's sessions, before
        and after); whether to keep holding the presence lock."""
        old_session = current.holder_session if current.holder_session != self.me.session else None
        while True:
            self._check_stopping()
            if old_session is not None:
                lease.end_sessions(connection, old_session)
            sent_at = time.monotonic()
            try:
                taken = lease.take(connection, self.me, self.timing.period, current.epoch, holder_gone)
            except psycopg.errors.LockNotAvailable:
                continue
            break
        if taken is None:
            lease.drop_presence(connection)
            return False
        if old_session is not None:
            lease.end_sessions(connection, old_session)
        self._active = True
        self._report(self.events.lease_taken, taken, sent_at, current, holder_gone)
        return True

    # -- active --------------------------------------------------------------------

    def _hold(self, connection: psycopg.Connection[Any]) -> None:
        """Renew every renewal interval; between renewals, watch the session."""
        next_renewal = time.monotonic() + self.timing.renew
        while True:
            self._watch(connection, next_renewal - time.monotonic())
            next_renewal = time.monotonic() + self.timing.renew
            self._renew(connection)

    def _watch(self, connection: psycopg.Connection[Any], seconds: float) -> None:
        """Wait *seconds*, or until the session has something to say (its
        end, usually) or the keeper is stopped.

        :raises psycopg.OperationalError: the session ended.
        """
        if seconds > 0:
            readable, _, _ = select.select([connection.fileno(), self._wake_reader.fileno()], [], [], seconds)
            self._check_stopping()
            if readable:
                connection.execute("SELECT 1")

    def _renew(self, connection: psycopg.Connection[Any]) -> None:
        """Renew the lease (it is lost if that is refused) and keep this member's row."""
        sent_at = time.monotonic()
        renewed = lease.renew(connection, self.me, self.timing.period)
        round_trip = time.monotonic() - sent_at
        if renewed is None:
            self._lose("the lease was taken by another broker, or expired before it could be renewed")
        self._report(self.events.lease_renewed, renewed, sent_at)
        lease.record_member(connection, self.me, "active", self._reachable(), round_trip)
        self._report(self.events.observed, renewed, lease.members(connection))


def _describe(error: Exception) -> str:
    """One line for a database error."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__

