"""The connection protocol client and server share.

:class:`AMQPConnection` negotiates the protocol header, reads frames
incrementally, assembles content, runs heartbeats and both close handshakes,
and hands complete commands to :meth:`AMQPConnection.commandReceived`. The
client and the server are subclasses that fill in the connection-class
handlers (``connection_<method>``) and the channel layer.

Output produced while one ``dataReceived`` runs is gathered and written once
at its end, for this connection and for every other connection of the same
:class:`OutputBatch` (a broker delivering a message published on one
connection to consumers on others).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from txamqp09.wire.base import Method, Properties, decode_method
from txamqp09.wire.errors import (
    AMQPError,
    ChannelError,
    ChannelLevelError,
    CommandInvalid,
    ConnectionLevelError,
    error_for_code,
)
from txamqp09.wire.frames import (
    FRAME_BODY,
    BodyLike,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    HEARTBEAT_FRAME,
    Command,
    ContentAssembler,
    FrameScanner,
    content_frames,
    method_frame,
)
from txamqp09.wire.versions import HEADER_SIZE, ProtocolVersion

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = ["ConnectionState", "OutputBatch", "AMQPConnection", "DEFAULT_MAX_BODY_SIZE"]

#: The largest message body accepted unless configured otherwise (RabbitMQ's default).
DEFAULT_MAX_BODY_SIZE = 128 * 1024 * 1024


class ConnectionState(enum.Enum):
    """Where a connection is in its life."""

    #: Waiting for (server) or having sent (client) the protocol header.
    AWAITING_HEADER = "awaiting-header"
    #: Header agreed; start/secure/tune/open under way.
    NEGOTIATING = "negotiating"
    #: connection.open-ok exchanged: channels may be used.
    OPEN = "open"
    #: connection.close sent, waiting for close-ok: everything else is dropped.
    CLOSING = "closing"
    #: The transport is gone.
    CLOSED = "closed"


class OutputBatch:
    """Gathers writes of a set of connections while input is being handled.

    While any connection of the batch is inside ``dataReceived``, writes are
    buffered; when the outermost one finishes, every connection with pending
    output writes it in one call.
    """

    def __init__(self) -> None:
        self._depth = 0
        self._dirty: list[AMQPConnection] = []

    @property
    def active(self) -> bool:
        """Input is being handled: writes wait for :meth:`leave`."""
        return self._depth > 0

    def enter(self) -> None:
        """Input handling starts."""
        self._depth += 1

    def leave(self) -> None:
        """Input handling ends: flush when it was the outermost."""
        self._depth -= 1
        if self._depth == 0:
            while self._dirty:
                dirty, self._dirty = self._dirty, []
                for connection in dirty:
                    connection.flush()

    def mark(self, connection: AMQPConnection) -> None:
        """*connection* has output to write at the end of the batch."""
        self._dirty.append(connection)


class AMQPConnection(Protocol):
    """Framing, heartbeats, close handshakes and dispatch for one connection.

    :param clock: the reactor's time interface (a ``Clock`` in tests).
    :param frame_max: the largest frame this side accepts.
    :param channel_max: the highest channel number this side accepts.
    :param heartbeat: the heartbeat interval this side asks for, in seconds.
    :param max_body_size: the largest message body accepted.
    :param close_timeout: seconds to wait for close-ok before dropping the
        transport.
    :param batch: the output batch shared with other connections.
    """

    #: The versions this side speaks; the first is preferred.
    version: Optional[ProtocolVersion] = None
    #: Where this connection's events go (a subclass gets its own namespace).
    log = Logger()

    def __init__(
        self,
        clock: IReactorTime,
        *,
        frame_max: int = 131072,
        channel_max: int = 2047,
        heartbeat: int = 60,
        max_body_size: int = DEFAULT_MAX_BODY_SIZE,
        close_timeout: float = 30.0,
        batch: Optional[OutputBatch] = None,
    ) -> None:
        self.clock = clock
        self.frame_max = frame_max
        self.channel_max = channel_max
        self.heartbeat = heartbeat
        self.max_body_size = max_body_size
        self.close_timeout = close_timeout
        self.batch = batch if batch is not None else OutputBatch()
        self.state = ConnectionState.AWAITING_HEADER
        #: The frame loop; hot paths register takers on it per channel.
        self.scanner = FrameScanner(self.frameReceived, frame_max)
        self._assemblers: dict[int, ContentAssembler] = {}
        #: Channels closed by this side, waiting for channel.close-ok.
        self.closing_channels: set[int] = set()
        #: Output queued for the end of the batch (bytes; a server's large
        #: deliveries add their body frames as views).
        self._output: list[BodyLike] = []
        self._header_buffer = b""
        self._last_received = 0.0
        self._last_sent = 0.0
        self._heartbeat_call: Optional[IDelayedCall] = None
        self._heartbeat_interval = 0
        self._close_call: Optional[IDelayedCall] = None
        self._handlers: dict[type[Method], Callable[[Method], None]] = {}
        #: Why the connection closed, once it has: an AMQPError or a Failure.
        self.close_reason: Optional[Union[AMQPError, Failure]] = None

    # -- version -----------------------------------------------------------

    def useVersion(self, version: ProtocolVersion) -> None:
        """Speak *version* from now on."""
        self.version = version
        self.scanner.reserved_types = version.reserved_frame_types
        self._handlers = {}
        for cls in version.methods.values():
            if cls.NAME.startswith("connection."):
                handler = self.connectionHandler(cls)
                if handler is not None:
                    self._handlers[cls] = handler
        self.state = ConnectionState.NEGOTIATING

    def connectionHandler(self, method_class: type[Method]) -> Optional[Callable[[Method], None]]:
        """The handler of the channel-0 method *method_class* (looked up once
        per version): this connection's ``connection_<name>`` method, if any."""
        return getattr(self, method_class.HANDLER, None)

    def headerReceived(self, header: bytes) -> None:
        """The peer's first 8 bytes arrived before any frame (role-specific)."""
        raise NotImplementedError

    # -- output ------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Queue *data* for the transport; written at the end of the batch."""
        if self.state is ConnectionState.CLOSED:
            return
        output = self._output
        output.append(data)
        if len(output) == 1:
            self._outputStarted()

    def writeParts(self, parts: list[BodyLike]) -> None:
        """Queue one output given in *parts* (a large content's frames, the
        body's as views of it), written with the batch's output: joined by
        :meth:`flush` here, sent from the parts where a subclass can."""
        if self.state is ConnectionState.CLOSED:
            return
        output = self._output
        output.extend(parts)
        if len(output) == len(parts):
            self._outputStarted()

    def _outputStarted(self) -> None:
        """The first output since the last flush: flush now, or at the batch's end."""
        if self.batch.active:
            self.batch.mark(self)
        else:
            self.flush()

    def flush(self) -> None:
        """Write queued output now."""
        output = self._output
        if not output or self.transport is None:
            return
        self._output = []
        self._last_sent = self.clock.seconds()
        if len(output) == 1:
            # One item is bytes: views come only several at a time, with their frame headers.
            self.transport.write(output[0])  # type: ignore[arg-type]
        else:
            self.transport.write(b"".join(output))

    def sendMethod(self, channel: int, method: Method) -> None:
        """Send one method without content."""
        self.write(method_frame(channel, method))

    def sendContent(
        self,
        channel: int,
        method: Method,
        properties: Union[Properties, bytes],
        body: bytes,
    ) -> None:
        """Send a content method with its header and body frames."""
        self.write(content_frames(channel, method, properties, body, self.scanner.frame_max))

    # -- input -------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        self.batch.enter()
        try:
            self._receive(data)
        except AMQPError as error:
            self.connectionError(error)
        finally:
            self.batch.leave()

    def _receive(self, data: bytes) -> None:
        self._last_received = self.clock.seconds()
        if self.state is ConnectionState.AWAITING_HEADER:
            data = self._awaitHeader(data)
            if not data or self.state is ConnectionState.AWAITING_HEADER:
                return
        if self.state is ConnectionState.CLOSED:
            return
        self.framesReceived(data)

    def framesReceived(self, data: bytes) -> None:
        """Handle the frames *data* completes, in order: each goes to its
        channel's taker in :attr:`scanner` (the hot path) or else to
        :meth:`frameReceived`."""
        self.scanner.scan(data)

    def frameReceived(self, frame_type: int, channel: int, payload: bytes) -> None:
        """Handle one well-formed frame: methods, content, heartbeats."""
        if frame_type == FRAME_METHOD:
            self._methodFrame(channel, payload)
        elif frame_type == FRAME_HEARTBEAT:
            return
        elif self.state is ConnectionState.CLOSING or channel in self.closing_channels:
            return
        elif frame_type == FRAME_HEADER:
            self._deliver(channel, self._assembler(channel).header(payload))
        elif frame_type == FRAME_BODY:
            self._deliver(channel, self._assembler(channel).body(payload))

    def _awaitHeader(self, data: bytes) -> bytes:
        """Collect the peer's 8-byte header; return what follows it."""
        needed = HEADER_SIZE - len(self._header_buffer)
        self._header_buffer += data[:needed]
        if len(self._header_buffer) < HEADER_SIZE:
            return b""
        header, self._header_buffer = self._header_buffer, b""
        self.headerReceived(header)
        return data[needed:]

    def _methodFrame(self, channel: int, payload: bytes) -> None:
        assert self.version is not None
        if self.state is ConnectionState.CLOSING:
            # Only the close handshake matters now.
            method = decode_method(self.version.methods, payload)
            if channel == 0 and method.NAME in ("connection.close", "connection.close-ok"):
                self._handlers[type(method)](method)
            return
        if channel == 0:
            method = decode_method(self.version.methods, payload)
            self.connectionMethodReceived(method)
            return
        if channel > self._channelLimit():
            raise ChannelError(f"channel {channel} is above channel_max {self._channelLimit()}")
        if channel in self.closing_channels:
            method = decode_method(self.version.methods, payload)
            if method.NAME in ("channel.close", "channel.close-ok"):
                self._deliver(channel, Command(method))
            return
        method = decode_method(self.version.methods, payload)
        if method.NAME.startswith("connection."):
            raise self.misplacedMethod(channel, method)
        self._deliver(channel, self._assembler(channel).method(method))

    def _channelLimit(self) -> int:
        return self.channel_max or 65535

    def _assembler(self, channel: int) -> ContentAssembler:
        assembler = self._assemblers.get(channel)
        if assembler is None:
            assert self.version is not None
            assembler = self._assemblers[channel] = ContentAssembler(
                self.version.properties, self.max_body_size
            )
        return assembler

    def _deliver(self, channel: int, command: Optional[Command]) -> None:
        if command is None:
            return
        try:
            self.commandReceived(channel, command)
        except ChannelLevelError as error:
            if error.class_id == 0:
                error.class_id = command.method.CLASS_ID
                error.method_id = command.method.METHOD_ID
            self.channelError(channel, error)

    def connectionMethodReceived(self, method: Method) -> None:
        """Dispatch a channel-0 method to its ``connection_<name>`` handler."""
        handler = self._handlers.get(type(method))
        if handler is None:
            if not method.NAME.startswith("connection."):
                raise self.misplacedMethod(0, method)
            raise CommandInvalid(
                f"{method.NAME} is not valid from this peer on channel 0",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        handler(method)

    def misplacedMethod(self, channel: int, method: Method) -> AMQPError:
        """The error for a connection method on *channel* (not 0), or for a
        method of another class on channel 0 (*channel* is 0)."""
        if channel:
            return ChannelError(
                f"{method.NAME} must be sent on channel 0, not {channel}",
                method.CLASS_ID,
                method.METHOD_ID,
            )
        return CommandInvalid(
            f"{method.NAME} is not valid from this peer on channel 0",
            method.CLASS_ID,
            method.METHOD_ID,
        )

    def commandReceived(self, channel: int, command: Command) -> None:
        """A complete command arrived on a channel other than 0."""
        raise NotImplementedError

    # -- channels ------------------------------------------------------------

    def channelError(self, channel: int, error: ChannelLevelError) -> None:
        """Close *channel* with a soft error; drop its input until close-ok."""
        assert self.version is not None
        self.closing_channels.add(channel)
        assembler = self._assemblers.get(channel)
        if assembler is not None:
            assembler.reset()
        self.sendMethod(
            channel,
            self.version.spec.ChannelClose(
                reply_code=error.reply_code,
                reply_text=self.replyText(error),
                class_id=error.class_id,
                method_id=error.method_id,
            ),
        )

    def replyText(self, error: AMQPError) -> str:
        """The reply text (at most 255 characters) *error* is sent with."""
        return error.full_text[:255]

    def channelClosed(self, channel: int) -> None:
        """Forget *channel*'s framing state; it may be opened again."""
        self.closing_channels.discard(channel)
        self._assemblers.pop(channel, None)

    # -- closing -----------------------------------------------------------

    def connectionError(self, error: AMQPError) -> None:
        """Close the whole connection because of *error*."""
        if not error.hard:
            error = ConnectionLevelError(
                error.reply_text, error.class_id, error.method_id, reply_code=error.reply_code,
                hint=error.hint,
            )
        self.close(error)

    def close(self, error: Optional[AMQPError] = None) -> None:
        """Start the close handshake: send connection.close and wait for close-ok.

        Without *error* the close is a normal shutdown (200). Nothing but the
        handshake is processed afterwards; the transport is dropped when the
        peer answers or after :attr:`close_timeout` seconds.
        """
        if self.state in (ConnectionState.CLOSING, ConnectionState.CLOSED):
            return
        if self.version is None or self.state is ConnectionState.AWAITING_HEADER:
            self.close_reason = error
            self.dropConnection()
            return
        if error is None:
            error = ConnectionLevelError("normal shutdown", reply_code=200)
        self.close_reason = error
        self.state = ConnectionState.CLOSING
        self._stopHeartbeat()
        self.sendMethod(
            0,
            self.version.spec.ConnectionClose(
                reply_code=error.reply_code,
                reply_text=self.replyText(error),
                class_id=error.class_id,
                method_id=error.method_id,
            ),
        )
        self._close_call = self.clock.callLater(self.close_timeout, self.dropConnection)

    def connection_close(self, method: methods.ConnectionClose) -> None:
        """The peer closes the connection: answer close-ok and hang up."""
        assert self.version is not None
        if self.close_reason is None:
            self.close_reason = self.peerClosed(method)
        self.sendMethod(0, self.version.spec.ConnectionCloseOk())
        self.state = ConnectionState.CLOSING
        self.flush()
        self.dropConnection(abort=False)

    def connection_close_ok(self, method: methods.ConnectionCloseOk) -> None:
        """The peer confirmed our connection.close."""
        self.dropConnection(abort=False)

    def peerClosed(self, method: methods.ConnectionClose) -> AMQPError:
        """The reason recorded when the peer sent connection.close."""
        return error_for_code(
            method.reply_code, method.reply_text, method.class_id, method.method_id, hard=True
        )

    def dropConnection(self, abort: bool = True) -> None:
        """Close the transport (abortively unless *abort* is false)."""
        self.flush()
        if self.transport is None:
            return
        if abort and hasattr(self.transport, "abortConnection"):
            self.transport.abortConnection()
        else:
            self.transport.loseConnection()

    def connectionLost(self, reason: Optional[Failure] = None) -> None:
        self.state = ConnectionState.CLOSED
        self.scanner.stop()
        self._stopHeartbeat()
        if self._close_call is not None and self._close_call.active():
            self._close_call.cancel()
        self._close_call = None
        self._output = []
        if self.close_reason is None:
            self.close_reason = reason

    # -- heartbeats ----------------------------------------------------------

    def startHeartbeat(self, interval: int) -> None:
        """Send heartbeats when idle and drop a peer silent for 2 intervals."""
        self._stopHeartbeat()
        self._heartbeat_interval = interval
        if interval <= 0:
            return
        now = self.clock.seconds()
        self._last_received = self._last_sent = now
        self._heartbeat_call = self.clock.callLater(interval / 2, self._heartbeatTick)

    def _heartbeatTick(self) -> None:
        interval = self._heartbeat_interval
        now = self.clock.seconds()
        if now - self._last_received >= 2 * interval:
            self._heartbeat_call = None
            self.heartbeatTimedOut()
            return
        if now - self._last_sent >= interval / 2:
            self.write(HEARTBEAT_FRAME)
        self._heartbeat_call = self.clock.callLater(interval / 2, self._heartbeatTick)

    def _stopHeartbeat(self) -> None:
        if self._heartbeat_call is not None and self._heartbeat_call.active():
            self._heartbeat_call.cancel()
        self._heartbeat_call = None

    def heartbeatTimedOut(self) -> None:
        """The peer missed its heartbeats: drop the transport without a handshake."""
        self.log.warn(
            "AMQP peer silent for {seconds} s; disconnecting", seconds=2 * self._heartbeat_interval
        )
        self.close_reason = ConnectionLevelError(
            f"missed heartbeats for {2 * self._heartbeat_interval} seconds", reply_code=320
        )
        self.dropConnection()

    def setFrameMax(self, frame_max: int) -> None:
        """Apply a negotiated frame_max to input and output."""
        self.scanner.frame_max = frame_max or (1 << 32) - 1

