"""The server side of an AMQP connection: the transport of one client.

:class:`ServerConnection` takes the protocol header in the version the
client asked for, and then runs two pieces of its own, as conch's SSH
transport runs its services: its :class:`~txamqp09.broker.handshake.ServerHandshake`
negotiates (connection.start, the login, tune, the virtual host), and its
:class:`~txamqp09.broker.channels.ServerChannels` opens and closes the
channels and hands them their commands. The connection itself does what
concerns the whole connection: reading (paused by alarms and the
throttle, with connection.blocked and unblocked), output (gathered
confirms, large deliveries sent from their parts), the limit on
unfinished bodies, closing, and the counters. :class:`ServerFactory`
makes a connection per client.
"""

from __future__ import annotations

import os
from time import monotonic
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.protocol import Factory
from twisted.protocols.policies import ProtocolWrapper

from txamqp09.broker.auth import AccessGuard, IAMQPUser, PeerInfo, Security, UserDatabase
from txamqp09.broker import oplog
from txamqp09.broker.alarms import PublishGate, ResourceAlarms, block_publishers
from txamqp09.broker.base import ConfirmSender
from txamqp09.broker.channel import ServerChannel
from txamqp09.broker.channels import ServerChannels
from txamqp09.broker.classes.staging import DEFAULT_STAGING_TTL
from txamqp09.broker.dialects import RABBITMQ, Dialect, dialect_for
from txamqp09.broker.flow import PublisherThrottle
from txamqp09.broker.handshake import ServerHandshake, unexpected_when_running
from txamqp09.broker.memory import (
    DEFAULT_MEMORY_HIGH_WATERMARK,
    MemoryMonitor,
    resident_memory,
    total_memory,
    watermark_bytes,
)
from txamqp09.broker.model import Broker, Client, VirtualHost
from txamqp09.broker.model.stats import ConnectionCounters
from txamqp09.broker.runtime import RuntimeConfig
from txamqp09.broker.serving import ServingWindow
from txamqp09.broker.timeouts import DEFAULT_CONSUMER_TIMEOUT, AckTimeouts
from txamqp09.protocol import AMQPConnection, ConnectionState, OutputBatch
from txamqp09.wire.errors import (
    AMQPError,
    ChannelLevelError,
    CommandInvalid,
    ConnectionForced,
    InternalError,
    ResourceError,
)
from txamqp09.wire.base import Method
from txamqp09.wire.bodies import MAPPED_BODY_SIZE
from txamqp09.wire.frames import HEARTBEAT_FRAME, BodyLike, Command
from txamqp09.wire.versions import PREFERRED, version_for_header

if TYPE_CHECKING:
    from txamqp09.wire import methods

#: Ready message bytes above which publishers are held back, by default.
DEFAULT_HIGH_WATERMARK = 512 * 1024 * 1024
#: Seconds between two heartbeat frames to a client the broker does not read.
PAUSED_PROBE_INTERVAL = 2.0
#: Bytes of unfinished messages one connection may hold across its channels, by default.
DEFAULT_PARTIAL_CONTENT_MAX = 256 * 1024 * 1024
#: The most bytes one system call sends (Twisted's default: 128 KiB).
SEND_SIZE = 1024 * 1024
#: The most bytes one system call reads on a connection that carries large
#: bodies (Twisted's default: 64 KiB): its body frames (128 KiB at most from
#: most clients) are then kept as views of what was read, not copied.
LARGE_READ_SIZE = 256 * 1024
#: Output of this many bytes is sent from its parts (see :meth:`ServerConnection.flush`).
DIRECT_SEND_FROM = 64 * 1024
#: The most parts one ``sendmsg`` takes.
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 16

#: The hold the ready bytes throttle puts on a connection's reading.
_WATERMARK_HOLD = "high watermark"


__all__ = [
    "DEFAULT_HIGH_WATERMARK",
    "DEFAULT_PARTIAL_CONTENT_MAX",
    "ServerConnection",
    "ServerFactory",
]



def _address(address: Any) -> str:
    """``host:port`` of a peer's address."""
    return f"{getattr(address, 'host', address)}:{getattr(address, 'port', '')}"


class ServerConnection(AMQPConnection):
    """One client's connection to the broker.

    Each open channel's :class:`~txamqp09.broker.publishing.Publisher` is
    the frame scanner's taker for that channel: basic.publish, its content
    and basic.ack go straight to it; every other frame takes the general
    path of :class:`~txamqp09.protocol.AMQPConnection`. A channel-level error
    raised by a frame closes that channel only.

    :param broker: the model the connection works on (a new, empty one if
        omitted).
    :param security: authenticates the client and authorizes its methods
        (shared by the broker's connections; if omitted, one of its own with
        RabbitMQ's defaults: vhost ``/``, guest/guest from loopback only).
    :param negotiation_timeout: seconds a client has to finish opening.
    :param staging_ttl: seconds an untouched file or message staging entry
        is kept (0: always).
    :param alarms: the broker's resource alarms (none ever raised if omitted);
        while any is active, the connection is blocked when it publishes
        (see :mod:`txamqp09.broker.alarms`).
    :param memory: the memory monitor told about the bodies the connection
        buffers (none if omitted).
    :param partial_content_max: bytes of unfinished message bodies the
        connection may hold across all its channels; beyond, it is closed
        with 506 resource-error.
    """

    def __init__(
        self,
        clock: IReactorTime,
        *,
        broker: Optional[Broker] = None,
        security: Optional[Security] = None,
        negotiation_timeout: float = 10.0,
        alarms: Optional[ResourceAlarms] = None,
        memory: Optional[MemoryMonitor] = None,
        partial_content_max: int = DEFAULT_PARTIAL_CONTENT_MAX,
        staging_ttl: float = DEFAULT_STAGING_TTL,
        **options: Any,
    ) -> None:
        super().__init__(clock, **options)
        self.scanner.channel_error = self.channelError
        self.broker = broker if broker is not None else Broker()
        self.broker.use_clock(clock)
        self.security = security if security is not None else Security(UserDatabase.default(), clock)
        #: The negotiation (see :mod:`.handshake`); it records what was
        #: agreed here (the user, the guard, the vhost...).
        self.handshake = ServerHandshake(
            self, self.security, self.broker, clock, timeout=negotiation_timeout, staging_ttl=staging_ttl
        )
        #: The open channels by number, and their bookkeeping (see :mod:`.channels`).
        self.channels = ServerChannels(self)
        #: The client's address and verified TLS certificate.
        self.peer = PeerInfo()
        #: When the transport connected (the clock's seconds).
        self.connected_at = 0.0
        #: The rules the protocol header chose (RabbitMQ's until it arrives).
        self.dialect: Dialect = RABBITMQ
        # What the handshake agrees, recorded by it (see HandshakeConnection).
        #: The client's properties (connection.start-ok).
        self.client_properties: dict[str, Any] = {}
        #: The SASL mechanism the client chose.
        self.auth_mechanism = ""
        #: The client asked for server-sent basic.cancel (consumer_cancel_notify).
        self.cancel_notify = False
        #: The client understands connection.blocked (else it gets channel.flow).
        self.blocked_notify = False
        self.user: Optional[IAMQPUser] = None
        #: Checks the channels' methods, once the vhost is open.
        self.guard: Optional[AccessGuard] = None
        self.vhost: Optional[str] = None
        self.model_vhost: Optional[VirtualHost] = None
        #: Reading stopped because the broker holds too many messages.
        self.publishing_blocked = False
        #: Whether the client is read: paused by alarms and the throttle.
        self.gate = PublishGate(self, alarms if alarms is not None else ResourceAlarms())
        self.memory = memory
        self.partial_content_max = partial_content_max
        #: Bytes of unfinished message bodies held across the channels.
        self.partial_bytes = 0
        self._probe_call: Optional[IDelayedCall] = None
        #: The connection's model counterpart (exclusive queues, global qos).
        self.client = Client()
        #: Bytes and reads/writes (see :mod:`txamqp09.broker.model.stats`).
        self.stats = ConnectionCounters()
        self._lost_waiters: list[Deferred[None]] = []
        self._confirming: list[ConfirmSender] = []
        #: Output a direct send left unsent (views, in order), sent from its
        #: parts once the socket takes more; later output queues behind it.
        self._held: list[BodyLike] = []
        #: Until when the broker may serve (its factory's; see :mod:`.serving`).
        self.window = ServingWindow()

    def dataReceived(self, data: bytes) -> None:
        """Handle the client's *data*. A fault of the broker's own (an
        exception that is not an AMQP error, such as a failed message store)
        is logged and closes the connection with 541 internal-error. Past
        the broker's serving deadline, nothing is handled."""
        window = self.window
        if window.until <= monotonic() and not window.is_open():
            return
        stats = self.stats
        stats.recv_oct += len(data)
        stats.recv_cnt += 1
        try:
            super().dataReceived(data)
        except Exception as error:
            self.log.failure("internal error while handling a client's input")
            self.connectionError(InternalError(f"internal error: {error}"))

    def connectionMade(self) -> None:
        assert self.transport is not None
        peer = self.transport.getPeer()
        self.client.name = _address(peer)
        self.connected_at = self.clock.seconds()
        self.broker.churn.connection_created += 1
        self.transport.registerProducer(self, True)  # type: ignore[attr-defined]
        if hasattr(self.transport, "SEND_LIMIT"):
            # A large delivery leaves in a few system calls, not one per 128 KiB.
            self.transport.SEND_LIMIT = SEND_SIZE
        if hasattr(self.transport, "setTcpNoDelay"):
            # Output is already gathered per read: Nagle would only add delay.
            self.transport.setTcpNoDelay(True)
        self.handshake.connectionMade()

    def clusterName(self) -> Optional[str]:
        """The global parameter ``cluster_name``, if the broker has one."""
        factory = getattr(self, "factory", None)
        name = factory.config.global_parameters.get("cluster_name") if factory is not None else None
        return name if isinstance(name, str) else None

    def headerReceived(self, header: bytes) -> None:
        """Speak the version the client asked for and start the handshake;
        answer a header of no version this broker speaks with the header
        of the one it prefers, and hang up."""
        version = version_for_header(header)
        if version is None:
            self.write(PREFERRED.header)
            self.dropConnection(abort=False)
            return
        self.useVersion(version)
        self.dialect = dialect_for(version)
        assert self.transport is not None
        self.peer = PeerInfo.from_transport(self.transport)
        self.handshake.start()

    def connectionHandler(self, method_class: type[Method]) -> Optional[Callable[[Method], None]]:
        """The handshake's ``connection_<name>`` method for *method_class*
        (start-ok, tune-ok, open, update-secret), else the connection's own
        (close, close-ok)."""
        handler = getattr(self.handshake, method_class.HANDLER, None)
        return handler if handler is not None else super().connectionHandler(method_class)

    def tune(self, channel_max: int, frame_max: int, heartbeat: int) -> None:
        """Use the limits and the heartbeat connection.tune-ok agreed on."""
        self.channel_max, self.frame_max = channel_max, frame_max
        self.setFrameMax(frame_max)
        self.startHeartbeat(heartbeat)

    # -- channels ------------------------------------------------------------

    def commandReceived(self, channel: int, command: Command) -> None:
        """A command on a channel other than 0: the channels' bookkeeping takes it."""
        self.channels.commandReceived(channel, command)

    def _channelLimit(self) -> int:
        """The highest channel number (RabbitMQ's dialect counts open channels instead)."""
        return 65535 if self.dialect.channel_max_counts_open else super()._channelLimit()

    def misplacedMethod(self, channel: int, method: Method) -> AMQPError:
        """RabbitMQ's dialect: 504 for another class on channel 0, 503 for a
        connection method elsewhere (the other way round otherwise)."""
        if not self.dialect.misplaced_methods_as_rabbitmq:
            return super().misplacedMethod(channel, method)
        if channel:
            return CommandInvalid(
                "unimplemented method", method.CLASS_ID, method.METHOD_ID,
                hint=f"{method.NAME} must be sent on channel 0, not {channel}",
            )
        return unexpected_when_running(method, hint=f"{method.NAME} must be sent on a channel other than 0")

    def replyText(self, error: AMQPError) -> str:
        """The reply text as the connection's dialect words it."""
        return self.dialect.reply_text(error)

    def channelError(self, channel: int, error: ChannelLevelError) -> None:
        """Close *channel* with a soft error, requeueing what it had unacked."""
        self.channels.forget(channel)
        super().channelError(channel, error)

    # -- flow of output ------------------------------------------------------

    def confirmsPending(self, publisher: ConfirmSender) -> None:
        """*publisher* gathers acks: have them sent with this batch's output."""
        self._confirming.append(publisher)
        if self.batch.active:
            self.batch.mark(self)
        else:
            self.flush()

    def flush(self) -> None:
        """Write queued output, gathered publisher acks first: from its parts
        (:meth:`writeParts`) when it is large enough (:meth:`_sendDirect`)."""
        if self._confirming:
            publishers, self._confirming = self._confirming, []
            for publisher in publishers:
                publisher.flushConfirms()
        output = self._output
        if output and self.transport is not None:
            stats = self.stats
            size = sum(map(len, output))
            stats.send_oct += size
            stats.send_cnt += 1
            if (size >= DIRECT_SEND_FROM or self._held) and self._sendDirect(output):
                return
        super().flush()

    def _sendDirect(self, output: list[BodyLike]) -> bool:
        """Send large *output* from its parts with one ``sendmsg`` (no join,
        so no copy of a body) when the transport is a TCP connection (not
        TLS) with nothing waiting to be sent; what the socket does not take
        is held as parts (:meth:`_sendHeld`), and any output while parts are
        held joins them. Whether it was sent this way."""
        if self._held:
            self._output = []
            self._held.extend(output)
            return True
        transport: Any = self.transport
        if isinstance(transport, ProtocolWrapper) or getattr(transport, "TLS", False):
            return False  # TLS (or another wrapper) must see every byte sent
        if (
            getattr(transport, "socket", None) is None
            or getattr(transport, "_tempDataLen", None) != 0  # Twisted's buffered output
            or len(transport.dataBuffer) != transport.offset
            or not transport.connected
            or transport.disconnecting
        ):
            return False
        self._output = []
        self._last_sent = self.clock.seconds()
        self._held = output
        self._sendHeld()
        return True

    def _sendHeld(self) -> bool:
        """Send what is held with one ``sendmsg``; whether all of it went.
        If not, deliveries pause and the transport is asked to call
        :meth:`resumeProducing` once the socket takes more."""
        transport: Any = self.transport
        held = self._held
        try:
            sent = transport.socket.sendmsg(held[:_IOV_MAX])
        except OSError:  # full (or broken: the transport finds out when it next writes or reads)
            sent = 0
        self._held = rest = _unsent(held, sent)
        if not rest:
            return True
        if not transport.producerPaused:
            self.pauseProducing()
        transport.producerPaused = True  # the transport resumes its producer once it may write
        transport.startWriting()
        return False

    def _releaseHeld(self) -> None:
        """Hand what is held to the transport (joined), ahead of closing it."""
        if self._held and self.transport is not None:
            held, self._held = self._held, []
            self.transport.write(b"".join(held))

    def dropConnection(self, abort: bool = True) -> None:
        """Close the transport, after what is held when not aborting."""
        if not abort:
            self.flush()
            self._releaseHeld()
        super().dropConnection(abort)

    def pauseProducing(self) -> None:
        """The transport's buffer is full: hold deliveries to this client."""
        self.client.set_writable(False)

    def resumeProducing(self) -> None:
        """The transport drained: send what is held, then deliver what
        waited, gathered in one write."""
        if self._held and not self._sendHeld():
            return
        self.batch.enter()
        try:
            self.client.set_writable(True)
        finally:
            self.batch.leave()

    def stopProducing(self) -> None:
        """The transport is going away; :meth:`connectionLost` cleans up."""

    # -- unfinished messages ---------------------------------------------------

    def bodyBuffered(self, size: int) -> None:
        """A channel buffered *size* more bytes of an unfinished message body.

        :raises ResourceError: the connection's unfinished bodies exceed
            :attr:`partial_content_max`.
        """
        held = self.partial_bytes = self.partial_bytes + size
        if held > self.partial_content_max:
            raise ResourceError(
                f"unfinished messages on this connection hold {held} bytes across its "
                f"channels, above the limit of {self.partial_content_max}; finish a "
                "message before starting the next"
            )
        if self.memory is not None:
            self.memory.buffered(size)

    def readLarge(self) -> None:
        """The client sends large bodies: read up to :data:`LARGE_READ_SIZE`
        bytes at a time from now on (the frame scanner passes their frames
        on in the pieces read, so larger reads cost no copies)."""
        transport = self.transport
        if transport is not None and getattr(transport, "bufferSize", LARGE_READ_SIZE) < LARGE_READ_SIZE:
            transport.bufferSize = LARGE_READ_SIZE  # type: ignore[attr-defined]

    def bodyReleased(self, size: int, dropped: bool) -> None:
        """A channel no longer holds *size* bytes of an unfinished body: the
        message is complete, or was *dropped* (its memory goes back to the system)."""
        self.partial_bytes -= size
        if dropped and size >= MAPPED_BODY_SIZE and self.memory is not None:
            self.memory.released()

    # -- holding publishers back ----------------------------------------------

    @property
    def published(self) -> bool:
        """The client has published on any channel still open."""
        return any(channel.publisher.publishes for channel in self.channels.values())

    def publishCount(self) -> int:
        """Messages published on the open channels, and contents under way."""
        return sum(
            channel.publisher.publishes + (channel.publisher.content is not None)
            for channel in self.channels.values()
        )

    def pauseReading(self) -> None:
        """Stop reading from the client (TCP pushes back on it), and stop
        handling what was read, from the frame after the current one.

        Until reading resumes, a heartbeat frame goes to the client every
        :data:`PAUSED_PROBE_INTERVAL` seconds: a connection that is not read
        would otherwise never notice that its client went away (the end of
        the stream waits behind what the client sent), and would keep what
        it holds, unfinished messages included.
        """
        if self.state is not ConnectionState.CLOSED and self.transport is not None:
            self.scanner.pause()
            self.transport.pauseProducing()  # type: ignore[attr-defined]
            self._probe_call = self.clock.callLater(PAUSED_PROBE_INTERVAL, self._probePaused)

    def _probePaused(self) -> None:
        self._probe_call = None
        if self.gate.paused and self.state is not ConnectionState.CLOSED:
            self.write(HEARTBEAT_FRAME)
            self._probe_call = self.clock.callLater(PAUSED_PROBE_INTERVAL, self._probePaused)

    def _stopProbing(self) -> None:
        if self._probe_call is not None and self._probe_call.active():
            self._probe_call.cancel()
        self._probe_call = None

    def resumeReading(self) -> None:
        """Read from the client again, starting with what was read but not handled."""
        self._stopProbing()
        if self.state is ConnectionState.CLOSED or self.transport is None:
            return
        self._last_received = self.clock.seconds()
        self.scanner.resume()
        self.transport.resumeProducing()  # type: ignore[attr-defined]
        if self.scanner.buffered:
            self.dataReceived(b"")

    def heartbeatTimedOut(self) -> None:
        # While reading is paused the client's heartbeats sit in the socket.
        if self.gate.paused:
            self.startHeartbeat(self._heartbeat_interval)
            return
        super().heartbeatTimedOut()

    def notifyBlocked(self, reason: Optional[str]) -> None:
        """connection.blocked (or connection.unblocked for None), if the client announced it."""
        assert self.version is not None
        spec = self.version.spec
        if not self.blocked_notify or not hasattr(spec, "ConnectionBlocked"):
            return
        if reason is None:
            self.sendMethod(0, spec.ConnectionUnblocked())
        else:
            self.sendMethod(0, spec.ConnectionBlocked(reason=reason[:255]))

    def blockPublishing(self, reason: str) -> None:
        """Tell the client to stop publishing, and stop reading from it."""
        assert self.version is not None
        spec = self.version.spec
        self.publishing_blocked = True
        if self.blocked_notify:
            self.sendMethod(0, spec.ConnectionBlocked(reason=reason[:255]))
        else:
            for number in self.channels:
                self.sendMethod(number, spec.ChannelFlow(active=False))
        self.gate.hold(_WATERMARK_HOLD)

    def unblockPublishing(self) -> None:
        """Let the client publish again, and read from it again."""
        assert self.version is not None
        spec = self.version.spec
        self.publishing_blocked = False
        if self.blocked_notify:
            self.sendMethod(0, spec.ConnectionUnblocked())
        else:
            for number in self.channels:
                self.sendMethod(number, spec.ChannelFlow(active=True))
        self.gate.release(_WATERMARK_HOLD)

    # -- closing -------------------------------------------------------------

    def close(self, error: Optional[AMQPError] = None) -> None:
        """Close the connection; its channels stop at once (unacked requeued)."""
        self.channels.close_all()
        super().close(error)

    def connection_close(self, method: methods.ConnectionClose) -> None:
        """The client closes: its channels stop before anything else it sent is read."""
        self.channels.close_all()
        super().connection_close(method)

    def _keepCutOffContent(self) -> None:
        """The transport broke: content cut off mid-way goes to its class, which
        may keep what arrived (file.stage: resumable staging)."""
        for number, channel in self.channels.items():
            assembler = self._assemblers.get(number)
            command = assembler.partial() if assembler is not None else None
            if command is not None and channel.classes is not None:
                channel.classes.cut_off(command)

    def connectionLost(self, reason: Any = None) -> None:
        self._stopProbing()
        self._keepCutOffContent()
        self.channels.close_all()
        self.client.close()
        self.broker.churn.connection_closed += 1
        self.handshake.connectionLost()
        self._held = []
        super().connectionLost(reason)
        oplog.connection_closed(
            self.client.name, self.user.name if self.user is not None else None,
            self.close_reason, self.clock.seconds() - self.connected_at,
        )
        factory = getattr(self, "factory", None)
        if factory is not None:
            factory.connections.discard(self)
        waiters, self._lost_waiters = self._lost_waiters, []
        for waiter in waiters:
            waiter.callback(None)

    def whenLost(self) -> Deferred[None]:
        """A Deferred that fires once the connection is gone."""
        waiter: Deferred[None] = Deferred()
        if self.state is ConnectionState.CLOSED:
            waiter.callback(None)
        else:
            self._lost_waiters.append(waiter)
        return waiter


def _unsent(parts: list[BodyLike], sent: int) -> list[BodyLike]:
    """What of *parts* remains after the first *sent* bytes."""
    for index, part in enumerate(parts):
        size = len(part)
        if sent < size:
            return [memoryview(part)[sent:], *parts[index + 1 :]] if sent else parts[index:]
        sent -= size
    return []


class ServerFactory(Factory):
    """Builds a :class:`ServerConnection` per client, sharing one broker model.

    :param broker: the model (a new one with the virtual host ``/`` if omitted).
    :param security: users, vhosts, permissions and tickets, shared by every
        connection (RabbitMQ's defaults if omitted: vhost ``/``, guest/guest
        from loopback only); the model gets a virtual host for each of its
        vhosts.
    :param high_watermark: bytes of ready messages above which publishers
        are blocked (see :class:`~txamqp09.broker.flow.PublisherThrottle`).
    :param alarms: the broker's resource alarms (a new set if omitted): while
        any is active, publishing connections are blocked.
    :param memory_high_watermark: the memory alarm's watermark: a fraction
        of the machine's memory (a float) or bytes (an int).
    :param memory_probe: what the memory monitor measures (the process's
        resident memory if omitted; see :class:`~txamqp09.broker.memory.MemoryMonitor`).
    :param consumer_timeout: seconds a delivery may stay unacknowledged
        before its channel is closed (RabbitMQ's ``consumer_timeout``; 0: never;
        see :mod:`txamqp09.broker.timeouts`).
    :param connection_max: connections open at once beyond which new ones
        are refused (RabbitMQ's ``connection_max``; None: no limit).
    :param window: until when the broker may serve (a new, unbounded one
        if omitted; see :mod:`txamqp09.broker.serving`).
    """

    def __init__(
        self,
        clock: IReactorTime,
        broker: Optional[Broker] = None,
        *,
        security: Optional[Security] = None,
        high_watermark: int = DEFAULT_HIGH_WATERMARK,
        alarms: Optional[ResourceAlarms] = None,
        memory_high_watermark: float | int = DEFAULT_MEMORY_HIGH_WATERMARK,
        memory_probe: Optional[Callable[[], Optional[int]]] = None,
        consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT,
        connection_max: Optional[int] = None,
        window: Optional[ServingWindow] = None,
        **options: Any,
    ) -> None:
        self.clock = clock
        self.broker = broker if broker is not None else Broker()
        self.broker.use_clock(clock)
        self.security = security if security is not None else Security(UserDatabase.default(), clock)
        for vhost in self.security.database.vhosts:
            self.broker.add_vhost(vhost)
        self.security.census = self
        #: The runtime configuration (users, vhosts, policies, limits ...);
        #: the broker service gives it the store and starts it.
        self.config = RuntimeConfig(self.security.database, self.broker)
        self.config.vhost_deleted.append(self._vhost_deleted)
        self.config.user_deleted.append(self._user_deleted)
        self.options = options
        self.batch = OutputBatch()
        #: The connections that are currently up.
        self.connections: set[ServerConnection] = set()
        self.throttle = PublisherThrottle(self.broker, self.connections, clock, high_watermark)
        #: Memory and disk alarms; publishers are blocked while any is active.
        self.alarms = alarms if alarms is not None else ResourceAlarms()
        block_publishers(self.alarms, lambda: [connection.gate for connection in self.connections])
        #: The memory alarm's watermark as given: a fraction of the machine's memory, or bytes.
        self.memory_high_watermark = memory_high_watermark
        self.memory = MemoryMonitor(
            self.alarms,
            clock,
            watermark_bytes(memory_high_watermark),
            memory_probe if memory_probe is not None else resident_memory,
        )
        self.ack_timeouts = AckTimeouts(clock, consumer_timeout, self._openChannels)
        self.connection_max = connection_max
        #: Until when the broker may serve (see :mod:`txamqp09.broker.serving`).
        self.window = window if window is not None else ServingWindow()

    def _openChannels(self) -> Iterator[tuple[str, ServerChannel]]:
        """(the client's address, channel) for every open channel."""
        for connection in list(self.connections):
            for channel in list(connection.channels.values()):
                yield connection.client.name, channel

    def _vhost_deleted(self, name: str) -> None:
        """Close the connections to a deleted vhost (320, as RabbitMQ)."""
        for connection in list(self.connections):
            if connection.vhost == name:
                connection.close(ConnectionForced(f"vhost '{name}' is deleted"))

    def _user_deleted(self, name: str) -> None:
        """Close the connections of a deleted user (320, as RabbitMQ)."""
        for connection in list(self.connections):
            if connection.user is not None and connection.user.name == name:
                connection.close(ConnectionForced(f"user '{name}' is deleted"))

    def stop_serving(self, error: AMQPError) -> None:
        """Close every connection with *error* at once, delivering nothing
        more to any of them (not even what closing the others requeues);
        connections made afterwards are refused."""
        self.window.lapsed = True
        connections = list(self.connections)
        for connection in connections:
            connection.client.halt()
        for connection in connections:
            connection.close(error)

    def vhost_connections(self, vhost: str) -> int:
        """Open connections on *vhost* (for its ``max-connections`` limit)."""
        return sum(1 for c in self.connections if c.vhost == vhost and c.state is ConnectionState.OPEN)

    def user_channels(self, user: str) -> int:
        """Open channels of *user* (for their ``max-channels`` limit)."""
        return sum(
            len(c.channels) for c in self.connections if c.user is not None and c.user.name == user
        )

    def startFactory(self) -> None:
        oplog.memory_watermark(self.memory_high_watermark, self.memory.watermark, total_memory())
        self.throttle.start()
        self.memory.start()
        self.ack_timeouts.start()

    def stopFactory(self) -> None:
        self.throttle.stop()
        self.memory.stop()
        self.ack_timeouts.stop()

    def buildProtocol(self, addr: Any) -> Optional[ServerConnection]:  # type: ignore[override]
        """A connection for the client at *addr*, or None (the socket is
        closed at once) when :attr:`connection_max` connections are open."""
        if self.connection_max is not None and len(self.connections) >= self.connection_max:
            oplog.connection_refused(_address(addr), self.connection_max)
            return None
        if self.window.lapsed:
            return None
        connection = ServerConnection(
            self.clock,
            broker=self.broker,
            security=self.security,
            batch=self.batch,
            alarms=self.alarms,
            memory=self.memory,
            **self.options,
        )
        connection.factory = self
        connection.window = self.window
        self.connections.add(connection)
        return connection
