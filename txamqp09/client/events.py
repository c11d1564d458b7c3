"""What a :class:`~txamqp09.client.reconnect.ReconnectingClient` tells its
listeners: connections made and lost, addresses passed over, queues renamed,
what could not be recovered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from txamqp09.client.errors import ConnectionClosed

if TYPE_CHECKING:
    from txamqp09.client.connection import ClientConnection

__all__ = ["AttemptFailed", "Connected", "ConnectionLost", "QueueRenamed", "RecoveryEvent", "RecoveryFailed"]


@dataclass(frozen=True)
class Connected:
    """A connection is open and recovered: topology, channels, consumers and
    unconfirmed publishes are in place.

    :ivar address: ``host:port`` of the broker.
    :ivar recovered: it replaces a lost connection (false for the first).
    """

    address: str
    connection: ClientConnection
    recovered: bool


@dataclass(frozen=True)
class ConnectionLost:
    """The open connection ended; the client tries the next address at once."""

    address: str
    reason: ConnectionClosed


@dataclass(frozen=True)
class AttemptFailed:
    """An address could not be reached, refused the connection, or the
    connection ended before it was recovered."""

    address: str
    reason: BaseException


@dataclass(frozen=True)
class QueueRenamed:
    """A server-named queue was declared again and got a new name; the
    client's channels translate the old name into the new one."""

    old: str
    new: str


@dataclass(frozen=True)
class RecoveryFailed:
    """Something could not be recovered (the new broker refused it) and was
    left out; the rest was recovered.

    :ivar what: what failed, e.g. ``queue 'orders'`` or ``consumer 'c1' of 'orders'``.
    """

    what: str
    reason: BaseException


RecoveryEvent = Union[Connected, ConnectionLost, AttemptFailed, QueueRenamed, RecoveryFailed]
