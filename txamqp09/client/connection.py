"""The client side of an AMQP connection, and :func:`connect`.

:class:`ClientConnection` sends the protocol header of the version asked for
(0-9-1 unless told otherwise), authenticates with SASL PLAIN or AMQPLAIN,
tunes within the server's limits, opens the virtual host, then carries
channels. Negotiation moves through named steps (:class:`Negotiation`); a
method out of step closes the connection with 503.

Heartbeats run both ways once tuned; a server silent for two intervals is
dropped (see :class:`~txamqp09.protocol.AMQPConnection`). ``connection.blocked``
and ``connection.unblocked`` update :attr:`ClientConnection.blocked` and call
the listeners added with :meth:`~ClientConnection.addBlockedListener`.
"""

from __future__ import annotations

import enum
import platform
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from twisted.internet.defer import Deferred, fail
from twisted.internet.endpoints import connectProtocol
from twisted.internet.interfaces import (
    IDelayedCall,
    IReactorTime,
    IStreamClientEndpoint,
)
from twisted.internet.protocol import Factory
from twisted.python.failure import Failure

import twisted
from txamqp09 import __version__
from txamqp09.client.api import channel_class
from txamqp09.client.base import ChannelState
from txamqp09.client.channel import Channel
from txamqp09.client.errors import (
    ClientError,
    ConnectionClosed,
    NotInThisVersion,
    connection_closed,
)
from txamqp09.client.outcome import Outcome
from txamqp09.client.params import ConnectionParameters, endpoint_for, parse_url
from txamqp09.protocol import AMQPConnection, ConnectionState
from txamqp09.wire.base import CONTENT_HEADER, Method, decode_method
from txamqp09.wire.errors import (
    AMQPError,
    ChannelError,
    ChannelLevelError,
    CommandInvalid,
    ConnectionLevelError,
)
from txamqp09.wire.fields import TableCodec, field_text
from txamqp09.wire.frames import (
    BASIC_CLASS,
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_METHOD,
    FRAME_MIN_SIZE,
    Command,
    Frame,
)
from txamqp09.wire.versions import (
    CAPABILITIES,
    AMQP0_9_1,
    HEADER_SIZE,
    ProtocolVersion,
    version_for_header,
    version_named,
)

if TYPE_CHECKING:
    from txamqp09.wire import methods

__all__ = [
    "ClientConnection",
    "ClientFactory",
    "Negotiation",
    "connect",
    "client_properties",
    "sasl_response",
]

_NO_LIMIT = (1 << 32) - 1
#: Output held for the end of a batch is written once it reaches this size.
WRITE_CHUNK = 65536
#: Class and method ids of basic.deliver at the start of its frame payload.
_DELIVER_IDS = bytes((0, BASIC_CLASS, 0, 60))


class Negotiation(enum.Enum):
    """The server method a connection waits for while it opens."""

    START = "connection.start"
    TUNE = "connection.tune"
    OPEN_OK = "connection.open-ok"
    #: Negotiation is over (opened, or failed).
    DONE = "done"


def client_properties(version: ProtocolVersion, extra: dict[str, Any]) -> dict[str, Any]:
    """The client-properties table of connection.start-ok."""
    properties: dict[str, Any] = {
        "product": "txamqp09",
        "version": __version__,
        "platform": f"Python {platform.python_version()}, Twisted {twisted.__version__}",
        "information": "AMQP 0-9, 0-8 and 0-9-1 for Twisted",
    }
    if version is AMQP0_9_1:
        properties["capabilities"] = dict(CAPABILITIES)
    properties.update(extra)
    return properties


def sasl_response(mechanism: str, username: str, password: str, tables: TableCodec) -> bytes:
    """The start-ok response for SASL *mechanism* (PLAIN or AMQPLAIN)."""
    if mechanism == "PLAIN":
        return b"\x00" + username.encode("utf-8") + b"\x00" + password.encode("utf-8")
    # AMQPLAIN: a field table without its length prefix.
    return tables.encode_table({"LOGIN": username, "PASSWORD": password})[4:]


def _lower_limit(ours: int, theirs: int) -> int:
    """The tighter of two limits where 0 means none."""
    if not ours or not theirs:
        return ours or theirs
    return min(ours, theirs)


def _socket_transport(transport: Any, attribute: str) -> Any:
    """The transport, or the one a TLS layer wraps, that has *attribute*; or None."""
    while transport is not None and not hasattr(transport, attribute):
        transport = getattr(transport, "transport", None)
    return transport


class ClientConnection(AMQPConnection):
    """One connection to an AMQP server.

    Usually made by :func:`connect`. Once open, :meth:`channel` opens
    channels and :meth:`disconnect` closes the connection cleanly.

    :ivar server_properties: the server-properties table of connection.start.
    :ivar blocked: the reason the server gave in connection.blocked while it
        blocks publishing connections, else None.
    :ivar channels: the open channels by number.
    """

    def __init__(self, parameters: ConnectionParameters, clock: IReactorTime) -> None:
        super().__init__(
            clock,
            frame_max=parameters.frame_max,
            channel_max=parameters.channel_max,
            heartbeat=parameters.heartbeat or 0,
            close_timeout=parameters.close_timeout,
        )
        self.parameters = parameters
        self.requested_version = version_named(parameters.version)
        self.server_properties: dict[str, Any] = {}
        self.channels: dict[int, Channel] = {}
        #: Method names by ``(class id << 16) | method id``, for error messages.
        self.method_names: dict[int, str] = {}
        #: The largest body frame to send: frame_max less the frame's overhead.
        self.body_frame_limit = FRAME_MIN_SIZE
        self.negotiated_heartbeat = 0
        self.negotiation = Negotiation.START
        self.blocked: Optional[str] = None
        self._blocked_listeners: list[Callable[[Optional[str]], object]] = []
        self._opened: Outcome[ClientConnection] = Outcome()
        self._closed: Outcome[ConnectionClosed] = Outcome()
        self._channel_class: type[Channel] = channel_class(self.requested_version)
        self._pausers: set[object] = set()
        self._first_byte_seen = False
        self._refusal: Optional[bytes] = None
        self._negotiation_call: Optional[IDelayedCall] = None
        self._secret_updates: deque[Deferred[Any]] = deque()
        self._writable: Outcome[None] = Outcome()
        self._writable.succeed(None)
        self._unflushed = 0

    # -- opening -----------------------------------------------------------------

    def connectionMade(self) -> None:
        assert self.transport is not None
        self.transport.registerProducer(self, True)  # type: ignore[attr-defined]
        # Output is gathered per batch already; Nagle would only delay it.
        tcp = _socket_transport(self.transport, "setTcpNoDelay")
        if tcp is not None:
            tcp.setTcpNoDelay(True)
        version = self.requested_version
        self.write(version.header)
        self.useVersion(version)
        self.method_names = {index: cls.NAME for index, cls in version.methods.items()}
        self._negotiation_call = self.clock.callLater(
            self.parameters.connection_timeout, self._negotiationTimedOut
        )

    def whenOpened(self) -> Deferred[ClientConnection]:
        """Fires with this connection once it is open; fails with ConnectionClosed."""
        return self._opened.when()

    def whenClosed(self) -> Deferred[ConnectionClosed]:
        """Fires with the :class:`ConnectionClosed` that describes the end of the connection."""
        return self._closed.when()

    def dataReceived(self, data: bytes) -> None:
        # A server that refuses the version answers with its own protocol
        # header instead of connection.start; frames never start with "A".
        if self._refusal is not None:
            self._collectRefusal(data)
        elif self._first_byte_seen:
            super().dataReceived(data)
        else:
            self._first_byte_seen = True
            if data[:1] == b"A":
                self._refusal = b""
                self._collectRefusal(data)
            else:
                super().dataReceived(data)

    def _collectRefusal(self, data: bytes) -> None:
        assert self._refusal is not None
        self._refusal += data
        if len(self._refusal) < HEADER_SIZE:
            return
        header = self._refusal[:HEADER_SIZE]
        offered = version_for_header(header)
        self._failNegotiation(
            f"the server does not speak AMQP {self.requested_version.name}; it offers "
            + (f"AMQP {offered.name}" if offered else f"the protocol header {header!r}"),
            reply_code=540,
        )

    def _step(self, method: methods.AnyMethod, expected: Negotiation) -> None:
        if self.negotiation is not expected:
            raise CommandInvalid(
                f"{method.NAME} arrived while the connection waited for {self.negotiation.value}",
                method.CLASS_ID,
                method.METHOD_ID,
            )

    def connection_start(self, method: methods.ConnectionStart) -> None:
        """Authenticate with the configured SASL mechanism."""
        self._step(method, Negotiation.START)
        assert self.version is not None
        self.server_properties = method.server_properties
        parameters = self.parameters
        offered = _words(method.mechanisms)
        if parameters.mechanism not in offered:
            self._failNegotiation(
                f"the server offers SASL {', '.join(offered) or 'nothing'}, "
                f"not {parameters.mechanism}",
                reply_code=530,
            )
            return
        self.negotiation = Negotiation.TUNE
        self.sendMethod(
            0,
            self.version.spec.ConnectionStartOk(
                client_properties=client_properties(self.version, parameters.client_properties),
                mechanism=parameters.mechanism,
                response=sasl_response(
                    parameters.mechanism, parameters.username, parameters.password, self.version.tables
                ),
                locale=parameters.locale,
            ),
        )

    def connection_secure(self, method: methods.ConnectionSecure) -> None:
        """PLAIN and AMQPLAIN take no challenge: give up."""
        self._step(method, Negotiation.TUNE)
        self._failNegotiation(
            f"the server sent a SASL challenge, which {self.parameters.mechanism} does not use",
            reply_code=540,
        )

    def connection_tune(self, method: methods.ConnectionTune) -> None:
        """Agree limits and heartbeat within the server's, then open the virtual host."""
        self._step(method, Negotiation.TUNE)
        assert self.version is not None
        parameters = self.parameters
        channel_max = _lower_limit(parameters.channel_max, method.channel_max)
        frame_max = _lower_limit(parameters.frame_max, method.frame_max)
        heartbeat = _heartbeat(parameters.heartbeat, method.heartbeat)
        spec = self.version.spec
        self.sendMethod(
            0, spec.ConnectionTuneOk(channel_max=channel_max, frame_max=frame_max, heartbeat=heartbeat)
        )
        self.channel_max = channel_max
        self.frame_max = frame_max
        self.setFrameMax(frame_max)
        self.body_frame_limit = frame_max or _NO_LIMIT
        self.negotiated_heartbeat = heartbeat
        self.startHeartbeat(heartbeat)
        self.negotiation = Negotiation.OPEN_OK
        self.sendMethod(0, spec.ConnectionOpen(virtual_host=parameters.virtual_host))

    def connection_open_ok(self, method: methods.ConnectionOpenOk) -> None:
        """The virtual host is open: channels may be used."""
        self._step(method, Negotiation.OPEN_OK)
        self.negotiation = Negotiation.DONE
        self.state = ConnectionState.OPEN
        self._cancelNegotiationTimer()
        self._opened.succeed(self)

    def connection_redirect(self, method: methods.ConnectionRedirect) -> None:
        """0-8 and 0-9 servers may send clients elsewhere; this client does not follow."""
        self._step(method, Negotiation.OPEN_OK)
        self._failNegotiation(
            f"the server redirects this connection to {method.host}; connect there instead",
            reply_code=530,
        )

    def _failNegotiation(self, text: str, reply_code: int) -> None:
        self.negotiation = Negotiation.DONE
        self.close(ConnectionLevelError(text, reply_code=reply_code))

    def _negotiationTimedOut(self) -> None:
        self._negotiation_call = None
        self.close_reason = ConnectionLevelError(
            f"the server did not open the connection within "
            f"{self.parameters.connection_timeout} seconds",
            reply_code=320,
        )
        self.dropConnection()

    def _cancelNegotiationTimer(self) -> None:
        if self._negotiation_call is not None and self._negotiation_call.active():
            self._negotiation_call.cancel()
        self._negotiation_call = None

    # -- deliveries: the hot path ----------------------------------------------------

    def takesDeliveries(self, number: int) -> bool:
        """Whether a basic.deliver on channel *number* may skip the general
        content assembler: the connection and channel are open and no other
        content is half received on it."""
        channel = self.channels.get(number)
        assembler = self._assemblers.get(number)
        return (
            channel is not None
            and channel.state is ChannelState.OPEN
            and (assembler is None or not assembler.busy)
            and self.state is ConnectionState.OPEN
        )

    # -- the open connection -----------------------------------------------------

    def channel(self, number: Optional[int] = None, *, resume: bytes = b"") -> Deferred[Channel]:
        """Open a channel (the lowest free number unless *number* is given).

        :param resume: 0-9: the channel-id of a channel of an earlier
            connection, to be resumed (channel.resume) instead of opened.
        """
        if self.state is not ConnectionState.OPEN:
            return fail(self._unusable())
        if number is None:
            number = self._freeChannelNumber()
        if number is None or number in self.channels or not 0 < number <= self._channelLimit():
            return fail(ClientError(f"no channel available (channel_max {self._channelLimit()})"))
        channel = self._channel_class(self, number)
        self.channels[number] = channel
        self.scanner.takers[number] = DeliveryTaker(self, number).take
        return channel.resume(resume) if resume else channel.open()

    def _freeChannelNumber(self) -> Optional[int]:
        for number in range(1, self._channelLimit() + 1):
            if number not in self.channels:
                return number
        return None

    def _unusable(self) -> ClientError:
        if self._closed.done:
            return connection_closed(self.close_reason, self.method_names)
        return ConnectionClosed(504, f"the connection is {self.state.value}")

    def forgetChannel(self, number: int) -> None:
        """*number* closed; it may be used again."""
        self.channels.pop(number, None)
        self.scanner.takers.pop(number, None)

    def commandReceived(self, channel: int, command: Command) -> None:
        try:
            target = self.channels[channel]
        except KeyError:
            if command.method.NAME == "channel.close-ok":
                # The answer to our close after both sides closed at once.
                return
            raise ChannelError(
                f"{command.method.NAME} on channel {channel}, which is not open",
                command.method.CLASS_ID,
                command.method.METHOD_ID,
            ) from None
        target.commandReceived(command)

    def channelError(self, channel: int, error: ChannelLevelError) -> None:
        super().channelError(channel, error)
        target = self.channels.get(channel)
        if target is not None:
            target.closedByClient(error)

    def connection_blocked(self, method: methods.ConnectionBlocked) -> None:
        """The server stopped reading from publishing connections (low on resources)."""
        self.blocked = method.reason
        self._notifyBlocked()

    def connection_unblocked(self, method: methods.ConnectionUnblocked) -> None:
        """The server reads again."""
        self.blocked = None
        self._notifyBlocked()

    def addBlockedListener(self, listener: Callable[[Optional[str]], object]) -> None:
        """Call *listener* with the reason on connection.blocked and None on unblocked."""
        self._blocked_listeners.append(listener)

    def _notifyBlocked(self) -> None:
        for listener in self._blocked_listeners:
            listener(self.blocked)

    def updateSecret(self, new_secret: bytes, reason: str) -> Deferred[Any]:
        """Replace the credentials' secret (0-9-1 connection.update-secret, e.g. a new OAuth token)."""
        assert self.version is not None
        if "connection.update-secret" not in self.version.spec.BY_NAME:
            return fail(NotInThisVersion(f"AMQP {self.version.name} has no connection.update-secret"))
        if self.state is not ConnectionState.OPEN:
            return fail(self._unusable())
        self.sendMethod(0, self.version.spec.ConnectionUpdateSecret(new_secret=new_secret, reason=reason))
        updated: Deferred[Any] = Deferred()
        self._secret_updates.append(updated)
        return updated

    def connection_update_secret_ok(self, method: methods.ConnectionUpdateSecretOk) -> None:
        """The server took the new secret."""
        if not self._secret_updates:
            raise CommandInvalid("connection.update-secret-ok without an update-secret", 10, 71)
        self._secret_updates.popleft().callback(method)

    # -- backpressure ------------------------------------------------------------

    def write(self, data: bytes) -> None:
        # Output waits for the end of the input being handled, but no longer
        # than WRITE_CHUNK bytes: the transport must see a long publishing
        # loop's output to tell it (pauseProducing) that its buffer is full.
        self._unflushed += len(data)
        super().write(data)
        if self._unflushed >= WRITE_CHUNK:
            self.flush()

    def flush(self) -> None:
        self._unflushed = 0
        super().flush()

    def replaceQueued(self, previous: Optional[bytes], replacement: bytes) -> bool:
        """Put *replacement* in the place of *previous* if that is the last output not yet written."""
        output = self._output
        if previous is None or not output or output[-1] is not previous:
            return False
        output[-1] = replacement
        return True

    # The transport calls these when its write buffer fills up and drains.

    def pauseProducing(self) -> None:
        """The transport's write buffer is full (the server reads slowly or is blocked)."""
        if self._writable.done:
            self._writable = Outcome()

    def resumeProducing(self) -> None:
        """The transport's write buffer has drained."""
        self._writable.succeed(None)

    def stopProducing(self) -> None:
        """The transport is going away; connectionLost follows."""

    @property
    def writable(self) -> bool:
        """The transport takes more output without buffering it up."""
        return self._writable.done

    def whenWritable(self) -> Deferred[None]:
        """Fires when the transport takes more output: await it between batches of publishes."""
        return self._writable.when()


    def pauseReading(self, by: object) -> None:
        """Stop reading from the socket until every *by* has called :meth:`resumeReading`."""
        first = not self._pausers
        self._pausers.add(by)
        producer = _socket_transport(self.transport, "pauseProducing")
        if first and producer is not None:
            producer.pauseProducing()

    def resumeReading(self, by: object) -> None:
        """*by* has caught up; read again once nothing else holds reading back."""
        if by not in self._pausers:
            return
        self._pausers.discard(by)
        producer = _socket_transport(self.transport, "pauseProducing")
        if not self._pausers and producer is not None and self.state is not ConnectionState.CLOSED:
            producer.resumeProducing()

    @property
    def reading_paused(self) -> bool:
        """A consumer's backlog holds reading back."""
        return bool(self._pausers)

    def heartbeatTimedOut(self) -> None:
        # While reading is paused the server's heartbeats sit in the socket.
        if self._pausers:
            self.startHeartbeat(self.negotiated_heartbeat)
            return
        super().heartbeatTimedOut()

    # -- closing -----------------------------------------------------------------

    def disconnect(self, reply_text: str = "normal shutdown") -> Deferred[ConnectionClosed]:
        """Close the connection cleanly; fires when the transport is gone.

        Channels end at once: pending calls fail and consumers stop. The
        server has :attr:`close_timeout` seconds to confirm before the
        transport is dropped.
        """
        self.close(ConnectionLevelError(reply_text, reply_code=200))
        return self.whenClosed()

    def close(self, error: Optional[AMQPError] = None) -> None:
        """Start the close handshake (see :meth:`disconnect`); channels end at once."""
        if self.state in (ConnectionState.CLOSING, ConnectionState.CLOSED):
            return
        super().close(error)
        ending = connection_closed(self.close_reason, self.method_names)
        clean = ending.reply_code == 200
        for channel in list(self.channels.values()):
            channel.shutdown(ending, clean)

    def dropConnection(self, abort: bool = True) -> None:
        # A TLS transport closes only once its producer is unregistered.
        if self.transport is not None:
            self.transport.unregisterProducer()  # type: ignore[attr-defined]
        super().dropConnection(abort)

    def connectionLost(self, reason: Optional[Failure] = None) -> None:
        super().connectionLost(reason)
        self._cancelNegotiationTimer()
        ended = self._ending()
        for channel in list(self.channels.values()):
            channel.shutdown(ended)
        pending, self._secret_updates = self._secret_updates, deque()
        for update in pending:
            update.errback(ended)
        self._opened.fail(ended)
        waiting_for_room, self._writable = self._writable, Outcome()
        waiting_for_room.fail(ended)
        self._writable.fail(ended)
        self._closed.succeed(ended)

    def _ending(self) -> ConnectionClosed:
        ended = connection_closed(self.close_reason, self.method_names)
        if self.negotiation is not Negotiation.DONE and not isinstance(self.close_reason, ConnectionLevelError):
            ended.reply_text += (
                f" while waiting for {self.negotiation.value}"
                + (" (the server may have refused the login)" if self.negotiation is Negotiation.TUNE else "")
            )
        return ended


def _heartbeat(ours: Optional[int], theirs: int) -> int:
    """The heartbeat interval to agree: the server's unless we asked for one."""
    if ours is None:
        return theirs
    return _lower_limit(ours, theirs) if ours else 0


def _words(value: Union[bytes, str]) -> list[str]:
    return str(field_text(value)).split()


class ClientFactory(Factory):
    """Builds a :class:`ClientConnection` with the same parameters for each connection."""

    def __init__(self, parameters: ConnectionParameters, clock: IReactorTime) -> None:
        self.parameters = parameters
        self.clock = clock

    def buildProtocol(self, addr: Any) -> ClientConnection:
        connection = ClientConnection(self.parameters, self.clock)
        connection.factory = self
        return connection


def connect(
    reactor: Any,
    url: Union[str, ConnectionParameters] = "amqp://guest:guest@localhost:5672/",
    *,
    endpoint: Optional[IStreamClientEndpoint] = None,
    **changes: Any,
) -> Deferred[ClientConnection]:
    """Connect and open; fires with the open :class:`ClientConnection`.

    :param url: an ``amqp://`` or ``amqps://`` URL, or parameters.
    :param endpoint: connect through this endpoint instead of the URL's host
        and port (a UNIX socket, a custom TLS setup, a proxy...).
    :param changes: :class:`ConnectionParameters` fields to override, such
        as ``version="0-9"`` or ``heartbeat=10``.
    :raises ConnectionClosed: (as the Deferred's failure) the server refused
        or dropped the connection while it opened; :class:`TLSFailed` when
        the TLS handshake failed.
    """
    parameters = parse_url(url) if isinstance(url, str) else url
    if changes:
        parameters = parameters.replace(**changes)
    connection = ClientConnection(parameters, reactor)
    connected = connectProtocol(endpoint or endpoint_for(reactor, parameters), connection)
    return connected.addCallback(lambda _: connection.whenOpened())


class DeliveryTaker:
    """The frame taker of one client channel: basic.deliver with its content
    becomes a command without the general content assembler.

    Anything unusual (a frame of another kind before the content is
    complete, a content header of another class, a body above the limit)
    hands the frames taken so far and the unusual one to the connection's
    general path, which reports protocol errors.

    :param connection: the channel's connection.
    :param number: the channel number.
    """

    __slots__ = ("_connection", "_number", "_taken", "_size", "_received")

    def __init__(self, connection: ClientConnection, number: int) -> None:
        self._connection = connection
        self._number = number
        #: The frames of the delivery so far (none: no delivery under way).
        self._taken: list[Frame] = []
        #: The announced body size, or -1 before the content header.
        self._size = -1
        self._received = 0

    def take(self, frame_type: int, buf: bytearray, start: int, end: int) -> bool:
        """The channel's :data:`~txamqp09.wire.frames.FrameTaker`."""
        taken = self._taken
        if not taken:
            if (
                frame_type != FRAME_METHOD
                or buf[start : start + 4] != _DELIVER_IDS
                or not self._connection.takesDeliveries(self._number)
            ):
                return False
            taken.append((frame_type, self._number, bytes(buf[start:end])))
            return True
        if self._size < 0:
            if frame_type != FRAME_HEADER or end - start < CONTENT_HEADER.size:
                return self._giveBack()
            class_id, _, size = CONTENT_HEADER.unpack_from(buf, start)
            if class_id != BASIC_CLASS or size > self._connection.max_body_size:
                return self._giveBack()
            self._size = size
            taken.append((frame_type, self._number, bytes(buf[start:end])))
            if size == 0:
                self._complete()
            return True
        received = self._received + end - start
        if frame_type != FRAME_BODY or received > self._size:
            return self._giveBack()
        taken.append((frame_type, self._number, bytes(buf[start:end])))
        self._received = received
        if received == self._size:
            self._complete()
        return True

    def _complete(self) -> None:
        connection = self._connection
        assert connection.version is not None
        taken = self._taken
        self._reset()
        header = taken[1][2]
        body = taken[2][2] if len(taken) == 3 else b"".join(frame[2] for frame in taken[2:])
        command = Command(
            decode_method(connection.version.methods, taken[0][2]),
            header[CONTENT_HEADER.size :],
            body,
            connection.version.properties[BASIC_CLASS],
        )
        connection._deliver(self._number, command)

    def _giveBack(self) -> bool:
        """Hand the frames taken so far to the general path; leave the current one to it."""
        taken = self._taken
        self._reset()
        connection = self._connection
        for frame in taken:
            connection.frameReceived(*frame)
            if connection.state is ConnectionState.CLOSED:
                break
        return False

    def _reset(self) -> None:
        self._taken = []
        self._size = -1
        self._received = 0
