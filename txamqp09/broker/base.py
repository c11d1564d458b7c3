"""What the broker's server layer shares, at the bottom of the package.

The server layer stands in layers, each looking only down: a channel's hot
path (:mod:`~txamqp09.broker.publishing`), the classes beyond basic
(:mod:`txamqp09.broker.classes`), the channel
(:mod:`~txamqp09.broker.channel`), and on top the connection that carries
the channels (:mod:`~txamqp09.broker.server`). The modules below the
connection see it only as a :class:`ConnectionLike`, which
:class:`~txamqp09.broker.server.ServerConnection` satisfies (mypy checks it
where a channel is made); the classes see their channel as a
:class:`~txamqp09.broker.classes.registry.ChannelLike` and the publisher
as a :class:`~txamqp09.broker.publishing.PublishingChannel`, both made of
:class:`ChannelBasics` and more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol

if TYPE_CHECKING:
    from twisted.internet.interfaces import IReactorTime

    from txamqp09.broker.alarms import PublishGate
    from txamqp09.broker.auth import AccessGuard, IAMQPUser
    from txamqp09.broker.dialects import Dialect
    from txamqp09.broker.model import Client, VirtualHost
    from txamqp09.protocol import OutputBatch
    from txamqp09.wire.errors import AMQPError, ChannelLevelError
    from txamqp09.wire.frames import BodyLike
    from txamqp09.wire.versions import ProtocolVersion

__all__ = ["ChannelBasics", "ConfirmSender", "ConnectionLike", "ConnectionTerms"]


class ConfirmSender(Protocol):
    """What gathers publisher confirms while the input is handled (a
    channel's :class:`~txamqp09.broker.publishing.Publisher`)."""

    def flushConfirms(self) -> None:
        """Send the gathered confirms."""


class ConnectionTerms(Protocol):
    """What a server connection and each of its channels offer alike: the
    connection's limits, clock and output batch."""

    @property
    def frame_max(self) -> int:
        """The connection's negotiated frame_max."""

    @property
    def max_body_size(self) -> int:
        """The largest message body the connection accepts."""

    @property
    def clock(self) -> IReactorTime:
        """The connection's clock."""

    @property
    def batch(self) -> OutputBatch:
        """The output batch the connection writes through."""


class ChannelBasics(Protocol):
    """What every view of a server channel offers: its number, and the
    model objects it works on."""

    @property
    def number(self) -> int:
        """The channel number."""

    @property
    def vhost(self) -> VirtualHost:
        """The virtual host the connection opened."""

    @property
    def client(self) -> Client:
        """The connection's model counterpart."""


class ConnectionLike(ConnectionTerms, Protocol):
    """A server connection as its channels and their publishers see it."""

    @property
    def version(self) -> Optional[ProtocolVersion]:
        """The negotiated protocol version (set before any channel opens)."""

    @property
    def dialect(self) -> Dialect:
        """The rules of that version."""

    @property
    def user(self) -> Optional[IAMQPUser]:
        """The user that logged in (set before any channel opens)."""

    @property
    def guard(self) -> Optional[AccessGuard]:
        """Checks the channels' methods (set before any channel opens)."""

    @property
    def gate(self) -> PublishGate:
        """Whether the client is read, and whether alarms block it."""

    @property
    def cancel_notify(self) -> bool:
        """The client asked for server-sent basic.cancel."""

    def write(self, data: bytes) -> None:
        """Queue *data*, written with the batch's output."""

    def writeParts(self, parts: list[BodyLike]) -> None:
        """Queue one output given in *parts* (a large content's frames)."""

    def close(self, error: Optional[AMQPError] = None) -> None:
        """Close the connection (with *error*'s reply code and text)."""

    def channelError(self, channel: int, error: ChannelLevelError) -> None:
        """Close *channel* with a soft error."""

    def bodyBuffered(self, size: int) -> None:
        """A channel buffered *size* more bytes of an unfinished message body.

        :raises ResourceError: the connection's unfinished bodies exceed its limit.
        """

    def bodyReleased(self, size: int, dropped: bool) -> None:
        """A channel no longer holds *size* bytes of an unfinished body."""

    def readLarge(self) -> None:
        """The client sends large bodies: read more at a time from now on."""

    def confirmsPending(self, publisher: ConfirmSender) -> None:
        """*publisher* gathers confirms: have them sent with this batch's output."""
