"""What the client's modules share, at the bottom of the package.

The client stands in layers: messages and consumers, then the channel,
then the connection that carries channels (and the recovering channels and
reconnecting client above them). A lower module sees the one above only
through the shapes here, never by importing it:

- :class:`ChannelLike` is a channel as a message or a consumer on it sees
  it: its number and state, its connection, and the settlements;
- :class:`ConnectionLike` is a connection as a channel (and code holding a
  channel) sees it: sending, the limits and names it negotiated,
  backpressure both ways, and the channel bookkeeping;
- :class:`ChannelState` names a channel's states;
- :data:`BodyLike` and :data:`PropertiesLike` are what the client takes as
  a message's body and properties.

:class:`~txamqp09.client.channel.Channel` satisfies :class:`ChannelLike` and
:class:`~txamqp09.client.connection.ClientConnection` satisfies
:class:`ConnectionLike`, which mypy checks where each is passed down.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Optional, Protocol, Union

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from txamqp09.wire.base import Method, Properties
from txamqp09.wire.versions import ProtocolVersion

__all__ = ["BodyLike", "ChannelLike", "ChannelState", "ConnectionLike", "PropertiesLike"]

#: Content properties: a generated Properties object, its fields as a
#: mapping, or the encoded flags and property list a delivered message
#: carries (:attr:`Message.raw_properties <txamqp09.client.message.Message.raw_properties>`),
#: to forward them unchanged.
PropertiesLike = Union[Properties, Mapping[str, Any], bytes, None]
#: A message body.
BodyLike = Union[bytes, bytearray, memoryview]


class ChannelState(enum.Enum):
    """Where a channel is in its life."""

    OPENING = "opening"
    OPEN = "open"
    #: channel.close sent, waiting for close-ok.
    CLOSING = "closing"
    CLOSED = "closed"


class ConnectionLike(Protocol):
    """A client connection as the channels it carries see it."""

    @property
    def clock(self) -> IReactorTime:
        """The clock the connection's timers run on."""

    @property
    def version(self) -> Optional[ProtocolVersion]:
        """The negotiated protocol version (set before any channel opens)."""

    @property
    def body_frame_limit(self) -> int:
        """The largest body frame to send."""

    @property
    def method_names(self) -> dict[int, str]:
        """Method names by ``(class id << 16) | method id``, for error messages."""

    @property
    def closing_channels(self) -> set[int]:
        """Channels whose channel.close is under way (their input is dropped)."""

    @property
    def writable(self) -> bool:
        """The transport takes more output without buffering it up."""

    def whenWritable(self) -> Deferred[None]:
        """Fires when the transport takes more output."""

    def sendMethod(self, channel: int, method: Method) -> None:
        """Send *method* on *channel*."""

    def write(self, data: bytes) -> None:
        """Send frames already encoded."""

    def replaceQueued(self, previous: Optional[bytes], replacement: bytes) -> bool:
        """Put *replacement* in the place of *previous* if that is the last
        output not yet written; whether it did."""

    def forgetChannel(self, number: int) -> None:
        """The channel *number* is gone; its number may be used again."""

    def channelClosed(self, channel: int) -> None:
        """The close handshake of *channel* is over."""

    def pauseReading(self, by: object) -> None:
        """Stop reading from the socket until every *by* resumed it."""

    def resumeReading(self, by: object) -> None:
        """*by* has caught up: read again once nothing else holds reading back."""


class ChannelLike(Protocol):
    """A channel as the messages and consumers on it see it."""

    @property
    def number(self) -> int:
        """The channel number."""

    @property
    def state(self) -> ChannelState:
        """Where the channel is in its life."""

    @property
    def connection(self) -> ConnectionLike:
        """The connection that carries the channel."""

    def ack(self, delivery_tag: int, multiple: bool = False) -> None:
        """Acknowledge a delivery (and with *multiple* all before it)."""

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        """Refuse deliveries (basic.nack)."""

    def reject(self, delivery_tag: int, requeue: bool = True) -> None:
        """Refuse one delivery (basic.reject)."""
