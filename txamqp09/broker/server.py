"""The server side of an AMQP connection: negotiation, then channels.

:class:`ServerConnection` answers the protocol header with connection.start
in the version the client asked for, authenticates the client, tunes the
connection, opens the virtual host, and then hands channel commands to the
channel layer.
"""

from __future__ import annotations

import platform
from typing import Any, Callable, Optional

import twisted
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Factory

from txamqp09 import __version__
from txamqp09.protocol import AMQPConnection, ConnectionState, OutputBatch
from txamqp09.wire.errors import (
    AccessRefused,
    AMQPNotImplemented,
    ChannelError,
    CommandInvalid,
    ConnectionLevelError,
    InvalidPath,
    NotAllowed,
)
from txamqp09.wire.frames import FRAME_MIN_SIZE, Command
from txamqp09.wire.versions import PREFERRED, AMQP0_9_1, ProtocolVersion, version_for_header

__all__ = ["ServerConnection", "ServerFactory", "server_properties", "parse_plain", "parse_amqplain"]

#: Capabilities a 0-9-1 client learns from connection.start.
CAPABILITIES = {
    "publisher_confirms": True,
    "exchange_exchange_bindings": True,
    "basic.nack": True,
    "consumer_cancel_notify": True,
    "connection.blocked": True,
    "authentication_failure_close": True,
    "per_consumer_qos": True,
}


def server_properties(version: ProtocolVersion) -> dict[str, Any]:
    """The server-properties table of connection.start."""
    properties: dict[str, Any] = {
        "product": "txamqp09",
        "version": __version__,
        "platform": f"Python {platform.python_version()}, Twisted {twisted.__version__}",
        "copyright": "Copyright (c) 2026 The txamqp09 authors",
        "information": "AMQP 0-9, 0-8 and 0-9-1 for Twisted; MIT licensed",
    }
    if version is AMQP0_9_1:
        properties["capabilities"] = dict(CAPABILITIES)
    return properties


def parse_plain(response: bytes) -> tuple[str, str]:
    """SASL PLAIN: ``authzid NUL authcid NUL password``.

    :raises AccessRefused: the response is not in that form.
    """
    parts = response.split(b"\x00")
    if len(parts) != 3:
        raise AccessRefused("PLAIN response must be authzid NUL user NUL password")
    try:
        return parts[1].decode("utf-8"), parts[2].decode("utf-8")
    except UnicodeDecodeError:
        raise AccessRefused("PLAIN user and password must be UTF-8") from None


def parse_amqplain(response: bytes, version: ProtocolVersion) -> tuple[str, str]:
    """AMQPLAIN: a field table without its length holding LOGIN and PASSWORD.

    :raises AccessRefused: the response is not such a table.
    """
    from txamqp09.wire.errors import AMQPError
    from txamqp09.wire.fields import encode_longstr

    try:
        table, _ = version.tables.decode_table(encode_longstr(response), 0)
    except AMQPError:
        raise AccessRefused("AMQPLAIN response is not a field table") from None
    login, password = table.get("LOGIN"), table.get("PASSWORD")
    if not isinstance(login, (bytes, str)) or not isinstance(password, (bytes, str)):
        raise AccessRefused("AMQPLAIN response lacks LOGIN or PASSWORD")

    def text(value: bytes | str) -> str:
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value

    return text(login), text(password)


#: Checks a user name and password; returns the user or raises AccessRefused.
Authenticator = Callable[[str, str], Any]


def guest_only(user: str, password: str) -> str:
    """The default authenticator: only guest/guest."""
    if (user, password) != ("guest", "guest"):
        raise AccessRefused("login refused: unknown user or wrong password")
    return user


class ServerConnection(AMQPConnection):
    """One client's connection to the broker.

    :param authenticate: checks credentials; see :data:`Authenticator`.
    :param vhosts: the names of the virtual hosts clients may open.
    :param negotiation_timeout: seconds a client has to finish opening.
    """

    def __init__(
        self,
        clock: IReactorTime,
        *,
        authenticate: Authenticator = guest_only,
        vhosts: frozenset[str] = frozenset({"/"}),
        negotiation_timeout: float = 10.0,
        **options: Any,
    ) -> None:
        super().__init__(clock, **options)
        self._reader.frame_max = self.frame_max
        self.authenticate = authenticate
        self.vhosts = vhosts
        self.negotiation_timeout = negotiation_timeout
        self.user: Any = None
        self.vhost: Optional[str] = None
        self.client_properties: dict[str, Any] = {}
        self.channels: set[int] = set()
        self._negotiation_call: Any = None

    def connectionMade(self) -> None:
        self._negotiation_call = self.clock.callLater(
            self.negotiation_timeout, self._negotiationTimedOut
        )

    def _negotiationTimedOut(self) -> None:
        self._negotiation_call = None
        if self.state in (ConnectionState.AWAITING_HEADER, ConnectionState.NEGOTIATING):
            self.close_reason = ConnectionLevelError(
                f"connection not opened within {self.negotiation_timeout} seconds",
                reply_code=320,
            )
            self.dropConnection()

    def headerReceived(self, header: bytes) -> None:
        version = version_for_header(header)
        if version is None:
            self.write(PREFERRED.header)
            self.dropConnection(abort=False)
            return
        self.useVersion(version)
        spec = version.spec
        self.sendMethod(
            0,
            spec.ConnectionStart(
                server_properties=server_properties(version),
                mechanisms=b"PLAIN AMQPLAIN",
                locales=b"en_US",
            ),
        )

    # -- negotiation ---------------------------------------------------------

    def _expect(self, method: Any, done: bool) -> None:
        if done:
            raise CommandInvalid(
                f"{method.NAME} arrived out of order during negotiation",
                method.CLASS_ID,
                method.METHOD_ID,
            )

    def connection_start_ok(self, method: Any) -> None:
        assert self.version is not None
        self._expect(method, self.user is not None)
        self.client_properties = method.client_properties
        if method.mechanism == "PLAIN":
            user, password = parse_plain(method.response)
        elif method.mechanism == "AMQPLAIN":
            user, password = parse_amqplain(method.response, self.version)
        else:
            raise self._refused(f"unsupported authentication mechanism {method.mechanism!r}")
        try:
            self.user = self.authenticate(user, password)
        except AccessRefused as error:
            raise self._refused(error.reply_text) from None
        self.sendMethod(
            0,
            self.version.spec.ConnectionTune(
                channel_max=self.channel_max, frame_max=self.frame_max, heartbeat=self.heartbeat
            ),
        )

    def _refused(self, text: str) -> ConnectionLevelError:
        return ConnectionLevelError(text, 10, 11, reply_code=403)

    def connection_tune_ok(self, method: Any) -> None:
        self._expect(method, self.user is None or self.vhost is not None)
        channel_max = method.channel_max or self.channel_max
        frame_max = method.frame_max or self.frame_max
        if channel_max > self.channel_max or frame_max > self.frame_max:
            raise NotAllowed(
                f"tune-ok asks for channel_max {channel_max} / frame_max {frame_max}, "
                f"above the server's {self.channel_max} / {self.frame_max}",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        if frame_max < FRAME_MIN_SIZE:
            raise NotAllowed(
                f"frame_max {frame_max} is below the minimum of {FRAME_MIN_SIZE}",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        self.channel_max, self.frame_max = channel_max, frame_max
        self.setFrameMax(frame_max)
        self.startHeartbeat(method.heartbeat)

    def connection_open(self, method: Any) -> None:
        assert self.version is not None
        self._expect(method, self.user is None or self.vhost is not None)
        if method.virtual_host not in self.vhosts:
            raise InvalidPath(
                f"no access to virtual host {method.virtual_host!r}: it does not exist",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        self.vhost = method.virtual_host
        self.state = ConnectionState.OPEN
        if self._negotiation_call is not None and self._negotiation_call.active():
            self._negotiation_call.cancel()
        self._negotiation_call = None
        self.sendMethod(0, self.version.spec.ConnectionOpenOk())

    # -- channels ------------------------------------------------------------

    def commandReceived(self, channel: int, command: Command) -> None:
        assert self.version is not None
        method = command.method
        if self.state is not ConnectionState.OPEN:
            raise ChannelError(
                f"{method.NAME} on channel {channel} before the connection was opened",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        spec = self.version.spec
        if method.NAME == "channel.open":
            if channel in self.channels:
                raise ChannelError(f"channel {channel} is already open", 20, 10)
            self.channels.add(channel)
            self.sendMethod(channel, spec.ChannelOpenOk())
        elif method.NAME == "channel.close":
            self.channels.discard(channel)
            self.channelClosed(channel)
            self.sendMethod(channel, spec.ChannelCloseOk())
        elif method.NAME == "channel.close-ok":
            self.channels.discard(channel)
            self.channelClosed(channel)
        elif channel not in self.channels:
            raise ChannelError(
                f"{method.NAME} on channel {channel}, which is not open",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        else:
            raise AMQPNotImplemented(
                f"{method.NAME} is not implemented by this server",
                method.CLASS_ID,
                method.METHOD_ID,
            )

    def connectionLost(self, reason: Any = None) -> None:
        if self._negotiation_call is not None and self._negotiation_call.active():
            self._negotiation_call.cancel()
        self._negotiation_call = None
        super().connectionLost(reason)


class ServerFactory(Factory):
    """Builds a :class:`ServerConnection` per client with shared options."""

    def __init__(self, clock: IReactorTime, **options: Any) -> None:
        self.clock = clock
        self.options = options
        self.batch = OutputBatch()

    def buildProtocol(self, addr: Any) -> ServerConnection:
        connection = ServerConnection(self.clock, batch=self.batch, **self.options)
        connection.factory = self
        return connection
