"""The group's records: who a broker is, its listeners, the lease and the
members as read from the database.

Plain data, importable without psycopg (the PostgreSQL driver), so that
what only shows a group (the management API, probes of listeners) does not
need the ``postgresql`` extra; :mod:`txamqp09.group.lease` reads and writes them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterable, Optional

__all__ = ["Address", "Identity", "Lease", "Member", "iso_moment", "member_named"]

#: PostgreSQL keeps this many bytes of an application_name.
_APPLICATION_NAME_BYTES = 63


@dataclass(frozen=True)
class Identity:
    """Who a broker is in the group.

    :ivar node: its node name (``--node-name``), for people.
    :ivar session: the ``application_name`` of every database session of
        this process's life (its node name and a random token, within the
        63 bytes PostgreSQL keeps), so that a new active can end exactly
        these sessions.
    """

    node: str
    session: str

    @classmethod
    def new(cls, node: str) -> Identity:
        """A new identity for *node*, with a session name no other process
        has: ``txamqp09@NODE`` (cut to fit) and a random token."""
        token = os.urandom(6).hex()
        room = _APPLICATION_NAME_BYTES - len(token) - 1
        named = f"txamqp09@{node}".encode()[:room].decode("utf-8", "ignore")
        return cls(node, f"{named} {token}")


@dataclass(frozen=True)
class Address:
    """A listener of a member: ``amqp``, ``amqp/ssl``, ``http``... on host:port."""

    protocol: str
    host: str
    port: int


@dataclass(frozen=True)
class Lease:
    """The lease row as read, with the database's clock.

    :ivar holder: the node that holds or last held it (None: never held).
    :ivar holder_session: that node's session name.
    :ivar holder_pid: the backend pid of its lease session.
    :ivar epoch: the number of takeovers so far.
    :ivar expires: when it expires (None: never held).
    :ivar lapsed: it had expired when read (or was never held).
    :ivar now: the database's clock when read.
    """

    holder: Optional[str]
    holder_session: Optional[str]
    holder_pid: Optional[int]
    epoch: int
    expires: Optional[datetime]
    lapsed: bool
    now: datetime

    @property
    def free(self) -> bool:
        """Nobody holds it: never held, released or expired."""
        return self.holder is None or self.lapsed

    def seconds_left(self) -> float:
        """Seconds until it expires, by the database's clock when read (0 when lapsed)."""
        if self.lapsed or self.expires is None:
            return 0.0
        return max((self.expires - self.now).total_seconds(), 0.0)


@dataclass(frozen=True)
class Member:
    """A member's row: role, listeners, last seen (database clock), round trip in seconds."""

    node: str
    session: str
    role: str
    addresses: tuple[Address, ...] = field(default_factory=tuple)
    last_seen: Optional[datetime] = None
    round_trip: Optional[float] = None

    def amqp_addresses(self) -> list[Address]:
        """Its AMQP listeners (plain and TLS)."""
        return [address for address in self.addresses if address.protocol.startswith("amqp")]


def iso_moment(moment: Optional[datetime]) -> Optional[str]:
    """*moment* in ISO 8601, as the group's JSON shows times (None stays None)."""
    return moment.isoformat() if moment is not None else None


def member_named(members: Iterable[Member], node: Optional[str]) -> Optional[Member]:
    """The row of *node* among *members* (None: it has none)."""
    return next((member for member in members if member.node == node), None)
