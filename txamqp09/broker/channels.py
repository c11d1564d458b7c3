"""The open channels of one server connection: opening them (and 0-9's
resuming), closing them, and handing each the commands that come on it.

:class:`ServerChannels` is the connection's bookkeeping of its channels,
as the channel service is on conch's SSH transport: the connection gives it
every command of a channel other than 0 once the virtual host is open
(:meth:`ServerChannels.commandReceived`), and it is the mapping of the open
channels by number that the rest of the broker reads
(``connection.channels``). It sees the connection as a
:class:`ChannelsConnection`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Optional, Protocol

from txamqp09.broker.base import ConnectionLike
from txamqp09.broker.channel import ServerChannel
from txamqp09.broker.classes import channel as classes
from txamqp09.protocol import ConnectionState
from txamqp09.wire.errors import ChannelError, ChannelLevelError, CommandInvalid, NotAllowed

if TYPE_CHECKING:
    from txamqp09.broker.auth import Security
    from txamqp09.broker.model import Broker, Client, VirtualHost
    from txamqp09.wire import methods
    from txamqp09.wire.base import Method
    from txamqp09.wire.frames import Command, FrameScanner

__all__ = ["ChannelsConnection", "ServerChannels"]


class ChannelsConnection(ConnectionLike, Protocol):
    """A server connection as its channel bookkeeping sees it (a
    :class:`~txamqp09.broker.server.ServerConnection`): what its channels
    see, and what opening and closing them takes."""

    @property
    def state(self) -> ConnectionState:
        """The connection's life (channels are used once it is open)."""

    @property
    def channel_max(self) -> int:
        """The negotiated channel_max."""

    @property
    def closing_channels(self) -> set[int]:
        """Channels whose channel.close the server sent, awaiting close-ok."""

    @property
    def scanner(self) -> FrameScanner:
        """The frame loop, whose takers each channel's publisher is."""

    @property
    def security(self) -> Security:
        """Checks a user's channel limit."""

    @property
    def broker(self) -> Broker:
        """The model (its churn counts channels)."""

    @property
    def model_vhost(self) -> Optional[VirtualHost]:
        """The virtual host the connection opened."""

    @property
    def client(self) -> Client:
        """The connection's model counterpart."""

    def sendMethod(self, channel: int, method: Method) -> None:
        """Send *method* on *channel*."""

    def channelClosed(self, channel: int) -> None:
        """Forget *channel*'s framing state; it may be opened again."""


class ServerChannels(Mapping[int, ServerChannel]):
    """The open channels of a connection by number (closing ones are not
    here), and their opening and closing.

    :param connection: the connection they belong to.
    """

    def __init__(self, connection: ChannelsConnection) -> None:
        self.connection = connection
        self._open: dict[int, ServerChannel] = {}

    def __getitem__(self, number: int) -> ServerChannel:
        return self._open[number]

    def __iter__(self) -> Iterator[int]:
        return iter(self._open)

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, number: object) -> bool:
        return number in self._open

    def get(self, number: int, default: Optional[ServerChannel] = None) -> Optional[ServerChannel]:  # type: ignore[override]
        """The open channel *number*, or *default*."""
        return self._open.get(number, default)

    def commandReceived(self, number: int, command: Command) -> None:
        """Handle *command*, which came on channel *number*: channel.open,
        close, close-ok and resume here, any other method in its open channel.

        :raises ChannelError: the connection is not open yet, or the channel is not.
        """
        method = command.method
        if self.connection.state is not ConnectionState.OPEN:
            raise ChannelError(
                f"{method.NAME} on channel {number} before the connection was opened",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        handler = _CHANNEL_METHODS.get(method.NAME)
        if handler is not None:
            handler(self, number, method)
            return
        channel = self._open.get(number)
        if channel is None:
            raise ChannelError(
                "expected 'channel.open'",
                method.CLASS_ID,
                method.METHOD_ID,
                hint=f"{method.NAME} came on channel {number}, which is not open",
            )
        channel.methodReceived(method, command if method.CONTENT else None)

    def _opening(self, number: int) -> ServerChannel:
        """A new channel *number* on the connection's virtual host."""
        connection = self.connection
        assert connection.model_vhost is not None
        return ServerChannel(connection, number, connection.model_vhost, connection.client)

    def _channelOpen(self, number: int, method: methods.ChannelOpen) -> None:
        connection = self.connection
        if number in self._open:
            raise ChannelError("second 'channel.open' seen", 20, 10, hint=f"channel {number} is already open")
        if connection.dialect.channel_max_counts_open and 0 < connection.channel_max <= len(self._open):
            raise NotAllowed(
                f"number of channels opened ({len(self._open)}) has reached the "
                f"negotiated channel_max ({connection.channel_max})",
                20, 10,
            )
        assert connection.user is not None
        connection.security.check_channel_limit(connection.user.name)
        channel = self._opening(number)
        self._add(channel)
        connection.sendMethod(number, classes.open_ok(channel))

    def _channelResume(self, number: int, method: methods.ChannelResume) -> None:
        """0-9: open a channel with the state of an interrupted one."""
        if number in self._open:
            raise ChannelError(f"channel {number} is already open; resume on an unopened channel", 20, 50)
        channel = self._opening(number)
        try:
            ok = classes.resume(channel, method.channel_id)
        except ChannelLevelError:
            channel.close()
            raise
        self._add(channel)
        self.connection.sendMethod(number, ok)

    def _channelClose(self, number: int, method: methods.ChannelClose) -> None:
        connection = self.connection
        assert connection.version is not None
        self.forget(number)
        connection.channelClosed(number)
        connection.sendMethod(number, connection.version.spec.ChannelCloseOk())

    def _channelCloseOk(self, number: int, method: methods.ChannelCloseOk) -> None:
        """The client confirms the channel.close the broker sent (503 for a
        channel the broker did not close)."""
        if number not in self.connection.closing_channels:
            raise CommandInvalid(
                "unimplemented method", 20, 41,
                hint=f"channel.close-ok came on channel {number}, which the server did not close",
            )
        self.forget(number)
        self.connection.channelClosed(number)

    def _add(self, channel: ServerChannel) -> None:
        """*channel* is open: its frames go to its publisher first."""
        scanner = self.connection.scanner
        self._open[channel.number] = channel
        scanner.takers[channel.number] = channel.publisher.take
        scanner.piece_takers[channel.number] = channel.publisher
        self.connection.broker.churn.channel_created += 1

    def forget(self, number: int) -> None:
        """Channel *number* closes: it stops (what it had unacked is requeued)."""
        scanner = self.connection.scanner
        scanner.takers.pop(number, None)
        scanner.piece_takers.pop(number, None)
        channel = self._open.pop(number, None)
        if channel is not None:
            self.connection.broker.churn.channel_closed += 1
            channel.close()

    def close_all(self) -> None:
        """The connection closes or ended: every channel stops at once."""
        channels = list(self._open.values())
        self._open.clear()
        scanner = self.connection.scanner
        scanner.takers.clear()  # in place: a running scan holds this dict
        scanner.piece_takers.clear()
        self.connection.broker.churn.channel_closed += len(channels)
        for channel in channels:
            channel.close(interrupted=True)


#: The channel-class methods the bookkeeping handles itself, by name.
_CHANNEL_METHODS: dict[str, Callable[[ServerChannels, int, Any], None]] = {
    "channel.open": ServerChannels._channelOpen,
    "channel.close": ServerChannels._channelClose,
    "channel.close-ok": ServerChannels._channelCloseOk,
    "channel.resume": ServerChannels._channelResume,
}
