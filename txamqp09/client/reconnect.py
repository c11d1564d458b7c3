"""A connection that comes back, to the same broker or the next one.

:class:`ReconnectingClient` is a Twisted service that keeps one connection
open to one of several brokers. It tries its addresses in order; after a
lost connection it starts with the address after the one it lost, and when
every address failed it waits (exponential backoff) before the next round.
Any failure counts: a refused or unanswered TCP connection, a broker that
closes the connection while it opens (a standby of a group, a broker
starting up, refused credentials), a connection lost while it is recovered.

On every new connection the channels of the client are recovered by
:mod:`txamqp09.client.recovery`: the topology declared through them is
declared again, their settings and consumers restored, unconfirmed messages
published again. Listeners added with :meth:`ReconnectingClient.addListener`
hear of each connection, loss and failed attempt.

The loop is written here rather than with
:class:`~twisted.application.internet.ClientService`, which counts a
connection as made once TCP connects: a connection that the broker closes
while it opens, as a standby does, would reach its state machine in a state
that has no transition for it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from twisted.application.internet import backoffPolicy
from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.endpoints import connectProtocol
from twisted.internet.interfaces import IDelayedCall, IStreamClientEndpoint
from twisted.logger import Logger

from txamqp09.client.api import channel_class
from txamqp09.client.base import BodyLike, PropertiesLike
from txamqp09.client.connection import ClientConnection
from txamqp09.client.consumer import DeliveryCallback
from txamqp09.client.errors import ConnectionClosed
from txamqp09.client.outcome import Outcome
from txamqp09.client.params import ConnectionParameters, endpoint_for, parse_url
from txamqp09.client.events import AttemptFailed, Connected, ConnectionLost, RecoveryEvent
from txamqp09.client.recovery import RecoveringChannel, RecoveringConsumer
from txamqp09.client.topology import Declaration, StepRecord, Topology
from txamqp09.protocol import ConnectionState
from txamqp09.wire.versions import version_named

__all__ = ["Address", "LinkState", "ReconnectingClient", "addresses_for"]

_log = Logger()

#: What the client is given: one URL or parameters, or a list of them.
Addresses = Union[str, ConnectionParameters, Sequence[Union[str, ConnectionParameters]]]


@dataclass(frozen=True)
class Address:
    """One broker to try: its connection parameters and the endpoint that reaches it."""

    parameters: ConnectionParameters
    endpoint: IStreamClientEndpoint

    @property
    def name(self) -> str:
        """``host:port``, as events and logs name it."""
        return f"{self.parameters.host}:{self.parameters.port}"


def addresses_for(
    reactor: Any,
    urls: Addresses,
    endpoint: Optional[IStreamClientEndpoint] = None,
    **changes: Any,
) -> list[Address]:
    """The addresses *urls* name, with *changes* (ConnectionParameters fields) applied to each.

    :param endpoint: connect through this endpoint (only with one URL).
    :raises ValueError: no URL, an endpoint with several, or URLs of
        different protocol versions.
    """
    given = [urls] if isinstance(urls, (str, ConnectionParameters)) else list(urls)
    parameters = [parse_url(url) if isinstance(url, str) else url for url in given]
    if changes:
        parameters = [each.replace(**changes) for each in parameters]
    if not parameters:
        raise ValueError("give at least one amqp:// or amqps:// URL")
    if endpoint is not None and len(parameters) > 1:
        raise ValueError("an endpoint replaces the address of one URL; give one URL with it")
    if len({each.version for each in parameters}) > 1:
        raise ValueError("every address must use the same AMQP version")
    return [Address(each, endpoint or endpoint_for(reactor, each)) for each in parameters]


class LinkState(enum.Enum):
    """Where a :class:`ReconnectingClient` is.

    STOPPED -> CONNECTING (started) -> CONNECTED (an address opened and the
    channels recovered) -> CONNECTING (the connection was lost) ...;
    CONNECTING -> WAITING (every address failed) -> CONNECTING (after the
    backoff); any -> STOPPED (stopped).
    """

    STOPPED = "stopped"
    #: Trying the addresses in order, one round.
    CONNECTING = "connecting"
    #: Every address failed; the next round is scheduled.
    WAITING = "waiting"
    CONNECTED = "connected"


class ReconnectingClient(Service):
    """Keeps one connection open to one of several brokers and recovers its channels on it.

    :param reactor: the reactor (also the clock of the backoff).
    :param urls: an ``amqp://`` or ``amqps://`` URL or parameters, or a list
        of them: the brokers to try, in order.
    :param endpoint: connect through this endpoint instead of the URL's
        (with one URL only).
    :param retry_policy: seconds to wait after *n* rounds in a row in which
        every address failed; exponential backoff from 1.5 s to 60 s with up
        to 1 s of jitter by default.
    :param confirms: put the channel of :meth:`publish` in confirm mode, so
        that it fires when a broker has the message.
    :param changes: :class:`ConnectionParameters` fields to override for every address.

    :ivar state: a :class:`LinkState`.
    :ivar topology: what was declared through the client's channels.
    :ivar connections_made: connections opened and recovered so far.
    """

    def __init__(
        self,
        reactor: Any,
        urls: Addresses = "amqp://guest:guest@localhost:5672/",
        *,
        endpoint: Optional[IStreamClientEndpoint] = None,
        retry_policy: Optional[Callable[[int], float]] = None,
        confirms: bool = False,
        **changes: Any,
    ) -> None:
        self.addresses = addresses_for(reactor, urls, endpoint, **changes)
        self.confirms = confirms
        self.state = LinkState.STOPPED
        self.topology = Topology(self.report)
        self.connections_made = 0
        self._reactor = reactor
        self._retry_policy = retry_policy or backoffPolicy()
        self._channel_class = channel_class(version_named(self.addresses[0].parameters.version))
        self._channels: list[RecoveringChannel] = []
        self._listeners: list[Callable[[RecoveryEvent], object]] = []
        self._connection: Optional[ClientConnection] = None
        self._connected: Outcome[ClientConnection] = Outcome()
        #: The index of the address each round starts with (while
        #: connected, the index of the current connection's address).
        self._next = 0
        self._failed_rounds = 0
        self._round: Optional[Deferred[None]] = None
        self._retry: Optional[IDelayedCall] = None
        self._default: Optional[RecoveringChannel] = None
        #: Settled once the declarations registered so far are made.
        self._declared: Outcome[None] = Outcome()
        self._declared.succeed(None)

    # -- events ------------------------------------------------------------------

    def addListener(self, listener: Callable[[RecoveryEvent], object]) -> None:
        """Call *listener* with each event of :mod:`txamqp09.client.events`
        (connections made and lost, addresses passed over, queues renamed,
        what could not be recovered)."""
        self._listeners.append(listener)

    def report(self, event: RecoveryEvent) -> None:
        """Log *event* and hand it to the listeners."""
        _log.info("{client}: {event}", client=self, event=event)
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                _log.failure("recovery listener {listener} failed on {event}", listener=listener, event=event)

    # -- state -------------------------------------------------------------------

    @property
    def recovering(self) -> bool:
        """A lost connection is replaced: the service runs."""
        return bool(self.running)

    @property
    def connection(self) -> Optional[ClientConnection]:
        """The current connection, once recovered; None between connections."""
        return self._connection

    @property
    def address(self) -> Optional[str]:
        """``host:port`` of the current connection's broker, or None."""
        return self.addresses[self._next].name if self._connection is not None else None

    def whenConnected(self) -> Deferred[ClientConnection]:
        """The open connection, once the topology, channels and consumers are
        recovered on it; fails with CancelledError when the client stops."""
        return self._connected.when()

    def __repr__(self) -> str:
        return f"<ReconnectingClient {', '.join(address.name for address in self.addresses)} ({self.state.value})>"

    # -- channels ----------------------------------------------------------------

    def channel(self) -> Deferred[RecoveringChannel]:
        """A new :class:`~txamqp09.client.recovery.RecoveringChannel`; fires
        once it is open (waiting for a connection if there is none)."""
        return self._newChannel().whenReady()

    def _newChannel(self) -> RecoveringChannel:
        channel = RecoveringChannel(self, self._channel_class)
        self._channels.append(channel)
        if self.state is LinkState.CONNECTED and self._connection is not None:
            restored = ensureDeferred(channel.restore(self._connection))
            # Lost meanwhile: the next connection's recovery restores it.
            restored.addErrback(lambda failure: failure.trap(ConnectionClosed))
        return channel

    def forget(self, channel: RecoveringChannel) -> None:
        """*channel* was closed: recover it no more."""
        if channel in self._channels:
            self._channels.remove(channel)
        if channel is self._default:
            self._default = None

    def _defaultChannel(self) -> RecoveringChannel:
        """The channel of :meth:`publish` and the declare methods."""
        if self._default is None:
            self._default = self._newChannel()
            if self.confirms:
                self._default.confirm_select().addErrback(
                    lambda failure: _log.failure("confirm mode refused", failure)
                )
        return self._default

    # -- registration --------------------------------------------------------------

    def _register(self, declared: Deferred[Any]) -> Deferred[Any]:
        """Consumers registered from now on wait for *declared* (made on the
        client's own channel, after the declarations registered before it)."""
        settled: Outcome[None] = Outcome()
        self._declared = settled

        def settle(result: Any) -> Any:
            settled.succeed(None)
            return result

        return declared.addBoth(settle)

    def declare(self, declaration: Declaration) -> Deferred[Any]:
        """Run *declaration* (given a :class:`Channel`, returning a Deferred)
        now or once connected, and again on every new connection, in order
        with the other declarations."""

        def keep(result: Any) -> Any:
            self.topology.add(StepRecord(declaration))
            return result

        performed = self._defaultChannel().perform(declaration, retry=True)
        return self._register(performed.addCallback(keep))

    def declare_exchange(self, exchange: str, type: str = "direct", **options: Any) -> Deferred[Any]:
        """Declare an exchange now or once connected, and on every new connection
        (options of :meth:`RecoveringChannel.exchange_declare`)."""
        return self._register(self._defaultChannel().exchange_declare(exchange, type, **options))

    def declare_queue(self, queue: str, **options: Any) -> Deferred[Any]:
        """Declare a queue now or once connected, and on every new connection
        (options of :meth:`RecoveringChannel.queue_declare`)."""
        return self._register(self._defaultChannel().queue_declare(queue, **options))

    def bind_queue(
        self, queue: str, exchange: str, routing_key: str = "", arguments: Optional[dict[str, Any]] = None
    ) -> Deferred[Any]:
        """Bind *queue* to *exchange* now or once connected, and on every new connection."""
        return self._register(self._defaultChannel().queue_bind(queue, exchange, routing_key, arguments=arguments))

    def consume(
        self,
        queue: str,
        callback: DeliveryCallback,
        *,
        prefetch_count: int = 0,
        **options: Any,
    ) -> Deferred[RecoveringConsumer]:
        """Consume *queue* into *callback* on a channel of its own, once the
        declarations registered before are made, and on every new connection.

        :param prefetch_count: the channel's basic.qos prefetch count.
        :param options: options of :meth:`RecoveringChannel.basic_consume`.
        """

        async def start() -> RecoveringConsumer:
            channel = await self.channel()
            if prefetch_count:
                await channel.basic_qos(prefetch_count)
            return await channel.basic_consume(queue, callback, **options)

        return self._declared.when().addCallback(lambda _: ensureDeferred(start()))

    def publish(
        self,
        body: BodyLike,
        exchange: str = "",
        routing_key: str = "",
        properties: PropertiesLike = None,
        *,
        mandatory: bool = False,
    ) -> Deferred[Any]:
        """Publish on the client's own channel, after the declarations
        registered before (see :meth:`RecoveringChannel.basic_publish`): with
        confirms, fires once a broker confirmed, published again on the next
        connection if this one is lost first."""
        return self._defaultChannel().basic_publish(body, exchange, routing_key, properties, mandatory=mandatory)

    # -- connecting ----------------------------------------------------------------

    def _startRound(self) -> None:
        self._retry = None
        self.state = LinkState.CONNECTING
        self._round = ensureDeferred(self._tryAddresses())
        self._round.addErrback(lambda failure: failure.trap(CancelledError))

    async def _tryAddresses(self) -> None:
        """One round: each address in turn until one opens and recovers."""
        count = len(self.addresses)
        for offset in range(count):
            index = (self._next + offset) % count
            address = self.addresses[index]
            try:
                connection = await self._open(address)
            except Exception as error:
                if not self.running:
                    return  # stopped: the attempt was cancelled
                self.report(AttemptFailed(address.name, error))
                continue
            self._connectedTo(index, connection)
            return
        self._failed_rounds += 1
        delay = self._retry_policy(self._failed_rounds)
        _log.info("{client}: no broker answered; next round in {delay:.2f} s", client=self, delay=delay)
        self.state = LinkState.WAITING
        self._retry = self._reactor.callLater(delay, self._startRound)

    async def _open(self, address: Address) -> ClientConnection:
        """A connection to *address*, open and with the channels recovered on it."""
        connection = ClientConnection(address.parameters, self._reactor)
        try:
            await connectProtocol(address.endpoint, connection)
            await connection.whenOpened()
            await self._recover(connection)
        except BaseException:
            if connection.transport is not None and connection.state is not ConnectionState.CLOSED:
                connection.dropConnection()
            raise
        return connection

    async def _recover(self, connection: ClientConnection) -> None:
        """Declare the topology on *connection*, then restore every channel (those opened meanwhile too)."""
        await self.topology.replay(connection)
        restored: set[int] = set()
        while True:
            waiting = [channel for channel in self._channels if id(channel) not in restored]
            if not waiting:
                return
            restored.add(id(waiting[0]))
            await waiting[0].restore(connection)

    def _connectedTo(self, index: int, connection: ClientConnection) -> None:
        self._next = index
        self._failed_rounds = 0
        self._connection = connection
        self.state = LinkState.CONNECTED
        recovered = self.connections_made > 0
        self.connections_made += 1
        self.report(Connected(self.addresses[index].name, connection, recovered))
        connection.whenClosed().addCallback(self._lost, connection)
        if self._connection is connection:
            self._connected.succeed(connection)

    def _lost(self, reason: ConnectionClosed, connection: ClientConnection) -> None:
        if connection is not self._connection:
            return
        self._connection = None
        self._connected = Outcome()
        if not self.running:
            return
        self.report(ConnectionLost(self.addresses[self._next].name, reason))
        self._next = (self._next + 1) % len(self.addresses)
        self._startRound()

    # -- service -----------------------------------------------------------------

    def startService(self) -> None:
        """Connect to the first address that answers."""
        super().startService()
        if self._connected.done:
            self._connected = Outcome()
        self._startRound()

    def stopService(self) -> Deferred[None]:
        """Stop reconnecting, close the current connection cleanly, and close every channel."""
        super().stopService()
        return ensureDeferred(self._stop())

    async def _stop(self) -> None:
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        if self._round is not None and not self._round.called:
            self._round.cancel()
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.disconnect()
        self.state = LinkState.STOPPED
        ending = ConnectionClosed(200, "the client stopped")
        for channel in list(self._channels):
            channel.shutdown(ending)
        if self._connected.done:
            self._connected = Outcome()
        self._connected.fail(CancelledError())
