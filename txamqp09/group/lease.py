"""The group's lease and members, as rows of the store's PostgreSQL database.

One row of ``amqp09_group_lease`` says which broker of the group is
*active*: its node name (``holder``), the ``application_name`` of its
database sessions (``holder_session``, unique to one process's life), the
backend pid of its lease session, an ``epoch`` that grows at each
takeover, and when the lease ``expires`` by the database's clock. The
rules, each one statement (ActiveMQ's lease-database-locker is the model):

- :func:`take`: a broker takes the lease (a new epoch) only if it is free
  (never held, released, or expired by the database's clock), or if its
  caller knows the holder's lease session has ended
  (``holder_gone``), and only from the epoch it read, so that two takers
  cannot both win.
- :func:`renew`: only the holder's own sessions renew, and only a lease
  that has not expired: an expired lease belongs to nobody.
- :func:`release`: the holder ends its lease early when it stops cleanly.
- :func:`guard`: the statement the message store runs first in each write
  transaction. It locks the lease row ``FOR SHARE`` and returns a row only
  while this broker holds an unexpired lease; a takeover's UPDATE of the row
  waits for those locks, so the new active sees every commit of the old one
  and the old one can commit nothing after it.

Besides the row, the active holds a session-level advisory lock
(:data:`PRESENCE_KEY`) on its lease session: a standby waiting for it
(:class:`PresenceRequest`) learns at once that the active's session ended.
Advisory locks live only on the server that granted them and vanish with a
crashed primary, so a standby counts an acquired lock as the holder's end
only when it saw the lock held on the same uninterrupted connection
(:func:`presence_holder`), and the lease's expiry stays the rule that
always holds.

``amqp09_group_members`` has one row per broker: its role, addresses, when
it was last seen (by the database's clock) and the round trip of its last
lease statement.

Every function takes a psycopg connection in autocommit mode and runs its
own transaction; none keeps state.
"""

from __future__ import annotations

import json
import select
import time
from datetime import timedelta
from typing import Any, Optional, Sequence

import psycopg
from psycopg import pq, sql

from txamqp09.group.records import Address, Identity, Lease, Member

__all__ = [
    "LEASE_NAME",
    "LEASE_TABLE",
    "MEMBERS_TABLE",
    "PRESENCE_KEY",
    "PresenceRequest",
    "check_client_connection",
    "claim_presence",
    "client_host",
    "drop_presence",
    "end_sessions",
    "forget_member",
    "guard",
    "members",
    "prepare",
    "presence_holder",
    "read",
    "record_member",
    "release",
    "renew",
    "take",
]

LEASE_TABLE = "amqp09_group_lease"
MEMBERS_TABLE = "amqp09_group_members"
#: The lease row's name (a database holds one group).
LEASE_NAME = "amqp09"
#: The advisory lock the active holds on its lease session (``amqp09gr``, as a bigint).
PRESENCE_KEY = int.from_bytes(b"amqp09gr", "big") >> 1
#: The advisory lock that serialises the creation of the tables.
_SCHEMA_KEY = PRESENCE_KEY - 1

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {LEASE_TABLE} (
    name text PRIMARY KEY,
    holder text,
    holder_session text,
    holder_pid integer,
    epoch bigint NOT NULL DEFAULT 0,
    expires timestamptz,
    acquired timestamptz
);
CREATE TABLE IF NOT EXISTS {MEMBERS_TABLE} (
    node text PRIMARY KEY,
    session text NOT NULL,
    role text NOT NULL,
    addresses jsonb NOT NULL DEFAULT '[]',
    last_seen timestamptz NOT NULL,
    round_trip double precision
);
"""

_LEASE_COLUMNS = "holder, holder_session, holder_pid, epoch, expires, coalesce(expires <= now(), true), now()"


def prepare(connection: psycopg.Connection[Any]) -> None:
    """Create the tables and the lease row if missing (safe when several
    brokers start at once)."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_KEY,))
        connection.execute(_SCHEMA)
        connection.execute(
            f"INSERT INTO {LEASE_TABLE} (name) VALUES (%s) ON CONFLICT (name) DO NOTHING", (LEASE_NAME,)
        )


def read(connection: psycopg.Connection[Any]) -> Lease:
    """The lease row now."""
    row = connection.execute(f"SELECT {_LEASE_COLUMNS} FROM {LEASE_TABLE} WHERE name = %s", (LEASE_NAME,)).fetchone()
    if row is None:
        raise LookupError(f"the lease row {LEASE_NAME!r} of {LEASE_TABLE} is missing: call prepare() first")
    return Lease(*row)


def take(
    connection: psycopg.Connection[Any],
    me: Identity,
    period: float,
    seen_epoch: int,
    holder_gone: bool,
    lock_timeout: float = 1.0,
) -> Optional[Lease]:
    """Take the lease for *period* seconds with a new epoch, if it still has
    *seen_epoch* and is free or *holder_gone*; the new lease, or None.

    The connection's session becomes the holder's lease session (its pid is
    recorded). The UPDATE waits for the old holder's guarded transactions
    (:func:`guard`) at most *lock_timeout* seconds.

    :raises psycopg.errors.LockNotAvailable: they did not end in time (end
        the old holder's sessions and try again).
    """
    with connection.transaction():
        connection.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{int(lock_timeout * 1000)}ms")))
        row = connection.execute(
            f"UPDATE {LEASE_TABLE} SET holder = %s, holder_session = %s, holder_pid = pg_backend_pid(), "
            "epoch = epoch + 1, expires = now() + %s, acquired = now() "
            "WHERE name = %s AND epoch = %s AND (holder IS NULL OR expires <= now() OR %s) "
            f"RETURNING {_LEASE_COLUMNS}",
            (me.node, me.session, timedelta(seconds=period), LEASE_NAME, seen_epoch, holder_gone),
        ).fetchone()
    return Lease(*row) if row is not None else None


def renew(connection: psycopg.Connection[Any], me: Identity, period: float) -> Optional[Lease]:
    """Extend *me*'s unexpired lease to *period* seconds from now (this
    session becomes its lease session); the lease, or None when *me* does
    not hold it."""
    row = connection.execute(
        f"UPDATE {LEASE_TABLE} SET expires = now() + %s, holder_pid = pg_backend_pid() "
        "WHERE name = %s AND holder_session = %s AND expires > now() "
        f"RETURNING {_LEASE_COLUMNS}",
        (timedelta(seconds=period), LEASE_NAME, me.session),
    ).fetchone()
    return Lease(*row) if row is not None else None


def release(connection: psycopg.Connection[Any], me: Identity) -> bool:
    """End *me*'s lease now (a clean stop); whether *me* held it."""
    row = connection.execute(
        f"UPDATE {LEASE_TABLE} SET expires = now(), holder_pid = NULL "
        "WHERE name = %s AND holder_session = %s AND expires > now() RETURNING epoch",
        (LEASE_NAME, me.session),
    ).fetchone()
    return row is not None


def guard(me: Identity) -> tuple[str, tuple[Any, ...]]:
    """The statement (and its parameters) the message store runs first in
    each write transaction: a row while *me* holds an unexpired lease, none
    otherwise; it locks the lease row against a takeover until the
    transaction ends."""
    return (
        f"SELECT 1 FROM {LEASE_TABLE} WHERE name = %s AND holder_session = %s AND expires > now() FOR SHARE",
        (LEASE_NAME, me.session),
    )


def end_sessions(connection: psycopg.Connection[Any], session: str) -> int:
    """Terminate every database session named *session* (a former holder's),
    except this connection's own; how many there were."""
    row = connection.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = %s AND pid <> pg_backend_pid()",
        (session,),
    ).fetchone()
    return int(row[0]) if row is not None else 0


def _presence_lock() -> tuple[int, int]:
    """:data:`PRESENCE_KEY` as pg_locks shows a bigint advisory lock: (classid, objid)."""
    return PRESENCE_KEY >> 32, PRESENCE_KEY & 0xFFFFFFFF


def presence_holder(connection: psycopg.Connection[Any]) -> Optional[int]:
    """The backend pid that holds the presence lock now, if any."""
    classid, objid = _presence_lock()
    row = connection.execute(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND classid = %s AND objid = %s AND objsubid = 1",
        (classid, objid),
    ).fetchone()
    return int(row[0]) if row is not None else None


def claim_presence(connection: psycopg.Connection[Any]) -> bool:
    """Take the presence lock on this session if nobody holds it; whether it did."""
    row = connection.execute("SELECT pg_try_advisory_lock(%s)", (PRESENCE_KEY,)).fetchone()
    return bool(row and row[0])


class PresenceRequest:
    """A request for the presence lock sent on a session and left waiting in
    the lock's queue (granted the moment its holder's session ends) while
    the caller does other work on other sessions.

    The session must not be used for anything else until :meth:`granted`
    says True, or the request is cancelled by closing the session
    (:meth:`cancel` first, so that the server drops it at once).
    """

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self._connection = connection
        connection.pgconn.send_query(b"SELECT pg_advisory_lock(%d)" % PRESENCE_KEY)

    def fileno(self) -> int:
        """The session's socket: readable when the server answers."""
        return self._connection.fileno()

    def granted(self) -> bool:
        """Read what the server sent: whether the lock is granted now.

        :raises psycopg.OperationalError: the session ended.
        :raises psycopg.DatabaseError: the server refused the request.
        """
        pgconn = self._connection.pgconn
        pgconn.consume_input()
        if pgconn.is_busy():
            return False
        error = None
        while (result := pgconn.get_result()) is not None:
            if result.status != pq.ExecStatus.TUPLES_OK:
                error = result.error_message.decode(errors="replace").strip()
        if error is not None:
            raise psycopg.DatabaseError(error)
        return True

    def cancel(self, timeout: float = 2.0) -> None:
        """Drop the request: ask the server to cancel it and read its answer
        (at most *timeout* seconds), so that the session can be used again."""
        try:
            self._connection.cancel_safe(timeout=timeout)
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                select.select([self], [], [], left)
                try:
                    if self.granted():
                        return
                except psycopg.DatabaseError:
                    return
        except psycopg.Error:
            pass


def check_client_connection(connection: psycopg.Connection[Any]) -> None:
    """Have the server check every second that this session's client is
    still there while it runs a statement, so that the queued presence
    request of a broker that died leaves the queue within a second
    (PostgreSQL 14 and later; older servers do not check)."""
    try:
        connection.execute("SET client_connection_check_interval = 1000")
    except psycopg.errors.UndefinedObject:
        pass


def client_host(connection: psycopg.Connection[Any]) -> str:
    """The address the database sees this connection come from (loopback
    over a Unix socket): how other members reach this broker's listeners
    bound to every interface."""
    row = connection.execute("SELECT host(inet_client_addr())").fetchone()
    return str(row[0]) if row is not None and row[0] is not None else "127.0.0.1"


def drop_presence(connection: psycopg.Connection[Any]) -> None:
    """Let go of the presence lock this session holds."""
    connection.execute("SELECT pg_advisory_unlock_all()")


def record_member(
    connection: psycopg.Connection[Any],
    me: Identity,
    role: str,
    addresses: Sequence[Address],
    round_trip: Optional[float],
) -> None:
    """Write *me*'s member row: its role, listeners, round trip; seen now."""
    connection.execute(
        f"INSERT INTO {MEMBERS_TABLE} (node, session, role, addresses, last_seen, round_trip) "
        "VALUES (%s, %s, %s, %s, now(), %s) ON CONFLICT (node) DO UPDATE SET "
        "session = EXCLUDED.session, role = EXCLUDED.role, addresses = EXCLUDED.addresses, "
        "last_seen = EXCLUDED.last_seen, round_trip = EXCLUDED.round_trip",
        (me.node, me.session, role, json.dumps([vars(address) for address in addresses]), round_trip),
    )


def forget_member(connection: psycopg.Connection[Any], me: Identity) -> None:
    """Remove *me*'s member row (it leaves the group), unless a newer
    process of the same node wrote it since."""
    connection.execute(f"DELETE FROM {MEMBERS_TABLE} WHERE node = %s AND session = %s", (me.node, me.session))


def members(connection: psycopg.Connection[Any]) -> list[Member]:
    """Every member row, by node name."""
    rows = connection.execute(
        f"SELECT node, session, role, addresses, last_seen, round_trip FROM {MEMBERS_TABLE} ORDER BY node"
    ).fetchall()
    return [
        Member(node, session, role, tuple(Address(**address) for address in addresses), last_seen, round_trip)
        for node, session, role, addresses, last_seen, round_trip in rows
    ]
